#include "projections/federation_decider.h"

#include <algorithm>

#include "events/instance_facts.h"
#include "src/common/time_format.h"
#include "src/common/uuid.h"

namespace dcm {
namespace {

namespace rs = reservation_state;

FederationOutcomeBase BaseFor(const FederationEnvelope& request, const char* type, int64_t seq) {
  FederationOutcomeBase b;
  b.request_id = request.event_id;
  b.seq = seq;
  b.request_type = type;
  b.time_ms = request.time_ms;  // decided at the request's time: a re-decision is identical
  b.actor = request.actor;
  return b;
}

template <typename T>
T With(const FederationOutcomeBase& base) {
  T out;
  static_cast<FederationOutcomeBase&>(out) = base;
  return out;
}

FederationOutcome Refused(const FederationOutcomeBase& base, const char* reason, int status,
                          std::string detail, std::string contract_id = "") {
  auto o = With<ReservationRefused>(base);
  o.reason = reason;
  o.status = status;
  o.detail = std::move(detail);
  o.contract_id = std::move(contract_id);
  return o;
}

// Copies the record's identity into `base`.
void Describe(FederationOutcomeBase& base, const ReservationRecord& r) {
  base.reservation_id = r.reservation_id;
  base.consumer = r.consumer;
  base.flavor_id = r.flavor_id;
}

template <typename T>
T ContractOutcome(const FederationOutcomeBase& base, const ReservationRecord& r) {
  auto o = With<T>(base);
  o.contract_id = r.contract_id;
  o.remote_instance_id = r.remote_instance_id;
  o.expires_at_ms = r.contract_expires_at_ms;
  return o;
}

ReservationHeld HeldAgain(FederationOutcomeBase base, const ReservationRecord& r) {
  base.repeat = true;
  auto o = With<ReservationHeld>(base);
  o.spec = r.spec;
  o.expires_at_ms = r.hold_expires_at_ms;
  o.capacity = r.capacity;
  return o;
}

// The refusal of a consumer's call on a reservation that does not exist or is another's.
std::optional<FederationOutcome> NotTheirs(const FederationOutcomeBase& base,
                                           const std::optional<ReservationRecord>& record,
                                           const std::string& reservation_id,
                                           const std::string& consumer) {
  if (!record) {
    return Refused(base, refusal::kNotFound, 404, "reservation '" + reservation_id + "' not found");
  }
  if (record->consumer != consumer) {
    return Refused(base, refusal::kForbidden, 403,
                   "reservation '" + reservation_id + "' is not '" + consumer + "''s");
  }
  return std::nullopt;
}

// The refusal of a call on a reservation whose hold or contract has ended (or never was).
FederationOutcome Ended(const FederationOutcomeBase& base, const ReservationRecord& r,
                        const std::string& contract_id = "") {
  const std::string& s = r.state;
  const std::string what = "reservation '" + r.reservation_id + "' is " + s;
  if (s == rs::kRefused) return Refused(base, refusal::kNotHeld, 409, what, contract_id);
  if (s == rs::kSigned) return Refused(base, refusal::kSigned, 409, what, contract_id);
  if (s == rs::kReleased) return Refused(base, refusal::kReleased, 410, what, contract_id);
  if (s == rs::kTerminated) return Refused(base, refusal::kTerminated, 410, what, contract_id);
  if (s == rs::kRevoked) return Refused(base, refusal::kRevoked, 410, what, contract_id);
  if (s == rs::kRelayed) {
    return Refused(base, refusal::kConflict, 409, what + " to '" + r.next_hop + "'", contract_id);
  }
  return Refused(base, refusal::kExpired, 410, what, contract_id);  // hold or contract expired
}

}  // namespace

std::string FederationIdNamespace() { return UuidV5(kUuidNamespaceUrl, "dcm-federation"); }

std::string ContractIdFor(const std::string& enclave_id, const std::string& reservation_id) {
  return UuidV5(FederationIdNamespace(), "contract:" + enclave_id + "/" + reservation_id);
}

std::string RemoteInstanceIdFor(const std::string& enclave_id, const std::string& reservation_id) {
  return UuidV5(FederationIdNamespace(), "instance:" + enclave_id + "/" + reservation_id);
}

Result<bool> FederationDecider::AlreadyDecided(const std::string& request_id,
                                               const StoreBatch& batch) const {
  ASSIGN_OR_RETURN(auto decided, state_.Decided(request_id, &batch));
  return decided.has_value();
}

Result<std::optional<FederationOutcome>> FederationDecider::Decide(const FederationRequest& request,
                                                                   int64_t seq,
                                                                   const FlavorCapacity& capacity,
                                                                   StoreBatch& batch) {
  auto decide = Overloaded{
      [&](const ReservationReceived& r) { return Reserve(r, seq, capacity, batch); },
      [&](const ReservationConfirmRequested& r) { return Confirm(r, seq, batch); },
      [&](const ReservationReleaseRequested& r) { return Release(r, seq, batch); },
      [&](const ReservationExpiryDue& r) { return ExpireHold(r, seq, batch); },
      [&](const ContractRenewalRequested& r) {
        return OnContract(r, r.kType, r.contract_id, r.consumer, "", seq, batch);
      },
      [&](const ContractTerminationRequested& r) {
        return OnContract(r, r.kType, r.contract_id, r.consumer, "", seq, batch);
      },
      [&](const ContractRevocationRequested& r) {
        return OnContract(r, r.kType, r.contract_id, "", r.reason, seq, batch);
      },
      [&](const ContractExpiryDue& r) { return ExpireContract(r, seq, batch); },
      [&](const ReservationRelayRequested& r) { return Relay(r, seq, batch); },
  };
  ASSIGN_OR_RETURN(auto outcome, std::visit(decide, request));
  const std::string& request_id = EnvelopeOf(request).event_id;
  if (!outcome) {
    state_.Remember(request_id, "", batch);
    return outcome;
  }
  RETURN_IF_ERROR(state_.Apply(*outcome, batch));
  return outcome;
}

FederationOutcome FederationDecider::RefuseInvalid(const CloudEvent& request, const Error& error,
                                                   int64_t seq, StoreBatch& batch) {
  FederationEnvelope envelope;
  envelope.event_id = request.id;
  envelope.time_ms = ParseRfc3339(request.time).value_or(0);
  envelope.actor = request.actor;
  FederationOutcome o =
      Refused(BaseFor(envelope, request.type.c_str(), seq), refusal::kInvalid, 400, error.message);
  BaseOf(o).request_type = request.type;  // BaseFor kept a pointer's copy: own the text
  (void)state_.Apply(o, batch);           // remembers the request; changes no record
  return o;
}

Result<bool> FederationDecider::Fold(const FederationOutcome& outcome, StoreBatch& batch) {
  ASSIGN_OR_RETURN(const bool decided, AlreadyDecided(BaseOf(outcome).request_id, batch));
  if (decided) return false;  // this instance's own decision, or a duplicated outcome
  return state_.Apply(outcome, batch);
}

FederationDecider::Outcome FederationDecider::Reserve(const ReservationReceived& r, int64_t seq,
                                                      const FlavorCapacity& capacity,
                                                      const StoreBatch& batch) {
  auto base = BaseFor(r, r.kType, seq);
  base.reservation_id = r.reservation_id;
  base.consumer = r.consumer;
  base.flavor_id = r.flavor_id;
  ASSIGN_OR_RETURN(auto record, state_.Reservation(r.reservation_id, &batch));
  if (record) {
    if (record->consumer != r.consumer || record->flavor_id != r.flavor_id || record->Relayed()) {
      return Refused(base, refusal::kConflict, 409,
                     "reservation id '" + r.reservation_id + "' is taken");
    }
    Describe(base, *record);
    if (record->HoldLive() && r.time_ms >= record->hold_expires_at_ms) {
      auto o = With<ReservationExpired>(base);  // observed expired: it expires now (410)
      o.expires_at_ms = record->hold_expires_at_ms;
      return o;
    }
    const std::string& s = record->state;
    if (s == rs::kRefused) {
      base.repeat = true;
      return Refused(base, record->reason.c_str(), record->status, "the first answer, repeated");
    }
    if (s == rs::kHoldExpired || s == rs::kReleased) {
      base.repeat = true;
      return Ended(base, *record);
    }
    return HeldAgain(base, *record);  // held, or held and then confirmed
  }
  const std::optional<int64_t> available = capacity ? capacity(r.flavor_id) : std::nullopt;
  if (!available) {
    return Refused(base, refusal::kUnknownFlavor, 404,
                   "flavour '" + r.flavor_id + "' is not offered here");
  }
  ASSIGN_OR_RETURN(const FlavorUsage usage, state_.Usage(r.flavor_id, &batch));
  if (usage.Total() >= *available) {
    return Refused(base, refusal::kNoCapacity, 409,
                   "flavour '" + r.flavor_id + "' has " + std::to_string(*available) +
                       " instances and " + std::to_string(usage.holds) + " holds and " +
                       std::to_string(usage.contracts) + " contracts on them");
  }
  auto o = With<ReservationHeld>(base);
  o.spec = r.spec;
  o.expires_at_ms = r.time_ms + std::min(r.ttl_ms, policy_.max_hold_ttl_ms);
  o.capacity = *available;
  return o;
}

FederationDecider::Outcome FederationDecider::Confirm(const ReservationConfirmRequested& r,
                                                      int64_t seq, const StoreBatch& batch) {
  auto base = BaseFor(r, r.kType, seq);
  base.reservation_id = r.reservation_id;
  base.consumer = r.consumer;
  ASSIGN_OR_RETURN(auto record, state_.Reservation(r.reservation_id, &batch));
  if (auto refused = NotTheirs(base, record, r.reservation_id, r.consumer)) return *refused;
  Describe(base, *record);
  if (record->HoldLive()) {
    if (r.time_ms >= record->hold_expires_at_ms) {
      auto o = With<ReservationExpired>(base);  // the confirm came too late: 410
      o.expires_at_ms = record->hold_expires_at_ms;
      return o;
    }
    auto o = With<ContractSigned>(base);
    o.contract_id = ContractIdFor(policy_.enclave_id, r.reservation_id);
    o.remote_instance_id = RemoteInstanceIdFor(policy_.enclave_id, r.reservation_id);
    o.expires_at_ms = r.time_ms + policy_.contract_ttl_ms;
    o.spec = record->spec;
    return o;
  }
  if (record->ContractLive()) {
    base.repeat = true;
    auto o = ContractOutcome<ContractSigned>(base, *record);
    o.spec = record->spec;
    return o;
  }
  return Ended(base, *record, record->contract_id);
}

FederationDecider::Outcome FederationDecider::Release(const ReservationReleaseRequested& r,
                                                      int64_t seq, const StoreBatch& batch) {
  auto base = BaseFor(r, r.kType, seq);
  base.reservation_id = r.reservation_id;
  base.consumer = r.consumer;
  ASSIGN_OR_RETURN(auto record, state_.Reservation(r.reservation_id, &batch));
  if (auto refused = NotTheirs(base, record, r.reservation_id, r.consumer)) return *refused;
  Describe(base, *record);
  if (record->HoldLive()) return With<ReservationReleased>(base);
  if (record->state == rs::kReleased) {
    base.repeat = true;
    return With<ReservationReleased>(base);
  }
  return Ended(base, *record, record->contract_id);
}

FederationDecider::Outcome FederationDecider::Relay(const ReservationRelayRequested& r, int64_t seq,
                                                    const StoreBatch& batch) {
  auto base = BaseFor(r, r.kType, seq);
  base.reservation_id = r.reservation_id;
  base.consumer = r.consumer;
  base.flavor_id = r.flavor_id;
  ASSIGN_OR_RETURN(auto record, state_.Reservation(r.reservation_id, &batch));
  if (record &&
      !(record->Relayed() && record->consumer == r.consumer && record->flavor_id == r.flavor_id)) {
    const std::string why = record->Relayed()
                                ? "relayed for another consumer or flavour"
                                : "a reservation of this enclave (" + record->state + ")";
    return Refused(base, refusal::kConflict, 409,
                   "reservation id '" + r.reservation_id + "' is taken: " + why);
  }
  auto o = With<ReservationRelayed>(base);
  if (record) {  // relayed before: the first answer again
    o.repeat = true;
    o.next_hop = record->next_hop;
    o.owner = record->owner;
    o.contract_id = record->contract_id;
    return o;
  }
  o.next_hop = r.next_hop;
  o.owner = r.owner;
  o.contract_id = ContractIdFor(r.owner, r.reservation_id);
  return o;
}

FederationDecider::Outcome FederationDecider::ExpireHold(const ReservationExpiryDue& r, int64_t seq,
                                                         const StoreBatch& batch) {
  ASSIGN_OR_RETURN(auto record, state_.Reservation(r.reservation_id, &batch));
  if (!record || !record->HoldLive() || record->hold_expires_at_ms != r.expires_at_ms ||
      r.time_ms < record->hold_expires_at_ms) {
    return std::optional<FederationOutcome>();  // confirmed or released first, or not due
  }
  auto base = BaseFor(r, r.kType, seq);
  Describe(base, *record);
  auto o = With<ReservationExpired>(base);
  o.expires_at_ms = record->hold_expires_at_ms;
  return o;
}

FederationDecider::Outcome FederationDecider::ExpireContract(const ContractExpiryDue& r,
                                                             int64_t seq, const StoreBatch& batch) {
  ASSIGN_OR_RETURN(auto reservation_id, state_.ReservationOfContract(r.contract_id, &batch));
  std::optional<ReservationRecord> record;
  if (reservation_id) {
    ASSIGN_OR_RETURN(record, state_.Reservation(*reservation_id, &batch));
  }
  if (!record || !record->ContractLive() || record->contract_expires_at_ms != r.expires_at_ms ||
      r.time_ms < record->contract_expires_at_ms) {
    return std::optional<FederationOutcome>();  // renewed or ended first, or not due
  }
  auto base = BaseFor(r, r.kType, seq);
  Describe(base, *record);
  return ContractOutcome<ContractExpired>(base, *record);
}

FederationDecider::Outcome FederationDecider::OnContract(
    const FederationEnvelope& r, const char* type, const std::string& contract_id,
    const std::string& consumer, const std::string& reason, int64_t seq, const StoreBatch& batch) {
  const std::string_view kind = type;
  auto base = BaseFor(r, type, seq);
  base.consumer = consumer;
  ASSIGN_OR_RETURN(auto reservation_id, state_.ReservationOfContract(contract_id, &batch));
  std::optional<ReservationRecord> record;
  if (reservation_id) {
    ASSIGN_OR_RETURN(record, state_.Reservation(*reservation_id, &batch));
  }
  if (!record) {
    return Refused(base, refusal::kNotFound, 404, "contract '" + contract_id + "' not found",
                   contract_id);
  }
  if (!consumer.empty() && record->consumer != consumer) {
    return Refused(base, refusal::kForbidden, 403,
                   "contract '" + contract_id + "' is not '" + consumer + "''s", contract_id);
  }
  Describe(base, *record);
  const bool live = record->ContractLive();
  if (live && r.time_ms >= record->contract_expires_at_ms) {
    return ContractOutcome<ContractExpired>(base, *record);  // observed expired: it ends now
  }
  if (kind == event_type::kContractRenewalRequested) {
    if (!live) return Ended(base, *record, contract_id);
    auto o = ContractOutcome<ContractRenewed>(base, *record);
    o.expires_at_ms = std::max(record->contract_expires_at_ms, r.time_ms + policy_.contract_ttl_ms);
    return o;
  }
  const bool terminate = kind == event_type::kContractTerminationRequested;
  const char* ended_as = terminate ? rs::kTerminated : rs::kRevoked;
  if (!live && record->state != ended_as) return Ended(base, *record, contract_id);
  base.repeat = !live;  // terminated (revoked) again: the same answer
  if (terminate) return ContractOutcome<ContractTerminated>(base, *record);
  auto o = ContractOutcome<ContractRevoked>(base, *record);
  o.reason = reason;
  return o;
}

}  // namespace dcm
