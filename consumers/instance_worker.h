// InstanceWorker: takes the instance operation requests (SPEC §3.3) of the roots this instance
// owns, decides them (InstanceDecider) and hands the started ones to the SagaRunner; its
// CleanupWorker runs the deferred deletes of the same partitions.
//
//   consumer group <prefix>instances on dcm.instance-requests (keyed by root)
//     assign P ─▶ wait until the local instance projection has applied dcm.instances P up to
//                 its high watermark (AppliedOffsets) ─▶ resume P's sagas in progress ─▶ read
//                 P's requests from the offset stored with this worker's progress
//     revoke   ─▶ stop emitting for P (a saga in flight abandons at its next step); flush
//   intake (group thread), per request batch:
//     per request: InstanceDecider::Decide (duplicate, resume, operation_failed 400/404/409, or
//     operation_started) ─▶ produce the decisions ─▶ wait for the acks, folding each
//     acknowledged fact into the decider's state ─▶ store the request offsets ─▶ hand the
//     started and resumed sagas to the SagaRunner (consumers/saga_runner.h)
//
// Only the owner of a root's partition emits facts for it, so the projection's state (caught up
// at takeover) plus this worker's own acknowledged facts is authoritative: no decision waits for
// the projection. Thread-safety: Start/Stop from one thread; getters from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "consumers/cleanup_worker.h"
#include "consumers/contract_renewer.h"
#include "consumers/fact_emitter.h"
#include "consumers/kafka.h"
#include "consumers/saga_runner.h"
#include "projections/applied_offsets.h"
#include "projections/health_projection.h"
#include "projections/instance_decider.h"
#include "projections/instance_projection.h"
#include "projections/registry_projection.h"
#include "src/common/clock.h"
#include "src/common/metrics.h"
#include "src/common/placement_ports.h"
#include "src/common/task_pool.h"

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
  // SPEC §10, the consumer side (SagaPorts): null = no peers.
  FederationApi* federation = nullptr;
  std::chrono::milliseconds discovery_timeout{2000};
  std::chrono::milliseconds hold_ttl{30000};
  bool rehydrate_on_loss = false;  // REHYDRATE_ON_PROVIDER_LOSS: a lost contract is rehydrated
  // FEDERATION_REPATRIATE: peer instances come home when a local provider can take them, checked
  // this often per instance (ContractRenewerOptions).
  bool repatriate = false;
  std::chrono::milliseconds repatriate_interval{30000};
  // Test hook (crash injection): SIGKILL this process ("SIGSTOP:<type>": stop it) right after a
  // fact of this type is acknowledged, as `kill -9` at that saga step would. Empty: off.
  std::string crash_after_fact;
};

class InstanceWorker {
 public:
  // `policy` may be null: the built-in policy decides (SPEC §3.3). `applied`: where the
  // instance projection's runner publishes its progress.
  InstanceWorker(InstanceWorkerOptions options, Store* store, AppliedOffsets* applied,
                 const InstanceView* instances, const RegistryView* registry,
                 const HealthView* health, ServiceProviderApi* sp, PolicyEngine* policy,
                 Producer* producer, Metrics* metrics, const Clock* clock);
  ~InstanceWorker();

  Status Start();
  void Stop();

  bool Healthy() const { return healthy_.load() && emitter_.Healthy(); }
  // True once the group gave this instance its first assignment and it resumed its sagas, or
  // gave it nothing (more instances than partitions).
  bool Joined() const { return joined_.load(); }
  std::vector<int32_t> OwnedPartitions() const;
  size_t SagasInFlight() const { return sagas_.InFlight(); }

  // Runs one cleanup cycle over the owned partitions now (tests; the cleanup thread calls it).
  void RunCleanupCycle() { cleanup_.RunCycle(); }

 private:
  Status CheckTopics();
  void StartRenewer();
  void GroupLoop();
  std::map<int32_t, int64_t> OnAssigned(const std::vector<int32_t>& partitions);
  size_t ResumeSagas(const std::vector<int32_t>& partitions);
  void OnRevoked();
  Status Intake(const std::vector<KafkaMessage>& messages);
  // Waits for the acks of a batch's decisions, then stores its request offsets.
  // Decides one request: its fact produced into `sent`, its saga (if any) into `to_run`.
  Status DecideOne(const InstanceEvent& request, StartedInBatch& batch,
                   std::vector<FactEmitter::Sent>& sent, std::vector<Saga>& to_run);
  Status Commit(std::vector<std::future<Status>>& dead_letters,
                std::vector<FactEmitter::Sent>& sent, const std::map<int32_t, int64_t>& next);
  static Result<InstanceEvent> DecodeRequest(const KafkaMessage& m);
  // Drops the decider's overlay when the projection has caught up with it (waits for that
  // when it grew past its bound).
  void CompactDecider();

  InstanceWorkerOptions options_;
  Store* store_;
  AppliedOffsets* applied_;
  const InstanceView* instances_;
  const RegistryView* registry_;
  const HealthView* health_;
  Producer* producer_;
  Metrics* metrics_;
  const Clock* clock_;
  int32_t partitions_ = 0;
  std::atomic<bool> running_{false};
  std::atomic<bool> healthy_{true};
  std::atomic<bool> joined_{false};

  InstanceDecider decider_;
  FactEmitter emitter_;
  TaskPool pool_;
  SagaRunner sagas_;
  CleanupWorker cleanup_;
  std::unique_ptr<ContractRenewer> renewer_;  // with peers
  std::unique_ptr<Consumer> consumer_;
  std::thread group_thread_;
};

}  // namespace dcm
