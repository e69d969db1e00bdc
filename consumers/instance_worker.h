// InstanceWorker: decides and runs instance operations (SPEC §3.3) as durable sagas, and runs
// the deferred cleanup of the partitions this instance owns.
//
//   consumer group <prefix>instances on dcm.instance-requests (keyed by root)
//     assign P ─▶ wait until the local instance projection has applied dcm.instances P up to
//                 its high watermark ─▶ resume P's sagas in progress ─▶ read P's requests from
//                 the offset stored with this worker's progress
//     revoke   ─▶ stop emitting for P (a saga in flight abandons at its next step); flush
//   intake (group thread), per request batch:
//     per request: InstanceDecider::Decide (projections/instance_decider.h: duplicate, resume,
//     operation_failed 400/404/409, or operation_started) ─▶ produce the decisions ─▶ wait for
//     the acks, folding each acknowledged fact into the decider's state ─▶ store the request
//     offsets ─▶ hand the started and resumed sagas to the pool
//   saga pool (N threads): one saga per root at a time; each step is an SP/policy call followed
//     by its fact, produced and acknowledged before the next step:
//       create:    resource.placed ─▶ service_type_instance.created ─▶ [catalog_item_instance.
//                  created] ─▶ operation_completed
//       rehydrate: resource.placed(new) ─▶ service_type_instance.created(new) ─▶
//                  cleanup.enqueued(old) ─▶ resource.deleted(old) ─▶ [catalog_item_instance.
//                  rehydrated] ─▶ operation_completed          (create before delete, always)
//     A policy rejection or a failed create ends in operation_failed before anything is
//     deleted or queued. A saga resumed by a new owner continues after its last recorded fact:
//     the SP create is idempotent by instance id (an SP 409 counts as created), so a crash
//     between the SP call and its fact repeats the call harmlessly.
//   cleanup thread, every cleanup_interval: each record of the owned partitions whose provider
//     is Ready gets one DELETE (2xx deleted, 404 gone, else retry_count+1; at max → FAILED and
//     cleanup.failed); a provider that is not Ready parks the record (PENDING_PROVIDER, no
//     retry burned).
//
// Only the owner of a root's partition emits facts for it, so the projection's state (caught up
// at takeover) plus this worker's own acknowledged facts is authoritative: every fact is folded
// into the decider as Kafka acknowledges it, so no decision waits for the projection.
// Thread-safety: Start/Stop from one thread; getters from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "consumers/kafka.h"
#include "projections/applied_offsets.h"
#include "projections/health_projection.h"
#include "projections/instance_decider.h"
#include "projections/instance_projection.h"
#include "projections/placement_policy.h"
#include "projections/registry_projection.h"
#include "src/common/clock.h"
#include "src/common/metrics.h"
#include "src/common/placement_ports.h"

namespace dcm {

struct InstanceWorkerOptions {
  std::string requests_topic;
  std::string instances_topic;
  std::string dead_letter_topic;
  std::string group_id;
  std::string source = "dcm/instance-worker";  // `source` of the facts
  KafkaOptions kafka;
  // CLEANUP_INTERVAL / CLEANUP_MAX_RETRIES (SPEC §2).
  std::chrono::milliseconds cleanup_interval{60000};
  int cleanup_max_retries = 10;
  // Sagas (and cleanup attempts) running at once; each blocks a thread on SP/policy calls.
  int threads = 32;
  // How long an assignment waits for the local projection before deciding from what it has.
  std::chrono::milliseconds catch_up_timeout{30000};
  size_t batch_size = 500;
  // Test hook (crash injection): SIGKILL this process right after a fact of this type is
  // acknowledged, as `kill -9` at that saga step would. Empty: off.
  std::string crash_after_fact;
};

class InstanceWorker {
 public:
  // `policy` may be null: the built-in policy decides (SPEC §3.3). `applied`: where the
  // instance projection's runner publishes its progress.
  InstanceWorker(InstanceWorkerOptions options, Store* store, const AppliedOffsets* applied,
                 const InstanceView* instances, const RegistryView* registry,
                 const HealthView* health, ServiceProviderApi* sp, PolicyEngine* policy,
                 Producer* producer, Metrics* metrics, const Clock* clock);
  ~InstanceWorker();

  Status Start();
  void Stop();

  bool Healthy() const { return healthy_.load(); }
  // True once the group gave this instance its first assignment and it resumed its sagas.
  bool Joined() const { return joined_.load(); }
  std::vector<int32_t> OwnedPartitions() const;
  size_t SagasInFlight() const;

  // Runs one cleanup cycle over the owned partitions now (tests; the thread calls it too).
  void RunCleanupCycle();

 private:
  // A fact handed to the producer and its delivery report.
  struct Sent {
    std::future<Result<KafkaPosition>> ack;
    InstanceEvent fact;  // as produced (root, source, time filled in)
  };

