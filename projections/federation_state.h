// FederationState: the provider enclave's reservations, holds and contracts (SPEC §10), as a
// fold of the dcm.federation outcomes (events/federation_events.h) into the Store under one root.
// Two users keep one each:
//   - the FederationDecider (root "fdec/"), whose state the worker commits with each decision;
//   - the FederationProjection (root "fed/"), folded by a runner on every instance: the read model
//     of the peer API and of the flavour derivation.
// Both fold the same outcomes with the same Apply, so they hold byte-identical keys under their
// roots once they have seen the same outcomes.
//
// Keys under <root>:
//   n/<reservation_id>          -> the reservation's record (JSON, below): every reservation ever
//                                  decided, held or not, so a repeated request gets the same
//                                  answer (kept forever, like the registrar's remembered ids)
//   h/<reservation_id>          -> the record, while the hold is live
//   c/<contract_id>             -> the record, while the contract is live
//   m/<contract_id>             -> reservation_id (every contract ever signed or relayed)
//   k/<consumer>/<contract_id>  -> "" while the contract is live (contracts per consumer)
//   u/<flavor_id>               -> "<holds> <contracts>" live on the flavour (absent: 0 0)
//   x/<expires_at 16 hex>/h|c/<id> -> "" the expiry index of live holds and contracts
//   q/<request_id>              -> the outcome type it got ("" for a moot sweep): decided once
// A relayed reservation (a supernode's) has its n/ record and m/ entry only: it uses no capacity
// here and has no lease (no h/, c/, k/, u/, x/).
//
// Apply is idempotent: a record takes an outcome only if its `seq` is newer than the record's
// (dcm.federation is keyed by reservation id, so a reservation's outcomes arrive in order; a
// duplicate is older or equal), and `repeat` outcomes change nothing but q/. Only point reads
// (Get) are used while folding, so it works on a bulk-load store (rebuilds).
//
// Not thread-safe for writers (one folding thread per root); the read methods may be called
// concurrently with it (they read the Store).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "events/federation_events.h"
#include "projections/store.h"

namespace dcm {

// Where a reservation is in its life.
namespace reservation_state {
inline constexpr char kHeld[] = "held";
inline constexpr char kRefused[] = "refused";
inline constexpr char kHoldExpired[] = "hold_expired";
inline constexpr char kReleased[] = "released";
inline constexpr char kSigned[] = "signed";  // a live contract
inline constexpr char kContractExpired[] = "contract_expired";
inline constexpr char kTerminated[] = "terminated";
inline constexpr char kRevoked[] = "revoked";
inline constexpr char kRelayed[] = "relayed";  // forwarded to a next hop (a supernode's)
}  // namespace reservation_state

struct ReservationRecord {
  std::string reservation_id;
  std::string state;  // reservation_state::k*
  int64_t seq = 0;    // the decision that last changed it
  std::string flavor_id;
  std::string consumer;
  std::string spec;  // JSON object text
  int64_t capacity = 0;
  int64_t hold_expires_at_ms = 0;
  // refused: the first answer, given again to a repeat.
  std::string reason;
  int status = 0;
  // signed and after:
  std::string contract_id;
  std::string remote_instance_id;
  int64_t contract_expires_at_ms = 0;
  // relayed: the peer it was forwarded to and the flavour's owner (contract_id is the owner's).
  std::string next_hop;
  std::string owner;
  bool operator==(const ReservationRecord&) const = default;

  bool HoldLive() const { return state == reservation_state::kHeld; }
  bool ContractLive() const { return state == reservation_state::kSigned; }
  bool Relayed() const { return state == reservation_state::kRelayed; }
};

std::string EncodeReservationRecord(const ReservationRecord& record);
Result<ReservationRecord> DecodeReservationRecord(std::string_view json);

// Live holds and contracts of one flavour: what the flavour derivation subtracts.
struct FlavorUsage {
  int64_t holds = 0;
  int64_t contracts = 0;
  int64_t Total() const { return holds + contracts; }
  bool operator==(const FlavorUsage&) const = default;
};

// A live hold or contract that is due at `expires_at_ms` (the sweeper's input).
struct DueLease {
  bool contract = false;
  std::string id;  // reservation id (hold) or contract id
  int64_t expires_at_ms = 0;
  bool operator==(const DueLease&) const = default;
};

class FederationState {
 public:
  FederationState(Store* store, std::string root) : store_(store), root_(std::move(root)) {}

  const std::string& root() const { return root_; }

  // Point reads (seeing `batch`'s pending writes when given).
  Result<std::optional<ReservationRecord>> Reservation(const std::string& reservation_id,
                                                       const StoreBatch* batch = nullptr) const;
  Result<std::optional<std::string>> ReservationOfContract(const std::string& contract_id,
                                                           const StoreBatch* batch = nullptr) const;
  Result<FlavorUsage> Usage(const std::string& flavor_id, const StoreBatch* batch = nullptr) const;
  // The outcome type `request_id` got ("" for a request decided without one), if decided.
  Result<std::optional<std::string>> Decided(const std::string& request_id,
                                             const StoreBatch* batch = nullptr) const;

  // Remembers `request_id` as decided with `outcome_type`.
  void Remember(const std::string& request_id, std::string_view outcome_type, StoreBatch& batch);
  // Folds `outcome` (and remembers its request). Returns whether it changed a record.
  Result<bool> Apply(const FederationOutcome& outcome, StoreBatch& batch);

  // Scans (committed state only).
  Status LiveHolds(const std::function<bool(const ReservationRecord&)>& fn) const;
  Status LiveContracts(const std::function<bool(const ReservationRecord&)>& fn) const;
  // The live contracts of `consumer`, in contract id order.
  Result<std::vector<ReservationRecord>> ContractsOf(const std::string& consumer) const;
  // Live holds and contracts whose lease ends at or before `now_ms`, soonest first, at most
  // `limit`.
  Result<std::vector<DueLease>> Due(int64_t now_ms, size_t limit) const;

 private:
  std::string Key(std::string_view family, std::string_view id) const;
  std::string ExpiryKey(int64_t expires_at_ms, char kind, std::string_view id) const;
  Status AddUsage(const std::string& flavor_id, int64_t holds, int64_t contracts,
                  StoreBatch& batch);
  void PutRecord(const ReservationRecord& record, StoreBatch& batch);
  Status StartHold(ReservationRecord& record, StoreBatch& batch);
  Status EndHold(ReservationRecord& record, StoreBatch& batch);
  Status StartContract(ReservationRecord& record, StoreBatch& batch);
  Status EndContract(ReservationRecord& record, StoreBatch& batch);
  Result<bool> ApplyChange(const FederationOutcome& outcome,
                           std::optional<ReservationRecord> record, StoreBatch& batch);
  // The record a held, refused or relayed new reservation starts (false: the outcome starts none).
  Result<bool> NewRecord(const FederationOutcome& outcome, ReservationRecord& r, StoreBatch& batch);
  // Moves an existing record on (false: the outcome does not apply to it as it is).
  Result<bool> ChangeRecord(const FederationOutcome& outcome, ReservationRecord& r,
                            StoreBatch& batch);

  Store* store_;
  std::string root_;
};

}  // namespace dcm
