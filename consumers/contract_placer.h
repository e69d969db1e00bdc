// ContractPlacer: keeps the provider enclave's instances in step with its contracts (SPEC §10:
// "a confirmed contract becomes an ordinary instance operation (root contract:<id>)"), so the
// saga, placement, cleanup and audit apply to a peer's instance unchanged.
//
//   live contract, no resource            ─▶ create_resource  root contract:<contract_id>,
//                                            resource id = the contract's remote_instance_id,
//                                            spec = the reservation's (service_type: the flavour's)
//   contract ended (expired, terminated,  ─▶ delete_resource  (the saga deletes it on the SP; an
//   revoked), its resource still there       SP that is down leaves it to the cleanup queue)
//
// It reconciles, level-triggered, on the FederationWorker's thread (only the owner of the
// decisions places): each pass reads the decider's live contracts and the instance view, and asks
// for what is missing, at most once per `resubmit_after` per contract while its operation is not
// seen. Ended contracts come from the worker's outcomes (Ended) and, when it takes the partition
// over, from one scan of the resources (Adopt): so a crash between a contract's end and its
// instance's deletion is repaired by the next owner. A repeated create is harmless: the resource
// id is the contract's, so the instance decider refuses it as taken (409) and the SP sees one.
//
// Not thread-safe: the worker's thread owns it.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>

#include "events/instance_events.h"
#include "projections/federation_state.h"
#include "projections/instance_projection.h"
#include "src/common/metrics.h"

namespace dcm {

// The root of a contract's instance operations.
std::string ContractRoot(const std::string& contract_id);

struct ContractPlacerOptions {
  std::string source = "dcm/federation";  // `source` of the operation requests
  std::chrono::milliseconds resubmit_after{10000};
  // Produces an instance operation request (dcm.instance-requests); the outcome only logs.
  std::function<void(const CloudEvent& request)> submit;
};

class ContractPlacer {
 public:
  // `contracts`: the decider's state (FederationDecider::kRoot).
  ContractPlacer(ContractPlacerOptions options, FederationState contracts,
                 const InstanceView* instances, Metrics* metrics);

  // A contract that ended (its instance is to go).
  void Ended(const std::string& contract_id, const std::string& remote_instance_id);
  // Every resource of a contract that is not live is to go (after taking the partition over).
  Status Adopt();
  // One pass at `now_ms`.
  Status Reconcile(int64_t now_ms);

 private:
  Status Place(const ReservationRecord& contract, int64_t now_ms);
  Status Remove(const std::string& contract_id, const std::string& resource_id, int64_t now_ms,
                bool* done);
  // Whether `root` may get a new request now (no operation in progress, none asked recently).
  Result<bool> MayAsk(const std::string& root);
  // Produces `request` (`what`: "create" | "delete", logged and counted).
  void Ask(InstanceEvent request, int64_t now_ms, const char* what, const std::string& contract_id);

  ContractPlacerOptions options_;
  FederationState contracts_;
  const InstanceView* instances_;
  Metrics* metrics_;
  std::map<std::string, std::string> ending_;  // contract id -> its resource id
  std::map<std::string, int64_t> asked_;       // root -> when its last request was produced
};

}  // namespace dcm
