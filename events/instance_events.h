// Instance events (SPEC §3.3): operation requests on dcm.instance-requests and the saga's facts
// on dcm.instances, both keyed by the operation's `root` (see below).
//
//   HTTP handler ──operation_requested──▶ dcm.instance-requests ──▶ InstanceWorker (the owner
//                                                                   of the root's partition)
//   InstanceWorker ──operation_started ─▶ resource.placed ─▶ service_type_instance.created ─▶
//                    cleanup.enqueued ─▶ catalog_item_instance.rehydrated ─▶ operation_completed
//                    (or operation_failed at any point)            ──▶ dcm.instances
//   cleanup worker ──cleanup.parked | cleanup.attempted (+ cleanup.failed) ──▶ dcm.instances
//
// The root is the id that serialises one family of entities: the catalog item instance id for
// everything created through the catalog, the resource id for resources created through the
// Placement API, the instance id for service-type instances created directly. A rehydrated
// resource keeps its root. Every request and fact of one root lands on one partition
// (KeyPartition(root)), so one worker decides them in order.
//
// The wire codec: one flat struct carries every type: each type uses a subset of the fields (the
// decoder rejects an event that lacks one its type requires; docs/events.md lists them); the
// codec writes the non-empty ones. JSON-object fields (`spec`, `intent`) are kept as minified
// JSON text. Code that handles one type at a time uses the typed view, InstanceFact
// (events/instance_facts.h): one struct per type, encoded and decoded through this codec.
// Catalogue with examples: docs/events.md; golden files: events/golden/.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "events/cloud_event.h"
#include "src/common/result.h"

namespace dcm {

namespace event_type {
// dcm.instance-requests
inline constexpr char kOperationRequested[] = "dcm.instance.operation_requested";
// dcm.instances: saga bookkeeping
inline constexpr char kOperationStarted[] = "dcm.instance.operation_started";
inline constexpr char kOperationCompleted[] = "dcm.instance.operation_completed";
inline constexpr char kOperationFailed[] = "dcm.instance.operation_failed";
// dcm.instances: facts
inline constexpr char kResourcePlaced[] = "dcm.resource.placed";
inline constexpr char kResourceDeleted[] = "dcm.resource.deleted";
inline constexpr char kResourceLost[] = "dcm.resource.lost";
inline constexpr char kInstanceCreated[] = "dcm.service_type_instance.created";
inline constexpr char kInstanceCreateFailed[] = "dcm.service_type_instance.create_failed";
inline constexpr char kInstanceDeleted[] = "dcm.service_type_instance.deleted";
inline constexpr char kInstanceDeleteFailed[] = "dcm.service_type_instance.delete_failed";
inline constexpr char kCleanupEnqueued[] = "dcm.cleanup.enqueued";
inline constexpr char kCleanupParked[] = "dcm.cleanup.parked";
inline constexpr char kCleanupAttempted[] = "dcm.cleanup.attempted";
inline constexpr char kCleanupFailed[] = "dcm.cleanup.failed";
inline constexpr char kCleanupRetried[] = "dcm.cleanup.retried";
inline constexpr char kCatalogItemInstanceCreated[] = "dcm.catalog_item_instance.created";
inline constexpr char kCatalogItemInstanceRehydrated[] = "dcm.catalog_item_instance.rehydrated";
inline constexpr char kCatalogItemInstanceDeleted[] = "dcm.catalog_item_instance.deleted";
// dcm.instances: a placement on a peer enclave (SPEC §10, the consumer side). The same type names
// as the provider enclave's outcomes on dcm.federation (events/federation_events.h), with this
// codec's data: a reader tells them apart by topic (or tries this codec first: `root`).
inline constexpr char kRemoteReservationRequested[] = "dcm.reservation.requested";
inline constexpr char kRemoteReservationHeld[] = "dcm.reservation.held";
inline constexpr char kRemoteReservationRefused[] = "dcm.reservation.refused";
inline constexpr char kRemoteContractSigned[] = "dcm.contract.signed";
inline constexpr char kRemoteContractRenewed[] = "dcm.contract.renewed";
inline constexpr char kRemoteContractExpired[] = "dcm.contract.expired";
inline constexpr char kRemoteContractRevoked[] = "dcm.contract.revoked";
inline constexpr char kRemoteContractTerminated[] = "dcm.contract.terminated";
// dcm.status (SP-produced, SPEC §3.3): type dcm.status.{service_type}
inline constexpr char kStatusPrefix[] = "dcm.status.";
}  // namespace event_type

// Every instance event type (all of the above but the dcm.status.* prefix), catalogue order.
inline constexpr const char* kInstanceEventTypes[] = {
    event_type::kOperationRequested,
    event_type::kOperationStarted,
    event_type::kOperationCompleted,
    event_type::kOperationFailed,
    event_type::kResourcePlaced,
    event_type::kResourceDeleted,
    event_type::kResourceLost,
    event_type::kInstanceCreated,
    event_type::kInstanceCreateFailed,
    event_type::kInstanceDeleted,
    event_type::kInstanceDeleteFailed,
    event_type::kCleanupEnqueued,
    event_type::kCleanupParked,
    event_type::kCleanupAttempted,
    event_type::kCleanupFailed,
    event_type::kCleanupRetried,
    event_type::kCatalogItemInstanceCreated,
    event_type::kCatalogItemInstanceRehydrated,
    event_type::kCatalogItemInstanceDeleted,
    event_type::kRemoteReservationRequested,
    event_type::kRemoteReservationHeld,
    event_type::kRemoteReservationRefused,
    event_type::kRemoteContractSigned,
    event_type::kRemoteContractRenewed,
    event_type::kRemoteContractExpired,
    event_type::kRemoteContractRevoked,
    event_type::kRemoteContractTerminated,
};
bool IsInstanceEventType(std::string_view type);
// Whether `event` is an instance event: its type is one, and for a type dcm.federation's outcomes
// share (dcm.reservation.held, dcm.contract.signed, ...), its data has a `root` (theirs never
// does). For readers that see several topics at once (the audit summary, tools).
bool IsInstanceEvent(const CloudEvent& event);

inline constexpr int kInstanceEventSchemaVersion = 1;

// Operations a request names (`operation`), stable strings.
enum class Operation {
  kCreateCatalogItemInstance,
  kDeleteCatalogItemInstance,
  kRehydrateCatalogItemInstance,
  kCreateResource,
  kDeleteResource,
  kRehydrateResource,
  kCreateServiceTypeInstance,
  kDeleteServiceTypeInstance,
  kRetryCleanup,
  // SPEC §8: a resource whose provider expired or was force-deleted is marked LOST and, with
  // REHYDRATE_ON_PROVIDER_LOSS, rehydrated (new_resource_id set) like kRehydrate*.
  kRecoverLostResource,
};
// "create_catalog_item_instance", ..., "retry_cleanup".
const char* OperationName(Operation op);
std::optional<Operation> ParseOperation(std::string_view name);

// A resource whose provider is gone (SPEC §8).
inline constexpr char kLostStatus[] = "LOST";

// Cleanup record status (SPEC §3.3 spelling).
inline constexpr char kCleanupPending[] = "PENDING";
inline constexpr char kCleanupPendingProvider[] = "PENDING_PROVIDER";
inline constexpr char kCleanupFailedStatus[] = "FAILED";

// The data of every instance event type, flattened (the wire form; InstanceFact is the typed
// one). Empty string / 0 / false = absent.
struct InstanceEvent {
  // Envelope.
  std::string type;
  std::string event_id;  // empty when encoding: DeterministicUuid(request_id/type/subject) if
                         // request_id is set (operation_requested: request_id itself), else a
                         // fresh UUIDv4
  std::string source;
  std::string subject;  // the entity the fact is about (set by Encode from the type if empty)
  int64_t time_ms = 0;
  // The CloudEvent's `actor` (SPEC §6): the requester for an operation request and every fact of
  // its saga; the component for the cleanup worker's own decisions ("dcm/cleanup").
  std::string actor;

