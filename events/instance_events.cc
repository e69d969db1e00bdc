#include "events/instance_events.h"

#include <climits>
#include <optional>
#include <string>

#include "events/federation_events.h"
#include "events/json_read.h"
#include "src/common/json_writer.h"
#include "src/common/time_format.h"
#include "src/common/uuid.h"

namespace dcm {
namespace {

constexpr Operation kOperations[] = {
    Operation::kCreateCatalogItemInstance,
    Operation::kDeleteCatalogItemInstance,
    Operation::kRehydrateCatalogItemInstance,
    Operation::kCreateResource,
    Operation::kDeleteResource,
    Operation::kRehydrateResource,
    Operation::kCreateServiceTypeInstance,
    Operation::kDeleteServiceTypeInstance,
    Operation::kRetryCleanup,
    Operation::kRecoverLostResource,
};

// How a data field is spelled in JSON.
enum class Kind {
  kString,  // a string; "" = absent
  kObject,  // a JSON object, kept as minified text; "" = absent
  kInt,     // a non-negative integer that fits an int
  kTime,    // an RFC 3339 string, held as unix millis; 0 = absent
  kBool,    // written only when true
};

struct FieldDef {
  const char* name;
  Kind kind;
  std::string InstanceEvent::*text = nullptr;  // kString, kObject
  int InstanceEvent::*number = nullptr;        // kInt
  bool InstanceEvent::*flag = nullptr;         // kBool
  bool cleanup_counter = false;                // kInt every dcm.cleanup.* writes (even 0)
  int64_t InstanceEvent::*millis = nullptr;    // kTime
};

// Every data field, in the struct's declaration order (the order Encode writes them).
const FieldDef kFields[] = {
    {"request_id", Kind::kString, &InstanceEvent::request_id},
    {"root", Kind::kString, &InstanceEvent::root},
    {"operation", Kind::kString, &InstanceEvent::operation},
    {"catalog_item_instance_id", Kind::kString, &InstanceEvent::catalog_item_instance_id},
    {"resource_id", Kind::kString, &InstanceEvent::resource_id},
    {"old_resource_id", Kind::kString, &InstanceEvent::old_resource_id},
    {"new_resource_id", Kind::kString, &InstanceEvent::new_resource_id},
    {"instance_id", Kind::kString, &InstanceEvent::instance_id},
    {"provider_name", Kind::kString, &InstanceEvent::provider_name},
    {"provider_id", Kind::kString, &InstanceEvent::provider_id},
    {"service_type", Kind::kString, &InstanceEvent::service_type},
    {"display_name", Kind::kString, &InstanceEvent::display_name},
    {"spec", Kind::kObject, &InstanceEvent::spec},
    {"intent", Kind::kObject, &InstanceEvent::intent},
    {"policy", Kind::kString, &InstanceEvent::policy},
    {"status", Kind::kString, &InstanceEvent::status},
    {"outcome", Kind::kString, &InstanceEvent::outcome},
    {"reason", Kind::kString, &InstanceEvent::reason},
    {"error", Kind::kString, &InstanceEvent::error},
    {"http_status", Kind::kInt, nullptr, &InstanceEvent::http_status},
    {"retry_count", Kind::kInt, nullptr, &InstanceEvent::retry_count, nullptr, true},
    {"max_retries", Kind::kInt, nullptr, &InstanceEvent::max_retries, nullptr, true},
    {"requested_at", Kind::kTime, nullptr, nullptr, nullptr, false,
     &InstanceEvent::requested_at_ms},
    {"deferred", Kind::kBool, nullptr, nullptr, &InstanceEvent::deferred},
    {"force", Kind::kBool, nullptr, nullptr, &InstanceEvent::force},
    {"prefer_local", Kind::kBool, nullptr, nullptr, &InstanceEvent::prefer_local},
    {"placement", Kind::kObject, &InstanceEvent::placement},
    {"peer", Kind::kString, &InstanceEvent::peer},
    {"reservation_id", Kind::kString, &InstanceEvent::reservation_id},
    {"flavor_id", Kind::kString, &InstanceEvent::flavor_id},
    {"contract_id", Kind::kString, &InstanceEvent::contract_id},
    {"expires_at", Kind::kTime, nullptr, nullptr, nullptr, false, &InstanceEvent::expires_at_ms},
};
constexpr size_t kFieldCount = sizeof(kFields) / sizeof(kFields[0]);
static_assert(kFieldCount <= 32, "presence is tracked in a uint32_t");

struct TypeRule {
  const char* type;
  std::string InstanceEvent::*subject;  // what the subject names when the caller left it empty
  const char* required;                 // data fields, space-separated
};

const TypeRule kTypeRules[] = {
    {event_type::kOperationRequested, &InstanceEvent::root, "operation root"},
    {event_type::kOperationStarted, &InstanceEvent::root, "request_id root operation"},
    {event_type::kOperationCompleted, &InstanceEvent::root, "request_id root operation"},
    {event_type::kOperationFailed, &InstanceEvent::root,
     "request_id root operation http_status reason error"},
    {event_type::kResourcePlaced, &InstanceEvent::resource_id,
     "request_id root resource_id provider_name provider_id service_type intent spec policy"},
    {event_type::kResourceDeleted, &InstanceEvent::resource_id, "root resource_id"},
    {event_type::kResourceLost, &InstanceEvent::resource_id,
     "request_id root resource_id provider_name provider_id reason"},
    {event_type::kInstanceCreated, &InstanceEvent::instance_id,
     "request_id root instance_id provider_name provider_id service_type spec status"},
    {event_type::kInstanceCreateFailed, &InstanceEvent::instance_id,
     "request_id root instance_id provider_name error"},
    {event_type::kInstanceDeleted, &InstanceEvent::instance_id,
     "root instance_id provider_name provider_id"},
    {event_type::kInstanceDeleteFailed, &InstanceEvent::instance_id,
     "request_id root instance_id provider_name error"},
    {event_type::kCleanupEnqueued, &InstanceEvent::instance_id,
     "root instance_id provider_name provider_id service_type requested_at"},
    {event_type::kCleanupParked, &InstanceEvent::instance_id,
     "root instance_id provider_name status"},
    {event_type::kCleanupAttempted, &InstanceEvent::instance_id,
     "root instance_id outcome status retry_count max_retries"},
    {event_type::kCleanupFailed, &InstanceEvent::instance_id,
     "root instance_id retry_count max_retries error"},
    {event_type::kCleanupRetried, &InstanceEvent::instance_id, "request_id root instance_id"},
    {event_type::kCatalogItemInstanceCreated, &InstanceEvent::catalog_item_instance_id,
     "request_id root catalog_item_instance_id resource_id spec provider_name"},
    {event_type::kCatalogItemInstanceRehydrated, &InstanceEvent::catalog_item_instance_id,
     "request_id root catalog_item_instance_id old_resource_id new_resource_id provider_name"},
    {event_type::kCatalogItemInstanceDeleted, &InstanceEvent::catalog_item_instance_id,
     "request_id root catalog_item_instance_id"},
    {event_type::kRemoteReservationRequested, &InstanceEvent::resource_id,
     "request_id root resource_id peer reservation_id flavor_id"},
    {event_type::kRemoteReservationHeld, &InstanceEvent::resource_id,
     "request_id root resource_id peer reservation_id expires_at"},
    {event_type::kRemoteReservationRefused, &InstanceEvent::resource_id,
     "request_id root resource_id peer reservation_id reason"},
    {event_type::kRemoteContractSigned, &InstanceEvent::resource_id,
     "request_id root resource_id peer reservation_id contract_id instance_id expires_at"},
    {event_type::kRemoteContractRenewed, &InstanceEvent::resource_id,
     "root resource_id peer contract_id expires_at"},
    {event_type::kRemoteContractExpired, &InstanceEvent::resource_id,
     "root resource_id peer contract_id reason"},
    {event_type::kRemoteContractRevoked, &InstanceEvent::resource_id,
     "root resource_id peer contract_id reason"},
    {event_type::kRemoteContractTerminated, &InstanceEvent::resource_id,
     "root resource_id peer contract_id"},
};

const TypeRule* RuleOf(std::string_view type) {
  for (const auto& rule : kTypeRules) {
    if (type == rule.type) return &rule;
  }
  return nullptr;
}

bool IsCleanupType(std::string_view type) { return type.starts_with("dcm.cleanup."); }
bool IsOperationType(std::string_view type) { return type.starts_with("dcm.instance.operation_"); }

// Whether Encode writes `field` of `e` (of type `e.type`).
bool Written(const InstanceEvent& e, const FieldDef& field) {
  switch (field.kind) {
    case Kind::kString:
      // operation_requested's request id is its own event id.
      if (field.text == &InstanceEvent::request_id && e.type == event_type::kOperationRequested) {
        return false;
      }
      return !(e.*field.text).empty();
    case Kind::kObject:
      return !(e.*field.text).empty();
    case Kind::kInt:
      return e.*field.number != 0 || (field.cleanup_counter && IsCleanupType(e.type));
    case Kind::kTime:
      return e.*field.millis != 0;
    case Kind::kBool:
      return e.*field.flag;
  }
  return false;
}

// Unix millis of an RFC 3339 text that also renders back (FormatRfc3339Millis covers years
// 0000..9999; an offset can push a parsed time outside).
std::optional<int64_t> ReadTime(std::string_view text) {
  auto millis = ParseRfc3339(text);
  if (!millis || ParseRfc3339(FormatRfc3339Millis(*millis)) != millis) return std::nullopt;
  return millis;
}

tl::unexpected<Error> Corrupt(std::string_view type, std::string_view field,
                              std::string_view what) {
  return MakeError(ErrorCode::kCorruption,
                   std::string(type) + ": " + std::string(field) + " " + std::string(what));
}

// Reads the member of `data` that `field` names into `out`; sets its bit in `*present`.
Status ReadField(simdjson::dom::object data, const std::string& type, const FieldDef& field,
                 InstanceEvent* out, uint32_t bit, uint32_t* present) {
  auto value = Member(data, field.name);
  if (!value) return OkStatus();
  switch (field.kind) {
    case Kind::kString: {
      std::string_view text;
      if (value->get(text)) return Corrupt(type, field.name, "must be a string");
      (out->*field.text).assign(text);
      break;
    }
    case Kind::kObject:
      if (!value->is_object()) return Corrupt(type, field.name, "must be an object");
      out->*field.text = Minify(*value);
      break;
    case Kind::kInt: {
      int64_t number = 0;
      if (value->get(number) || number < 0 || number > INT_MAX) {
        return Corrupt(type, field.name, "must be a non-negative integer");
      }
      out->*field.number = static_cast<int>(number);
      break;
    }
    case Kind::kTime: {
      std::string_view text;
      std::optional<int64_t> millis;
      if (!value->get(text)) millis = ReadTime(text);
      if (!millis) return Corrupt(type, field.name, "must be an RFC 3339 time");
      out->*field.millis = *millis;
      break;
    }
    case Kind::kBool: {
      bool flag = false;
      if (value->get(flag)) return Corrupt(type, field.name, "must be a boolean");
      out->*field.flag = flag;
      break;
    }
  }
  *present |= bit;
  return OkStatus();
}

// A required field is one the data holds and the encoder would write back.
Status CheckRequired(const InstanceEvent& e, const TypeRule& rule, uint32_t present) {
  std::string_view names = rule.required;
  while (!names.empty()) {
    const size_t space = names.find(' ');
    const std::string_view name = names.substr(0, space);
    names = space == std::string_view::npos ? std::string_view() : names.substr(space + 1);
    for (size_t i = 0; i < kFieldCount; ++i) {
      if (name != kFields[i].name) continue;
      if (!(present & (1u << i)) || !Written(e, kFields[i])) {
        return Corrupt(e.type, name, "is required");
      }
    }
  }
  return OkStatus();
}

}  // namespace

bool IsInstanceEventType(std::string_view type) { return RuleOf(type) != nullptr; }

bool IsInstanceEvent(const CloudEvent& event) {
  if (!IsInstanceEventType(event.type)) return false;
  if (!IsFederationOutcomeType(event.type)) return true;
  auto data = ParseJson(event.data);
  return data && data->is_object() && Member(simdjson::dom::object(*data), "root").has_value();
}

const char* OperationName(Operation op) {
  switch (op) {
    case Operation::kCreateCatalogItemInstance:
      return "create_catalog_item_instance";
    case Operation::kDeleteCatalogItemInstance:
      return "delete_catalog_item_instance";
    case Operation::kRehydrateCatalogItemInstance:
      return "rehydrate_catalog_item_instance";
    case Operation::kCreateResource:
      return "create_resource";
    case Operation::kDeleteResource:
      return "delete_resource";
    case Operation::kRehydrateResource:
      return "rehydrate_resource";
    case Operation::kCreateServiceTypeInstance:
      return "create_service_type_instance";
    case Operation::kDeleteServiceTypeInstance:
      return "delete_service_type_instance";
    case Operation::kRetryCleanup:
      return "retry_cleanup";
    case Operation::kRecoverLostResource:
      return "recover_lost_resource";
  }
  return "";
}

std::optional<Operation> ParseOperation(std::string_view name) {
  for (auto op : kOperations) {
    if (name == OperationName(op)) return op;
  }
  return std::nullopt;
}

CloudEvent EncodeInstanceEvent(const InstanceEvent& event) {
  CloudEvent e;
  e.type = event.type;
  e.source = event.source;
  e.subject = event.subject;
  if (e.subject.empty()) {
    if (const TypeRule* rule = RuleOf(event.type)) e.subject = event.*rule->subject;
  }
  e.time = FormatRfc3339Millis(event.time_ms);
  e.schema_version = kInstanceEventSchemaVersion;
  e.actor = event.actor;
  if (!event.event_id.empty()) {
    e.id = event.event_id;
  } else if (event.request_id.empty()) {
    e.id = NewUuidV4();
  } else if (event.type == event_type::kOperationRequested) {
    e.id = event.request_id;
  } else {
    // A re-decided request re-emits the same fact with the same id: consumers drop it. A saga
    // asks several peers: each peer's facts are distinct.
    e.id = DeterministicUuid(event.request_id + "/" + event.type + "/" + e.subject +
                             (event.peer.empty() ? "" : "/" + event.peer));
  }

  JsonWriter w;
  w.BeginObject();
  for (const auto& field : kFields) {
    if (!Written(event, field)) continue;
    w.Key(field.name);
    switch (field.kind) {
      case Kind::kString:
        w.String(event.*field.text);
        break;
      case Kind::kObject:
        w.Raw(event.*field.text);
        break;
      case Kind::kInt:
        w.Int(event.*field.number);
        break;
      case Kind::kTime:
        w.String(FormatRfc3339Millis(event.*field.millis));
        break;
      case Kind::kBool:
        w.Bool(true);
        break;
    }
  }
  w.EndObject();
  e.data = w.Take();
  return e;
}

Result<InstanceEvent> DecodeInstanceEvent(const CloudEvent& event) {
  const TypeRule* rule = RuleOf(event.type);
  if (rule == nullptr) {
    return MakeError(ErrorCode::kCorruption, "not an instance event: " + event.type);
  }
  ASSIGN_OR_RETURN(auto element, ParseEventData(event, kInstanceEventSchemaVersion));
  const simdjson::dom::object data(element);

  InstanceEvent out;
  out.type = event.type;
  out.event_id = event.id;
  out.source = event.source;
  out.subject = event.subject;
  out.actor = event.actor;
  auto time_ms = ReadTime(event.time);
  if (!time_ms) return MakeError(ErrorCode::kCorruption, "unreadable time '" + event.time + "'");
  out.time_ms = *time_ms;

  const bool requested = event.type == event_type::kOperationRequested;
  uint32_t present = 0;
  for (size_t i = 0; i < kFieldCount; ++i) {
    if (requested && kFields[i].text == &InstanceEvent::request_id) continue;
    RETURN_IF_ERROR(ReadField(data, out.type, kFields[i], &out, 1u << i, &present));
  }
  RETURN_IF_ERROR(CheckRequired(out, *rule, present));

  if (IsOperationType(out.type) && !ParseOperation(out.operation)) {
    return Corrupt(out.type, "operation", "'" + out.operation.substr(0, 64) + "' is unknown");
  }
  if (out.type == event_type::kCleanupAttempted && out.outcome != "deleted" &&
      out.outcome != "gone" && out.outcome != "failed") {
    return Corrupt(out.type, "outcome", "must be deleted, gone or failed");
  }
  if (requested) out.request_id = event.id;
  return out;
}

Result<SpStatusEvent> DecodeSpStatusEvent(const CloudEvent& event) {
  const std::string_view prefix = event_type::kStatusPrefix;
  if (!std::string_view(event.type).starts_with(prefix) || event.type.size() == prefix.size()) {
    return MakeError(ErrorCode::kCorruption,
                     "not a dcm.status.{service_type} event: " + event.type.substr(0, 128));
  }
  ASSIGN_OR_RETURN(auto element, ParseEventData(event, kSpStatusEventSchemaVersion));
  const simdjson::dom::object data(element);

  SpStatusEvent out;
  out.service_type = event.type.substr(prefix.size());
  auto time_ms = ReadTime(event.time);
  if (!time_ms) return MakeError(ErrorCode::kCorruption, "unreadable time '" + event.time + "'");
  out.time_ms = *time_ms;

  auto non_empty = [&](const char* key, std::string* field) -> Status {
    std::string_view text;
    auto value = Member(data, key);
    if (!value || value->get(text) || text.empty()) {
      return Corrupt("dcm.status", key, "must be a non-empty string");
    }
    field->assign(text);
    return OkStatus();
  };
  RETURN_IF_ERROR(non_empty("id", &out.instance_id));
  RETURN_IF_ERROR(non_empty("status", &out.status));
  for (char& c : out.status) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  // Optional; an SP may send null for "no message".
  if (auto message = Member(data, "message"); message && !message->is_null()) {
    std::string_view text;
    if (message->get(text)) return Corrupt("dcm.status", "message", "must be a string");
    out.message.assign(text);
  }
  return out;
}

}  // namespace dcm
