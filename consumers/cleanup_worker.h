// CleanupWorker: the deferred deletes of the partitions this instance owns (SPEC §3.3 cleanup
// queue). Every cleanup_interval, each record whose provider is Ready gets one DELETE on the
// TaskPool; a provider that is not Ready parks the record (no retry burned).
//
//   PENDING ──DELETE 2xx / 404──▶ (removed: instance deleted / gone)
//      │  └──other answer──▶ PENDING, retry_count+1 ──(retry_count = max)──▶ FAILED
//      │                                                 (cleanup.failed; POST :retry ─▶ PENDING)
//      └──provider not Ready──▶ PENDING_PROVIDER ──provider Ready again──▶ DELETE as above
//
// The record's provider is found by its id or, once that id is gone, by its name: a provider
// garbage-collected or force-deleted (SPEC §8) and registered again gets a new id, and the
// deletes its lost resources wait for reach it then.
//
// A record of a resource on a peer enclave (provider "peer:<enclave>", SPEC §10) is cleaned by
// terminating its contract instead (DELETE /contracts/{id} through the FederationApi): 2xx, 404
// and 410 end it (contract.terminated, then the attempt); a peer that does not answer parks it
// (PENDING_PROVIDER, no retry burned); another answer burns a retry as an SP's would.
//
// Its facts (actor dcm/cleanup) go through the FactEmitter, so only the owner of a record's
// root acts on it. Thread-safety: Start/Stop from one thread; RunCycle from any (tests).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "consumers/fact_emitter.h"
#include "consumers/saga_runner.h"
#include "projections/health_projection.h"
#include "projections/instance_projection.h"
#include "projections/registry_projection.h"
#include "src/common/federation_ports.h"
#include "src/common/metrics.h"
#include "src/common/placement_ports.h"
#include "src/common/task_pool.h"

namespace dcm {

struct CleanupOptions {
  // CLEANUP_INTERVAL / CLEANUP_MAX_RETRIES (SPEC §2).
  std::chrono::milliseconds interval{60000};
  int max_retries = 10;
  FederationApi* federation = nullptr;  // peers' contracts (SPEC §10); null: no peers
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
  // The registry's providers by name, read once per cycle at the first record that needs it.
  class ProviderByName {
   public:
    explicit ProviderByName(const RegistryView* registry) : registry_(registry) {}
    std::optional<Provider> Find(const std::string& name);

   private:
    const RegistryView* registry_;
    bool loaded_ = false;
    std::unordered_map<std::string, Provider> providers_;
  };
  // The provider of `r`'s record: by id, else by name (registered again under a new id).
  std::optional<Provider> ProviderOf(const CleanupRecord& r, ProviderByName& by_name) const;
  // Queues one attempt on the pool; false if one runs already for the record.
  bool Submit(const CleanupRecord& r, std::function<void()> attempt);
  void Attempt(const CleanupRecord& r, const std::string& endpoint);
  // A resource on `peer`: its contract terminated.
  void AttemptOnPeer(const CleanupRecord& r, const std::string& peer);
  // An attempt at `r` that ended it (outcome still to set), and the same turned into a failure.
  CleanupAttempted AttemptOf(const CleanupRecord& r, int http_status) const;
  void Failed(const CleanupRecord& r, CleanupAttempted& attempt, std::string error) const;
  // Records `attempt` (counted, emitted, alerted when it was the last retry).
  void Finish(const CleanupRecord& r, CleanupAttempted attempt);
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
