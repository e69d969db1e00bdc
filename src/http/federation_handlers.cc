#include "src/http/federation_handlers.h"

#include "src/http/federation_params.h"
#include "src/http/federation_render.h"
#include "src/http/handler_util.h"
#include "src/http/problem.h"

namespace dcm::http {
namespace {

Result<std::vector<Flavor>> CurrentFlavors(const FederationContext& ctx) {
  ASSIGN_OR_RETURN(auto supply, CollectFlavorSupply(*ctx.registry, *ctx.health, *ctx.instances,
                                                    ctx.flavors.export_service_types));
  return DeriveFlavors(supply, ctx.flavors, ctx.holds, ctx.clock->NowMillis());
}

HttpResponse Refusal(int status, const std::string& detail, const char* reason) {
  return WithMember(Problem(status, detail), "reason", reason);
}

// Produces `request` (stamped with this instance's source, the time and the caller) and answers
// with the decider's outcome once the projection here applied it.
void Submit(const FederationContext& ctx, const std::string& consumer, FederationRequest request,
            Respond respond) {
  FederationEnvelope& e = EnvelopeOf(request);
  e.source = ctx.source;
  e.time_ms = ctx.clock->NowMillis();
  e.actor = "dcm-enclave://" + consumer;
  ctx.requests->Submit(
      EncodeFederationRequest(request), [respond = std::move(respond)](Result<CloudEvent> event) {
        if (!event) return respond(ProblemFromError(event.error()));
        auto outcome = DecodeFederationOutcome(*event);
        if (!outcome) {
          return respond(Problem(500, "unreadable outcome: " + outcome.error().message));
        }
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

// The consumer's call `T` on its reservation or contract `id` (`what`: which, for the answers).
template <typename T>
void ConsumerCall(const HttpRequest& request, const std::string& id, const FederationContext& ctx,
                  const char* what, Lookup lookup, std::string T::*id_field, Respond respond) {
  auto caller = Caller(request, respond);
  if (!caller) return;
  if (!ctx.requests) {
    return respond(Refusal(404, std::string("no ") + what + " here", refusal::kNotFound));
  }
  if (!CallerOwns((ctx.reservations->*lookup)(id), *caller, what, id, respond)) return;
  T call;
  call.*id_field = id;
  call.consumer = *caller;
  Submit(ctx, *caller, std::move(call), std::move(respond));
}

}  // namespace

void ListFlavors(const HttpRequest& request, const FederationContext& ctx, Respond respond) {
  auto selector = ParseFlavorSelector(request);
  if (!selector) return respond(ProblemFromError(selector.error()));
  auto flavors = CurrentFlavors(ctx);
  if (!flavors) return respond(ProblemFromError(flavors.error()));
  std::vector<Flavor> matching;
  for (Flavor& f : *flavors) {
    if (Matches(*selector, f)) matching.push_back(std::move(f));
  }
  respond(Json(200, RenderFlavors(ctx.flavors.enclave_id, matching)));
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
      request, reservation_id, ctx, "reservation", &FederationView::Reservation,
      &ReservationReleaseRequested::reservation_id, std::move(respond));
}

void ConfirmReservation(const HttpRequest& request, const std::string& reservation_id,
                        const FederationContext& ctx, Respond respond) {
  ConsumerCall<ReservationConfirmRequested>(
      request, reservation_id, ctx, "reservation", &FederationView::Reservation,
      &ReservationConfirmRequested::reservation_id, std::move(respond));
}

void RenewContract(const HttpRequest& request, const std::string& contract_id,
                   const FederationContext& ctx, Respond respond) {
  ConsumerCall<ContractRenewalRequested>(
      request, contract_id, ctx, "contract", &FederationView::Contract,
      &ContractRenewalRequested::contract_id, std::move(respond));
}

void TerminateContract(const HttpRequest& request, const std::string& contract_id,
                       const FederationContext& ctx, Respond respond) {
  ConsumerCall<ContractTerminationRequested>(
      request, contract_id, ctx, "contract", &FederationView::Contract,
      &ContractTerminationRequested::contract_id, std::move(respond));
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
