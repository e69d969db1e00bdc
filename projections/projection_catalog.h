// ProjectionCatalog: every read model DCM folds, in one table. Each entry says what the
// projection is called, which keys it owns, which topics feed it, what a fold costs and how to
// build it. Its users:
//
//   dcm serve (src/cli/serve_parts.cc)      one ProjectionRunner per entry, live
//   dcm projections rebuild|verify           every entry folded again into a side store
//     (consumers/rebuild.h)                  (fold_cost balances the fold threads)
//   /admin/projections (src/cli/serve_ops.cc) each entry's prefix digested, with its runner's lag
//   time travel (projections/time_travel.h)  the `as_of` entries folded from the audit index
//
// Adding a projection means adding one entry to ProjectionCatalog() (projection_catalog.cc);
// docs/architecture.md "Adding a projection" walks through one.
//
// Thread-safety: the catalog is plain data; a built Projection is used from one thread at a time
// (projections/projection.h).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "projections/outcome_waiters.h"
#include "projections/projection.h"
#include "projections/store.h"
#include "src/common/clock.h"
#include "src/common/config.h"
#include "src/common/metrics.h"

namespace dcm {

// What a factory may build a projection with. Null hooks are not wired: a rebuild and time
// travel fold without waiters (nobody waits for their outcomes) and time travel without metrics.
struct ProjectionDeps {
  Store* store = nullptr;
  const Topics* topics = nullptr;
  Metrics* metrics = nullptr;
  OutcomeWaiters* provider_waiters = nullptr;    // HTTP provider writes waiting for an outcome
  OutcomeWaiters* instance_waiters = nullptr;    // HTTP instance writes waiting for an outcome
  OutcomeWaiters* federation_waiters = nullptr;  // peer API calls waiting for an outcome
  // Probe retention (HEALTH_EVENTS_RETENTION): the live audit index sweeps expired probes with
  // this clock. Null clock (rebuilds, time travel): nothing is swept.
  std::chrono::milliseconds health_events_retention{0};
  const Clock* clock = nullptr;
};

struct ProjectionEntry {
  // Projection::Name(): the namespace of its offsets in the Store, `--projection NAME`, the
  // `name` in /admin/projections and the readiness check `projection:NAME`. Stable: renaming it
  // makes every store fold the projection again from offset 0.
  std::string name;
  // Every key the projection writes starts with this (digests, `dcm projections verify`).
  std::string prefix;
  // The topics it folds, in the order its runner subscribes them.
  std::vector<std::string> topics;
  // CPU per event relative to the audit index (~3 µs on the reference machine), measured with
  // `rebuild_bench rebuild --only NAME` (BENCHMARKS.md "Rebuild"). Only balances the rebuild's
  // fold threads.
  double fold_cost = 1;
  // Folded again for `as_of` reads (time travel): state that a past answer renders. Indexes over
  // the log itself (the audit index) are not.
  bool as_of = false;
  // Folded in the background: no write's answer waits for it (only consistent reads do, SPEC
  // §7), so `dcm serve` runs its runner at a lower CPU priority (--background-fold-nice). Under
  // load it yields the cores to the write path and folds in larger batches; idle, it runs at once.
  bool background = false;
  // Against the mock, whether its runner takes what this process produced from the delivery
  // reports (KafkaOptions::take_deliveries). Off for a projection another thread of this process
  // folds the same records into at that moment (the registry: the registrar's own outcomes), which
  // would contend with it for the projection's lock.
  bool take_deliveries = true;
  std::function<std::unique_ptr<Projection>(const ProjectionDeps&)> make;
  // Entries that follow events with a retention (probes, HEALTH_EVENTS_RETENTION): true when the
  // entry (key, value) depends on events older than `cutoff_ms`, which a rebuild from what Kafka
  // still holds may lack. `dcm projections verify` leaves such entries out on both sides. Null:
  // every entry is compared.
  std::function<bool(std::string_view key, std::string_view value, int64_t cutoff_ms)> expires;

  // The `topic` of /admin/projections: the one topic, or "*" for a projection of several.
  std::string TopicLabel() const { return topics.size() == 1 ? topics.front() : "*"; }
};

// The catalog with this deployment's topic names. The order is the order of runners in
// `dcm serve`, of rows in /admin/projections and of lines in `dcm projections verify`.
std::vector<ProjectionEntry> ProjectionCatalog(const Topics& topics);

// Projections built from catalog entries, in the entries' order.
struct ProjectionSet {
  std::vector<ProjectionEntry> entries;
  std::vector<std::unique_ptr<Projection>> projections;

  // The projection called `name` as a T (null: none, or not a T): for the hooks one user wires
  // (serve's change listeners).
  template <class T>
  T* Find(std::string_view name) const {
    for (size_t i = 0; i < entries.size(); ++i) {
      if (entries[i].name == name) return dynamic_cast<T*>(projections[i].get());
    }
    return nullptr;
  }
};
ProjectionSet BuildProjections(std::vector<ProjectionEntry> entries, const ProjectionDeps& deps);

}  // namespace dcm
