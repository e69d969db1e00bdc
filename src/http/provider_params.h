// Parameters of the provider API (SPEC §3.1), parsed and validated: the pure first step of the
// provider handlers (provider_handlers.h). Errors are kInvalidArgument naming the field
// (ProblemFromError renders the 400); the handlers also record them as rejections.
#pragma once

#include <simdjson.h>

#include <cstddef>
#include <optional>
#include <string>

#include "events/health_events.h"
#include "events/heartbeat_events.h"
#include "src/common/result.h"
#include "src/http/http_types.h"

namespace dcm::http {

// GET /providers?type=&health_status=&max_page_size=&page_token=
struct ProviderListParams {
  std::string service_type;            // empty = any
  std::optional<HealthStatus> health;  // effective health status to keep; nullopt = any
  std::string page_token;
  size_t page_size = 0;
};
Result<ProviderListParams> ParseProviderListParams(const HttpRequest& request);

// A provider id in path or query field `field` ("id", "new_id").
Status CheckProviderId(const std::string& id, const char* field);

// `new_id` (or `newId`) of POST /providers/{id}:changeId, from its JSON body.
Result<std::string> ParseNewProviderId(simdjson::dom::element body);

// The optional body of POST/PUT /providers/{id}/heartbeat (SPEC §8): none, or a JSON object
// whose optional `status` is "healthy" (the default) or "unhealthy" (any case); other members
// are ignored. kInvalidArgument naming `body` or `status` otherwise.
Result<BeatResult> ParseHeartbeatBody(const HttpRequest& request);

}  // namespace dcm::http
