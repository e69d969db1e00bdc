#include "src/http/federation_params.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <string_view>

#include "src/common/duration.h"
#include "src/common/federation_config.h"
#include "src/common/json_read.h"
#include "src/common/json_writer.h"
#include "src/common/principal.h"
#include "src/http/instance_handlers.h"

namespace dcm::http {
namespace {

tl::unexpected<Error> Invalid(const std::string& field, const std::string& why) {
  return MakeError(ErrorCode::kInvalidArgument, field + " " + why, {{field, why}});
}

Result<int64_t> ParseCount(const std::string& field, const std::string& text) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0) {
    return Invalid(field, "must be a non-negative integer");
  }
  return value;
}

Result<double> ParseAmount(const std::string& field, const std::string& text) {
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value) || value < 0) {
    return Invalid(field, "must be a non-negative number");
  }
  return value;
}

Result<int64_t> ParseBytes(const std::string& field, const std::string& text) {
  auto bytes = ParseMemoryQuantity(text);
  if (!bytes) return Invalid(field, "must be bytes or a quantity such as 4Gi");
  return *bytes;
}

// Sets the selector field named `name` from `value`; false when no field has that name.
Result<bool> SetField(FlavorSelector& s, const std::string& name, const std::string& value) {
  using Count = std::optional<int64_t> FlavorSelector::*;
  using Amount = std::optional<double> FlavorSelector::*;
  using Text = std::optional<std::string> FlavorSelector::*;
  static const std::pair<std::string_view, Text> kTexts[] = {
      {"flavor_id", &FlavorSelector::flavor_id},
      {"service_type", &FlavorSelector::service_type},
      {"region", &FlavorSelector::region}};
  static const std::pair<std::string_view, Count> kCounts[] = {
      {"instances_available_min", &FlavorSelector::instances_available_min},
      {"instances_available_max", &FlavorSelector::instances_available_max}};
  static const std::pair<std::string_view, Count> kBytes[] = {
      {"memory_available_min", &FlavorSelector::memory_available_min},
      {"memory_available_max", &FlavorSelector::memory_available_max}};
  static const std::pair<std::string_view, Amount> kAmounts[] = {
      {"cpu_available_min", &FlavorSelector::cpu_available_min},
      {"cpu_available_max", &FlavorSelector::cpu_available_max},
      {"price_min", &FlavorSelector::price_min},
      {"price_max", &FlavorSelector::price_max}};
  for (const auto& [key, field] : kTexts) {
    if (key != name) continue;
    s.*field = value;
    return true;
  }
  for (const auto& [key, field] : kCounts) {
    if (key != name) continue;
    ASSIGN_OR_RETURN(s.*field, ParseCount(name, value));
    return true;
  }
  for (const auto& [key, field] : kBytes) {
    if (key != name) continue;
    ASSIGN_OR_RETURN(s.*field, ParseBytes(name, value));
    return true;
  }
  for (const auto& [key, field] : kAmounts) {
    if (key != name) continue;
    ASSIGN_OR_RETURN(s.*field, ParseAmount(name, value));
    return true;
  }
  return false;
}

}  // namespace

Result<FlavorSelector> ParseFlavorSelector(const HttpRequest& request) {
  FlavorSelector selector;
  for (const auto& [name, value] : request.query) {
    ASSIGN_OR_RETURN(bool known, SetField(selector, name, value));
    if (!known) return Invalid(name, "is not a flavour selector field");
  }
  return selector;
}

}  // namespace dcm::http

