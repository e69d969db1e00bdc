#include "consumers/local_deliveries.h"

#include <algorithm>

namespace dcm {

LocalDeliveries& LocalDeliveries::Instance() {
  static LocalDeliveries* instance = new LocalDeliveries();  // never destroyed: used at exit
  return *instance;
}

void LocalDeliveries::Delivered(std::string_view topic,
                                const std::function<KafkaMessage()>& record) {
  if (listening_.load(std::memory_order_acquire) == 0) return;
  std::lock_guard lock(mu_);
  std::shared_ptr<const KafkaMessage> made;
  const auto now = std::chrono::steady_clock::now();
  for (auto& [id, listener] : listeners_) {
    if (std::ranges::find(listener.topics, topic) == listener.topics.end()) continue;
    if (listener.offers && listener.offered_count < kMaxOffers) {
      if (!made) made = std::make_shared<const KafkaMessage>(record());
      auto& partition = listener.offered[{made->topic, made->partition}];
      if (partition.insert_or_assign(made->offset, Offer{made, now}).second) {
        ++listener.offered_count;
      }
    }
    listener.to_notify = true;
    to_notify_.store(true, std::memory_order_relaxed);
  }
}

void LocalDeliveries::Notify() {
  if (!to_notify_.exchange(false, std::memory_order_relaxed)) return;
  std::lock_guard lock(mu_);
  for (auto& [id, listener] : listeners_) {
    if (!listener.to_notify) continue;
    listener.to_notify = false;
    listener.woken = true;
    listener.cv.notify_one();
    if (listener.wake) listener.wake();
  }
}

uint64_t LocalDeliveries::Register(std::vector<std::string> topics, bool offers,
                                   std::function<void()> wake) {
  std::lock_guard lock(mu_);
  const uint64_t id = next_id_++;
  Listener& listener = listeners_[id];
  listener.topics = std::move(topics);
  listener.offers = offers;
  listener.wake = std::move(wake);
  listening_.store(listeners_.size(), std::memory_order_release);
  return id;
}

bool LocalDeliveries::Wait(uint64_t id, TimePoint deadline) {
  std::unique_lock lock(mu_);
  auto it = listeners_.find(id);
  if (it == listeners_.end()) return false;
  Listener& listener = it->second;  // map nodes stay put while others come and go
  listener.cv.wait_until(lock, deadline, [&] { return listener.woken; });
  const bool woken = listener.woken;
  listener.woken = false;
  return woken;
}

std::vector<KafkaMessage> LocalDeliveries::Take(uint64_t id, Positions& positions, size_t max,
                                                std::optional<TimePoint>* oldest_kept) {
  std::vector<KafkaMessage> out;
  std::optional<TimePoint> unwanted;
  if (!oldest_kept) oldest_kept = &unwanted;
  oldest_kept->reset();
  std::lock_guard lock(mu_);
  auto found = listeners_.find(id);
  if (found == listeners_.end()) return out;
  Listener& listener = found->second;
  for (auto part = listener.offered.begin(); part != listener.offered.end();) {
    auto& offers = part->second;
    int64_t* next = nullptr;
    if (auto t = positions.find(part->first.first); t != positions.end()) {
      if (auto p = t->second.find(part->first.second); p != t->second.end()) next = &p->second;
    }
    // Below the position (or not assigned): fetched already, or never wanted.
    auto keep = next ? offers.lower_bound(*next) : offers.end();
    listener.offered_count -= static_cast<size_t>(std::distance(offers.begin(), keep));
    offers.erase(offers.begin(), keep);
    for (auto it = offers.begin(); it != offers.end() && it->first == *next && out.size() < max;
         it = offers.erase(it)) {
      out.push_back(*it->second.record);
      --listener.offered_count;
      ++*next;
    }
    if (!offers.empty() && offers.begin()->first > *next) {
      // A logical position (the beginning, the end) is resolved by a fetch only.
      const TimePoint arrived = *next < 0 ? TimePoint::min() : offers.begin()->second.arrived;
      if (!*oldest_kept || arrived < **oldest_kept) *oldest_kept = arrived;
    }
    part = offers.empty() ? listener.offered.erase(part) : std::next(part);
  }
  return out;
}

void LocalDeliveries::Unregister(uint64_t id) {
  std::lock_guard lock(mu_);
  listeners_.erase(id);
  listening_.store(listeners_.size(), std::memory_order_release);
}

}  // namespace dcm
