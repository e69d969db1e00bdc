// InstanceDecider: the instance worker's decision state and rules (SPEC §3.3, seed
// rehydration-flow). The worker that owns a root's partition of dcm.instance-requests asks it
// what to do with each request; the sagas ask it where to place and read the entities they act
// on through it.
//
// State: the local instance projection (authoritative for the owned partitions once it has
// caught up at takeover: the previous owner flushed before giving them up) plus an overlay of
// this worker's own facts, folded in as Kafka acknowledges them, with the projection's own fold
// (projections/instance_fold.h). Only the owner emits facts for its roots, so base + overlay is
// the state as of this worker's last acknowledged fact: nothing waits for, or polls, the
// projection. Compact drops the facts the projection has applied (AppliedOffsets) and folds the
// others again, so the overlay holds about one fetch wait's worth of facts.
//
//   Kafka ack of fact F at (partition, offset) ─▶ Apply(F) ─▶ overlay ─┐
//   projection runner applies F ─▶ AppliedOffsets ─▶ Compact() drops ◀┘ (once applied)
//   request ─▶ Decide ─▶ duplicate | resume | operation_started | operation_failed
//
// Rules (in order):
//   - a request whose outcome is recorded is a duplicate (skipped); one whose saga is in
//     progress is resumed (never started twice); a copy of one started earlier in the same
//     batch is a duplicate;
//   - a root with another operation in progress: 409 (retry when it has finished);
//   - an unknown operation: 400;
//   - per operation: an entity to act on that does not exist: 404; an id to create that is
//     taken (by a resource or an instance; a catalog item instance id by another one): 409; a
//     rehydration that names the resource it replaces, when another one replaced it since
//     (concurrent rehydrations of one generation: exactly one proceeds): 409; a retry of a
//     cleanup record that is not FAILED: 409.
// DecidePlacement maps the Policy Manager's verdict (called outside, by the saga) and the
// built-in choice to a provider or a failure (SPEC §3.2/§3.3 statuses).
//
// Thread-safety: Apply takes the state exclusively; Compact rebuilds the overlay without it and
// takes it only to swap the rebuilt one in; Decide and the reads share it.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "events/instance_events.h"
#include "events/instance_facts.h"
#include "projections/applied_offsets.h"
#include "projections/decoded_cache.h"
#include "projections/instance_projection.h"
#include "projections/placement_policy.h"
#include "projections/store.h"
#include "src/common/placement_ports.h"

namespace dcm {

// Why an operation ends in operation_failed: the HTTP status the caller gets, the machine
// reason and the message.
struct OperationFailure {
  int http_status = 0;
  std::string reason;
  std::string error;
};

// The operation_failed fact that ends `request`'s operation (`request`: its operation_requested
// or operation_started).
OperationFailed FailureFact(const InstanceEvent& request, const OperationFailure& failure);

struct InstanceDecision {
  enum class Kind {
    kDuplicate,  // decided before: nothing to do
    kResume,     // its saga is in progress: run it (unless it runs already)
    kStarted,    // `fact` is operation_started: produce it, then run `saga`
    kFailed,     // `fact` is operation_failed: produce it
  };
  Kind kind = Kind::kDuplicate;
  InstanceEvent fact = {};
  Saga saga = {};
};

// The entity rules alone (no duplicate or busy-root check) for `request` against `state`:
// kFailed with the operation_failed the decider would produce, or kStarted with the
// operation_started it would produce (what the state fills in: a rehydration's old resource, a
// catalog delete's resource). The HTTP handlers call it for an early answer with the same
// status; the decider calls it for the final one.
// An error when the state could not be read (nothing is decided then).
Result<InstanceDecision> CheckOperation(const InstanceView& state, const InstanceEvent& request);

// root -> request_id of the operations started earlier in the batch being decided (their
// operation_started is produced but not acknowledged yet, so not in the state).
using StartedInBatch = std::map<std::string, std::string>;

// The built-in or the Policy Manager's placement, or why there is none.
struct PlacementDecision {
  std::optional<OperationFailure> failure = std::nullopt;
  const PlacementCandidate* chosen = nullptr;  // into the candidates, when no failure
  std::string spec;                            // the evaluated spec to send to the SP
  std::string policy;                          // "builtin" | "policy_manager"
};

// `intent`: the request's spec. `verdict`: the Policy Manager's answer (nullptr: no Policy
// Manager, the built-in policy decides). `candidates`: every registered provider with its
// effective health and load.
PlacementDecision DecidePlacement(const std::string& intent, const Result<PolicyDecision>* verdict,
                                  const std::vector<PlacementCandidate>& candidates);

// A service-type instance names its provider (`provider`: nullopt when none has that name): it
// must exist (422) and be Ready (503).
std::optional<OperationFailure> CheckNamedProvider(const std::string& name,
                                                   const std::optional<Provider>& provider,
                                                   HealthStatus health);

class InstanceDecider {
 public:
  // `store`: the instance projection's. `applied`: where its runner publishes what it applied
  // of `topic` (dcm.instances).
  InstanceDecider(const Store* store, const AppliedOffsets* applied, std::string topic);

  // `fact`, acknowledged by Kafka at `partition`/`offset` of dcm.instances: the state now
  // includes it. kInternal: a fact the fold refuses (a broken invariant of this worker).
  Status Apply(const InstanceFact& fact, int32_t partition, int64_t offset);

  // What to do with `request` (an operation_requested).
  Result<InstanceDecision> Decide(const InstanceEvent& request,
                                  const StartedInBatch& batch = {}) const;

  // Reads of the state (the sagas'): `read` gets a view whose point reads see the overlay.
  template <typename Read>
  auto With(Read&& read) const {
    std::shared_lock lock(mu_);
    return read(view_);
  }

  // Drops from the overlay the facts the projection has applied: when all of them are, when the
  // overlay holds 1,024 facts and at least half are, or (`force`) when any is. The rest are
  // folded again into a new overlay, built without the state lock. True if it is empty now.
  bool Compact(bool force = false);
  // Waits (until `deadline`, while `keep_waiting`) for the projection to apply every fact in
  // the overlay, then drops it. For a worker whose overlay grew past a bound.
  bool CompactBy(AppliedOffsets::Deadline deadline, const std::function<bool()>& keep_waiting);
  // Writes in the overlay (0 once compacted).
  size_t OverlaySize() const;

 private:
  struct OwnFact {
    int32_t partition;
    int64_t offset;
    InstanceFact fact;
  };

  // Folds `fact` into `overlay` over the store (Compact's rebuild); logs a fact it refuses.
  void Refold(StoreBatch& overlay, DecodedCache<Saga>& sagas, const InstanceFact& fact) const;

  const Store* store_;
  const AppliedOffsets* applied_;
  std::string topic_;
  std::mutex compact_mu_;  // one Compact at a time
  mutable std::shared_mutex mu_;
  StoreBatch overlay_;
  InstanceView view_;
  DecodedCache<Saga> sagas_;
  std::vector<OwnFact> facts_;  // folded into the overlay, in the order acknowledged
};

}  // namespace dcm
