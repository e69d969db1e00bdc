// Router: one table maps method + path to a handler and to the Access it needs (auth.h), so
// authorization is decided in one place, next to the routes. The API lives under /api/v1alpha1
// and its alias /api/v1 (SPEC §3); the operations endpoints live at the root.
//
// Order of answers: an unknown path under a route that needs credentials still authenticates
// first (401 before 404, so the API's shape is not shown to strangers); then 404, 405 (with
// Allow), 403; then the handler.
#pragma once

#include <string>
#include <vector>

#include "src/http/auth.h"
#include "src/http/http_types.h"
#include "src/http/ops_handlers.h"
#include "src/http/provider_handlers.h"

namespace dcm::http {

// The returned handler copies the contexts; their pointers must outlive it. `access` has no
// default: a router without an authenticator lets everyone act as admin, which a caller must
// ask for (AccessContext{}).
Handler MakeRouter(ApiContext api, OpsContext ops, AccessContext access);

// One row of the route table, for docs and tests: method, path pattern ("/providers/{id}"; API
// routes are relative to the base path) and the access it needs.
struct RouteInfo {
  std::string method;
  std::string pattern;
  bool api = true;
  Access access = Access::kRead;
};
std::vector<RouteInfo> RouteTable();

}  // namespace dcm::http
