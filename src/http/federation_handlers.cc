#include "src/http/federation_handlers.h"

#include "src/http/federation_params.h"
#include "src/http/federation_render.h"
#include "src/http/problem.h"

namespace dcm::http {

void ListFlavors(const HttpRequest& request, const FederationContext& ctx, Respond respond) {
  auto selector = ParseFlavorSelector(request);
  if (!selector) return respond(ProblemFromError(selector.error()));
  auto supply = CollectFlavorSupply(*ctx.registry, *ctx.health, *ctx.instances,
                                    ctx.flavors.export_service_types);
  if (!supply) return respond(ProblemFromError(supply.error()));
  std::vector<Flavor> matching;
  for (Flavor& f : DeriveFlavors(*supply, ctx.flavors, ctx.holds, ctx.clock->NowMillis())) {
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

}  // namespace dcm::http
