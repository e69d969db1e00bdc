#include "src/http/handler_util.h"

#include <cctype>
#include <charconv>

#include "events/json_read.h"
#include "src/common/json_writer.h"
#include "src/http/problem.h"

namespace dcm::http {

bool IsJsonContentType(const HttpRequest& request) {
  const std::string* type = request.Header("content-type");
  if (!type) return true;  // lenient: a body without a Content-Type is read as JSON
  std::string media = type->substr(0, type->find(';'));
  while (!media.empty() && media.back() == ' ') media.pop_back();
  for (auto& c : media) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return media == "application/json" ||
         (media.starts_with("application/") && media.ends_with("+json"));
}

std::optional<simdjson::dom::element> ParseBody(const HttpRequest& request, HttpResponse* error) {
  if (!IsJsonContentType(request)) {
    *error = Problem(415, "Content-Type must be application/json",
                     {{"content-type", "must be application/json"}});
    return std::nullopt;
  }
  auto parsed = ParseJson(request.body);
  if (!parsed) {
    *error = Problem(HttpStatusFor(parsed.error().code), parsed.error().message,
                     {{"body", parsed.error().message}});
    return std::nullopt;
  }
  return *parsed;
}

Result<size_t> PageSizeParam(const HttpRequest& request) {
  const auto* size = request.Query("max_page_size");
  if (!size) return kDefaultPageSize;
  int value = 0;
  auto [end, ec] = std::from_chars(size->data(), size->data() + size->size(), value);
  if (ec != std::errc() || end != size->data() + size->size() || value < 1 ||
      static_cast<size_t>(value) > kMaxPageSize) {
    return MakeError(ErrorCode::kInvalidArgument, "max_page_size must be an integer from 1 to 100",
                     {{"max_page_size", "must be an integer from 1 to 100"}});
  }
  return static_cast<size_t>(value);
}

std::optional<size_t> ParsePageSize(const HttpRequest& request, HttpResponse* error) {
  auto size = PageSizeParam(request);
  if (!size) {
    *error = ProblemFromError(size.error());
    return std::nullopt;
  }
  return *size;
}

std::optional<bool> ParseBoolFlag(const HttpRequest& request, const std::string& name,
                                  bool fallback, HttpResponse* error) {
  const auto* value = request.Query(name);
  if (!value) return fallback;
  if (*value == "true") return true;
  if (*value == "false") return false;
  *error = Problem(400, name + " must be true or false", {{name, "must be true or false"}});
  return std::nullopt;
}

bool ForceRequested(const HttpRequest& request) {
  const auto* force = request.Query("force");
  return force && (*force == "true" || *force == "1");
}

HttpResponse WithMember(HttpResponse problem, std::string_view key, std::string_view value) {
  const auto close = problem.body.rfind('}');
  if (close == std::string::npos) return problem;
  std::string member = ",\"";
  AppendJsonEscaped(member, key);
  member += "\":\"";
  AppendJsonEscaped(member, value);
  member += '"';
  problem.body.insert(close, member);
  return problem;
}

}  // namespace dcm::http
