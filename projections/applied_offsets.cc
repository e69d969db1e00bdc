#include "projections/applied_offsets.h"

#include <algorithm>

namespace dcm {

void AppliedOffsets::Publish(const std::string& projection, const std::string& topic,
                             int32_t partition, int64_t next) {
  {
    std::lock_guard lock(mu_);
    auto& stored = next_[Key{projection, topic, partition}];
    if (next <= stored) return;
    stored = next;
  }
  cv_.notify_all();
  if (observer_) observer_(projection, topic, partition, next);
}

int64_t AppliedOffsets::Next(const std::string& projection, const std::string& topic,
                             int32_t partition) const {
  std::lock_guard lock(mu_);
  auto it = next_.find(Key{projection, topic, partition});
  return it == next_.end() ? 0 : it->second;
}

bool AppliedOffsets::Reached(const std::string& projection, const std::string& topic,
                             const std::map<int32_t, int64_t>& targets) const {
  return std::all_of(targets.begin(), targets.end(), [&](const auto& target) {
    auto it = next_.find(Key{projection, topic, target.first});
    return it != next_.end() && it->second >= target.second;
  });
}

bool AppliedOffsets::WaitFor(const std::string& projection, const std::string& topic,
                             const std::map<int32_t, int64_t>& targets, Deadline deadline,
                             const std::function<bool()>& keep_waiting) const {
  std::unique_lock lock(mu_);
  while (!Reached(projection, topic, targets)) {
    if (!keep_waiting()) return false;
    const uint64_t wakes = wakes_;
    if (!cv_.wait_until(lock, deadline,
                        [&] { return wakes_ != wakes || Reached(projection, topic, targets); })) {
      return false;
    }
  }
  return true;
}

void AppliedOffsets::Wake() const {
  {
    std::lock_guard lock(mu_);
    ++wakes_;
  }
  cv_.notify_all();
}

}  // namespace dcm
