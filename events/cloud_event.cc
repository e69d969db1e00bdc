#include "events/cloud_event.h"

#include "events/json_read.h"
#include "src/common/json_writer.h"
#include "src/common/time_format.h"

namespace dcm {

std::string EncodeCloudEvent(const CloudEvent& e) {
  JsonWriter w;
  w.BeginObject();
  w.Field("specversion", "1.0");
  w.Field("id", e.id);
  w.Field("source", e.source);
  w.Field("type", e.type);
  if (!e.subject.empty()) w.Field("subject", e.subject);
  w.Field("time", e.time);
  w.Field("datacontenttype", "application/json");
  w.Field("schemaversion", e.schema_version);
  if (!e.actor.empty()) w.Field("actor", e.actor);
  w.Key("data");
  w.Raw(e.data.empty() ? std::string_view("{}") : std::string_view(e.data));
  w.EndObject();
  return w.Take();
}

Result<CloudEvent> DecodeCloudEvent(std::string_view json) {
  auto parsed = ParseJson(json);
  if (!parsed) return MakeError(ErrorCode::kCorruption, parsed.error().message);
  simdjson::dom::object object;
  if (parsed->get(object)) return MakeError(ErrorCode::kCorruption, "event is not a JSON object");
  CloudEvent event;
  auto required = [&](std::string_view key, std::string* out) -> Status {
    auto value = Member(object, key);
    std::string_view text;
    if (!value || value->get(text) || text.empty()) {
      return MakeError(ErrorCode::kCorruption,
                       "event attribute '" + std::string(key) + "' must be a non-empty string");
    }
    out->assign(text);
    return OkStatus();
  };
  std::string specversion;
  RETURN_IF_ERROR(required("specversion", &specversion));
  if (specversion != "1.0") {
    return MakeError(ErrorCode::kCorruption, "unsupported specversion '" + specversion + "'");
  }
  RETURN_IF_ERROR(required("id", &event.id));
  RETURN_IF_ERROR(required("source", &event.source));
  RETURN_IF_ERROR(required("type", &event.type));
  RETURN_IF_ERROR(required("time", &event.time));
  if (!ParseRfc3339(event.time)) {
    return MakeError(ErrorCode::kCorruption, "event attribute 'time' is not RFC 3339");
  }
  if (auto subject = Member(object, "subject")) {
    std::string_view text;
    if (subject->get(text)) {
      return MakeError(ErrorCode::kCorruption, "event attribute 'subject' must be a string");
    }
    event.subject.assign(text);
  }
  if (auto version = Member(object, "schemaversion")) {
    int64_t v = 0;
    std::string_view text;
    if (!version->get(v)) {
      if (v < 1 || v > 99999) {  // the int cast below must not wrap (4294967297 -> 1)
        return MakeError(ErrorCode::kCorruption, "event attribute 'schemaversion' is out of range");
      }
      event.schema_version = static_cast<int>(v);
    } else if (!version->get(text) && !text.empty() && text.size() < 6 &&
               text.find_first_not_of("0123456789") == std::string_view::npos) {
      event.schema_version = std::stoi(std::string(text));  // extensions may travel as strings
    } else {
      return MakeError(ErrorCode::kCorruption, "event attribute 'schemaversion' is not a number");
    }
    if (event.schema_version < 1) {
      return MakeError(ErrorCode::kCorruption, "event attribute 'schemaversion' must be >= 1");
    }
  }
  if (auto actor = Member(object, "actor"); actor && !actor->is_null()) {
    std::string_view text;
    if (actor->get(text) || text.size() > kMaxActorBytes) {
      return MakeError(ErrorCode::kCorruption,
                       "event attribute 'actor' must be a string of at most 256 bytes");
    }
    event.actor.assign(text);
  }
  auto data = Member(object, "data");
  if (!data || !data->is_object()) {
    return MakeError(ErrorCode::kCorruption, "event 'data' must be a JSON object");
  }
  event.data = Minify(*data);
  return event;
}

bool TypeMatches(std::string_view pattern, std::string_view type) {
  if (pattern.empty()) return true;
  if (pattern.ends_with('*')) return type.starts_with(pattern.substr(0, pattern.size() - 1));
  return type == pattern;
}

}  // namespace dcm
