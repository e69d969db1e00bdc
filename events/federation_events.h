// Federation events of the provider enclave (SPEC §10, docs/federation.md "Reservations and
// contracts (provider side)"): the requests peers' calls become, on the one-partition topic
// dcm.federation-requests, and the decider's outcomes on dcm.federation.
//
//   peer API / sweeper ──reservation.received ──────▶ dcm.federation-requests (1 partition)
//                        reservation.confirm_requested       │ one FederationWorker decides,
//                        reservation.release_requested       │ in total order
//                        reservation.expiry_due              ▼
//                        contract.renewal_requested    dcm.federation (key: reservation id)
//                        contract.termination_requested  ◀── reservation.held | .refused |
//                        contract.revocation_requested        .expired | .released,
//                        contract.expiry_due                  contract.signed | .renewed |
//                        reservation.relay_requested          .expired | .revoked | .terminated,
//                                                             reservation.relayed
//
// Requests are named `<entity>.<what is asked>` (`_requested`; `received` for a new hold, which
// is the peer's own reservation arriving; `expiry_due` for the sweeper's), outcomes are facts in
// the past tense. Every outcome carries the request's event id (`request_id`, its own id is
// UUIDv5 of it) and the decision sequence `seq` (the request's offset), which make folding it
// idempotent; `repeat: true` marks the same answer given again to a repeated request (it changes
// no state). Refusals of every request kind are `dcm.reservation.refused`.
//
// The typed view is one struct per type (its stable `kType` tag, its data fields) in two
// std::variant families, FederationRequest and FederationOutcome; the codec reads and writes them
// through one field table per type (kFields in federation_events.cc). Times are unix millis in
// the structs and RFC 3339 strings on the wire; durations are integer milliseconds (`ttl_ms`).
// Catalogue with examples: docs/events.md; golden files: events/golden/.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "events/cloud_event.h"
#include "src/common/result.h"

