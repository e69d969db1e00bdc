#include "events/provider_events.h"

#include "events/event_limits.h"
#include "events/json_read.h"
#include "src/common/json_writer.h"
#include "src/common/reply_summary.h"
#include "src/common/time_format.h"
#include "src/common/uuid.h"

namespace dcm {

const char* ProviderOutcomeType(OutcomeKind kind) {
  switch (kind) {
    case OutcomeKind::kRegistered:
      return event_type::kRegistered;
    case OutcomeKind::kUpdated:
      return event_type::kUpdated;
    case OutcomeKind::kIdChanged:
      return event_type::kIdChanged;
    case OutcomeKind::kDeleted:
      return event_type::kDeleted;
    case OutcomeKind::kExpired:
      return event_type::kExpired;
    case OutcomeKind::kRejected:
      return event_type::kRejected;
  }
  return "";
}

namespace {

Result<RequestKind> ParseRequestKind(std::string_view text) {
  for (auto kind : {RequestKind::kRegister, RequestKind::kUpdate, RequestKind::kChangeId,
                    RequestKind::kDelete, RequestKind::kExpire}) {
    if (text == RequestKindName(kind)) return kind;
  }
  return MakeError(ErrorCode::kCorruption, "unknown request_type '" + std::string(text) + "'");
}

// Reads an optional string id field of a request; a non-string is a validation error.
Status ReadIdField(simdjson::dom::object data, std::string_view key, std::string* out,
                   bool required) {
  auto value = Member(data, key);
  if (!value || value->is_null()) {
    if (required) {
      return MakeError(ErrorCode::kInvalidArgument, std::string(key) + " is required",
                       {{std::string(key), "is required"}});
    }
    return OkStatus();
  }
  std::string_view text;
  if (value->get(text)) {
    return MakeError(ErrorCode::kInvalidArgument, std::string(key) + " must be a string",
                     {{std::string(key), "must be a string"}});
  }
  out->assign(text);
  if (auto why = ValidateProviderId(*out); !why.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, std::string(key) + " " + why,
                     {{std::string(key), why}});
  }
  return OkStatus();
}

// Reads an integer field of a request; a non-integer is a validation error.
Status ReadInt(simdjson::dom::object data, std::string_view key, int64_t* out, bool required) {
  auto value = Member(data, key);
  if (!value || value->is_null()) {
    if (!required) return OkStatus();
    return MakeError(ErrorCode::kInvalidArgument, std::string(key) + " is required",
                     {{std::string(key), "is required"}});
  }
  if (value->get(*out)) {
    return MakeError(ErrorCode::kInvalidArgument, std::string(key) + " must be an integer",
                     {{std::string(key), "must be an integer"}});
  }
  return OkStatus();
}

}  // namespace

std::optional<RequestKind> RequestKindOfType(std::string_view type) {
  if (type == event_type::kRegistrationRequested) return RequestKind::kRegister;
  if (type == event_type::kUpdateRequested) return RequestKind::kUpdate;
  if (type == event_type::kIdChangeRequested) return RequestKind::kChangeId;
  if (type == event_type::kDeletionRequested) return RequestKind::kDelete;
  if (type == event_type::kExpiryRequested) return RequestKind::kExpire;
  return std::nullopt;
}

const char* RequestKindName(RequestKind kind) {
  switch (kind) {
    case RequestKind::kRegister:
      return "register";
    case RequestKind::kUpdate:
      return "update";
    case RequestKind::kChangeId:
      return "change_id";
    case RequestKind::kDelete:
      return "delete";
    case RequestKind::kExpire:
      return "expire";
  }
  return "";
}

bool IsProviderOutcomeType(std::string_view type) {
  return type == event_type::kRegistered || type == event_type::kUpdated ||
         type == event_type::kIdChanged || type == event_type::kDeleted ||
         type == event_type::kExpired || type == event_type::kRejected;
}

std::string OutcomeEventId(const std::string& request_id) {
  return DeterministicUuid("outcome:" + request_id);
}

CloudEvent EncodeProviderRequest(const ProviderRequest& r, const std::string& source,
                                 int64_t now_millis) {
  CloudEvent e;
  e.id = r.request_id.empty() ? NewUuidV4() : r.request_id;
  e.source = source;
  e.time = FormatRfc3339Millis(now_millis);
  e.schema_version = kProviderEventSchemaVersion;
  e.actor = r.actor;
  JsonWriter w;
  w.BeginObject();
  switch (r.kind) {
    case RequestKind::kRegister:
      e.type = event_type::kRegistrationRequested;
      e.subject = r.id.empty() ? r.spec.name : r.id;
      if (!r.id.empty()) w.Field("id", r.id);
      WriteProviderSpecFields(w, r.spec);
      break;
    case RequestKind::kUpdate:
      e.type = event_type::kUpdateRequested;
      e.subject = r.id;
      w.Field("id", r.id);
      WriteProviderSpecFields(w, r.spec);
      break;
    case RequestKind::kChangeId:
      e.type = event_type::kIdChangeRequested;
      e.subject = r.id;
      w.Field("id", r.id);
      w.Field("new_id", r.new_id);
      break;
    case RequestKind::kDelete:
      e.type = event_type::kDeletionRequested;
      e.subject = r.id;
      w.Field("id", r.id);
      w.Field("force", r.force);
      break;
    case RequestKind::kExpire:
      e.type = event_type::kExpiryRequested;
      e.subject = r.id;
      w.Field("id", r.id);
      w.Field("registration_seq", r.registration_seq);
      if (!r.last_heartbeat_time.empty()) w.Field("last_heartbeat_time", r.last_heartbeat_time);
      w.Field("gc_after_ms", r.gc_after_ms);
      break;
  }
  if (r.owner_scoped) w.Field("owner_scoped", true);
  w.EndObject();
  e.data = w.Take();
  return e;
}