  // Data.
  std::string request_id;  // the operation_requested event id this fact belongs to (in
                           // operation_requested: its own event id, not repeated in data)
  std::string root;
  std::string operation;  // requested/started/completed/failed: OperationName
  std::string catalog_item_instance_id;
  std::string resource_id;      // placed/deleted resource; the result of create/rehydrate
  std::string old_resource_id;  // rehydrations
  std::string new_resource_id;  // rehydrations (generated by the handler, carried along)
  std::string instance_id;      // service-type instance / cleanup record
  std::string provider_name;
  std::string provider_id;
  std::string service_type;
  std::string display_name;
  std::string spec;             // JSON object text: the spec sent to (or to be sent to) the SP
  std::string intent;           // JSON object text: the original request spec (resource.placed)
  std::string policy;           // resource.placed: "builtin" | "policy_manager"
  std::string status;           // created: SP status; cleanup: record status after the fact
  std::string outcome;          // cleanup.attempted: "deleted" | "gone" | "failed"
  std::string reason;           // operation_failed: machine-readable (policy_rejected, ...)
  std::string error;            // operation_failed/…_failed/cleanup: human-readable detail
  int http_status = 0;          // SP/policy status seen; operation_failed: the HTTP answer to give
  int retry_count = 0;          // cleanup: after this fact
  int max_retries = 0;          // cleanup.attempted/failed: CLEANUP_MAX_RETRIES in effect
  int64_t requested_at_ms = 0;  // cleanup.enqueued
  bool deferred = false;        // delete requests: queue for cleanup instead of calling the SP
  bool force = false;           // reserved for delete requests
  bool prefer_local = false;    // rehydrations (SPEC §10): placed locally or not at all
  // A placement on a peer enclave (SPEC §10).
  std::string placement;       // resource.placed, created: {"kind":"remote","peer","contract_id"}
  std::string peer;            // the peer enclave's id
  std::string reservation_id;  // UUIDv5 of the operation, the resource and the peer
  std::string flavor_id;       // the peer's flavour
  std::string contract_id;     // the peer's contract (its instance id is instance_id)
  int64_t expires_at_ms = 0;   // the hold's or the contract's lease end

  bool operator==(const InstanceEvent&) const = default;
};

CloudEvent EncodeInstanceEvent(const InstanceEvent& event);
// kCorruption (dead-letter it) for an unknown type, a newer schema version, or data that lacks
// a field its type requires or holds one of the wrong JSON type.
Result<InstanceEvent> DecodeInstanceEvent(const CloudEvent& event);

// An SP status event (dcm.status.{service_type}, data {id, status, message}); the status
// upper-cased. kCorruption when malformed or newer than kSpStatusEventSchemaVersion.
inline constexpr int kSpStatusEventSchemaVersion = 1;
struct SpStatusEvent {
  std::string service_type;
  std::string instance_id;
  std::string status;
  std::string message;
  int64_t time_ms = 0;
  bool operator==(const SpStatusEvent&) const = default;
};
Result<SpStatusEvent> DecodeSpStatusEvent(const CloudEvent& event);

}  // namespace dcm
