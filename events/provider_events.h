// Provider commands (on dcm.provider-requests) and their outcomes (on dcm.providers).
// Catalogue with examples: docs/events.md; golden files: events/golden/.
//
//   SP / HTTP handler ──registration_requested──▶ dcm.provider-requests (1 partition)
//                       update_requested            │ one registrar decides, in total order
//                       id_change_requested         ▼
//                       deletion_requested      dcm.providers ◀── registered | updated |
//   prober (GC) ───────expiry_requested                            id_changed | deleted |
//                                                                  expired | rejected
// Every outcome carries the request's event id (`request_id`) and the registrar's decision
// sequence `seq` (the request's offset), which makes applying it idempotent and order-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "events/cloud_event.h"
#include "events/provider.h"
#include "src/common/result.h"

namespace dcm {

namespace event_type {
inline constexpr char kRegistrationRequested[] = "dcm.provider.registration_requested";
inline constexpr char kUpdateRequested[] = "dcm.provider.update_requested";
inline constexpr char kIdChangeRequested[] = "dcm.provider.id_change_requested";
inline constexpr char kDeletionRequested[] = "dcm.provider.deletion_requested";
inline constexpr char kExpiryRequested[] = "dcm.provider.expiry_requested";
inline constexpr char kRegistered[] = "dcm.provider.registered";
inline constexpr char kUpdated[] = "dcm.provider.updated";
inline constexpr char kIdChanged[] = "dcm.provider.id_changed";
inline constexpr char kDeleted[] = "dcm.provider.deleted";
inline constexpr char kExpired[] = "dcm.provider.expired";
inline constexpr char kRejected[] = "dcm.provider.rejected";
}  // namespace event_type

// The newest `schemaversion` of each provider event's data. Decoders accept 1..current.
inline constexpr int kProviderEventSchemaVersion = 1;

// kExpire: garbage collection of a heartbeat provider (SPEC §8, PROVIDER_GC_AFTER), asked by the
// prober that owns it; never from HTTP.
enum class RequestKind { kRegister, kUpdate, kChangeId, kDelete, kExpire };
// "register", "update", "change_id", "delete", "expire"
const char* RequestKindName(RequestKind kind);
// The kind a request event type names, or nullopt for any other type.
std::optional<RequestKind> RequestKindOfType(std::string_view type);

struct ProviderRequest {
  RequestKind kind = RequestKind::kRegister;
  std::string request_id;  // the request event's id
  std::string id;          // register: optional; others: the target provider
  ProviderSpec spec;       // register, update
  std::string new_id;      // change_id
  bool force = false;      // delete
  // expire: the provider's registration `seq` the expiry is about (a provider registered or
  // updated since is not expired: 409), its last heartbeat and PROVIDER_GC_AFTER, for the record.
  int64_t registration_seq = 0;
  std::string last_heartbeat_time;
  int64_t gc_after_ms = 0;
  std::string requested_by;  // the request event's source
  // Who asks (the request event's `actor`, SPEC §6). A new provider is owned by it.
  std::string actor;
  // The actor may act only on providers it owns (an SP with the dcm-provider role, not an
  // admin): the registrar rejects anything else with 403. Requests produced straight to Kafka
  // are trusted by Kafka ACLs and are not scoped unless they say so.
  bool owner_scoped = false;
};

// Builds the request event (new random id, `source`, `time` = now, `actor`).
CloudEvent EncodeProviderRequest(const ProviderRequest& request, const std::string& source,
                                 int64_t now_millis);

// Decodes a request event. kCorruption: not a provider request at all (dead-letter it).
// kInvalidArgument (with fields): a request whose data fails validation (reject it, 400).
Result<ProviderRequest> DecodeProviderRequest(const CloudEvent& event, const ProviderRules& rules);

enum class OutcomeKind { kRegistered, kUpdated, kIdChanged, kDeleted, kExpired, kRejected };

struct ConflictRef {
  std::string id;
  std::string name;
  bool operator==(const ConflictRef&) const = default;
};

struct ProviderOutcome {
  OutcomeKind kind = OutcomeKind::kRejected;
  std::string request_id;
  int64_t seq = 0;
  Provider provider;   // registered, updated, id_changed: the state after; deleted, expired: before
  std::string old_id;  // id_changed
  // expired: why (SPEC §8: its history says why), and the last heartbeat it is timed from.
  std::string reason;
  std::string last_heartbeat_time;
  // rejected:
  RequestKind request_kind = RequestKind::kRegister;
  int status = 0;  // the HTTP status the request gets: 400, 404, 409
  std::string detail;
  std::vector<FieldError> errors;
  std::optional<ConflictRef> conflict;
  std::string attempted_name;
  std::string attempted_id;
  // The request's actor: the outcome event's `actor` (SPEC §6: an outcome carries the actor of
  // the request that caused it).
  std::string actor;

  bool operator==(const ProviderOutcome&) const = default;
};

// Outcome event ids are derived from the request id, so re-deciding a request after a crash
// produces the same event (projections drop the duplicate).
std::string OutcomeEventId(const std::string& request_id);

// A rejection as it is recorded: its detail, field errors and attempted name and id cut to the
// caps of events/event_limits.h (a request's errors can echo input of any size).
ProviderOutcome CappedRejection(ProviderOutcome outcome);

CloudEvent EncodeProviderOutcome(const ProviderOutcome& outcome, const std::string& source,
                                 int64_t now_millis);
// kCorruption for events that are not provider outcomes or are malformed.
Result<ProviderOutcome> DecodeProviderOutcome(const CloudEvent& event);

bool IsProviderOutcomeType(std::string_view type);
// The event type of an outcome kind ("dcm.provider.registered", ...).
const char* ProviderOutcomeType(OutcomeKind kind);

}  // namespace dcm
