// CleanupWorker: the deferred deletes of the partitions this instance owns (SPEC §3.3 cleanup
// queue). Every cleanup_interval, each record whose provider is Ready gets one DELETE on the
// TaskPool; a provider that is not Ready parks the record (no retry burned).
//
//   PENDING ──DELETE 2xx / 404──▶ (removed: instance deleted / gone)
//      │  └──other answer──▶ PENDING, retry_count+1 ──(retry_count = max)──▶ FAILED
//      │                                                 (cleanup.failed; POST :retry ─▶ PENDING)
//      └──provider not Ready──▶ PENDING_PROVIDER ──provider Ready again──▶ DELETE as above
//
// Its facts (actor dcm/cleanup) go through the FactEmitter, so only the owner of a record's
// root acts on it. Thread-safety: Start/Stop from one thread; RunCycle from any (tests).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "consumers/fact_emitter.h"
#include "consumers/saga_runner.h"
#include "consumers/task_pool.h"
#include "projections/health_projection.h"
#include "projections/instance_projection.h"
#include "projections/registry_projection.h"
#include "src/common/metrics.h"
#include "src/common/placement_ports.h"

namespace dcm {

struct CleanupOptions {
  // CLEANUP_INTERVAL / CLEANUP_MAX_RETRIES (SPEC §2).
  std::chrono::milliseconds interval{60000};
  int max_retries = 10;
};

class CleanupWorker {
 public:
  CleanupWorker(CleanupOptions options, const InstanceView* instances, const RegistryView* registry,
                const HealthView* health, ServiceProviderApi* sp, FactEmitter* emitter,
                TaskPool* pool, Metrics* metrics);
  ~CleanupWorker();

  void Start();
  void Stop();
  // One cycle over the owned partitions now; returns once its attempts are done.
  void RunCycle();

 private:
  void Loop();
  // Emits cleanup.parked for `r` (its provider is not Ready or not registered).
  std::optional<FactEmitter::Sent> Park(const CleanupRecord& r, bool known, HealthStatus health);
  // Queues one DELETE attempt on the pool; false if one runs already for the record.
  bool Submit(const CleanupRecord& r);
  void Attempt(const CleanupRecord& r);
  void Alert(const CleanupRecord& r, const CleanupAttempted& attempt);

  CleanupOptions options_;
  const InstanceView* instances_;
  const RegistryView* registry_;
  const HealthView* health_;
  ServiceProviderApi* sp_;
  FactEmitter* emitter_;
  TaskPool* pool_;
  Metrics* metrics_;
  Gauge* queue_depth_ = nullptr;

  std::thread thread_;
  bool running_ = false;  // guarded by mu_
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::string> cleaning_;  // instance ids with an attempt running
  size_t tasks_ = 0;                // attempts submitted and not done
};

}  // namespace dcm
