// Prober: active health probing of the providers this instance owns (SPEC §3.2).
//
//   consumer group <prefix>prober on dcm.health (membership only; partitions paused)
//     assign P ─▶ wait until the local health projection has applied P up to its high
//                 watermark ─▶ load P's providers (registry) and records (health) ─▶ schedule
//     revoke   ─▶ forget them; flush what was produced, so the next owner reads it
//   scheduler thread: due tasks (ProbeScheduler) ─▶ HealthChecker (async HTTP)
//   checker thread:   response ─▶ fold ─▶ produce health_probed to P of the probes topic
//                     (+ health_changed to P of dcm.health)
//   registry runner:  provider registered/updated/deleted ─▶ Upsert/Remove (probe at once)
//   HTTP (any thread): Beat ─▶ owned: HeartbeatTracker (coalesced records) ─▶ probes topic
//                             not owned: a `forwarded` record ─▶ the owner's projection
//   scheduler thread:  HeartbeatTracker::Due ─▶ heartbeat_expired record (+ health_changed)
//                      HeartbeatTracker::GcDue ─▶ expiry_requested ─▶ the registrar (SPEC §8 GC)
//
// Liveness (SPEC §8): providers registered with `liveness: heartbeat` are never probed; the
// HeartbeatTracker (consumers/heartbeat_tracker.h) of their partition's owner decides their
// expiry, so each expiry is decided by exactly one live instance, from the log on a takeover.
// Providers with `liveness: both` are probed and tracked: the fold keeps the two signals apart
// (projections/health_state.h), and each side takes the other's from the local projection before
// it folds (a health_changed event may be off by what the projection has not applied yet; the
// folded status is always the log's).
//
// A provider belongs to partition KeyPartition(id, partitions of dcm.health), the partition its
// health events are produced to, so the group's assignment splits providers across instances:
// each is probed by exactly one live instance, and a dead instance's share moves to the
// survivors after the group session timeout. The prober's in-memory records are the same fold
// as the projection (health_state.h), seeded from the projection on assignment.
//
// Thread-safety: Start/Stop from one thread; OnProvidersChanged from the registry runner; the
// getters from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "consumers/heartbeat_tracker.h"
#include "consumers/kafka.h"
#include "consumers/probe_scheduler.h"
#include "projections/applied_offsets.h"
#include "projections/health_projection.h"
#include "projections/registry_projection.h"
#include "src/common/clock.h"
#include "src/common/config.h"
#include "src/common/health_check.h"
#include "src/common/metrics.h"

namespace dcm {

struct ProberOptions {
  // health_changed goes to `health_topic` (kept forever), health_probed to `probes_topic` (with a
  // retention; empty: health_topic too, as before issue #13). Both must have the same partitions:
  // the group on health_topic decides who probes a provider, and its probes go to the same
  // partition number of probes_topic.
  std::string health_topic;
  std::string probes_topic;
  std::string group_id;
  std::string source = "dcm/prober";  // `source` of the health events
  HealthCheckConfig health;
  KafkaOptions kafka;
  // How long an assignment waits for the local health projection to catch up before probing
  // with what it has. Counters from a stale record may be off for a few probes; the probe seqs
  // stay newer than the previous owner's (they are time-based), so no probe is dropped.
  std::chrono::milliseconds catch_up_timeout{30000};
  // Full re-read of the owned providers from the registry, healing any missed change.
  std::chrono::milliseconds reconcile_interval{30000};
  // Where the health projection's runner publishes its progress (null: a takeover does not
  // wait for the projection).
  const AppliedOffsets* applied = nullptr;
  // HEARTBEAT_TIMEOUT, HEARTBEAT_RECORD_EVERY, PROVIDER_GC_AFTER (SPEC §8).
  HeartbeatOptions heartbeat;
  // Where garbage collection asks the registrar to remove a provider (dcm.provider-requests).
  std::string requests_topic;
};

class Prober {
 public:
  Prober(ProberOptions options, const Store* store, const RegistryView* registry,
         const HealthView* health, HealthChecker* checker, Producer* producer, Metrics* metrics,
         const Clock* clock);
  ~Prober();

