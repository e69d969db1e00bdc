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
// contract, so every instance and every retry asks for one recovery. Thread-safety: Start/Stop
// from one thread; Tick from the renewer's thread (or a test).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "consumers/fact_emitter.h"
#include "projections/instance_projection.h"
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
  std::string source = "dcm/contract-renewer";
  // Produces a recover_lost_resource request (to dcm.instance-requests, keyed by its root).
  std::function<void(const InstanceEvent& request)> submit;
};

// The recovery request of `instance` whose contract the peer answered `answer` (410 / 404):
// pure, so its ids are tested without Kafka.
InstanceEvent ContractLossRequest(const ServiceTypeInstance& instance,
                                  const RemotePlacement& remote, const PeerAnswer& answer,
                                  bool rehydrate, int64_t now_ms);

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
  };

  Lease Renew(const ServiceTypeInstance& instance, const RemotePlacement& remote, int64_t now);
  // Records the loss and asks for the recovery; false when Kafka did not take the fact.
  bool Lost(const ServiceTypeInstance& instance, const RemotePlacement& remote,
            const PeerAnswer& answer);
  // A renewer fact about `instance`'s contract, as the peer answered `http_status`.
  RemoteFact FactAbout(const ServiceTypeInstance& instance, const RemotePlacement& remote,
                       int http_status) const;
  void Count(const std::string& peer, const char* outcome);

  ContractRenewerOptions options_;
  const InstanceView* instances_;
  FederationApi* federation_;
  FactEmitter* emitter_;
  Metrics* metrics_;
  const Clock* clock_;
  std::map<std::string, Lease> leases_;  // the renewer's thread only
  std::set<std::string> unreachable_;    // peers that did not answer this tick

  std::mutex mu_;
  std::condition_variable wake_;
  bool running_ = false;
  std::thread thread_;
};

}  // namespace dcm
