#include "consumers/local_deliveries.h"

#include <algorithm>

namespace dcm {

LocalDeliveries& LocalDeliveries::Instance() {
  static LocalDeliveries* instance = new LocalDeliveries();  // never destroyed: used at exit
  return *instance;
}

void LocalDeliveries::Delivered(std::string_view topic) {
  if (sleeping_.load(std::memory_order_acquire) == 0) return;
  bool woke = false;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, sleeper] : sleepers_) {
      if (!sleeper.woken && std::ranges::find(sleeper.topics, topic) != sleeper.topics.end()) {
        sleeper.woken = true;
        woke = true;
      }
    }
  }
  if (woke) cv_.notify_all();
}

uint64_t LocalDeliveries::Register(std::vector<std::string> topics) {
  std::lock_guard lock(mu_);
  const uint64_t id = next_id_++;
  sleepers_.emplace(id, Sleeper{std::move(topics), false});
  sleeping_.store(sleepers_.size(), std::memory_order_release);
  return id;
}

bool LocalDeliveries::Wait(uint64_t id, TimePoint deadline) {
  std::unique_lock lock(mu_);
  auto it = sleepers_.find(id);
  if (it == sleepers_.end()) return false;
  Sleeper& sleeper = it->second;  // map nodes stay put while others come and go
  cv_.wait_until(lock, deadline, [&] { return sleeper.woken; });
  const bool woken = sleeper.woken;
  sleeper.woken = false;
  return woken;
}

void LocalDeliveries::Unregister(uint64_t id) {
  std::lock_guard lock(mu_);
  sleepers_.erase(id);
  sleeping_.store(sleepers_.size(), std::memory_order_release);
}

}  // namespace dcm
