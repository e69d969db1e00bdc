// Retrying a step that failed for a reason outside the process's control (a full disk, a broker
// away): how long to wait before each attempt, and which attempts to log, so that a long outage
// neither spins nor floods the log.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>

namespace dcm {

// The wait before retry number `failures` (1 = after the first failure): 250 ms doubling, at
// most 5 s.
inline std::chrono::milliseconds RetryDelay(int failures) {
  return std::chrono::milliseconds(250 << std::clamp(failures - 1, 0, 4));
}

// Whether to log failure number `failures`: the first, then every 12th (about once a minute at
// the 5 s cap).
inline bool LogRetry(int failures) { return failures == 1 || failures % 12 == 0; }

// The wait between retries, cut short when the owner stops. Thread-safe.
class RetryWait {
 public:
  // Waits `delay`, or until Interrupt ran and `stopped()` holds.
  template <typename Stopped>
  void WaitFor(std::chrono::milliseconds delay, Stopped stopped) {
    std::unique_lock lock(mu_);
    wake_.wait_for(lock, delay, stopped);
  }
  // Runs `stop` (which makes the waiter's `stopped()` true) and wakes the waiter.
  template <typename Stop>
  void Interrupt(Stop stop) {
    {
      std::lock_guard lock(mu_);
      stop();
    }
    wake_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable wake_;
};

}  // namespace dcm
