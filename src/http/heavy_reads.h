// HeavyReads: the bounded pool heavy reads run on, off the HTTP I/O threads (SPEC §7), so a
// flood of `as_of` lists, filtered scans or /admin/projections never delays /healthz or a plain
// GET. The router decides which requests are heavy (router.cc, the route table's `heavy`).
//
//   router ──Submit(task, respond)──▶ queue (at most `queue`) ──▶ `threads` pool threads
//                  │ queue full: 503 now          │ waited past the deadline: 503, not run
//                  ▼                              ▼ task(deadline): folds check it (kTimeout)
//
// Every refusal is a problem+json 503 with `Retry-After: 1`. A task that starts gets the
// request's deadline (enqueued + `timeout`) and must give up by itself once it passed (the
// as_of fold checks it, projections/time_travel.h); its answer goes through `respond` as usual.
// Pool threads run at a lower CPU priority (nice +10) than the I/O threads when `nice` is set:
// on a 2-core machine a busy pool then costs a light request a few milliseconds, not a slice.
//
// Thread-safety: Submit from any thread; Stop from one (drops queued tasks without answering:
// the server is stopping too).
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "src/common/clock.h"
#include "src/common/metrics.h"
#include "src/common/result.h"
#include "src/http/http_types.h"

namespace dcm::http {

struct HeavyReadOptions {
  // Pool threads. Heavy reads are CPU-bound folds and scans: half the cores leaves the other
  // half to the I/O threads, the consumers and the prober.
  int threads = 1;
  // Heavy reads waiting for a thread; beyond it a new one is answered 503 at once.
  size_t queue = 64;
  // From submission: a read still queued at its deadline is answered 503 without running; one
  // running gets it as its Deadline.
  std::chrono::milliseconds timeout{10000};
  // Lower the pool threads' CPU priority (setpriority, nice +10).
  bool nice = true;
  const Clock* clock = &SystemClock::Instance();
  // When set: counter dcm_http_heavy_reads_total{result} (`run`, `queue_full`, `expired`), gauge
  // dcm_http_heavy_reads_queued, histogram dcm_http_heavy_read_wait_seconds (queued → started).
  Metrics* metrics = nullptr;
};

class HeavyReads {
 public:
  // A heavy read: answers through the `respond` given to Submit, giving up at `deadline`.
  using Task = std::function<void(Deadline deadline)>;

  // Starts the threads (kInvalidArgument: threads outside 1..256, queue 0 or timeout <= 0).
  static Result<std::unique_ptr<HeavyReads>> Start(HeavyReadOptions options);
  ~HeavyReads();  // Stop()
  HeavyReads(const HeavyReads&) = delete;
  HeavyReads& operator=(const HeavyReads&) = delete;

  // Queues `task`, or answers `respond` 503 at once when `queue` reads are waiting. A task whose
  // deadline passed before a thread took it is answered 503 and not run.
  void Submit(Task task, Respond respond);
  void Stop();

  size_t Queued() const;

 private:
  struct Item {
    Task task;
    Respond respond;
    TimePoint enqueued;
  };
  enum class Outcome { kRun, kQueueFull, kExpired };
  static constexpr std::array<const char*, 3> kResultNames = {"run", "queue_full", "expired"};
  explicit HeavyReads(HeavyReadOptions options);
  void Loop();
  void Count(Outcome outcome);

  HeavyReadOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;  // under mu_
  bool running_ = true;     // under mu_
  std::vector<std::thread> threads_;
  Gauge* queued_gauge_ = nullptr;
  Histogram* wait_ = nullptr;
  std::array<Counter*, 3> results_{};
};

}  // namespace dcm::http
