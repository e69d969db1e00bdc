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
