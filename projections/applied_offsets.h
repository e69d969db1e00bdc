// AppliedOffsets: how far each projection has applied each partition, published by the
// projection runners after every Store::Write (the offsets are durable in the Store by then), so
// a consumer that must wait for the local state to reach an offset (a takeover, the registrar's
// deletion deferral) blocks on a condition variable instead of polling the Store.
//
//   ProjectionRunner ── Publish(projection, topic, partition, next) ──▶ AppliedOffsets
//   waiter ── WaitFor(projection, topic, {partition: next}, deadline) ──▶ true once reached
//
// Offsets only grow (a smaller one is ignored). Wake() releases every waiter at once (their
// owner is stopping; they re-check their own stop flag). An observer (the read barrier,
// read_barrier.h) hears of every offset that grew, on the publishing thread. Thread-safe, but
// SetObserver must be called before the first Publish.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

namespace dcm {

class AppliedOffsets {
 public:
  using Deadline = std::chrono::steady_clock::time_point;

  // `projection` has applied `topic`/`partition` up to `next` (the next offset it will read).
  void Publish(const std::string& projection, const std::string& topic, int32_t partition,
               int64_t next);

  // The next offset `projection` will read from `topic`/`partition` (0: nothing published).
  int64_t Next(const std::string& projection, const std::string& topic, int32_t partition) const;

  // True once `projection` has applied `topic` up to `targets` (partition -> next offset, i.e.
  // offsets below it are applied). False at `deadline`, or when woken while `keep_waiting`
  // says no.
  bool WaitFor(
      const std::string& projection, const std::string& topic,
      const std::map<int32_t, int64_t>& targets, Deadline deadline,
      const std::function<bool()>& keep_waiting = [] { return true; }) const;

  // Wakes every waiter now (so one whose owner stops re-checks `keep_waiting`).
  void Wake() const;

  // Called after each Publish that moved an offset forward, outside the lock, with its arguments.
  using Observer = std::function<void(const std::string& projection, const std::string& topic,
                                      int32_t partition, int64_t next)>;
  void SetObserver(Observer observer) { observer_ = std::move(observer); }

 private:
  using Key = std::tuple<std::string, std::string, int32_t>;
  bool Reached(const std::string& projection, const std::string& topic,
               const std::map<int32_t, int64_t>& targets) const;  // holds mu_

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::map<Key, int64_t> next_;
  mutable uint64_t wakes_ = 0;
  Observer observer_;
};

}  // namespace dcm
