// Time travel (SPEC §3.4 `as_of`): the state of some entities at a past time, folded again from
// their events in the audit index by the same projections that serve live reads, into a fresh
// in-memory store. Which projections fold again is the catalog's `as_of` entries
// (projections/projection_catalog.h), each fed the events of its topics. Reads then use the
// ordinary views over that store, so a past answer is rendered exactly like a live one.
//
// Cost (docs/architecture.md §9): one entity's state at T costs O(h log n), h = that entity's
// events up to T (probes included), n = the index size: a range scan of the entity index and one
// fold per event, no write to the live store. GET /providers?as_of folds every provider's events
// up to T: O(E_T). Nothing is cached; a snapshot per entity every K events would bound h by K.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "projections/audit_projection.h"
#include "projections/health_projection.h"
#include "projections/instance_projection.h"
#include "projections/projection_catalog.h"
#include "projections/registry_projection.h"
#include "src/common/clock.h"
#include "src/common/config.h"

namespace dcm {

class PastState {
 public:
  // Providers `ids` (empty: every provider the index knows) at `as_of_ms`. A fold still running
  // at `deadline` gives up: kTimeout (checked every kDeadlineCheckEvents events and per entity).
  static Result<std::unique_ptr<PastState>> OfProviders(const AuditView& audit,
                                                        const Topics& topics,
                                                        const std::vector<std::string>& ids,
                                                        int64_t as_of_ms, Deadline deadline = {});
  // One catalog item instance (its root's facts, and the SP status of its resource).
  static Result<std::unique_ptr<PastState>> OfCatalogItemInstance(const AuditView& audit,
                                                                  const Topics& topics,
                                                                  const std::string& id,
                                                                  int64_t as_of_ms,
                                                                  Deadline deadline = {});
  static constexpr int64_t kDeadlineCheckEvents = 256;

  const RegistryView& registry() const { return registry_; }
  const HealthView& health() const { return health_; }
  const InstanceView& instances() const { return instances_; }
  // Events folded (the h or E_T above), for logs and benchmarks.
  int64_t folded() const { return folded_; }

 private:
  PastState(std::unique_ptr<Store> store, const Topics& topics, Deadline deadline);
  Status FoldEntity(const AuditView& audit, const std::string& entity, int64_t as_of_ms,
                    StoreBatch& batch);

  std::unique_ptr<Store> store_;
  ProjectionSet projections_;                                 // the catalog's as_of entries
  std::map<std::string, std::vector<Projection*>> by_topic_;  // who folds each topic
  RegistryView registry_;
  HealthView health_;
  InstanceView instances_;
  int64_t folded_ = 0;
  Deadline deadline_;
};

}  // namespace dcm
