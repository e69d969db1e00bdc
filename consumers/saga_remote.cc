// The instance saga's peer placement (SPEC §10, the consumer side): the steps SagaRunner takes
// when no local provider can serve a request and peers are configured.
//
//   Discover (Ready peers, in parallel, a deadline) ─▶ RankOffers ─▶ for each offer, in order:
//     reservation.requested ─▶ POST /reservations ─▶ reservation.held ─▶ :confirm ─▶
//     contract.signed ─▶ resource.placed (provider_name "peer:<enclave>", placement remote)
//     a refusal (409 no capacity, 404, 410 the hold expired, the peer unreachable):
//     reservation.refused, then the next offer
//   no offer left: the local failure, as with no peer (422 no_provider / 503)
//
// Every request a placement makes is named by ids derived from the operation
// (ReservationIdFor), so a saga resumed after a crash at any step repeats the same requests and
// the peer answers them the same way: one hold, one contract, one instance.
#include <set>

#include "consumers/saga_runner.h"
#include "projections/placement_policy.h"
#include "src/common/log.h"

namespace dcm {
namespace {

// How often a placement asks a peer that does not answer before it gives up on the offer.
constexpr int kPeerAttempts = 3;
constexpr std::chrono::milliseconds kPeerRetryDelay{500};

// The peer's call, retried while the peer cannot be reached (a refusal is an answer).
template <typename Call>
Result<PeerAnswer> Retried(const std::atomic<bool>* running, Call call) {
  Result<PeerAnswer> answer = call();
  for (int attempt = 1; attempt < kPeerAttempts && !answer && running->load(); ++attempt) {
    std::this_thread::sleep_for(kPeerRetryDelay);
    answer = call();
  }
  return answer;
}

bool Is2xxAnswer(const Result<PeerAnswer>& answer) { return answer && Is2xx(answer->http_status); }

// dcm_federation_<what>_total{peer,outcome}: the consumer side's offers, holds and contracts.
void CountPeer(Metrics* metrics, const std::string& what, const std::string& peer,
               const std::string& outcome) {
  metrics
      ->GetCounter("dcm_federation_" + what + "_total",
                   "Placements on peer enclaves: " + what + " by peer and outcome",
                   "peer=\"" + peer + "\",outcome=\"" + outcome + "\"")
      .Inc();
}

// A 2xx that lacks what the facts it becomes require (a lease's end; a contract's ids) is a bad
// answer, never recorded as held or signed (the port's HTTP transport checks this too).
Result<PeerAnswer> Checked(Result<PeerAnswer> answer, bool contract) {
  if (!Is2xxAnswer(answer)) return answer;
  if (answer->expires_at_ms == 0 ||
      (contract && (answer->contract_id.empty() || answer->remote_instance_id.empty()))) {
    return MakeError(ErrorCode::kUnavailable, "the peer's answer lacks what it promises");
  }
  return answer;
}

}  // namespace

bool SagaRunner::PlaceOnPeer(Saga& saga, const SagaStep& step, const ResourcePlaced& placed,
                             const OperationFailure& local) {
  auto logger = Logger("instance-worker");
  if (!saga.contract_id.empty()) return RecordPeerPlacement(saga, placed);
  std::vector<PeerOffer> offers;
  if (!saga.reservation_id.empty()) {  // resumed: the hold asked before the crash comes first
    PeerOffer resumed;
    resumed.peer = saga.peer;
    resumed.flavor_id = saga.flavor_id;
    offers.push_back(std::move(resumed));
  }
  // One offer per peer, its best: the reservation id is the peer's for this operation, so a
  // second flavour of the same peer would be refused as a conflict.
  std::set<std::string> peers;
  if (!offers.empty()) peers.insert(offers.front().peer);
  const std::string service_type = SpecServiceType(placed.spec);
  std::vector<PeerOffer> discovered =
      ports_.federation->Discover(service_type, ports_.discovery_timeout);
  for (const PeerOffer& offer : discovered) CountPeer(metrics_, "offers", offer.peer, "offered");
  for (PeerOffer& offer : RankOffers(std::move(discovered), SpecRegion(placed.spec))) {
    if (peers.insert(offer.peer).second) offers.push_back(std::move(offer));
  }
  logger->info("msg=\"no local provider: asking peers\" root={} service_type={} offers={}",
               saga.started.root, service_type, offers.size());
  for (const PeerOffer& offer : offers) {
    switch (TryOffer(saga, step, offer, placed.spec)) {
      case OfferResult::kSigned:
        return RecordPeerPlacement(saga, placed);
      case OfferResult::kEnded:
        return false;
      case OfferResult::kRefused:
        break;
    }
  }
  OperationFailure failure = local;
  if (!offers.empty()) failure.error += "; no peer took it either";
  return Fail(saga, failure);
}

SagaRunner::OfferResult SagaRunner::TryOffer(Saga& saga, const SagaStep& step,
                                             const PeerOffer& offer, const std::string& spec) {
  RemoteFact fact;
  fact.resource_id = step.target;
  fact.peer = offer.peer;
  fact.flavor_id = offer.flavor_id;
  fact.reservation_id = ReservationIdFor(saga.started.request_id, step.target, offer.peer);
  if (saga.reservation_id != fact.reservation_id) {
    if (!Emit(saga, RemoteReservationRequested{fact})) return OfferResult::kEnded;
    saga.peer = fact.peer;
    saga.flavor_id = fact.flavor_id;
    saga.reservation_id = fact.reservation_id;
  }
  FederationApi& api = *ports_.federation;
  auto held = Checked(Retried(running_,
                              [&] {
                                return api.Reserve(fact.peer, fact.reservation_id, fact.flavor_id,
                                                   spec, ports_.hold_ttl);
                              }),
                      false);
  if (!Is2xxAnswer(held)) return Refused(saga, fact, held);
  fact.expires_at_ms = held->expires_at_ms;
  CountPeer(metrics_, "holds", fact.peer, "held");
  if (!Emit(saga, RemoteReservationHeld{fact})) return OfferResult::kEnded;
  auto signed_ =
      Checked(Retried(running_, [&] { return api.Confirm(fact.peer, fact.reservation_id); }), true);
  if (!Is2xxAnswer(signed_)) {
    if (!signed_) (void)api.Release(fact.peer, fact.reservation_id);  // best effort: it expires
    return Refused(saga, fact, signed_);
  }
  fact.contract_id = signed_->contract_id;
  fact.instance_id = signed_->remote_instance_id;
  fact.expires_at_ms = signed_->expires_at_ms;
  CountPeer(metrics_, "contracts", fact.peer, "signed");
  if (!Emit(saga, RemoteContractSigned{fact})) return OfferResult::kEnded;
  saga.contract_id = fact.contract_id;
  return OfferResult::kSigned;
}

SagaRunner::OfferResult SagaRunner::Refused(Saga& saga, RemoteFact fact,
                                            const Result<PeerAnswer>& answer) {
  if (answer) {
    fact.http_status = answer->http_status;
    fact.reason =
        answer->reason.empty() ? "http_" + std::to_string(answer->http_status) : answer->reason;
    fact.error = answer->detail;
  } else {
    fact.reason = "unreachable";
    fact.error = answer.error().message;
  }
  CountPeer(metrics_, "holds", fact.peer, fact.reason);
  Logger("instance-worker")
      ->info(
          "msg=\"peer refused the reservation\" root={} peer={} reservation_id={} reason={} "
          "error=\"{}\"",
          saga.started.root, fact.peer, fact.reservation_id, fact.reason, fact.error);
  if (!Emit(saga, RemoteReservationRefused{fact})) return OfferResult::kEnded;
  saga.peer = saga.flavor_id = saga.reservation_id = "";
  return OfferResult::kRefused;
}

bool SagaRunner::RecordPeerPlacement(Saga& saga, ResourcePlaced placed) {
  placed.provider_name = PeerProviderName(saga.peer);
  placed.provider_id = placed.provider_name;
  placed.service_type = SpecServiceType(placed.spec);
  if (placed.policy.empty()) placed.policy = "builtin";
  placed.placement = EncodeRemotePlacement({saga.peer, saga.contract_id});
  const std::string spec = placed.spec;
  saga.placed_resource_id = placed.resource_id;
  if (!Emit(saga, std::move(placed))) return false;
  saga.provider_name = PeerProviderName(saga.peer);
  saga.provider_id = saga.provider_name;
  saga.spec = spec;
  return true;
}

// The peer's contract created the instance there: this enclave records it as created.
bool SagaRunner::CreateOnPeer(Saga& saga, const std::string& instance_id) {
  InstanceCreated fact;
  fact.instance_id = instance_id;
  fact.provider_name = saga.provider_name;
  fact.provider_id = saga.provider_id;
  fact.service_type = SpecServiceType(saga.spec);
  fact.spec = saga.spec;
  fact.status = "PROVISIONING";
  fact.http_status = 201;
  fact.placement =
      EncodeRemotePlacement({PeerOfProviderName(saga.provider_name), saga.contract_id});
  return Emit(saga, std::move(fact));
}

// A peer's instance goes with its contract: DELETE /contracts/{id} (a contract the peer no
// longer has, or has ended, is gone too). A deferred delete, or one whose peer does not end the
// contract, goes to the cleanup queue (CleanupWorker terminates it there) unless the delete is
// direct (then 502). Meanwhile nothing renews it: the peer also ends it when its lease runs out.
bool SagaRunner::DeleteOnPeer(Saga& saga, const ServiceTypeInstance& si,
                              const RemotePlacement& remote, DeleteMode mode) {
  Result<PeerAnswer> answer = MakeError(ErrorCode::kUnavailable, "not contacted (deferred)");
  if (mode != DeleteMode::kDeferred) {
    answer = Retried(running_, [&] {
      return ports_.federation
                 ? ports_.federation->Terminate(remote.peer, remote.contract_id)
                 : Result<PeerAnswer>(MakeError(ErrorCode::kUnavailable, "no peers configured"));
    });
  }
  const int status = answer ? answer->http_status : 0;
  if (Is2xxAnswer(answer) || status == 404 || status == 410) {
    RemoteFact ended;
    ended.resource_id = si.id;
    ended.peer = remote.peer;
    ended.contract_id = remote.contract_id;
    ended.http_status = status;
    CountPeer(metrics_, "contracts", remote.peer, "terminated");
    if (!Emit(saga, RemoteContractTerminated{ended})) return false;
    InstanceDeleted deleted;
    deleted.instance_id = si.id;
    deleted.provider_name = si.provider_name;
    deleted.provider_id = si.provider_id;
    deleted.http_status = status;
    return Emit(saga, std::move(deleted));
  }
  if (mode != DeleteMode::kDirect) return Enqueue(saga, si);
  const std::string error = answer ? "answered " + std::to_string(status) + ": " + answer->detail
                                   : answer.error().message;
  InstanceDeleteFailed failed;
  failed.instance_id = si.id;
  failed.provider_name = si.provider_name;
  failed.http_status = status;
  failed.error = error;
  if (!Emit(saga, std::move(failed))) return false;
  return Fail(saga,
              {502, "delete_failed",
               "peer '" + remote.peer + "' did not terminate contract '" + remote.contract_id +
                   "': " + error + " (DELETE ?deferred=true queues it for cleanup)"});
}

}  // namespace dcm
