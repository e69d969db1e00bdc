// Typed instance events: one struct per event type of events/instance_events.h, each with its
// stable type tag (`kType`, the CloudEvent type) and only the data fields its type carries
// (docs/events.md lists them), over a common envelope whose `root` is the Kafka key.
//
//   InstanceFact fact = ResourcePlaced{...};
//   std::visit(overloads, fact);  // every alternative must be handled: the compiler checks it
//
// The wire codec is the flat one (EncodeInstanceEvent / DecodeInstanceEvent and their kFields
// table), so the JSON is byte-identical; DecodeInstanceFact picks the alternative through one
// table keyed by kType. ToInstanceEvent / ToInstanceFact convert for code that still works on
// the flat InstanceEvent: operation requests (HTTP handlers, the instance worker's intake, the
// decider's rules and decisions), the saga record's `started`, the projection's waiters.
#pragma once

#include <cstdint>
#include <string>
#include <variant>

#include "events/cloud_event.h"
#include "events/instance_events.h"
#include "src/common/result.h"

namespace dcm {

// The envelope every instance event carries (see InstanceEvent for each field's meaning).
struct InstanceEnvelope {
  std::string event_id;
  std::string source;
  std::string subject;
  int64_t time_ms = 0;
  std::string actor;
  std::string request_id;
  std::string root;  // the key: every event of one root lands on one partition
  bool operator==(const InstanceEnvelope&) const = default;
};

// A type whose data is all its base's: `Base` tagged with `Type`.
template <typename Base, const char* Type>
struct Tagged : Base {
  static constexpr const char* kType = Type;
};

// What every operation event names: the operation and the entities it is about.
struct OperationIds : InstanceEnvelope {
  std::string operation;
  std::string catalog_item_instance_id;
  std::string resource_id;
  std::string old_resource_id;
  std::string new_resource_id;
  std::string instance_id;
  std::string provider_name;
  bool operator==(const OperationIds&) const = default;
};

// The parameters of an operation request, carried on by its operation_started.
struct OperationParams : OperationIds {
  std::string service_type;
  std::string display_name;
  std::string spec;
  bool deferred = false;
  bool force = false;
  bool prefer_local = false;  // rehydrations (SPEC §10): no peer placement
  // recover_lost_resource (SPEC §8): the lost provider and why ("provider_expired" |
  // "provider_deleted").
  std::string provider_id;
  std::string reason;
  bool operator==(const OperationParams&) const = default;
};

using OperationRequested = Tagged<OperationParams, event_type::kOperationRequested>;
using OperationStarted = Tagged<OperationParams, event_type::kOperationStarted>;

// The end of an operation: its entity ids and the HTTP answer.
struct OperationEnd : OperationIds {
  int http_status = 0;
  bool operator==(const OperationEnd&) const = default;
};

using OperationCompleted = Tagged<OperationEnd, event_type::kOperationCompleted>;
struct OperationFailed : OperationEnd {
  static constexpr const char* kType = event_type::kOperationFailed;
  std::string reason;
  std::string error;
  bool operator==(const OperationFailed&) const = default;
};

struct ResourcePlaced : InstanceEnvelope {
  static constexpr const char* kType = event_type::kResourcePlaced;
  std::string placement;  // on a peer: {"kind":"remote","peer","contract_id"}; "" = local
  std::string catalog_item_instance_id;
  std::string resource_id;
  std::string old_resource_id;
  std::string provider_name;
  std::string provider_id;
  std::string service_type;
  std::string spec;
  std::string intent;
  std::string policy;
  bool operator==(const ResourcePlaced&) const = default;
};

struct ResourceDeleted : InstanceEnvelope {
  static constexpr const char* kType = event_type::kResourceDeleted;
  std::string resource_id;
  std::string provider_name;
  std::string provider_id;
  std::string reason;
  bool deferred = false;
  bool operator==(const ResourceDeleted&) const = default;
};

// SPEC §8: the provider the resource lives on expired or was force-deleted.
struct ResourceLost : InstanceEnvelope {
  static constexpr const char* kType = event_type::kResourceLost;
  std::string resource_id;
  std::string provider_name;
  std::string provider_id;
  std::string reason;  // "provider_expired" | "provider_deleted"
  bool operator==(const ResourceLost&) const = default;
};

// An SP instance and the provider it lives on.
struct SpInstanceFact : InstanceEnvelope {
  std::string resource_id;
  std::string instance_id;
  std::string provider_name;
  std::string provider_id;
  std::string service_type;
  int http_status = 0;
  bool operator==(const SpInstanceFact&) const = default;
};

struct InstanceCreated : SpInstanceFact {
  static constexpr const char* kType = event_type::kInstanceCreated;
  std::string spec;
  std::string status;
  std::string placement;  // as resource.placed's
  bool operator==(const InstanceCreated&) const = default;
};
struct InstanceCreateFailed : SpInstanceFact {
  static constexpr const char* kType = event_type::kInstanceCreateFailed;
  std::string error;
  bool operator==(const InstanceCreateFailed&) const = default;
};
using InstanceDeleted = Tagged<SpInstanceFact, event_type::kInstanceDeleted>;
struct InstanceDeleteFailed : SpInstanceFact {
  static constexpr const char* kType = event_type::kInstanceDeleteFailed;
  std::string error;
  bool operator==(const InstanceDeleteFailed&) const = default;
};

// A cleanup record's state after the fact.
struct CleanupFact : InstanceEnvelope {
  std::string resource_id;
  std::string instance_id;
  std::string provider_name;
  std::string provider_id;
  std::string status;
  std::string error;
  int http_status = 0;
  int retry_count = 0;
  int max_retries = 0;
  bool operator==(const CleanupFact&) const = default;
};

struct CleanupEnqueued : CleanupFact {
  static constexpr const char* kType = event_type::kCleanupEnqueued;
  std::string service_type;
  int64_t requested_at_ms = 0;
  bool operator==(const CleanupEnqueued&) const = default;
};
using CleanupParked = Tagged<CleanupFact, event_type::kCleanupParked>;
struct CleanupAttempted : CleanupFact {
  static constexpr const char* kType = event_type::kCleanupAttempted;
  std::string outcome;  // "deleted" | "gone" | "failed"
  bool operator==(const CleanupAttempted&) const = default;
};
using CleanupFailed = Tagged<CleanupFact, event_type::kCleanupFailed>;
using CleanupRetried = Tagged<CleanupFact, event_type::kCleanupRetried>;

struct CatalogItemInstanceCreated : InstanceEnvelope {
  static constexpr const char* kType = event_type::kCatalogItemInstanceCreated;
  std::string catalog_item_instance_id;
  std::string resource_id;
  std::string provider_name;
  std::string provider_id;
  std::string service_type;
  std::string display_name;
  std::string spec;
  bool operator==(const CatalogItemInstanceCreated&) const = default;
};
struct CatalogItemInstanceRehydrated : InstanceEnvelope {
  static constexpr const char* kType = event_type::kCatalogItemInstanceRehydrated;
  std::string catalog_item_instance_id;
  std::string resource_id;
  std::string old_resource_id;
  std::string new_resource_id;
  std::string provider_name;
  std::string provider_id;
  bool operator==(const CatalogItemInstanceRehydrated&) const = default;
};
struct CatalogItemInstanceDeleted : InstanceEnvelope {
  static constexpr const char* kType = event_type::kCatalogItemInstanceDeleted;
  std::string catalog_item_instance_id;
  std::string resource_id;
  bool operator==(const CatalogItemInstanceDeleted&) const = default;
};

// A step of a placement on a peer enclave (SPEC §10): `resource_id` is this enclave's resource,
// `instance_id` the peer's instance (a signed contract's remote_instance_id).
struct RemoteFact : InstanceEnvelope {
  std::string resource_id;
  std::string instance_id;
  std::string peer;
  std::string reservation_id;
  std::string flavor_id;
  std::string contract_id;
  std::string reason;  // refused: the peer's reason (no_capacity, expired, ...) or "unreachable"
  std::string error;   // refused: what the peer said, bounded
  int http_status = 0;
  int64_t expires_at_ms = 0;  // held, signed: the lease's end
  bool operator==(const RemoteFact&) const = default;
};
using RemoteReservationRequested = Tagged<RemoteFact, event_type::kRemoteReservationRequested>;
using RemoteReservationHeld = Tagged<RemoteFact, event_type::kRemoteReservationHeld>;
using RemoteReservationRefused = Tagged<RemoteFact, event_type::kRemoteReservationRefused>;
using RemoteContractSigned = Tagged<RemoteFact, event_type::kRemoteContractSigned>;
using RemoteContractRenewed = Tagged<RemoteFact, event_type::kRemoteContractRenewed>;
using RemoteContractExpired = Tagged<RemoteFact, event_type::kRemoteContractExpired>;
using RemoteContractRevoked = Tagged<RemoteFact, event_type::kRemoteContractRevoked>;
using RemoteContractTerminated = Tagged<RemoteFact, event_type::kRemoteContractTerminated>;

// Every instance event type, in the catalogue order of kInstanceEventTypes.
using InstanceFact =
    std::variant<OperationRequested, OperationStarted, OperationCompleted, OperationFailed,
                 ResourcePlaced, ResourceDeleted, ResourceLost, InstanceCreated,
                 InstanceCreateFailed, InstanceDeleted, InstanceDeleteFailed, CleanupEnqueued,
                 CleanupParked, CleanupAttempted, CleanupFailed, CleanupRetried,
                 CatalogItemInstanceCreated, CatalogItemInstanceRehydrated,
                 CatalogItemInstanceDeleted, RemoteReservationRequested, RemoteReservationHeld,
                 RemoteReservationRefused, RemoteContractSigned, RemoteContractRenewed,
                 RemoteContractExpired, RemoteContractRevoked, RemoteContractTerminated>;

// The fact's type tag (its alternative's kType) and envelope.
const char* TypeOf(const InstanceFact& fact);
const InstanceEnvelope& EnvelopeOf(const InstanceFact& fact);
InstanceEnvelope& EnvelopeOf(InstanceFact& fact);

CloudEvent EncodeInstanceFact(const InstanceFact& fact);
// As DecodeInstanceEvent: kCorruption for an unknown type, a newer schema or bad data.
Result<InstanceFact> DecodeInstanceFact(const CloudEvent& event);

// Conversions for code still on the flat struct. ToInstanceFact: kCorruption for an unknown
// type; fields its type does not carry are dropped.
InstanceEvent ToInstanceEvent(const InstanceFact& fact);
Result<InstanceFact> ToInstanceFact(const InstanceEvent& event);
Result<InstanceFact> ToInstanceFact(InstanceEvent&& event);  // moves the fields out

// std::visit helper: Overloaded{[](const A&) {...}, [](const B&) {...}}.
template <typename... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <typename... F>
Overloaded(F...) -> Overloaded<F...>;

}  // namespace dcm