namespace dcm {

namespace event_type {
// dcm.federation-requests
inline constexpr char kReservationReceived[] = "dcm.reservation.received";
inline constexpr char kReservationConfirmRequested[] = "dcm.reservation.confirm_requested";
inline constexpr char kReservationReleaseRequested[] = "dcm.reservation.release_requested";
inline constexpr char kReservationExpiryDue[] = "dcm.reservation.expiry_due";
inline constexpr char kContractRenewalRequested[] = "dcm.contract.renewal_requested";
inline constexpr char kContractTerminationRequested[] = "dcm.contract.termination_requested";
inline constexpr char kContractRevocationRequested[] = "dcm.contract.revocation_requested";
inline constexpr char kContractExpiryDue[] = "dcm.contract.expiry_due";
inline constexpr char kReservationRelayRequested[] = "dcm.reservation.relay_requested";
// dcm.federation
inline constexpr char kReservationHeld[] = "dcm.reservation.held";
inline constexpr char kReservationRefused[] = "dcm.reservation.refused";
inline constexpr char kReservationExpired[] = "dcm.reservation.expired";
inline constexpr char kReservationReleased[] = "dcm.reservation.released";
inline constexpr char kContractSigned[] = "dcm.contract.signed";
inline constexpr char kContractRenewed[] = "dcm.contract.renewed";
inline constexpr char kContractExpired[] = "dcm.contract.expired";
inline constexpr char kContractRevoked[] = "dcm.contract.revoked";
inline constexpr char kContractTerminated[] = "dcm.contract.terminated";
inline constexpr char kReservationRelayed[] = "dcm.reservation.relayed";
}  // namespace event_type

inline constexpr int kFederationEventSchemaVersion = 1;

// Why a request was refused (`reason` of dcm.reservation.refused) and the HTTP status it maps to.
namespace refusal {
inline constexpr char kNoCapacity[] = "no_capacity";        // 409: the flavour is full
inline constexpr char kUnknownFlavor[] = "unknown_flavor";  // 404
inline constexpr char kNotFound[] = "not_found";            // 404: no such reservation/contract
inline constexpr char kForbidden[] = "forbidden";           // 403: another consumer's
inline constexpr char kConflict[] =
    "conflict";  // 409: reservation id taken (other consumer/flavour)
inline constexpr char kNotHeld[] = "not_held";   // 409: confirm/release of a refused reservation
inline constexpr char kSigned[] = "signed";      // 409: release of a confirmed reservation
inline constexpr char kExpired[] = "expired";    // 410: the hold or contract expired
inline constexpr char kReleased[] = "released";  // 410
inline constexpr char kTerminated[] = "terminated";  // 410
inline constexpr char kRevoked[] = "revoked";        // 410
inline constexpr char kInvalid[] = "invalid";        // 400: the request's data is malformed
}  // namespace refusal

// The envelope every federation event carries. `time_ms` of a request is its decision time: the
// decider reads no clock, so a replay decides the same way.
struct FederationEnvelope {
  std::string event_id;  // empty when encoding: a request gets a new UUIDv4, an outcome
                         // FederationOutcomeId(request_id)
  std::string source;
  std::string subject;  // set by Encode from the type when empty
  int64_t time_ms = 0;
  std::string actor;
  bool operator==(const FederationEnvelope&) const = default;
};

// A type whose data is all its base's: `Base` tagged with `Type`.
template <typename Base, const char* Type>
struct FederationTagged : Base {
  static constexpr const char* kType = Type;
};

// ---- Requests (dcm.federation-requests) ----

// A peer's POST /reservations: hold one instance of `flavor_id` for `ttl_ms`.
struct ReservationReceived : FederationEnvelope {
  static constexpr const char* kType = event_type::kReservationReceived;
  std::string reservation_id;
  std::string flavor_id;
  std::string consumer;  // the consumer enclave (the authenticated peer)
  std::string spec;      // JSON object text: what the instance will be
  int64_t ttl_ms = 0;
  bool operator==(const ReservationReceived&) const = default;
};

// A consumer's call on its reservation.
struct ReservationCall : FederationEnvelope {
  std::string reservation_id;
  std::string consumer;
  bool operator==(const ReservationCall&) const = default;
};
using ReservationConfirmRequested =
    FederationTagged<ReservationCall, event_type::kReservationConfirmRequested>;
using ReservationReleaseRequested =
    FederationTagged<ReservationCall, event_type::kReservationReleaseRequested>;

// The sweeper's: the hold `reservation_id` that expires at `expires_at_ms` is due.
struct ReservationExpiryDue : FederationEnvelope {
  static constexpr const char* kType = event_type::kReservationExpiryDue;
  std::string reservation_id;
  int64_t expires_at_ms = 0;
  bool operator==(const ReservationExpiryDue&) const = default;
};

// A consumer's call on its contract.
struct ContractCall : FederationEnvelope {
  std::string contract_id;
  std::string consumer;
  bool operator==(const ContractCall&) const = default;
};
using ContractRenewalRequested =
    FederationTagged<ContractCall, event_type::kContractRenewalRequested>;
using ContractTerminationRequested =
    FederationTagged<ContractCall, event_type::kContractTerminationRequested>;

// This enclave's admin ends a contract (the consumer learns it as revoked).
struct ContractRevocationRequested : FederationEnvelope {
  static constexpr const char* kType = event_type::kContractRevocationRequested;
  std::string contract_id;
  std::string reason;
  bool operator==(const ContractRevocationRequested&) const = default;
};

struct ContractExpiryDue : FederationEnvelope {
  static constexpr const char* kType = event_type::kContractExpiryDue;
  std::string contract_id;
  int64_t expires_at_ms = 0;
  bool operator==(const ContractExpiryDue&) const = default;
};

// A supernode's (an enclave with no providers of the flavour): forward the consumer's reservation
// `reservation_id` to the peer `next_hop`, under the same id, for the flavour `owner` offers.
struct ReservationRelayRequested : FederationEnvelope {
  static constexpr const char* kType = event_type::kReservationRelayRequested;
  std::string reservation_id;
  std::string flavor_id;
  std::string consumer;  // the consumer enclave (the authenticated peer)
  std::string next_hop;  // the peer enclave this one forwards to
  std::string owner;     // the enclave that owns the flavour (signs the contract)
  bool operator==(const ReservationRelayRequested&) const = default;
};

using FederationRequest =
    std::variant<ReservationReceived, ReservationConfirmRequested, ReservationReleaseRequested,
                 ReservationExpiryDue, ContractRenewalRequested, ContractTerminationRequested,
                 ContractRevocationRequested, ContractExpiryDue, ReservationRelayRequested>;

// ---- Outcomes (dcm.federation, keyed by reservation id) ----

// What every outcome carries.
struct FederationOutcomeBase : FederationEnvelope {
  std::string request_id;    // the request's event id
  int64_t seq = 0;           // the request's offset on dcm.federation-requests
  std::string request_type;  // the request's event type
  std::string reservation_id;
  std::string consumer;
  std::string flavor_id;
  bool repeat = false;  // the same answer again to a repeated request: no state change
  bool operator==(const FederationOutcomeBase&) const = default;
};

struct ReservationHeld : FederationOutcomeBase {
  static constexpr const char* kType = event_type::kReservationHeld;
  std::string spec;
  int64_t expires_at_ms = 0;
  int64_t capacity = 0;  // the flavour's instances before holds and contracts, as decided
  bool operator==(const ReservationHeld&) const = default;
};

struct ReservationRefused : FederationOutcomeBase {
  static constexpr const char* kType = event_type::kReservationRefused;
  std::string contract_id;  // a refused contract call
  std::string reason;       // refusal::k*
  int status = 0;           // the HTTP status the call gets (4xx)
  std::string detail;
  bool operator==(const ReservationRefused&) const = default;
};

struct ReservationExpired : FederationOutcomeBase {
  static constexpr const char* kType = event_type::kReservationExpired;
  int64_t expires_at_ms = 0;
  bool operator==(const ReservationExpired&) const = default;
};

using ReservationReleased =
    FederationTagged<FederationOutcomeBase, event_type::kReservationReleased>;

// A contract's state after the fact.
struct ContractFact : FederationOutcomeBase {
  std::string contract_id;
  std::string remote_instance_id;  // the instance this enclave runs for the consumer
  int64_t expires_at_ms = 0;       // the lease's end (signed, renewed) or when it ended
  bool operator==(const ContractFact&) const = default;
};

struct ContractSigned : ContractFact {
  static constexpr const char* kType = event_type::kContractSigned;
  std::string spec;
  bool operator==(const ContractSigned&) const = default;
};
using ContractRenewed = FederationTagged<ContractFact, event_type::kContractRenewed>;
using ContractExpired = FederationTagged<ContractFact, event_type::kContractExpired>;
struct ContractRevoked : ContractFact {
  static constexpr const char* kType = event_type::kContractRevoked;
  std::string reason;
  bool operator==(const ContractRevoked&) const = default;
};
using ContractTerminated = FederationTagged<ContractFact, event_type::kContractTerminated>;

// A supernode relays the reservation to `next_hop`: it holds no capacity and no lease here; the
// contract `contract_id` (ContractIdFor(owner, reservation_id)) is the owner's.
struct ReservationRelayed : FederationOutcomeBase {
  static constexpr const char* kType = event_type::kReservationRelayed;
  std::string next_hop;
  std::string owner;
  std::string contract_id;
  bool operator==(const ReservationRelayed&) const = default;
};

using FederationOutcome =
    std::variant<ReservationHeld, ReservationRefused, ReservationExpired, ReservationReleased,
                 ContractSigned, ContractRenewed, ContractExpired, ContractRevoked,
                 ContractTerminated, ReservationRelayed>;

// Type tags and envelopes.
const char* TypeOf(const FederationRequest& request);
const char* TypeOf(const FederationOutcome& outcome);
const FederationEnvelope& EnvelopeOf(const FederationRequest& request);
FederationEnvelope& EnvelopeOf(FederationRequest& request);
const FederationOutcomeBase& BaseOf(const FederationOutcome& outcome);
FederationOutcomeBase& BaseOf(FederationOutcome& outcome);

bool IsFederationRequestType(std::string_view type);
bool IsFederationOutcomeType(std::string_view type);

// An outcome's event id: UUIDv5 of its request's id, so a re-decided request re-emits the same
// event (projections drop the duplicate).
std::string FederationOutcomeId(const std::string& request_id);

// The HTTP status the peer API answers a request with once `outcome` decided it: 201 for a new
// hold, contract or relay, 200 for other successes and repeats, the refusal's status, 410 when the
// call found its hold or contract expired.
int FederationAnswerStatus(const FederationOutcome& outcome);

CloudEvent EncodeFederationRequest(const FederationRequest& request);
// kCorruption: not a federation request, a newer schema, or data that is not a JSON object (dead-
// letter it). kInvalidArgument (with fields): a field missing, of the wrong type or out of range
// (the decider refuses it, 400).
Result<FederationRequest> DecodeFederationRequest(const CloudEvent& event);

CloudEvent EncodeFederationOutcome(const FederationOutcome& outcome);
// kCorruption for anything that is not a well-formed federation outcome.
Result<FederationOutcome> DecodeFederationOutcome(const CloudEvent& event);

}  // namespace dcm
