#include "src/auth/key_source.h"

namespace dcm::auth {

KeySetHolder::KeySetHolder() : current_(std::make_shared<const KeySnapshot>()) {}

std::shared_ptr<const KeySnapshot> KeySetHolder::Current() const {
  std::lock_guard lock(mu_);
  return current_;
}

bool KeySetHolder::Publish(std::vector<VerificationKey> keys) {
  std::lock_guard lock(mu_);
  if (current_->keys == keys && current_->unavailable.empty()) return false;
  auto next = std::make_shared<KeySnapshot>();
  next->generation = current_->generation + 1;
  next->keys = std::move(keys);
  current_ = std::move(next);
  generation_.store(current_->generation, std::memory_order_release);
  return true;
}

void KeySetHolder::MarkUnavailable(std::string why) {
  std::lock_guard lock(mu_);
  if (!current_->keys.empty()) return;
  auto next = std::make_shared<KeySnapshot>(*current_);
  next->unavailable = std::move(why);
  current_ = std::move(next);  // same generation: no key changed
}

}  // namespace dcm::auth
