// FederationDecider: the provider enclave's capacity, decided in total order (SPEC §10, issue
// #17). One FederationWorker in the cluster feeds it the requests of the one-partition topic
// dcm.federation-requests, in order, so two buyers can never hold the same last slot.
//
// Pure: the outcome depends only on the state (a FederationState under "fdec/"), the request
// (its decision time is the request event's `time`, never a clock) and the flavour's capacity the
// caller passes in. Deciding stages the outcome's fold (FederationState::Apply) and the request's
// id, so the decider's state is exactly the fold of its outcomes: a worker that takes the
// partition over folds the outcomes others produced (Fold) and reaches the same state.
//
// Rules (docs/federation.md "Reservations and contracts (provider side)"):
//   reserve (reservation.received), a new reservation id:
//     unknown flavour (capacity nullopt) → refused unknown_flavor 404;
//     live holds + live contracts of the flavour >= its capacity → refused no_capacity 409;
//     else held until time + min(ttl, max_hold_ttl): the hold counts against the flavour at once.
//   reserve, a reservation id seen before: another consumer or flavour, or relayed → refused
//     conflict 409; else the first answer again (`repeat`), except a hold that has ended without
//     a contract (expired, released → refused 410).
//   relay (reservation.relay_requested, a supernode's), a new reservation id → relayed to
//     next_hop with contract_id = ContractIdFor(owner, reservation id) (the id the owner will
//     sign it under); no capacity is consulted or used, no lease starts. Seen before as relayed
//     for the same consumer and flavour → the first answer again (its next_hop, owner, contract;
//     `repeat`); any other record (another consumer or flavour, or decided here) → refused
//     conflict 409. Confirm, release and contract calls on a relayed reservation → conflict 409
//     (the supernode forwards those; its decider only remembers the relay).
//   confirm: unknown → 404; another consumer's → 403; a live hold past its expiry → the hold
//     expires now (reservation.expired, answered 410); a live hold → contract.signed with
//     contract_id = UUIDv5(ns, "contract:" + enclave + "/" + reservation id) and
//     remote_instance_id = UUIDv5(ns, "instance:" + enclave + "/" + reservation id), expiring at
//     time + contract_ttl; a live contract → the same contract again (`repeat`); else 410/409.
//   release: a live hold → released; released again → `repeat`; else 404/403/409/410.
//   renew: a live contract → renewed to time + contract_ttl (never shortened); past its expiry →
//     contract.expired now (answered 410); an ended one → 410.
//   terminate: a live contract → terminated (capacity freed); terminated again → `repeat`.
//   revoke (this enclave's admin, no consumer check): a live contract → revoked.
//   expiry_due (the sweeper's): the hold or contract still live with that very expires_at and
//     the request's time at or past it → reservation.expired / contract.expired; else moot: no
//     outcome (a renewal or a confirm was decided first: whichever is decided first wins).
//
// Not thread-safe: one worker thread owns it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "events/federation_events.h"
#include "projections/federation_state.h"
#include "projections/store.h"

namespace dcm {

struct FederationPolicy {
  std::string enclave_id;  // this (provider) enclave: part of every contract and instance id
  int64_t max_hold_ttl_ms = 5 * 60 * 1000;   // a hold asks for its ttl; at most this
  int64_t contract_ttl_ms = 10 * 60 * 1000;  // CONTRACT_TTL: a signed or renewed lease
};

// The flavour derivation's seam: instances of `flavor_id` available before federation holds and
// contracts (Ready providers' max_instances minus their local, non-federated instances), or
// nullopt for a flavour this enclave does not offer. Consulted for new reservations only.
using FlavorCapacity = std::function<std::optional<int64_t>(const std::string& flavor_id)>;

// The namespace of federation contract and instance ids (UUIDv5 of "dcm-federation" in the URL
// namespace).
std::string FederationIdNamespace();
std::string ContractIdFor(const std::string& enclave_id, const std::string& reservation_id);
std::string RemoteInstanceIdFor(const std::string& enclave_id, const std::string& reservation_id);

class FederationDecider {
 public:
  static constexpr char kName[] = "federation-decider";  // its offsets' namespace
  static constexpr char kRoot[] = "fdec/";

  FederationDecider(Store* store, FederationPolicy policy)
      : state_(store, kRoot), policy_(std::move(policy)) {}

  const FederationState& state() const { return state_; }
  const FederationPolicy& policy() const { return policy_; }

  Result<bool> AlreadyDecided(const std::string& request_id, const StoreBatch& batch) const;

  // Decides `request` as decision number `seq` (its offset) and stages the new state in `batch`.
  // nullopt: a moot expiry (remembered, no outcome).
  Result<std::optional<FederationOutcome>> Decide(const FederationRequest& request, int64_t seq,
                                                  const FlavorCapacity& capacity,
                                                  StoreBatch& batch);

  // A refusal (400) for a request whose data failed validation.
  FederationOutcome RefuseInvalid(const CloudEvent& request, const Error& error, int64_t seq,
                                  StoreBatch& batch);

  // Stages an outcome another worker decided, unless its request was decided here already.
  Result<bool> Fold(const FederationOutcome& outcome, StoreBatch& batch);

 private:
  using Outcome = Result<std::optional<FederationOutcome>>;
  Outcome Reserve(const ReservationReceived& r, int64_t seq, const FlavorCapacity& capacity,
                  const StoreBatch& batch);
  Outcome Confirm(const ReservationConfirmRequested& r, int64_t seq, const StoreBatch& batch);
  Outcome Release(const ReservationReleaseRequested& r, int64_t seq, const StoreBatch& batch);
  Outcome Relay(const ReservationRelayRequested& r, int64_t seq, const StoreBatch& batch);
  Outcome ExpireHold(const ReservationExpiryDue& r, int64_t seq, const StoreBatch& batch);
  Outcome ExpireContract(const ContractExpiryDue& r, int64_t seq, const StoreBatch& batch);
  // renew, terminate and revoke (`consumer` empty: no consumer check; `reason`: revoke's).
  Outcome OnContract(const FederationEnvelope& r, const char* type, const std::string& contract_id,
                     const std::string& consumer, const std::string& reason, int64_t seq,
                     const StoreBatch& batch);

  FederationState state_;
  FederationPolicy policy_;
};

}  // namespace dcm
