#include "src/http/provider_params.h"

#include <strings.h>

#include "events/json_read.h"
#include "events/provider.h"
#include "src/http/handler_util.h"

namespace dcm::http {

Result<ProviderListParams> ParseProviderListParams(const HttpRequest& request) {
  ProviderListParams params;
  ASSIGN_OR_RETURN(params.page_size, PageSizeParam(request));
  if (const auto* type = request.Query("type")) params.service_type = *type;
  if (const auto* health = request.Query("health_status")) {
    params.health = ParseHealthStatus(*health);
    if (!params.health) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "health_status must be Pending, Ready, Unhealthy or Unavailable",
                       {{"health_status", "must be Pending, Ready, Unhealthy or Unavailable"}});
    }
  }
  if (const auto* token = request.Query("page_token")) params.page_token = *token;
  return params;
}

Status CheckProviderId(const std::string& id, const char* field) {
  auto why = ValidateProviderId(id);
  if (why.empty()) return OkStatus();
  return MakeError(ErrorCode::kInvalidArgument, std::string(field) + " " + why, {{field, why}});
}

Result<std::string> ParseNewProviderId(simdjson::dom::element body) {
  auto invalid = [](const std::string& message) {
    return MakeError(ErrorCode::kInvalidArgument, "new_id " + message, {{"new_id", message}});
  };
  simdjson::dom::element value;
  if (!body.is_object() || (body["new_id"].get(value) && body["newId"].get(value))) {
    return invalid("is required");
  }
  std::string_view new_id;
  if (value.get(new_id)) return invalid("must be a string");
  return std::string(new_id);
}

}  // namespace dcm::http

namespace dcm::http {

Result<BeatResult> ParseHeartbeatBody(const HttpRequest& request) {
  if (request.body.find_first_not_of(" \t\r\n") == std::string::npos) return BeatResult::kHealthy;
  auto parsed = ParseJson(request.body);
  if (!parsed) {
    return MakeError(ErrorCode::kInvalidArgument, "heartbeat body: " + parsed.error().message,
                     {{"body", parsed.error().message}});
  }
  simdjson::dom::object body;
  if (parsed->get(body)) {
    return MakeError(
        ErrorCode::kInvalidArgument, "heartbeat body must be a JSON object",
        {{"body", std::string("must be a JSON object, got ") + JsonTypeName(*parsed)}});
  }
  auto status = Member(body, "status");
  if (!status || status->is_null()) return BeatResult::kHealthy;
  std::string_view text;
  const auto bad = [] {
    return MakeError(ErrorCode::kInvalidArgument,
                     "heartbeat status must be \"healthy\" or \"unhealthy\"",
                     {{"status", "must be \"healthy\" or \"unhealthy\""}});
  };
  if (status->get(text)) return bad();
  if (text.size() == 7 && strncasecmp(text.data(), "healthy", 7) == 0) {
    return BeatResult::kHealthy;
  }
  if (text.size() == 9 && strncasecmp(text.data(), "unhealthy", 9) == 0) {
    return BeatResult::kReportedUnhealthy;
  }
  return bad();
}

}  // namespace dcm::http
