// JSON of the provider API (SPEC §3.1): the last, pure step of the provider handlers
// (provider_handlers.h). A provider is rendered joined with its health record.
#pragma once

#include <string>
#include <vector>

#include "events/provider.h"
#include "projections/health_state.h"

namespace dcm::http {

// The API representation of a provider (snake_case; `status` only on POST replies), joined with
// its health record (null: never probed).
std::string RenderProvider(const Provider& provider, const HealthRecord* health,
                           const std::string& status = "");

// A provider's `health` detail (the object RenderProvider nests), alone: the reply to a
// heartbeat (SPEC §8). `registration_seq`: the provider's (registry) seq.
std::string RenderHealthDetail(const HealthRecord* health, int64_t registration_seq);

// GET /providers: {"providers": [each already rendered], "next_page_token"?}.
std::string RenderProviderList(const std::vector<std::string>& rendered,
                               const std::string& next_page_token);

// GET /service-types: {"service_types": [...]}.
std::string RenderServiceTypes(const std::vector<std::string>& service_types);

}  // namespace dcm::http
