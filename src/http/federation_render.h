// JSON of the federation API (SPEC §10) and of the peer list: the last, pure step of the
// federation handlers (federation_handlers.h).
#pragma once

#include <string>
#include <vector>

#include "events/federation_events.h"
#include "projections/federation_state.h"
#include "projections/flavors.h"
#include "projections/health_state.h"
#include "src/common/federation_config.h"
#include "src/http/http_types.h"

namespace dcm::http {

// GET /federation/v1alpha1/flavors: {"owner", "flavors": [{flavor_id, owner, service_type,
// region, instances_available, cpu_available, memory_available, price{amount, currency,
// period}, expires_at, hops, path}]}. An unlimited availability is null; `hops` is 1 and `path`
// [owner] for this enclave's own flavours. `forwarded`: a forwarding enclave's peers' flavours,
// re-advertised (federation_forwarding.h), after its own.
std::string RenderFlavors(const std::string& enclave_id, const std::vector<Flavor>& flavors,
                          const std::vector<std::string>& forwarded = {});

// GET /federation/v1alpha1/health: {"status": "healthy"|"unhealthy", "enclave_id"}: what the
// peers' probers classify (events/health_events.h ClassifyHealthResponse).
std::string RenderFederationHealth(const std::string& enclave_id, bool healthy);

// One configured peer and its health record (null: never probed): {id, url, health_status,
// health{...}} with `health` as a provider's (provider_render.h RenderHealthDetail).
std::string RenderPeer(const PeerConfig& peer, const HealthRecord* health);
// GET /api/v1alpha1/peers: {"enclave_id", "peers": [each already rendered]}.
std::string RenderPeerList(const std::string& enclave_id, const std::vector<std::string>& rendered);

// The peer API's answer to a decided reservation or contract call (FederationAnswerStatus):
//   held (201; 200 repeat)        {reservation_id, flavor_id, consumer, state, expires_at, repeat}
//   signed, renewed (201/200)     + contract_id, remote_instance_id (expires_at: the lease's end)
//   released, terminated, revoked {reservation_id, contract_id?, state, repeat}
//   refused, expired (4xx, 410)   problem+json with `reason` (events/federation_events.h refusal)
HttpResponse RenderFederationAnswer(const FederationOutcome& outcome);

// One reservation's record as the peer API shows it: {reservation_id, flavor_id, consumer, state,
// expires_at, contract_id?, remote_instance_id?}. GET /contracts: {"contracts": [...]}.
std::string RenderContracts(const std::vector<ReservationRecord>& records);

}  // namespace dcm::http
