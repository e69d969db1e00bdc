// Federation handlers (SPEC §10): pure functions of a request and the views.
//
//   GET /federation/v1alpha1/flavors   role dcm-peer: params (federation_params.h: the selector)
//                                      ─▶ CollectFlavorSupply + DeriveFlavors (projections/
//                                      flavors.h) ─▶ render (federation_render.h)
//   GET /federation/v1alpha1/health    open: what peers probe (consumers/peer_prober.h)
//   GET /api/v1alpha1/peers            role dcm-reader: the configured peers and their health
//
// The reservation and contract calls (POST /reservations, ...) are the reservation decider's
// (issue #17, provider side) and are not here.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "projections/flavors.h"
#include "projections/health_projection.h"
#include "projections/instance_projection.h"
#include "projections/registry_projection.h"
#include "src/common/clock.h"
#include "src/common/federation_config.h"
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
  // Whether this enclave can serve peers now (every readiness check); null: always.
  std::function<bool()> ready;
};

void ListFlavors(const HttpRequest& request, const FederationContext& ctx, Respond respond);
// 200 {"status":"healthy","enclave_id"} when ready, else 503 {"status":"unhealthy",...}.
void FederationHealth(const FederationContext& ctx, Respond respond);
void ListPeers(const FederationContext& ctx, Respond respond);

}  // namespace dcm::http
