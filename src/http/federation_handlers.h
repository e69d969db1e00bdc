// Federation handlers (SPEC §10): pure functions of a request and the views.
//
//   GET /federation/v1alpha1/flavors   role dcm-peer: params (federation_params.h: the selector)
//                                      ─▶ CollectFlavorSupply + DeriveFlavors (projections/
//                                      flavors.h) ─▶ render (federation_render.h)
//   GET /federation/v1alpha1/health    open: what peers probe (consumers/peer_prober.h)
//   GET /api/v1alpha1/peers            role dcm-reader: the configured peers and their health
//
//   POST   /federation/v1alpha1/reservations            role dcm-peer: a hold
//   DELETE /federation/v1alpha1/reservations/{id}       release it
//   POST   /federation/v1alpha1/reservations/{id}:confirm  sign its contract
//   POST   /federation/v1alpha1/contracts/{id}:renew    extend the contract's lease
//   DELETE /federation/v1alpha1/contracts/{id}          terminate it
//   GET    /federation/v1alpha1/contracts?consumer=     the caller's live contracts
// A call becomes a request on dcm.federation-requests (events/federation_events.h) and answers
// with the FederationWorker's outcome once this instance's `federation` projection applied it.
// What the view already shows to be wrong (an unknown flavour, reservation or contract, another
// enclave's) is answered at once and produces no event.
//
// A forwarding enclave (a supernode, `forwarder` set) also lists its peers' flavours (not to a
// discovery it has seen, nor beyond the hop limit); a reservation for a flavour it does not own
// is routed (the peer offering it in the fewest hops), decided as dcm.reservation.relayed, and
// sent on under the same id; the confirm, release, renew and terminate of a relayed reservation
// or contract are sent on to the same peer. Forwarded answers are the peer's, as it gave them.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "events/command_bus.h"
#include "projections/federation_projection.h"
#include "projections/flavors.h"
#include "projections/health_projection.h"
#include "projections/instance_projection.h"
#include "projections/registry_projection.h"
#include "src/common/clock.h"
#include "src/common/federation_config.h"
#include "src/http/federation_forwarding.h"
#include "src/http/http_types.h"

namespace dcm::http {

// Base path of the peer API (SPEC §10).
inline constexpr char kFederationBase[] = "/federation/v1alpha1";

// What the federation handlers read. Owned by `dcm serve` (src/cli/serve_federation.cc).
struct FederationContext {
  FlavorOptions flavors;  // enclave id, exported types, price, ttl
  std::vector<PeerConfig> peers;
  const RegistryView* registry = nullptr;
  const HealthView* health = nullptr;       // providers'
  const InstanceView* instances = nullptr;  // live instances and their requests
  const HealthView* peer_health = nullptr;  // peers' (HealthProjection::kPeerPrefix)
  // Active holds (the reservation decider's projection); null: nothing is held yet.
  const HeldCapacity* holds = nullptr;
  const Clock* clock = nullptr;
  // The reservation decider's requests (dcm.federation-requests) and its projection; null: this
  // enclave exports nothing (every reservation is for an unknown flavour).
  CommandBus* requests = nullptr;
  const FederationView* reservations = nullptr;
  std::string source;  // `source` of the requests: dcm/federation-api/<instance>
  // Whether this enclave can serve peers now (every readiness check); null: always.
  std::function<bool()> ready;
  // FEDERATION_FORWARD (a supernode): re-advertises its peers' flavours and forwards the calls
  // for them (federation_forwarding.h); null: this enclave forwards nothing. Needs `requests`:
  // which reservation went to which peer is decided (dcm.reservation.relayed) before a forward.
  FederationForwarder* forwarder = nullptr;
};

void ListFlavors(const HttpRequest& request, const FederationContext& ctx, Respond respond);
// 200 {"status":"healthy","enclave_id"} when ready, else 503 {"status":"unhealthy",...}.
void FederationHealth(const FederationContext& ctx, Respond respond);
void ListPeers(const FederationContext& ctx, Respond respond);

void ReserveFlavor(const HttpRequest& request, const FederationContext& ctx, Respond respond);
void ReleaseReservation(const HttpRequest& request, const std::string& reservation_id,
                        const FederationContext& ctx, Respond respond);
void ConfirmReservation(const HttpRequest& request, const std::string& reservation_id,
                        const FederationContext& ctx, Respond respond);
void RenewContract(const HttpRequest& request, const std::string& contract_id,
                   const FederationContext& ctx, Respond respond);
void TerminateContract(const HttpRequest& request, const std::string& contract_id,
                       const FederationContext& ctx, Respond respond);
void ListContracts(const HttpRequest& request, const FederationContext& ctx, Respond respond);

}  // namespace dcm::http