  Status Start();
  void Stop();

  // From the registry's change listener (after the change is durable locally).
  void OnProvidersChanged(const std::vector<ProviderChange>& changes);

  // A heartbeat of `provider` (liveness heartbeat; the HTTP handler checked it exists) from any
  // thread. Returns the provider's health after it, as the projection will fold it. A provider
  // this instance owns is tracked here; any other beat is recorded at once as `forwarded`.
  // kUnavailable before Start.
  Result<HealthRecord> Beat(const Provider& provider, BeatResult result);

  bool Healthy() const { return healthy_.load(); }
  // True once the group gave this instance its first assignment (possibly empty) and it loaded
  // its providers: before that, nothing it would own is probed yet.
  bool Joined() const { return joined_.load(); }
  size_t OwnedProviders() const;
  // The heartbeat providers whose expiry this instance decides (its tracker), sorted: over the
  // live instances each heartbeat provider appears once (GET /admin/heartbeat-providers).
  std::vector<std::string> HeartbeatProviders() const;
  std::vector<int32_t> OwnedPartitions() const;

 private:
  void GroupLoop();
  void SchedulerLoop();
  void OnAssigned(const std::vector<int32_t>& partitions);
  void OnRevoked();
  void Reconcile(const std::set<int32_t>& partitions);
  void Launch(const ProbeTask& task);
  void Finish(const ProbeTask& task, ProbeResponse response);
  void Emit(const std::string& topic, const CloudEvent& event);
  void EmitBeat(const BeatOutcome& outcome);                       // mu_ held
  void ExpireDue();                                                // mu_ held
  void RequestGc(const GcCandidate& candidate);                    // mu_ held
  std::chrono::microseconds UntilNextExpiry(TimePoint now) const;  // mu_ held
  // Routes an owned provider to the scheduler or the tracker by its liveness; mu_ held. True
  // when the probe URL changed (drop its pooled connection).
  bool Track(const Provider& p, const std::optional<HealthRecord>& record, bool registered_now);
  const std::string& ProbesTopic() const;
  bool Owns(const std::string& id) const;  // mu_ held
  void SetOwnedGauges();                   // mu_ held
  static std::string HealthUrl(const std::string& endpoint);

  ProberOptions options_;
  const Store* store_;
  const RegistryView* registry_;
  const HealthView* health_;
  HealthChecker* checker_;
  Producer* producer_;
  Metrics* metrics_;
  const Clock* clock_;
  int32_t partitions_ = 0;  // of the health topic, from Start

  std::unique_ptr<Consumer> consumer_;
  std::thread group_thread_;
  std::thread scheduler_thread_;
  std::atomic<bool> running_{false};
  std::atomic<bool> healthy_{true};
  std::atomic<bool> joined_{false};

  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::set<int32_t> owned_;  // partitions
  ProbeScheduler scheduler_;
  HeartbeatTracker tracker_;
  int64_t next_expiry_check_ms_ = 0;     // when ExpireDue scans the tracker next (mu_)
  int64_t next_refresh_ms_ = 0;          // when it refreshes the unarmed from the projection (mu_)
  std::vector<int32_t> pending_assign_;  // group thread only
  bool assigned_ = false;                // an assignment arrived (maybe empty); group thread

  Counter* probes_by_result_[9] = {};  // by kFailures in prober.cc: healthy, then each class
  Histogram* latency_ = nullptr;
  Histogram* lag_ = nullptr;
  Gauge* in_flight_ = nullptr;
  Gauge* owned_gauge_ = nullptr;
  Gauge* partitions_gauge_ = nullptr;
  Gauge* heartbeat_gauge_ = nullptr;
  Counter* changes_ = nullptr;
  Counter* emit_failures_ = nullptr;
  Counter* heartbeats_ = nullptr;
  Counter* expiries_ = nullptr;
  Counter* gc_requests_ = nullptr;
};

}  // namespace dcm
