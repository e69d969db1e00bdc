// Router: maps method + path to the handlers. Accepts the API under /api/v1alpha1 and its alias
// /api/v1 (SPEC §3); operations endpoints live at the root.
#pragma once

#include "src/http/http_types.h"
#include "src/http/ops_handlers.h"
#include "src/http/provider_handlers.h"

namespace dcm::http {

// The returned handler copies both contexts; their pointers must outlive it.
Handler MakeRouter(ApiContext api, OpsContext ops);

}  // namespace dcm::http
