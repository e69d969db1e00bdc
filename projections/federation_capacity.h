// What the provider enclave's flavours have left (SPEC §10): the two seams between the flavour
// derivation (flavors.h) and the reservation decider's state (federation_state.h).
//
//   FederationHolds (HeldCapacity)  GET /flavors subtracts, per flavour, the live holds and the
//                                   live contracts whose instance is not running yet (a running
//                                   one is already a live instance of its provider).
//   FlavorCapacityFrom              the decider's FlavorCapacity: the flavour's instances before
//                                   holds and contracts, i.e. Ready providers' max_instances minus
//                                   their live instances that no contract holds.
//
// So a contract's slot is counted once: as a contract while its instance is being created, and
// still as a contract (not as a local instance) once it runs. Thread-safe (reads the Store).
#pragma once

#include <cstdint>
#include <string>

#include "projections/federation_decider.h"
#include "projections/federation_state.h"
#include "projections/flavors.h"
#include "src/common/clock.h"

namespace dcm {

// What the flavour derivation reads.
struct FlavorSources {
  const RegistryView* registry = nullptr;
  const HealthView* health = nullptr;
  const InstanceView* instances = nullptr;
  FlavorOptions options;
};

// The live contracts of `flavor_id` in `state` whose instance is live on this enclave.
Result<int64_t> RunningContracts(const FederationState& state, const InstanceView& instances,
                                 const std::string& flavor_id);

class FederationHolds final : public HeldCapacity {
 public:
  // `state`: the `federation` projection's (fed/), read from HTTP threads.
  FederationHolds(Store* store, const InstanceView* instances);
  HeldAmount ActiveHolds(const std::string& flavor_id) const override;

 private:
  FederationState state_;
  const InstanceView* instances_;
};

// The decider's capacity (FederationWorkerOptions::capacity): nullopt for a flavour this enclave
// does not offer now (no Ready provider of its type and region), INT64_MAX for an unlimited one.
// `state`: the decider's own (FederationDecider::kRoot), read on its thread.
FlavorCapacity FlavorCapacityFrom(FlavorSources sources, FederationState state, const Clock* clock);

}  // namespace dcm
