#include "events/health_events.h"

#include <strings.h>

#include <cmath>

#include "events/json_read.h"
#include "events/upcast.h"
#include "src/common/json_writer.h"
#include "src/common/reply_summary.h"
#include "src/common/time_format.h"
#include "src/common/uuid.h"

namespace dcm {
namespace {

constexpr HealthStatus kStatuses[] = {HealthStatus::kPending, HealthStatus::kReady,
                                      HealthStatus::kUnhealthy, HealthStatus::kUnavailable};

// Bounds of a probe's latency: v1 accepted up to 1e9 ms, so v2 accepts up to 1e12 µs.
constexpr double kMaxLatencyMs = 1e9;
constexpr int64_t kMaxLatencyUs = 1'000'000'000'000;

// The data of `event` (of `type`) at its latest schema version, upcast into `storage` if older.
Result<simdjson::dom::object> ParseData(const CloudEvent& event, const char* type,
                                        std::string& storage) {
  if (event.type != type) {
    return MakeError(ErrorCode::kCorruption, std::string("not a ") + type + ": " + event.type);
  }
  ASSIGN_OR_RETURN(std::string_view data, DataAtLatestVersion(event, storage));
  auto parsed = ParseJson(data);
  if (!parsed) return MakeError(ErrorCode::kCorruption, parsed.error().message);
  simdjson::dom::object object;
  if (parsed->get(object)) return MakeError(ErrorCode::kCorruption, "data is not an object");
  return object;
}

Result<std::string> RequiredString(simdjson::dom::object data, std::string_view key) {
  std::string_view text;
  auto value = Member(data, key);
  if (!value || value->get(text) || text.empty()) {
    return MakeError(ErrorCode::kCorruption, std::string(key) + " must be a non-empty string");
  }
  return std::string(text);
}

Result<int64_t> RequiredInt(simdjson::dom::object data, std::string_view key) {
  int64_t v = 0;
  auto value = Member(data, key);
  if (!value || value->get(v)) {
    return MakeError(ErrorCode::kCorruption, std::string(key) + " must be an integer");
  }
  return v;
}

Result<int64_t> EventTime(const CloudEvent& event) {
  auto millis = ParseRfc3339(event.time);
  if (!millis) return MakeError(ErrorCode::kCorruption, "unreadable time '" + event.time + "'");
  return *millis;
}

CloudEvent Envelope(const char* type, std::string id, const std::string& source,
                    const std::string& subject, int64_t time_ms, int schema_version) {
  CloudEvent e;
  e.id = id.empty() ? NewUuidV4() : std::move(id);
  e.source = source;
  e.type = type;
  e.subject = subject;
  e.time = FormatRfc3339Millis(time_ms);
  e.schema_version = schema_version;
  e.actor = kProberActor;  // probes and their transitions are the prober's own decisions
  return e;
}

// health_probed v3's `state`: members in this order; last_error and last_error_time_ms only when
// set, earlier_streak_probe_ids always (maybe empty).
void WriteCarriedState(JsonWriter& w, const CarriedHealthState& s) {
  w.Key("state");
  w.BeginObject();
  w.Field("status", HealthStatusName(s.status));
  w.Field("registration_seq", s.registration_seq);
  w.Field("consecutive_failures", s.consecutive_failures);
  w.Field("consecutive_successes", s.consecutive_successes);
  w.Field("last_transition_time_ms", s.last_transition_time_ms);
  w.Field("last_transition_reason", s.last_transition_reason);
  if (!s.last_error.empty()) w.Field("last_error", s.last_error);
  if (s.last_error_time_ms != 0) w.Field("last_error_time_ms", s.last_error_time_ms);
  w.StringArray("earlier_streak_probe_ids", s.earlier_streak_probe_ids);
  w.EndObject();
}

// Bounds that keep a carried state sane: a counter is at most a year of probes a second, a
// streak names at most as many probes as the largest threshold (1000).
constexpr int64_t kMaxCarriedCounter = 40'000'000;
constexpr size_t kMaxStreakIds = 1000;

Result<CarriedHealthState> ReadCarriedState(simdjson::dom::element value) {
  simdjson::dom::object o;
  if (value.get(o)) return MakeError(ErrorCode::kCorruption, "state must be an object");
  CarriedHealthState s;
  auto status = ParseHealthStatus(StringMember(o, "status"));
  if (!status) return MakeError(ErrorCode::kCorruption, "state.status must be a health status");
  s.status = *status;
  ASSIGN_OR_RETURN(s.registration_seq, RequiredInt(o, "registration_seq"));
  ASSIGN_OR_RETURN(int64_t failures, RequiredInt(o, "consecutive_failures"));
  ASSIGN_OR_RETURN(int64_t successes, RequiredInt(o, "consecutive_successes"));
  if (failures < 0 || failures > kMaxCarriedCounter || successes < 0 ||
      successes > kMaxCarriedCounter) {
    return MakeError(ErrorCode::kCorruption, "state counters must be 0..4e7");
  }
  s.consecutive_failures = static_cast<int>(failures);
  s.consecutive_successes = static_cast<int>(successes);
  ASSIGN_OR_RETURN(s.last_transition_time_ms, RequiredInt(o, "last_transition_time_ms"));
  s.last_transition_reason = StringMember(o, "last_transition_reason");
  s.last_error = StringMember(o, "last_error");
  if (auto t = Member(o, "last_error_time_ms")) {
    if (t->get(s.last_error_time_ms)) {
      return MakeError(ErrorCode::kCorruption, "state.last_error_time_ms must be an integer");
    }
  }
  simdjson::dom::array ids;
  auto streak = Member(o, "earlier_streak_probe_ids");
  if (!streak || streak->get(ids) || ids.size() > kMaxStreakIds) {
    return MakeError(ErrorCode::kCorruption,
                     "state.earlier_streak_probe_ids must be an array of at most 1000 ids");
  }
  for (auto item : ids) {
    std::string_view id;
    if (item.get(id) || id.empty()) {
      return MakeError(ErrorCode::kCorruption, "state.earlier_streak_probe_ids holds a non-id");
    }
    s.earlier_streak_probe_ids.emplace_back(id);
  }
  return s;
}

}  // namespace

const char* HealthStatusName(HealthStatus status) {
  switch (status) {
    case HealthStatus::kPending:
      return "Pending";
    case HealthStatus::kReady:
      return "Ready";
    case HealthStatus::kUnhealthy:
      return "Unhealthy";
    case HealthStatus::kUnavailable:
      return "Unavailable";
  }
  return "";
}

std::optional<HealthStatus> ParseHealthStatus(std::string_view name) {
  for (auto status : kStatuses) {
    const char* spelled = HealthStatusName(status);
    if (name.size() == strlen(spelled) && strncasecmp(name.data(), spelled, name.size()) == 0) {
      return status;
    }
  }
  return std::nullopt;
}

CloudEvent EncodeHealthProbe(const HealthProbe& p, const std::string& source,
                             const HealthSubject& subject) {
  CloudEvent e = Envelope(subject.probed_type, p.probe_id, source, p.provider_id, p.time_ms,
                          subject.probed_version);
  JsonWriter w;
  w.BeginObject();
  w.Field(subject.id_member, p.provider_id);
  w.Field("seq", p.seq);
  w.Field("registration_seq", p.registration_seq);
  w.Field("url", p.url);
  w.Key("failure_class");
  if (p.failure == ProbeFailure::kNone) {
    w.Null();
  } else {
    w.String(ProbeFailureName(p.failure));
  }
  w.Key("http_status");
  if (p.http_status == 0) {
    w.Null();
  } else {
    w.Int(p.http_status);
  }
  w.Field("latency_us", p.latency_us);
  if (!p.error.empty()) w.Field("error", p.error);
  w.Field("failure_threshold", p.failure_threshold);
  w.Field("success_threshold", p.success_threshold);
  if (p.state) WriteCarriedState(w, *p.state);
  w.EndObject();
  e.data = w.Take();
  return e;
}

Result<HealthProbe> DecodeHealthProbe(const CloudEvent& event, const HealthSubject& subject) {
  std::string upcast;
  ASSIGN_OR_RETURN(auto data, ParseData(event, subject.probed_type, upcast));
  HealthProbe p;
  p.probe_id = event.id;
  ASSIGN_OR_RETURN(p.time_ms, EventTime(event));
  ASSIGN_OR_RETURN(p.provider_id, RequiredString(data, subject.id_member));
  ASSIGN_OR_RETURN(p.seq, RequiredInt(data, "seq"));
  ASSIGN_OR_RETURN(p.registration_seq, RequiredInt(data, "registration_seq"));
  p.url = StringMember(data, "url");
  if (auto value = Member(data, "failure_class"); value && !value->is_null()) {
    std::string_view name;
    std::optional<ProbeFailure> failure;
    if (!value->get(name)) failure = ParseProbeFailure(name);
    if (!failure || *failure == ProbeFailure::kNone) {
      return MakeError(ErrorCode::kCorruption, "unknown failure_class");
    }
    p.failure = *failure;
  }
  if (auto value = Member(data, "http_status"); value && !value->is_null()) {
    int64_t status = 0;
    if (value->get(status) || status < 100 || status > 999) {
      return MakeError(ErrorCode::kCorruption, "http_status must be an HTTP status or null");
    }
    p.http_status = static_cast<int>(status);
  }
  if (auto value = Member(data, "latency_us")) {
    if (value->get(p.latency_us) || p.latency_us < 0 || p.latency_us > kMaxLatencyUs) {
      return MakeError(ErrorCode::kCorruption,
                       "latency_us must be an integer number of microseconds, 0..1e12");
    }
  }
  p.error = StringMember(data, "error");
  ASSIGN_OR_RETURN(int64_t failures, RequiredInt(data, "failure_threshold"));
  ASSIGN_OR_RETURN(int64_t successes, RequiredInt(data, "success_threshold"));
  if (failures < 1 || failures > 1000 || successes < 1 || successes > 1000) {
    return MakeError(ErrorCode::kCorruption, "thresholds must be 1..1000");
  }
  p.failure_threshold = static_cast<int>(failures);
  p.success_threshold = static_cast<int>(successes);
  if (auto value = Member(data, "state"); value && !value->is_null()) {
    ASSIGN_OR_RETURN(p.state, ReadCarriedState(*value));
  }
  return p;
}

CloudEvent EncodeHealthChange(const HealthChange& c, const std::string& source,
                              const HealthSubject& subject) {
  // Derived from the last probe's seq, so a re-emitted change is recognisably the same event
  // (providers keep their historic name; peers' ids are their type's).
  const std::string name = std::string_view(subject.changed_type) == event_type::kHealthChanged
                               ? std::string("health_changed")
                               : std::string(subject.changed_type);
  CloudEvent e =
      Envelope(subject.changed_type,
               DeterministicUuid(name + ":" + c.provider_id + ":" + std::to_string(c.seq)), source,
               c.provider_id, c.time_ms, subject.changed_version);
  JsonWriter w;
  w.BeginObject();
  w.Field(subject.id_member, c.provider_id);
  w.Field("from", HealthStatusName(c.from));
  w.Field("to", HealthStatusName(c.to));
  w.Field("reason", c.reason);
  w.Field("seq", c.seq);
  w.StringArray("probe_ids", c.probe_ids);
  w.EndObject();
  e.data = w.Take();
  return e;
}

Result<HealthChange> DecodeHealthChange(const CloudEvent& event, const HealthSubject& subject) {
  std::string upcast;
  ASSIGN_OR_RETURN(auto data, ParseData(event, subject.changed_type, upcast));
  HealthChange c;
  ASSIGN_OR_RETURN(c.time_ms, EventTime(event));
  ASSIGN_OR_RETURN(c.provider_id, RequiredString(data, subject.id_member));
  auto from = ParseHealthStatus(StringMember(data, "from"));
  auto to = ParseHealthStatus(StringMember(data, "to"));
  if (!from || !to) return MakeError(ErrorCode::kCorruption, "from/to must be health statuses");
  c.from = *from;
  c.to = *to;
  c.reason = StringMember(data, "reason");
  ASSIGN_OR_RETURN(c.seq, RequiredInt(data, "seq"));
  if (auto ids = Member(data, "probe_ids"); ids && ids->is_array()) {
    for (auto item : simdjson::dom::array(*ids)) {
      std::string_view id;
      if (!item.get(id)) c.probe_ids.emplace_back(id);
    }
  }
  return c;
}

Result<std::string> UpcastHealthProbedV1ToV2(std::string_view data) {
  auto parsed = ParseJson(data);
  if (!parsed) return MakeError(ErrorCode::kCorruption, parsed.error().message);
  simdjson::dom::object object;
  if (parsed->get(object)) return MakeError(ErrorCode::kCorruption, "data is not an object");
  JsonWriter w;
  w.BeginObject();
  bool converted = false;
  for (const auto field : object) {
    if (field.key == "latency_us") continue;  // not a v1 field: it would shadow the converted one
    if (field.key != "latency_ms") {
      w.Key(field.key);
      w.Raw(Minify(field.value));
      continue;
    }
    if (converted) continue;  // a repeated key: v1 readers took the first
    double ms = 0;
    if (field.value.get(ms) || !(ms >= 0) || ms > kMaxLatencyMs) {
      return MakeError(ErrorCode::kCorruption,
                       "latency_ms must be a number of milliseconds, 0..1e9");
    }
    w.Field("latency_us", static_cast<int64_t>(std::llround(ms * 1000.0)));
    converted = true;
  }
  w.EndObject();
  return w.Take();
}

Result<std::string> UpcastHealthProbedV2ToV3(std::string_view data) {
  auto parsed = ParseJson(data);
  simdjson::dom::object object;
  if (!parsed || parsed->get(object)) {
    return MakeError(ErrorCode::kCorruption, "data is not an object");
  }
  return std::string(data);
}

ProbeResponse ClassifyHealthResponse(ProbeResponse r) {
  if (r.failure != ProbeFailure::kNone) return r;
  if (r.http_status != 200) {
    r.failure = ProbeFailure::kHttpStatus;
    r.error = "HTTP " + std::to_string(r.http_status);
    return r;
  }
  std::string_view status;
  auto parsed = ParseJson(r.body);
  simdjson::dom::object object;
  if (!parsed || parsed->get(object)) {
    r.failure = ProbeFailure::kBadBody;
    r.error = "body is not a JSON object";
    return r;
  }
  auto value = Member(object, "status");
  if (!value || value->get(status)) {
    r.failure = ProbeFailure::kBadBody;
    r.error = "body has no string status";
    return r;
  }
  if (status.size() == 7 && strncasecmp(status.data(), "healthy", 7) == 0) return r;
  if (status.size() == 9 && strncasecmp(status.data(), "unhealthy", 9) == 0) {
    r.failure = ProbeFailure::kReportedUnhealthy;
    r.error = "provider reported unhealthy";
    return r;
  }
  r.failure = ProbeFailure::kBadBody;
  // Bounded and sanitized: the status string comes from a remote body.
  r.error = "status is '" + SanitizeText(status, 64) + "', not healthy or unhealthy";
  return r;
}

}  // namespace dcm
