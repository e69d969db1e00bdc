// OutcomeWaiters: how a mutating HTTP call learns that its command's outcome has been applied
// by this instance's projection (read-your-writes, SPEC §3).
//
//   handler: Expect(request_id, deadline, cb) ─▶ produce request ─▶ ... registrar decides ...
//   registry runner: commit batch ─▶ Complete(request_id, outcome event) ─▶ cb(outcome)
//   reaper: Expire(now) ─▶ cb(kTimeout) for waiters past their deadline
//
// Each callback runs exactly once, outside the lock, on the completing thread.
// Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>

#include "events/cloud_event.h"
#include "src/common/result.h"

namespace dcm {

class OutcomeWaiters {
 public:
  using Callback = std::function<void(Result<CloudEvent>)>;

  void Expect(const std::string& request_id, int64_t deadline_ms, Callback callback);
  // Completes the waiter for `request_id`, if any (duplicates and other instances' requests
  // have none).
  void Complete(const std::string& request_id, const CloudEvent& outcome);
  void Fail(const std::string& request_id, Error error);
  // Fails every waiter whose deadline is at or before `now_ms` with kTimeout.
  void Expire(int64_t now_ms);
  size_t Pending() const;

 private:
  struct Waiter {
    int64_t deadline_ms;
    Callback callback;
  };
  Callback Take(const std::string& request_id);

  mutable std::mutex mu_;
  std::unordered_map<std::string, Waiter> waiters_;
};

}  // namespace dcm