  void GroupLoop();
  std::map<int32_t, int64_t> OnAssigned(const std::vector<int32_t>& partitions);
  void OnRevoked();
  Status Intake(const std::vector<KafkaMessage>& messages);
  static Result<InstanceEvent> DecodeRequest(const KafkaMessage& m);
  // Drops the decider's overlay when the projection has caught up with it (waits for that
  // when it grew past its bound).
  void CompactDecider();
  // Marks `saga` as running here and refreshes it from the state; false if it runs already or
  // is no longer in progress. Release undoes it.
  bool Claim(Saga& saga);
  void Release(const Saga& saga);
  void Dispatch(Saga saga);
  void Submit(std::function<void()> task);
  void PoolLoop();
  // Runs a saga; re-dispatches it if Kafka refused a fact while this instance still owns it.
  void RunSagaTask(Saga saga);
  void RunSaga(Saga& saga);
  void CleanupLoop();
  void CleanupOne(const CleanupRecord& record);

  // Saga steps. Each returns false once the saga has ended (failed, or ownership lost).
  bool Place(Saga& saga, const std::string& resource_id, const std::string& intent,
             const std::string& old_resource_id);
  bool CreateOnProvider(Saga& saga, const std::string& instance_id);
  // kDirect: DELETE on the SP, a failure fails the operation. kDirectOrQueue: DELETE if the
  // provider is Ready, else (or on failure) queue it for cleanup. kDeferred: queue it.
  enum class DeleteMode { kDirect, kDirectOrQueue, kDeferred };
  bool DeleteOnProvider(Saga& saga, const std::string& instance_id, DeleteMode mode);
  bool Rehydrate(Saga& saga);
  bool Fail(Saga& saga, const OperationFailure& failure);
  bool Complete(Saga& saga, InstanceEvent result);
  void CountOutcome(const std::string& operation, const std::string& result);

  // A fact of `saga`'s root: fills request_id/root/source/time, produces it to the root's
  // partition and waits for the ack; records the type in saga.steps. False when this instance
  // no longer owns the partition or Kafka did not acknowledge (the saga stops; a new owner or a
  // restart resumes it).
  bool Emit(Saga& saga, InstanceEvent fact);
  // The same for facts without a saga (cleanup).
  bool EmitFact(const std::string& root, InstanceEvent fact);
  // Produces `fact` if this instance owns `root`'s partition (nullopt otherwise); Acknowledged
  // waits for the ack, folds the fact into the decider (and fires the crash-injection hook).
  std::optional<Sent> EmitAsync(const std::string& root, const InstanceEvent& fact);
  bool Acknowledged(Sent sent);
  Sent Produce(const std::string& root, InstanceEvent fact);
  // Waits for `sent`'s ack and folds it into the decider's state.
  Status Fold(Sent& sent);
  bool OwnsRoot(const std::string& root) const;
  // The resource's placement counts in the state now (or failed): its reservation ends.
  void Unreserve(const std::string& resource_id);

  std::vector<PlacementCandidate> Candidates();
  std::optional<Provider> ProviderByName(const std::string& name);
  HealthStatus HealthOf(const Provider& provider) const;

  InstanceWorkerOptions options_;
  Store* store_;
  const AppliedOffsets* applied_;
  const InstanceView* instances_;
  const RegistryView* registry_;
  const HealthView* health_;
  ServiceProviderApi* sp_;
  PolicyEngine* policy_;
  Producer* producer_;
  Metrics* metrics_;
  const Clock* clock_;
  InstanceDecider decider_;
  int32_t partitions_ = 0;

  std::unique_ptr<Consumer> consumer_;
  std::thread group_thread_;
  std::thread cleanup_thread_;
  std::vector<std::thread> pool_;
  std::atomic<bool> running_{false};
  std::atomic<bool> healthy_{true};
  std::atomic<bool> joined_{false};

  // Ownership: emitters hold it shared while enqueueing; revocation takes it exclusively.
  mutable std::shared_mutex own_mu_;
  std::set<int32_t> owned_;

  mutable std::mutex mu_;  // the fields below
  std::condition_variable work_cv_;
  std::condition_variable cleanup_cv_;
  std::deque<std::function<void()>> queue_;  // sagas and cleanup attempts
  // root -> request_id of the saga running (queued or on a thread) here
  std::map<std::string, std::string> running_sagas_;
  // resource id -> provider id: placed by a saga running here, not created (or failed) yet;
  // counted as load so that concurrent placements spread
  std::map<std::string, std::string> pending_load_;
  std::set<std::string> cleaning_;  // instance ids with an attempt running
  size_t cleanup_tasks_ = 0;

  Counter* dead_letters_ = nullptr;
  Gauge* sagas_gauge_ = nullptr;
  Gauge* queue_depth_ = nullptr;
  Histogram* saga_seconds_ = nullptr;
};

}  // namespace dcm
