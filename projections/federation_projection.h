// FederationProjection folds dcm.federation (the FederationWorker's outcomes) into the provider
// enclave's read model of reservations, holds and contracts (SPEC §10), under "fed/"
// (FederationState's layout: fed/h/ live holds, fed/c/ live contracts, ...). FederationView is
// its read-only query side: the seam the flavour derivation subtracts (Usage), the peer API's
// GET /contracts?consumer= (ContractsOf) and its waiters (OutcomeType).
//
// The fold is FederationState::Apply, the one the decider commits its own state with, so the
// projection and the decider agree key for key (under their roots). It is idempotent (records
// take only newer `seq`s; repeats change nothing) and reads by point lookups only, so a rebuild
// from offset 0 yields byte-identical state (SPEC §5.3, §5.4).
#pragma once

#include <string>
#include <vector>

#include "events/federation_events.h"
#include "projections/federation_state.h"
#include "projections/outcome_waiters.h"
#include "projections/projection.h"

namespace dcm {

class FederationProjection final : public Projection {
 public:
  static constexpr char kName[] = "federation";
  static constexpr char kPrefix[] = "fed/";

  // `waiters` (may be null): the peer API's calls waiting for their request's outcome.
  FederationProjection(Store* store, OutcomeWaiters* waiters, Metrics* metrics);

  std::string Name() const override { return kName; }
  Status Apply(const CloudEvent& event, const EventPosition& position, StoreBatch& batch) override;
  void AfterCommit(const std::vector<CloudEvent>& applied) override;
  void Abandoned() override;

 private:
  FederationState state_;
  OutcomeWaiters* waiters_;
  AppliedCounters applied_;
  std::vector<std::string> applied_request_ids_;  // of the batch in progress, in order
  std::vector<OutcomePosition> applied_at_;
};

// Thread-safe (reads the Store only).
class FederationView {
 public:
  explicit FederationView(Store* store) : state_(store, FederationProjection::kPrefix) {}

  Result<std::optional<ReservationRecord>> Reservation(const std::string& reservation_id) const;
  // The reservation record of `contract_id` (live or ended), if it was ever signed or relayed.
  Result<std::optional<ReservationRecord>> Contract(const std::string& contract_id) const;
  // The relayed reservation whose contract (the owner's) is `contract_id`; nullopt for an unknown
  // contract id or one this enclave signed itself.
  Result<std::optional<ReservationRecord>> RelayOfContract(const std::string& contract_id) const;
  // Live holds and contracts on `flavor_id`: what the flavour derivation subtracts.
  Result<FlavorUsage> Usage(const std::string& flavor_id) const;
  // Live holds (flavor_id empty: of every flavour), in reservation id order.
  Result<std::vector<ReservationRecord>> Holds(const std::string& flavor_id = "") const;
  // Live contracts (flavor_id empty: of every flavour), in contract id order.
  Result<std::vector<ReservationRecord>> Contracts(const std::string& flavor_id = "") const;
  // The live contracts of one consumer enclave (GET /contracts?consumer=).
  Result<std::vector<ReservationRecord>> ContractsOf(const std::string& consumer) const;
  // The outcome type applied for `request_id` ("" for a moot expiry), if any.
  Result<std::optional<std::string>> OutcomeType(const std::string& request_id) const;

 private:
  FederationState state_;
};

}  // namespace dcm
