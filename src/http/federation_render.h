// JSON of the federation API (SPEC §10) and of the peer list: the last, pure step of the
// federation handlers (federation_handlers.h).
#pragma once

#include <string>
#include <vector>

#include "projections/flavors.h"
#include "projections/health_state.h"
#include "src/common/federation_config.h"

namespace dcm::http {

// GET /federation/v1alpha1/flavors: {"owner", "flavors": [{flavor_id, owner, service_type,
// region, instances_available, cpu_available, memory_available, price{amount, currency,
// period}, expires_at}]}. An unlimited availability is null.
std::string RenderFlavors(const std::string& enclave_id, const std::vector<Flavor>& flavors);

// GET /federation/v1alpha1/health: {"status": "healthy"|"unhealthy", "enclave_id"}: what the
// peers' probers classify (events/health_events.h ClassifyHealthResponse).
std::string RenderFederationHealth(const std::string& enclave_id, bool healthy);

// One configured peer and its health record (null: never probed): {id, url, health_status,
// health{...}} with `health` as a provider's (provider_render.h RenderHealthDetail).
std::string RenderPeer(const PeerConfig& peer, const HealthRecord* health);
// GET /api/v1alpha1/peers: {"enclave_id", "peers": [each already rendered]}.
std::string RenderPeerList(const std::string& enclave_id, const std::vector<std::string>& rendered);

}  // namespace dcm::http
