#include "src/http/federation_handlers.h"

#include <future>

#include "src/common/log.h"
#include "src/http/federation_params.h"
#include "src/http/federation_render.h"
#include "src/http/handler_util.h"
#include "src/http/problem.h"

namespace dcm::http {
namespace {

constexpr auto kRelayDecisionWait = std::chrono::seconds(60);

Result<std::vector<Flavor>> CurrentFlavors(const FederationContext& ctx) {
  ASSIGN_OR_RETURN(auto supply, CollectFlavorSupply(*ctx.registry, *ctx.health, *ctx.instances,
                                                    ctx.flavors.export_service_types));
  return DeriveFlavors(supply, ctx.flavors, ctx.holds, ctx.clock->NowMillis());
}

HttpResponse Refusal(int status, const std::string& detail, const char* reason) {
  return WithMember(Problem(status, detail), "reason", reason);
}

// Produces `request` (stamped with this instance's source, the time and the caller) and calls
// `then` with the decider's outcome once the projection here applied it.
void SubmitThen(const FederationContext& ctx, const std::string& consumer,
                FederationRequest request, std::function<void(Result<FederationOutcome>)> then) {
  FederationEnvelope& e = EnvelopeOf(request);
  e.source = ctx.source;
  e.time_ms = ctx.clock->NowMillis();
  e.actor = "dcm-enclave://" + consumer;
  ctx.requests->Submit(
      EncodeFederationRequest(request), [then = std::move(then)](Result<CloudEvent> event) {
        if (!event) return then(tl::unexpected(event.error()));
        auto outcome = DecodeFederationOutcome(*event);
        if (!outcome) {
          return then(
              MakeError(ErrorCode::kInternal, "unreadable outcome: " + outcome.error().message));
        }
        then(std::move(*outcome));
      });
}

// SubmitThen, answering with the outcome.
void Submit(const FederationContext& ctx, const std::string& consumer, FederationRequest request,
            Respond respond) {
  SubmitThen(ctx, consumer, std::move(request),
             [respond = std::move(respond)](Result<FederationOutcome> outcome) {
               if (!outcome) return respond(ProblemFromError(outcome.error()));
               respond(RenderFederationAnswer(*outcome));
             });
}

// The caller's enclave, or the answer already given (a 400, or a 403 for a mismatched Fed-Via).
std::optional<std::string> Caller(const HttpRequest& request, const Respond& respond) {
  auto caller = CallerEnclave(request);
  if (!caller) {
    respond(ProblemFromError(caller.error()));
    return std::nullopt;
  }
  return std::move(*caller);
}

// Checks what the view shows of a reservation (`what` 'reservation') or contract before any event
// is produced: unknown → 404, another enclave's → 403. Returns whether to go on.
bool CallerOwns(const Result<std::optional<ReservationRecord>>& record, const std::string& caller,
                const char* what, const std::string& id, const Respond& respond) {
  if (!record) {
    respond(ProblemFromError(record.error()));
    return false;
  }
  if (!*record) {
    respond(Refusal(404, std::string(what) + " '" + id + "' not found", refusal::kNotFound));
    return false;
  }
  if ((*record)->consumer != caller) {
    respond(Refusal(403, std::string(what) + " '" + id + "' belongs to another enclave",
                    refusal::kForbidden));
    return false;
  }
  return true;
}

using Lookup =
    Result<std::optional<ReservationRecord>> (FederationView::*)(const std::string& id) const;

// A peer's answer, passed back as it came (status, content type, body).
HttpResponse PassBack(Result<HttpResponse> answer, const std::string& peer) {
  if (!answer) {
    return Problem(
        502, "peer '" + peer + "' did not answer the forwarded call: " + answer.error().message);
  }
  HttpResponse out;
  out.status = answer->status;
  out.content_type = answer->content_type;
  out.body = std::move(answer->body);
  return out;
}

// The call as it came, sent on to `peer` (the next hop of a relayed reservation) off the
// server's threads; the peer's answer passed back.
void ForwardCall(const HttpRequest& request, const std::string& peer, const FederationContext& ctx,
                 Respond respond) {
  auto hop = ParseFedHop(request);
  if (!hop) return respond(ProblemFromError(hop.error()));
  if (!ctx.forwarder) {
    return respond(Problem(503, "this reservation was forwarded to '" + peer +
                                    "', but forwarding is off here (FEDERATION_FORWARD)"));
  }
  std::string target = request.target;
  if (target.starts_with(kFederationBase)) target.erase(0, sizeof(kFederationBase) - 1);
  auto work = [&ctx, peer, method = request.method, target, body = request.body, hop = *hop,
               respond]() mutable {
    respond(PassBack(ctx.forwarder->Forward(peer, method, target, body, hop), peer));
  };
  if (!ctx.forwarder->Run(std::move(work))) {
    respond(Problem(503, "too many calls are being forwarded; try again"));
  }
}

// The consumer's call `T` on its reservation or contract `id` (`what`: which, for the answers).
// `relayed` (contracts only): where a contract this enclave relayed is found.
template <typename T>
void ConsumerCall(const HttpRequest& request, const std::string& id, const FederationContext& ctx,
                  const char* what, Lookup lookup, Lookup relayed, std::string T::*id_field,
                  Respond respond) {
  auto caller = Caller(request, respond);
  if (!caller) return;
  if (!ctx.requests) {
    return respond(Refusal(404, std::string("no ") + what + " here", refusal::kNotFound));
  }
  auto record = (ctx.reservations->*lookup)(id);
  if (relayed && record && !*record) record = (ctx.reservations->*relayed)(id);
  if (!CallerOwns(record, *caller, what, id, respond)) return;
  if ((*record)->state == reservation_state::kRelayed) {
    return ForwardCall(request, (*record)->next_hop, ctx, std::move(respond));
  }
  T call;
  call.*id_field = id;
  call.consumer = *caller;
  Submit(ctx, *caller, std::move(call), std::move(respond));
}

// A reservation for a flavour this enclave does not own, on a forwarding enclave: the route (the
// one recorded for a repeat), decided as dcm.reservation.relayed, then the call sent on.
void RelayReservation(const HttpRequest& request, const std::string& caller,
                      const ReservationParams& params, const FederationContext& ctx,
                      Respond respond) {
  auto hop = ParseFedHop(request);
  if (!hop) return respond(ProblemFromError(hop.error()));
  auto known = ctx.reservations->Reservation(params.reservation_id);
  if (!known) return respond(ProblemFromError(known.error()));
  if (*known && ((*known)->state != reservation_state::kRelayed || (*known)->consumer != caller ||
                 (*known)->flavor_id != params.flavor_id)) {
    return respond(Refusal(409, "reservation id '" + params.reservation_id + "' is taken",
                           refusal::kConflict));
  }
  if (!*known && hop->hop_limit <= 1) {
    return respond(Refusal(404,
                           "flavor '" + params.flavor_id +
                               "' is not offered here, and the hop limit forbids a forward",
                           refusal::kUnknownFlavor));
  }
  auto work = [&ctx, request, caller, params, hop = *hop, known = *known, respond]() mutable {
    std::string next_hop = known ? known->next_hop : "";
    if (!known) {
      auto route = ctx.forwarder->RouteFor(params.flavor_id, hop);
      if (!route) {
        return respond(
            Refusal(404, "flavor '" + params.flavor_id + "' is offered neither here nor by a peer",
                    refusal::kUnknownFlavor));
      }
      ReservationRelayRequested relay;
      relay.reservation_id = params.reservation_id;
      relay.flavor_id = params.flavor_id;
      relay.consumer = caller;
      relay.next_hop = route->peer;
      relay.owner = route->owner;
      auto decided = std::make_shared<std::promise<Result<FederationOutcome>>>();
      auto future = decided->get_future();
      SubmitThen(ctx, caller, std::move(relay),
                 [decided](Result<FederationOutcome> o) { decided->set_value(std::move(o)); });
      // The bus answers within its decision timeout; this bound only keeps a stopping server
      // from waiting forever.
      if (future.wait_for(kRelayDecisionWait) != std::future_status::ready) {
        return respond(Problem(503, "the relay of this reservation was not decided in time"));
      }
      auto outcome = future.get();
      if (!outcome) return respond(ProblemFromError(outcome.error()));
      const auto* relayed = std::get_if<ReservationRelayed>(&*outcome);
      if (!relayed) return respond(RenderFederationAnswer(*outcome));
      next_hop = relayed->next_hop;
    }
    respond(PassBack(ctx.forwarder->Forward(next_hop, "POST", "/reservations", request.body, hop),
                     next_hop));
  };
  if (!ctx.forwarder->Run(std::move(work))) {
    respond(Problem(503, "too many calls are being forwarded; try again"));
  }
}

// Whether ListFlavors goes on to the peers: a forwarding enclave, a discovery seen for the first
// time (a repeat is answered empty), within the hop limit. Answers (and returns false) otherwise.
bool ForwardsDiscovery(const FederationContext& ctx, const FedHop& hop,
                       const std::vector<Flavor>& local, const Respond& respond) {
  if (!ctx.forwarder) {
    respond(Json(200, RenderFlavors(ctx.flavors.enclave_id, local)));
    return false;
  }
  const std::string via = hop.via.empty() ? "" : hop.via.back();
  if (!ctx.forwarder->FirstArrival(hop.request_id)) {
    Logger("federation-relay")
        ->info("msg=\"repeated discovery answered empty\" request_id={} via={}", hop.request_id,
               via);
    respond(Json(200, RenderFlavors(ctx.flavors.enclave_id, {})));
    return false;
  }
  if (hop.hop_limit <= 1) {
    Logger("federation-relay")
        ->info("msg=\"discovery handled\" request_id={} via={} hop_limit=1 local={} forwarded=0",
               hop.request_id, via, local.size());
    respond(Json(200, RenderFlavors(ctx.flavors.enclave_id, local)));
    return false;
  }
  return true;
}

}  // namespace

void ListFlavors(const HttpRequest& request, const FederationContext& ctx, Respond respond) {
  auto selector = ParseFlavorSelector(request);
  if (!selector) return respond(ProblemFromError(selector.error()));
  auto hop = ParseFedHop(request);
  if (!hop) return respond(ProblemFromError(hop.error()));
  auto flavors = CurrentFlavors(ctx);
  if (!flavors) return respond(ProblemFromError(flavors.error()));
  std::vector<Flavor> matching;
  for (Flavor& f : *flavors) {
    if (Matches(*selector, f)) matching.push_back(std::move(f));
  }
  if (!ForwardsDiscovery(ctx, *hop, matching, respond)) return;
  const size_t q = request.target.find('?');
  std::string query = q == std::string::npos ? "" : request.target.substr(q + 1);
  auto work = [&ctx, local = std::move(matching), hop = *hop, query, respond]() mutable {
    auto forwarded = ctx.forwarder->Discover(query, hop);
    Logger("federation-relay")
        ->info("msg=\"discovery handled\" request_id={} via={} hop_limit={} local={} forwarded={}",
               hop.request_id, hop.via.empty() ? "" : hop.via.back(), hop.hop_limit, local.size(),
               forwarded.size());
    respond(Json(200, RenderFlavors(ctx.flavors.enclave_id, local, forwarded)));
  };
  if (!ctx.forwarder->Run(std::move(work))) {
    respond(Problem(503, "too many calls are being forwarded; try again"));
  }
}

void FederationHealth(const FederationContext& ctx, Respond respond) {
  const bool healthy = !ctx.ready || ctx.ready();
  respond(Json(healthy ? 200 : 503, RenderFederationHealth(ctx.flavors.enclave_id, healthy)));
}

void ListPeers(const FederationContext& ctx, Respond respond) {
  std::vector<std::string> rendered;
  for (const PeerConfig& peer : ctx.peers) {
    auto record = ctx.peer_health ? ctx.peer_health->Get(peer.id)
                                  : Result<std::optional<HealthRecord>>(std::nullopt);
    if (!record) return respond(ProblemFromError(record.error()));
    rendered.push_back(RenderPeer(peer, *record ? &**record : nullptr));
  }
  respond(Json(200, RenderPeerList(ctx.flavors.enclave_id, rendered)));
}

void ReserveFlavor(const HttpRequest& request, const FederationContext& ctx, Respond respond) {
  auto caller = Caller(request, respond);
  if (!caller) return;
  auto params = ParseReservation(request);
  if (!params) return respond(ProblemFromError(params.error()));
  auto flavors = CurrentFlavors(ctx);
  if (!flavors) return respond(ProblemFromError(flavors.error()));
  auto flavor = std::find_if(flavors->begin(), flavors->end(),
                             [&](const Flavor& f) { return f.flavor_id == params->flavor_id; });
  if (flavor == flavors->end() && ctx.forwarder && ctx.requests) {
    return RelayReservation(request, *caller, *params, ctx, std::move(respond));
  }
  if (flavor == flavors->end() || !ctx.requests) {
    return respond(Refusal(404, "flavor '" + params->flavor_id + "' is not offered here",
                           refusal::kUnknownFlavor));
  }
  auto known = ctx.reservations->Reservation(params->reservation_id);
  if (!known) return respond(ProblemFromError(known.error()));
  if (*known && (*known)->consumer != *caller) {
    return respond(Refusal(409, "reservation id '" + params->reservation_id + "' is taken",
                           refusal::kConflict));
  }
  auto spec = WithServiceType(params->spec, flavor->service_type);
  if (!spec) return respond(ProblemFromError(spec.error()));
  ReservationReceived hold;
  hold.reservation_id = params->reservation_id;
  hold.flavor_id = params->flavor_id;
  hold.consumer = *caller;
  hold.spec = std::move(*spec);
  hold.ttl_ms = params->ttl_ms;
  Submit(ctx, *caller, std::move(hold), std::move(respond));
}

void ReleaseReservation(const HttpRequest& request, const std::string& reservation_id,
                        const FederationContext& ctx, Respond respond) {
  ConsumerCall<ReservationReleaseRequested>(
      request, reservation_id, ctx, "reservation", &FederationView::Reservation, nullptr,
      &ReservationReleaseRequested::reservation_id, std::move(respond));
}

void ConfirmReservation(const HttpRequest& request, const std::string& reservation_id,
                        const FederationContext& ctx, Respond respond) {
  ConsumerCall<ReservationConfirmRequested>(
      request, reservation_id, ctx, "reservation", &FederationView::Reservation, nullptr,
      &ReservationConfirmRequested::reservation_id, std::move(respond));
}

void RenewContract(const HttpRequest& request, const std::string& contract_id,
                   const FederationContext& ctx, Respond respond) {
  ConsumerCall<ContractRenewalRequested>(
      request, contract_id, ctx, "contract", &FederationView::Contract,
      &FederationView::RelayOfContract, &ContractRenewalRequested::contract_id, std::move(respond));
}

void TerminateContract(const HttpRequest& request, const std::string& contract_id,
                       const FederationContext& ctx, Respond respond) {
  ConsumerCall<ContractTerminationRequested>(
      request, contract_id, ctx, "contract", &FederationView::Contract,
      &FederationView::RelayOfContract, &ContractTerminationRequested::contract_id,
      std::move(respond));
}

void ListContracts(const HttpRequest& request, const FederationContext& ctx, Respond respond) {
  auto caller = Caller(request, respond);
  if (!caller) return;
  if (const std::string* consumer = request.Query("consumer");
      consumer && !consumer->empty() && *consumer != *caller) {
    return respond(
        Refusal(403, "contracts of '" + *consumer + "' are not the caller's", refusal::kForbidden));
  }
  if (!ctx.reservations) return respond(Json(200, RenderContracts({})));
  auto contracts = ctx.reservations->ContractsOf(*caller);
  if (!contracts) return respond(ProblemFromError(contracts.error()));
  respond(Json(200, RenderContracts(*contracts)));
}

}  // namespace dcm::http