Result<ProviderRequest> DecodeProviderRequest(const CloudEvent& event, const ProviderRules& rules) {
  const auto kind = RequestKindOfType(event.type);
  if (!kind) return MakeError(ErrorCode::kCorruption, "not a provider request type: " + event.type);
  ProviderRequest r;
  r.kind = *kind;
  ASSIGN_OR_RETURN(auto parsed, ParseEventData(event, kProviderEventSchemaVersion));
  const simdjson::dom::object data(parsed);
  r.request_id = event.id;
  r.requested_by = event.source;
  r.actor = event.actor;
  if (auto scoped = Member(data, "owner_scoped"); scoped && !scoped->is_null()) {
    if (scoped->get(r.owner_scoped)) {
      return MakeError(ErrorCode::kInvalidArgument, "owner_scoped must be a boolean",
                       {{"owner_scoped", "must be a boolean"}});
    }
  }
  switch (r.kind) {
    case RequestKind::kRegister: {
      RETURN_IF_ERROR(ReadIdField(data, "id", &r.id, /*required=*/false));
      ASSIGN_OR_RETURN(r.spec, ParseProviderSpec(parsed, rules));
      break;
    }
    case RequestKind::kUpdate: {
      RETURN_IF_ERROR(ReadIdField(data, "id", &r.id, /*required=*/true));
      ASSIGN_OR_RETURN(r.spec, ParseProviderSpec(parsed, rules));
      break;
    }
    case RequestKind::kChangeId:
      RETURN_IF_ERROR(ReadIdField(data, "id", &r.id, /*required=*/true));
      RETURN_IF_ERROR(ReadIdField(data, "new_id", &r.new_id, /*required=*/true));
      break;
    case RequestKind::kDelete: {
      RETURN_IF_ERROR(ReadIdField(data, "id", &r.id, /*required=*/true));
      if (auto force = Member(data, "force"); force && !force->is_null()) {
        if (force->get(r.force)) {
          return MakeError(ErrorCode::kInvalidArgument, "force must be a boolean",
                           {{"force", "must be a boolean"}});
        }
      }
      break;
    }
    case RequestKind::kExpire: {
      RETURN_IF_ERROR(ReadIdField(data, "id", &r.id, /*required=*/true));
      RETURN_IF_ERROR(ReadInt(data, "registration_seq", &r.registration_seq, /*required=*/true));
      RETURN_IF_ERROR(ReadInt(data, "gc_after_ms", &r.gc_after_ms, /*required=*/false));
      r.last_heartbeat_time = StringMember(data, "last_heartbeat_time");
      break;
    }
  }
  return r;
}

namespace {
// `text` if it fits in `max_bytes`, else cut (at a character boundary, ending in "...").
std::string Capped(const std::string& text, size_t max_bytes) {
  return text.size() <= max_bytes ? text : SanitizeText(text, max_bytes);
}
}  // namespace

ProviderOutcome CappedRejection(ProviderOutcome o) {
  o.detail = Capped(o.detail, kRejectionDetailMaxBytes);
  o.attempted_name = Capped(o.attempted_name, kRejectionAttemptedMaxBytes);
  o.attempted_id = Capped(o.attempted_id, kRejectionAttemptedMaxBytes);
  if (o.errors.size() > kRejectionMaxFieldErrors) o.errors.resize(kRejectionMaxFieldErrors);
  for (auto& err : o.errors) {
    err.field = Capped(err.field, kRejectionFieldErrorMaxBytes);
    err.message = Capped(err.message, kRejectionFieldErrorMaxBytes);
  }
  return o;
}

