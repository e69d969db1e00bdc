// The fold of one instance fact (events/instance_events.h) into the instance projection's
// records (projections/instance_records.h). The InstanceProjection folds every fact it consumes;
// the instance worker folds its own acknowledged facts into an overlay with the same function
// (projections/instance_decider.h), so both hold the same state once both have seen a fact.
//
// Every step is idempotent (a duplicate leaves the state as it is: a live count changes only
// when an instance's live flag flips).
#pragma once

#include "events/instance_facts.h"
#include "projections/decoded_cache.h"
#include "projections/instance_projection.h"
#include "projections/store.h"

namespace dcm {

// Folds `fact` into `batch`, reading the state through `batch` then `store`. `sagas` caches the
// decoded saga records (one per fold user). kCorruption: a fact that is not foldable (poison).
// One Apply per alternative of InstanceFact, dispatched by std::visit (instance_fold.cc).
Status FoldInstanceFact(const Store* store, StoreBatch& batch, DecodedCache<Saga>& sagas,
                        const InstanceFact& fact);

}  // namespace dcm
