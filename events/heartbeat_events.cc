#include "events/heartbeat_events.h"

#include <utility>

#include "events/health_events.h"
#include "events/json_read.h"
#include "src/common/json_writer.h"
#include "src/common/time_format.h"
#include "src/common/uuid.h"

namespace dcm {
namespace {

constexpr BeatResult kResults[] = {BeatResult::kHealthy, BeatResult::kReportedUnhealthy,
                                   BeatResult::kExpired};

Result<int64_t> NonNegativeInt(simdjson::dom::object data, std::string_view key) {
  int64_t v = 0;
  auto value = Member(data, key);
  if (!value || value->get(v) || v < 0) {
    return MakeError(ErrorCode::kCorruption, std::string(key) + " must be an integer >= 0");
  }
  return v;
}

}  // namespace

const char* BeatResultName(BeatResult result) {
  switch (result) {
    case BeatResult::kHealthy:
      return "healthy";
    case BeatResult::kReportedUnhealthy:
      return "reported_unhealthy";
    case BeatResult::kExpired:
      return kHeartbeatExpiredReason;
  }
  return "";
}

CloudEvent EncodeHeartbeatRecord(const HeartbeatRecord& r, const std::string& source) {
  CloudEvent e;
  e.id = r.record_id.empty() ? NewUuidV4() : r.record_id;
  e.source = source;
  e.type = event_type::kHeartbeatRecorded;
  e.subject = r.provider_id;
  e.time = FormatRfc3339Millis(r.time_ms);
  e.schema_version = kHeartbeatRecordedSchemaVersion;
  // An expiry is the control plane's decision; a beat is the provider's word, but the record
  // (what is kept and when) is the prober's, like a probe.
  e.actor = kProberActor;
  JsonWriter w;
  w.BeginObject();
  w.Field("provider_id", r.provider_id);
  w.Field("seq", r.seq);
  w.Field("registration_seq", r.registration_seq);
  w.Field("result", BeatResultName(r.result));
  w.Field("beats", r.beats);
  w.Field("last_beat_time_ms", r.last_beat_time_ms);
  w.Field("timeout_ms", r.timeout_ms);
  if (r.forwarded) w.Field("forwarded", true);
  if (r.both) w.Field("both", true);
  w.EndObject();
  e.data = w.Take();
  return e;
}

Result<HeartbeatRecord> DecodeHeartbeatRecord(const CloudEvent& event) {
  if (event.type != event_type::kHeartbeatRecorded) {
    return MakeError(ErrorCode::kCorruption,
                     std::string("not a ") + event_type::kHeartbeatRecorded + ": " + event.type);
  }
  ASSIGN_OR_RETURN(auto element, ParseEventData(event, kHeartbeatRecordedSchemaVersion));
  simdjson::dom::object data;
  if (element.get(data)) return MakeError(ErrorCode::kCorruption, "data is not an object");
  HeartbeatRecord r;
  r.record_id = event.id;
  auto time = ParseRfc3339(event.time);
  if (!time) return MakeError(ErrorCode::kCorruption, "unreadable time '" + event.time + "'");
  r.time_ms = *time;
  r.provider_id = StringMember(data, "provider_id");
  if (r.provider_id.empty()) {
    return MakeError(ErrorCode::kCorruption, "provider_id must be a non-empty string");
  }
  ASSIGN_OR_RETURN(r.seq, NonNegativeInt(data, "seq"));
  ASSIGN_OR_RETURN(r.registration_seq, NonNegativeInt(data, "registration_seq"));
  const std::string result = StringMember(data, "result");
  bool known = false;
  for (auto candidate : kResults) {
    if (result == BeatResultName(candidate)) {
      r.result = candidate;
      known = true;
    }
  }
  if (!known) return MakeError(ErrorCode::kCorruption, "unknown result '" + result + "'");
  ASSIGN_OR_RETURN(r.beats, NonNegativeInt(data, "beats"));
  ASSIGN_OR_RETURN(r.last_beat_time_ms, NonNegativeInt(data, "last_beat_time_ms"));
  ASSIGN_OR_RETURN(r.timeout_ms, NonNegativeInt(data, "timeout_ms"));
  for (auto [key, out] : {std::pair<const char*, bool*>{"forwarded", &r.forwarded},
                          std::pair<const char*, bool*>{"both", &r.both}}) {
    if (auto flag = Member(data, key); flag && !flag->is_null() && flag->get(*out)) {
      return MakeError(ErrorCode::kCorruption, std::string(key) + " must be a boolean");
    }
  }
  return r;
}

}  // namespace dcm
