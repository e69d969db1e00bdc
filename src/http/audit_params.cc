#include "src/http/audit_params.h"

#include <string>

#include "src/common/time_format.h"
#include "src/http/handler_util.h"

namespace dcm::http {
namespace {

// An RFC 3339 time from query parameter `name` (absent: 0).
Result<int64_t> TimeParam(const HttpRequest& request, const std::string& name) {
  const auto* text = request.Query(name);
  if (!text) return int64_t{0};
  auto ms = ParseRfc3339(*text);
  if (!ms || *ms < 0) {
    const std::string message = "must be an RFC 3339 time such as 2026-01-01T00:00:00Z";
    return MakeError(ErrorCode::kInvalidArgument, name + " " + message, {{name, message}});
  }
  return *ms;
}

}  // namespace

Result<AuditQuery> ParseAuditQuery(const HttpRequest& request) {
  AuditQuery query;
  ASSIGN_OR_RETURN(const size_t page_size, PageSizeParam(request));
  ASSIGN_OR_RETURN(query.since_ms, TimeParam(request, "since"));
  ASSIGN_OR_RETURN(query.until_ms, TimeParam(request, "until"));
  query.max_page_size = static_cast<int>(page_size);
  if (query.until_ms > 0 && query.until_ms < query.since_ms) {
    return MakeError(ErrorCode::kInvalidArgument, "until is before since",
                     {{"until", "must not be before since"}});
  }
  if (const auto* subject = request.Query("subject")) query.subject = *subject;
  if (const auto* type = request.Query("type")) query.type = *type;
  if (const auto* token = request.Query("page_token")) query.page_token = *token;
  return query;
}

Result<int64_t> ParseAsOf(const HttpRequest& request) {
  ASSIGN_OR_RETURN(const int64_t as_of, TimeParam(request, "as_of"));
  if (as_of == 0) {
    return MakeError(ErrorCode::kInvalidArgument, "as_of must be after 1970",
                     {{"as_of", "must be after 1970"}});
  }
  return as_of;
}

}  // namespace dcm::http