CloudEvent EncodeProviderOutcome(const ProviderOutcome& outcome, const std::string& source,
                                 int64_t now_millis) {
  std::optional<ProviderOutcome> capped;  // rejections only: accepted outcomes are not copied
  if (outcome.kind == OutcomeKind::kRejected) capped = CappedRejection(outcome);
  const ProviderOutcome& o = capped ? *capped : outcome;
  CloudEvent e;
  e.id = OutcomeEventId(o.request_id);
  e.source = source;
  e.type = ProviderOutcomeType(o.kind);
  e.time = FormatRfc3339Millis(now_millis);
  e.schema_version = kProviderEventSchemaVersion;
  e.actor = o.actor;
  JsonWriter w;
  w.BeginObject();
  w.Field("request_id", o.request_id);
  w.Field("seq", o.seq);
  if (o.kind == OutcomeKind::kRejected) {
    // The entity it concerns; a request too broken to name one is keyed by its own id.
    e.subject = !o.attempted_id.empty()     ? o.attempted_id
                : !o.attempted_name.empty() ? o.attempted_name
                                            : o.request_id;
    w.Field("request_type", RequestKindName(o.request_kind));
    w.Field("status", o.status);
    w.Field("detail", o.detail);
    if (!o.attempted_name.empty()) w.Field("name", o.attempted_name);
    if (!o.attempted_id.empty()) w.Field("id", o.attempted_id);
    if (!o.errors.empty()) {
      w.Key("errors");
      w.BeginArray();
      for (const auto& err : o.errors) {
        w.BeginObject();
        w.Field("field", err.field);
        w.Field("message", err.message);
        w.EndObject();
      }
      w.EndArray();
    }
    if (o.conflict) {
      w.Key("conflict");
      w.BeginObject();
      w.Field("id", o.conflict->id);
      w.Field("name", o.conflict->name);
      w.EndObject();
    }
  } else {
    e.subject = o.kind == OutcomeKind::kIdChanged ? o.old_id : o.provider.id;
    if (o.kind == OutcomeKind::kIdChanged) w.Field("old_id", o.old_id);
    if (o.kind == OutcomeKind::kExpired) {
      w.Field("reason", o.reason);
      if (!o.last_heartbeat_time.empty()) w.Field("last_heartbeat_time", o.last_heartbeat_time);
    }
    w.Key("provider");
    WriteProvider(w, o.provider);
  }
  w.EndObject();
  e.data = w.Take();
  return e;
}

Result<ProviderOutcome> DecodeProviderOutcome(const CloudEvent& event) {
  ProviderOutcome o;
  o.actor = event.actor;
  if (event.type == event_type::kRegistered)
    o.kind = OutcomeKind::kRegistered;
  else if (event.type == event_type::kUpdated)
    o.kind = OutcomeKind::kUpdated;
  else if (event.type == event_type::kIdChanged)
    o.kind = OutcomeKind::kIdChanged;
  else if (event.type == event_type::kDeleted)
    o.kind = OutcomeKind::kDeleted;
  else if (event.type == event_type::kExpired)
    o.kind = OutcomeKind::kExpired;
  else if (event.type == event_type::kRejected)
    o.kind = OutcomeKind::kRejected;
  else
    return MakeError(ErrorCode::kCorruption, "not a provider outcome type: " + event.type);
  ASSIGN_OR_RETURN(auto parsed, ParseEventData(event, kProviderEventSchemaVersion));
  const simdjson::dom::object data(parsed);
  o.request_id = StringMember(data, "request_id");
  if (auto seq = Member(data, "seq")) {
    int64_t v = 0;
    if (!seq->get(v)) o.seq = v;
  }
  if (o.kind == OutcomeKind::kRejected) {
    ASSIGN_OR_RETURN(o.request_kind, ParseRequestKind(StringMember(data, "request_type")));
    if (auto status = Member(data, "status")) {
      int64_t v = 0;
      if (!status->get(v)) o.status = static_cast<int>(v);
    }
    o.detail = StringMember(data, "detail");
    o.attempted_name = StringMember(data, "name");
    o.attempted_id = StringMember(data, "id");
    if (auto errors = Member(data, "errors"); errors && errors->is_array()) {
      for (auto item : simdjson::dom::array(*errors)) {
        if (!item.is_object()) continue;
        o.errors.push_back({StringMember(item, "field"), StringMember(item, "message")});
      }
    }
    if (auto conflict = Member(data, "conflict"); conflict && conflict->is_object()) {
      o.conflict = ConflictRef{StringMember(*conflict, "id"), StringMember(*conflict, "name")};
    }
    if (o.status < 400 || o.status > 499) {
      return MakeError(ErrorCode::kCorruption, "rejected outcome without a 4xx status");
    }
    return o;
  }
  auto provider = Member(data, "provider");
  if (!provider) return MakeError(ErrorCode::kCorruption, "outcome has no provider");
  ASSIGN_OR_RETURN(o.provider, ReadProvider(*provider));
  if (o.kind == OutcomeKind::kIdChanged) {
    o.old_id = StringMember(data, "old_id");
    if (o.old_id.empty()) return MakeError(ErrorCode::kCorruption, "id_changed has no old_id");
  }
  if (o.kind == OutcomeKind::kExpired) {
    o.reason = StringMember(data, "reason");
    o.last_heartbeat_time = StringMember(data, "last_heartbeat_time");
  }
  return o;
}

}  // namespace dcm
