// Query parameters of the audit endpoints (SPEC §3.4), parsed and validated: the pure first step
// of each audit handler (audit_handlers.h). Errors are kInvalidArgument naming the parameter
// (ProblemFromError renders the 400).
#pragma once

#include <cstdint>

#include "projections/audit_projection.h"
#include "src/common/result.h"
#include "src/http/http_types.h"

namespace dcm::http {

// GET /events and the history endpoints: subject, type, since, until, max_page_size,
// page_token. `since`/`until` are RFC 3339 times; until before since is refused.
Result<AuditQuery> ParseAuditQuery(const HttpRequest& request);

// `as_of` of a time-travel read: an RFC 3339 time after 1970, as Unix ms.
Result<int64_t> ParseAsOf(const HttpRequest& request);

}  // namespace dcm::http
