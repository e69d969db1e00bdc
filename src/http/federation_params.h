// Parameters of the federation API (SPEC §10), parsed and validated: the pure first step of the
// federation handlers (federation_handlers.h). Errors are kInvalidArgument naming the field.
#pragma once

#include "projections/flavors.h"
#include "src/common/result.h"
#include "src/http/http_types.h"

namespace dcm::http {

// GET /federation/v1alpha1/flavors?<selector>: matches `flavor_id`, `service_type`, `region`;
// ranges `instances_available_min|max`, `cpu_available_min|max`, `memory_available_min|max`
// (bytes, or a quantity such as 4Gi), `price_min|max`. Unknown parameters are refused (a typo
// would otherwise widen the answer).
Result<FlavorSelector> ParseFlavorSelector(const HttpRequest& request);

}  // namespace dcm::http

namespace dcm::http {

// POST /federation/v1alpha1/reservations {reservation_id, flavor_id, spec, ttl}.
struct ReservationParams {
  std::string reservation_id;  // the consumer's (UUIDv5 of its operation): 1-64 of [A-Za-z0-9._-]
  std::string flavor_id;
  std::string spec = "{}";  // a JSON object (minified), at most kMaxInstanceSpecBytes
  int64_t ttl_ms = 0;       // `ttl`: a duration ("30s", "1m30s") or seconds; absent: the default
};
inline constexpr int64_t kDefaultHoldTtlMs = 60 * 1000;
Result<ReservationParams> ParseReservation(const HttpRequest& request);

// `spec` (a minified JSON object) with `service_type` set to the flavour's `type`: added when
// absent; a different one is a 400 naming spec.service_type.
Result<std::string> WithServiceType(std::string_view spec, const std::string& type);

// The calling enclave (SPEC §10): the authenticated peer's enclave id (a certificate subject
// `dcm-enclave://<id>` or a token's `sub`); with authentication disabled, the last hop of the
// `Fed-Via` header (`a,s`: every enclave a call passed through, the caller last), which callers
// always send. 400 without one; 403 when Fed-Via's last hop is not the authenticated peer.
Result<std::string> CallerEnclave(const HttpRequest& request);

}  // namespace dcm::http
