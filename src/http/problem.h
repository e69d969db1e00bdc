// problem+json (RFC 9457) rendering and the one mapping from ErrorCode to HTTP status.
#pragma once

#include <optional>
#include <string>

#include "events/provider_events.h"
#include "src/common/result.h"
#include "src/http/http_types.h"

namespace dcm::http {

int HttpStatusFor(ErrorCode code);

// {type, title, status, detail[, errors][, conflict]} with content type application/problem+json.
HttpResponse Problem(int status, const std::string& detail,
                     const std::vector<FieldError>& errors = {},
                     const std::optional<ConflictRef>& conflict = std::nullopt);
HttpResponse ProblemFromError(const Error& error);

// application/json response.
HttpResponse Json(int status, std::string body);

}  // namespace dcm::http
