#include "projections/federation_capacity.h"

#include <algorithm>
#include <limits>

#include "projections/federation_projection.h"

namespace dcm {

Result<int64_t> RunningContracts(const FederationState& state, const InstanceView& instances,
                                 const std::string& flavor_id) {
  int64_t running = 0;
  Status status = OkStatus();
  RETURN_IF_ERROR(state.LiveContracts([&](const ReservationRecord& r) {
    if (r.flavor_id != flavor_id) return true;
    auto instance = instances.GetInstance(r.remote_instance_id);
    if (!instance) {
      status = tl::unexpected(instance.error());
      return false;
    }
    if (*instance && !(*instance)->deleted) ++running;
    return true;
  }));
  RETURN_IF_ERROR(status);
  return running;
}

FederationHolds::FederationHolds(Store* store, const InstanceView* instances)
    : state_(store, FederationProjection::kPrefix), instances_(instances) {}

HeldAmount FederationHolds::ActiveHolds(const std::string& flavor_id) const {
  // A read error must not offer capacity that is taken: count the flavour as full.
  constexpr int64_t kAll = std::numeric_limits<int64_t>::max() / 2;
  auto usage = state_.Usage(flavor_id);
  if (!usage) return {.instances = kAll};
  if (usage->contracts == 0) return {.instances = usage->holds};
  auto running = RunningContracts(state_, *instances_, flavor_id);
  if (!running) return {.instances = usage->Total()};
  return {.instances = usage->holds + std::max<int64_t>(0, usage->contracts - *running)};
}

FlavorCapacity FlavorCapacityFrom(FlavorSources sources, FederationState state,
                                  const Clock* clock) {
  return [sources = std::move(sources), state = std::move(state),
          clock](const std::string& flavor_id) -> std::optional<int64_t> {
    auto supply = CollectFlavorSupply(*sources.registry, *sources.health, *sources.instances,
                                      sources.options.export_service_types);
    if (!supply) return std::nullopt;  // unknown now: the decider refuses, the peer asks again
    for (const Flavor& f : DeriveFlavors(*supply, sources.options, nullptr, clock->NowMillis())) {
      if (f.flavor_id != flavor_id) continue;
      if (!f.instances_available) return std::numeric_limits<int64_t>::max();
      auto running = RunningContracts(state, *sources.instances, flavor_id);
      if (!running) return std::nullopt;
      return *f.instances_available + *running;
    }
    return std::nullopt;
  };
}

}  // namespace dcm
