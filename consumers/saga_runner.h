// SagaRunner: runs instance operations (SPEC §3.3) as durable sagas on a TaskPool, one saga per
// root at a time. It executes the operation's plan (projections/saga_plan.h) step by step; each
// step is an SP/policy call followed by its fact, produced and acknowledged (FactEmitter) before
// the next step. A saga resumed by a new owner continues after its last recorded fact: the SP
// create is idempotent by instance id (an SP 409 counts as created), so a crash between the SP
// call and its fact repeats the call harmlessly.
//
//   Dispatch(saga) ─▶ Claim (not running here, still in progress) ─▶ pool: for each step not
//   done: run it ─▶ operation_completed | operation_failed ─▶ Release
//   A fact Kafka refused while this instance still owns the root: back off, run it again.
//   Ownership lost: stop; the new owner resumes it.
//
// Thread-safety: Dispatch and the getters from any thread.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "consumers/fact_emitter.h"
#include "projections/health_projection.h"
#include "projections/instance_decider.h"
#include "projections/registry_projection.h"
#include "projections/saga_plan.h"
#include "src/common/clock.h"
#include "src/common/federation_ports.h"
#include "src/common/metrics.h"
#include "src/common/placement_ports.h"
#include "src/common/task_pool.h"

namespace dcm {

bool Is2xx(int status);
// A short description of an SP answer for error messages and events: the transport error, or
// SummarizeReply's (bounded, sanitized, never the raw body). A 3xx is a failure like any other
// non-2xx: redirects are never followed.
std::string DescribeSpReply(const Result<SpReply>& reply);

// A provider's effective health (SPEC §3.2).
HealthStatus ProviderHealth(const HealthView& health, const Provider& provider);

// Counts an instance operation's outcome (dcm_instance_operations_total).
void CountInstanceOutcome(Metrics* metrics, const std::string& operation,
                          const std::string& result);

struct SagaPorts {
  const RegistryView* registry = nullptr;
  const HealthView* health = nullptr;
  ServiceProviderApi* sp = nullptr;
  PolicyEngine* policy = nullptr;  // null: the built-in policy decides
  const Clock* clock = nullptr;
  // SPEC §10, the consumer side: null = no peers, a request no local provider can serve fails.
  FederationApi* federation = nullptr;
  std::chrono::milliseconds discovery_timeout{2000};
  std::chrono::milliseconds hold_ttl{30000};
};

class SagaRunner {
 public:
  SagaRunner(SagaPorts ports, FactEmitter* emitter, const InstanceDecider* decider, TaskPool* pool,
             Metrics* metrics, const std::atomic<bool>* running);

  // Runs `saga` on the pool unless it runs here already or is no longer in progress.
  void Dispatch(Saga saga);
  size_t InFlight() const;

 private:
  bool Claim(Saga& saga);
  void Release(const Saga& saga);
  void RunTask(Saga saga);
  void Run(Saga& saga);
  // Each returns false once the saga has ended (failed, or ownership lost).
  bool RunStep(Saga& saga, const SagaStep& step);
  bool Place(Saga& saga, const SagaStep& step);
  // SPEC §10 (saga_remote.cc): no local provider fits, so a peer's contract places it.
  enum class OfferResult { kSigned, kRefused, kEnded };
  bool PlaceOnPeer(Saga& saga, const SagaStep& step, const ResourcePlaced& placed,
                   const OperationFailure& local);
  OfferResult TryOffer(Saga& saga, const SagaStep& step, const PeerOffer& offer,
                       const std::string& spec);
  OfferResult Refused(Saga& saga, RemoteFact fact, const Result<PeerAnswer>& answer);
  bool RecordPeerPlacement(Saga& saga, ResourcePlaced placed);
  bool CreateOnPeer(Saga& saga, const std::string& instance_id);
  bool DeleteOnPeer(Saga& saga, const ServiceTypeInstance& si, const RemotePlacement& remote,
                    DeleteMode mode);
  // cleanup.enqueued for `si`: the CleanupWorker deletes it from its SP, or ends its contract.
  bool Enqueue(Saga& saga, const ServiceTypeInstance& si);
  bool CheckNamedProvider(Saga& saga, const SagaStep& step);
  bool CreateOnProvider(Saga& saga, const std::string& instance_id);
  bool DeleteOnProvider(Saga& saga, const std::string& instance_id, DeleteMode mode);
  bool Record(Saga& saga, const SagaStep& step);
  bool Fail(Saga& saga, const OperationFailure& failure);
  bool Complete(Saga& saga);
  // Produces `fact` as a step of `saga` and records its type in saga.steps.
  bool Emit(Saga& saga, InstanceFact fact);

  std::vector<PlacementCandidate> Candidates();
  std::optional<Provider> ProviderByName(const std::string& name);
  void Unreserve(const std::string& resource_id);

  SagaPorts ports_;
  FactEmitter* emitter_;
  const InstanceDecider* decider_;
  TaskPool* pool_;
  Metrics* metrics_;
  const std::atomic<bool>* running_;

  mutable std::mutex mu_;  // the fields below
  // root -> request_id of the saga running (queued or on a thread) here
  std::map<std::string, std::string> running_sagas_;
  // resource id -> provider id: placed by a saga running here, not created (or failed) yet;
  // counted as load so that concurrent placements spread
  std::map<std::string, std::string> pending_load_;

  Gauge* sagas_gauge_ = nullptr;
  Histogram* saga_seconds_ = nullptr;
};

}  // namespace dcm
