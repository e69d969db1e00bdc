// OutcomeWaiters: how a mutating HTTP call learns that its command's outcome has been applied
// by this instance's projection (read-your-writes, SPEC §3).
//
//   handler: Expect(request_id, deadline, cb) ─▶ produce request ─▶ ... registrar decides ...
//   registry runner: commit batch ─▶ Complete(request_id, outcome event) ─▶ cb(outcome)
//   reaper: Expire(now) ─▶ cb(kTimeout) for waiters past their deadline
//
// Each callback runs exactly once, outside the lock, on the completing thread. A positioned
// waiter also learns where the outcome is on its topic (the command bus acknowledges it for
// consistent reads, read_barrier.h). Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>

#include "events/cloud_event.h"
#include "src/common/result.h"

namespace dcm {

// Where an applied outcome is on its topic (partition -1: not known).
struct OutcomePosition {
  int32_t partition = -1;
  int64_t offset = -1;
};

class OutcomeWaiters {
 public:
  using Callback = std::function<void(Result<CloudEvent>)>;
  // `at` is the outcome's position (a default OutcomePosition on failures).
  using PositionedCallback = std::function<void(Result<CloudEvent>, OutcomePosition at)>;

  void Expect(const std::string& request_id, int64_t deadline_ms, Callback callback);
  void ExpectPositioned(const std::string& request_id, int64_t deadline_ms,
                        PositionedCallback callback);
  // Completes the waiter for `request_id`, if any (duplicates and other instances' requests
  // have none), with the outcome applied at `at`.
  void Complete(const std::string& request_id, const CloudEvent& outcome, OutcomePosition at = {});
  void Fail(const std::string& request_id, Error error);
  // Fails every waiter whose deadline is at or before `now_ms` with kTimeout.
  void Expire(int64_t now_ms);
  size_t Pending() const;

 private:
  struct Waiter {
    int64_t deadline_ms;
    PositionedCallback callback;
  };
  PositionedCallback Take(const std::string& request_id);

  mutable std::mutex mu_;
  std::unordered_map<std::string, Waiter> waiters_;
};

}  // namespace dcm
