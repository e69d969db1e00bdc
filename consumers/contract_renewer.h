// ContractRenewer: keeps this enclave's contracts with peer enclaves alive (SPEC §10, the
// consumer side) and finds the ones it lost. It runs inside the instance worker, over the roots
// whose partitions this instance owns, on its own thread.
//
//   every tick: live instances on peers (InstanceView::ListPeerInstancesFor, owned roots)
//     due (a third of the lease left, or not renewed since this instance took the root over):
//       POST {peer}/contracts/{id}:renew
//         2xx ─▶ dcm.contract.renewed (the new expires_at)
//         410 / 404 (expired, revoked, terminated, unknown) ─▶ dcm.contract.expired | .revoked
//             ─▶ recover_lost_resource (reason contract_<why>; with REHYDRATE_ON_PROVIDER_LOSS a
//                new resource id: placed again, local first) ─▶ dcm.instance-requests
//         anything else (the peer down, 5xx): tried again next tick; the peer expires the
//             contract if the outage outlasts the lease, and the next renewal finds that out.
//             A peer that does not answer is asked once per tick, not once per contract.
//
// Each renewal is a question about one contract, so it is also the reconcile: a contract the peer
// no longer has is found at the next renewal. The recovery's request id derives from the
// contract, so every instance and every retry asks for one recovery.
//
// FEDERATION_REPATRIATE (repatriate): at most every repatriate_interval per instance, a live peer
// instance (not LOST, not queued for cleanup) whose resource's intent a local Ready provider
// could take now (the saga's candidate rule, ChooseProvider; a cheap check: the saga decides
// again) gets a rehydrate_resource request with prefer_local ─▶ dcm.instance-requests: placed
// here or not at all (a provider gone meanwhile fails the operation and nothing moves); the old
// contract is queued for cleanup, which terminates it. The request id derives from the contract
// and the check's time bucket (now / repatriate_interval): every instance and every tick of one
// bucket asks once, and a failed attempt is asked again in a later bucket. Thread-safety:
// Start/Stop from one thread; Tick from the renewer's thread (or a test).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "consumers/fact_emitter.h"
#include "projections/health_projection.h"
#include "projections/instance_projection.h"
#include "projections/placement_policy.h"
#include "projections/registry_projection.h"
#include "src/common/clock.h"
#include "src/common/federation_ports.h"
#include "src/common/metrics.h"

namespace dcm {

struct ContractRenewerOptions {
  std::chrono::milliseconds tick{1000};
  // A contract whose lease length is unknown here (first seen) is renewed at once; then when a
  // third of its lease is left, and at least this often.
  std::chrono::milliseconds max_renew_interval{5 * 60 * 1000};
  bool rehydrate = false;  // REHYDRATE_ON_PROVIDER_LOSS
  // FEDERATION_REPATRIATE: bring peer instances home when a local provider can take them, checked
  // this often per instance; `registry` and `health` are the local providers (required with it).
  bool repatriate = false;
  std::chrono::milliseconds repatriate_interval{30000};
  const RegistryView* registry = nullptr;
  const HealthView* health = nullptr;
  std::string source = "dcm/contract-renewer";
  // Produces a recover_lost_resource or a repatriation's rehydrate_resource request (to
  // dcm.instance-requests, keyed by its root).
  std::function<void(const InstanceEvent& request)> submit;
};

// The recovery request of `instance` whose contract the peer answered `answer` (410 / 404):
// pure, so its ids are tested without Kafka.
InstanceEvent ContractLossRequest(const ServiceTypeInstance& instance,
                                  const RemotePlacement& remote, const PeerAnswer& answer,
                                  bool rehydrate, int64_t now_ms);

// The repatriation of `resource` (on a peer under `remote`'s contract): a rehydrate_resource
// request with prefer_local when a local Ready provider could take its intent now
// (ChooseProvider over `candidates`: type, hints, region, Ready), else none. Pure. Its request
// id (and the new resource's) derive from the contract and `bucket`.
std::optional<InstanceEvent> RepatriationRequest(const Resource& resource,
                                                 const RemotePlacement& remote,
                                                 const std::vector<PlacementCandidate>& candidates,
                                                 int64_t bucket, int64_t now_ms);

class ContractRenewer {
 public:
  ContractRenewer(ContractRenewerOptions options, const InstanceView* instances,
                  FederationApi* federation, FactEmitter* emitter, Metrics* metrics,
                  const Clock* clock);
  ~ContractRenewer();

  void Start();
  void Stop();
  void Tick();

 private:
  // When a contract (by instance id) is next due, from its last renewal here.
  struct Lease {
    int64_t due_ms = 0;
    bool lost = false;  // its recovery was asked: not renewed again
    int64_t repatriate_due_ms = 0;
  };

  Lease Renew(const ServiceTypeInstance& instance, const RemotePlacement& remote, int64_t now);
  // Records the loss and asks for the recovery; false when Kafka did not take the fact.
  bool Lost(const ServiceTypeInstance& instance, const RemotePlacement& remote,
            const PeerAnswer& answer);
  // A renewer fact about `instance`'s contract, as the peer answered `http_status`.
  RemoteFact FactAbout(const ServiceTypeInstance& instance, const RemotePlacement& remote,
                       int http_status) const;
  void Count(const std::string& peer, const char* outcome);
  // FEDERATION_REPATRIATE: asks to bring `instance` home if a local provider can take it now.
  void MaybeRepatriate(const ServiceTypeInstance& instance, const RemotePlacement& remote,
                       int64_t now);
  // The local providers as placement candidates (read once per tick, when a check needs them).
  const std::vector<PlacementCandidate>& LocalCandidates();

  ContractRenewerOptions options_;
  const InstanceView* instances_;
  FederationApi* federation_;
  FactEmitter* emitter_;
  Metrics* metrics_;
  const Clock* clock_;
  std::map<std::string, Lease> leases_;  // the renewer's thread only
  std::set<std::string> unreachable_;    // peers that did not answer this tick
  std::optional<std::vector<PlacementCandidate>> candidates_;  // this tick's, once read

  std::mutex mu_;
  std::condition_variable wake_;
  bool running_ = false;
  std::thread thread_;
};

}  // namespace dcm