namespace dcm::http {
namespace {

bool IsReservationId(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

Result<std::string> RequiredString(simdjson::dom::object body, const char* name) {
  simdjson::dom::element value;
  std::string_view text;
  if (body.at_key(name).get(value) || value.is_null()) return Invalid(name, "is required");
  if (value.get(text)) return Invalid(name, "must be a string");
  return std::string(text);
}

// `ttl`: a Go-style duration string, or a number of seconds; 1 s .. 1 day.
Result<int64_t> TtlMs(simdjson::dom::object body) {
  simdjson::dom::element value;
  if (body.at_key("ttl").get(value) || value.is_null()) return kDefaultHoldTtlMs;
  int64_t ms = -1;
  std::string_view text;
  double seconds = 0;
  if (!value.get(text)) {
    auto parsed = ParseGoDuration(text);
    if (parsed) ms = parsed->count();
  } else if (!value.get(seconds) && std::isfinite(seconds)) {
    ms = static_cast<int64_t>(std::llround(seconds * 1000));
  }
  if (ms < 1000 || ms > 24 * 3600 * 1000) {
    return Invalid("ttl", "must be a duration (\"30s\") or seconds, from 1s to 24h");
  }
  return ms;
}

}  // namespace

Result<ReservationParams> ParseReservation(const HttpRequest& request) {
  auto body = ParseJson(request.body);
  if (!body) return tl::unexpected(body.error());
  simdjson::dom::object object;
  if (body->get(object)) return Invalid("body", "must be a JSON object");
  ReservationParams p;
  ASSIGN_OR_RETURN(p.reservation_id, RequiredString(object, "reservation_id"));
  if (!IsReservationId(p.reservation_id)) {
    return Invalid("reservation_id", "must be 1-64 of A-Z, a-z, 0-9, '.', '_', '-'");
  }
  ASSIGN_OR_RETURN(p.flavor_id, RequiredString(object, "flavor_id"));
  if (auto spec = Member(object, "spec"); spec && !spec->is_null()) {
    if (!spec->is_object()) return Invalid("spec", "must be a JSON object");
    p.spec = Minify(*spec);
    if (p.spec.size() > kMaxInstanceSpecBytes) {
      return MakeError(ErrorCode::kPayloadTooLarge,
                       "spec must be at most " + std::to_string(kMaxInstanceSpecBytes) + " bytes");
    }
  }
  ASSIGN_OR_RETURN(p.ttl_ms, TtlMs(object));
  return p;
}

Result<std::string> WithServiceType(std::string_view spec, const std::string& type) {
  ASSIGN_OR_RETURN(auto parsed, ParseJson(spec));
  simdjson::dom::object object;
  if (parsed.get(object)) return Invalid("spec", "must be a JSON object");
  if (auto given = Member(object, "service_type")) {
    std::string_view text;
    if (given->get(text) || text != type) {
      return Invalid("spec.service_type", "must be '" + type + "', the flavour's service type");
    }
    return std::string(spec);
  }
  JsonWriter w;
  w.BeginObject();
  w.Field("service_type", type);
  w.EndObject();
  std::string out = w.Take();
  out.pop_back();                          // '}'
  std::string_view rest = spec.substr(1);  // after '{'
  if (rest != "}") out += ',';
  out.append(rest);
  return out;
}

Result<std::string> CallerEnclave(const HttpRequest& request) {
  std::string via_last;
  if (const std::string* via = request.Header("fed-via")) {
    std::string_view hops = *via;
    const size_t comma = hops.rfind(',');
    std::string_view last = comma == std::string_view::npos ? hops : hops.substr(comma + 1);
    while (!last.empty() && last.front() == ' ') last.remove_prefix(1);
    while (!last.empty() && last.back() == ' ') last.remove_suffix(1);
    via_last = std::string(last);
    if (!IsDnsLabel(via_last)) return Invalid("Fed-Via", "must end with the calling enclave's id");
  }
  const Principal& who = request.principal;
  if (who.via == Principal::Via::kCertificate || who.via == Principal::Via::kToken) {
    constexpr std::string_view kScheme = "dcm-enclave://";
    std::string id = who.subject;
    if (std::string_view(id).starts_with(kScheme)) id.erase(0, kScheme.size());
    if (!via_last.empty() && via_last != id) {
      return MakeError(ErrorCode::kForbidden,
                       "Fed-Via names '" + via_last + "' but the caller is '" + id + "'");
    }
    return id;
  }
  if (via_last.empty()) {
    return Invalid("Fed-Via", "is required: the calling enclave's id (authentication is off)");
  }
  return via_last;
}

}  // namespace dcm::http
