// Rebuilder: folds projections again from the head of their topics into a Store, the engine of
// `dcm projections rebuild|verify` (SPEC §3.4, §5.4: a rebuild from offset 0 is byte-identical).
//
//   watermarks of every partition ─▶ assign all partitions at the low watermark ─▶
//   consume thread: batch ─▶ decode each CloudEvent once ─▶ queue (bounded) ─▶
//   fold threads (one per group of projections; group 0 on the caller's thread): Apply to every
//   projection of the group reading the topic ─▶ offsets into the same StoreBatch ─▶
//   Store::Write ─▶ AfterCommit ─▶ ... until every partition reached its target
//
// Targets are per projection, topic and partition (exclusive: the next offset to read), by
// default the high watermarks at start. `dcm projections verify` passes the live store's stored
// offsets, so the rebuilt state is compared at the live position even while `dcm serve` goes on.
// The batch layout follows ProjectionRunner (consumers/projection_runner.h): one StoreBatch per
// consume batch, offsets under each projection's name, poison events (undecodable, or Apply
// returning kCorruption) skipped and counted — the live runner dead-letters them, a rebuild only
// counts them. A partition whose low watermark is above 0 lost its head to retention: the rebuild
// cannot reproduce the live state, and the result says so.
//
// Into a fresh store opened with StoreOptions{.bulk_load = true} this is the fast path of
// ../shared/KAFKA-NOTES.md ("Rebuild fast"); BENCHMARKS.md "Rebuild (issue #5)" has the figures.
// Projections of different groups Apply concurrently; each projection is called from one thread.
// Thread-safety: one Run at a time per Rebuilder; the progress callback runs on the caller's
// thread.
//
// Files: rebuild_plan.h (targets and fold groups), rebuild_consume.h (the consume thread),
// rebuild_queue.h (the hand-over), rebuild_fold.h (the fold threads), this one (the whole run,
// and comparing a rebuilt store with the live one).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "consumers/kafka.h"
#include "projections/projection.h"
#include "projections/projection_catalog.h"
#include "projections/store.h"
#include "src/common/config.h"
#include "src/common/metrics.h"
#include "src/common/result.h"

namespace dcm {

// topic -> partition -> offset.
using TopicOffsets = std::map<std::string, std::map<int32_t, int64_t>>;

// One projection to rebuild and the topics it folds.
struct RebuildSource {
  Projection* projection = nullptr;
  std::vector<std::string> topics;
  // Next offset to stop at, per topic and partition (exclusive). nullopt: the high watermarks at
  // start. Given: exactly these; a partition missing here is not read at all (the live
  // projection had consumed nothing from it).
  std::optional<TopicOffsets> targets;
  // CPU per event relative to the other sources (ProjectionEntry::fold_cost): the fold threads
  // get groups of about equal events × fold_cost.
  double fold_cost = 1;
};

struct RebuildProgress {
  int64_t done = 0;   // messages folded (over every partition in range)
  int64_t total = 0;  // messages between the low watermarks and the targets
  double events_per_s = 0;
  double eta_s = 0;  // 0 when unknown or done
};

struct RebuildOptions {
  KafkaOptions kafka;
  // Messages per consume batch and per StoreBatch. Large batches amortise the RocksDB write and
  // the per-batch bookkeeping; 10,000 × ~450 B keeps a batch near 5 MB.
  size_t batch_size = 10000;
  // Decoded batches waiting for each fold thread: the consumer runs ahead by this much.
  size_t queue_depth = 4;
  // Fold threads: the projections are split into this many groups of about equal work (events
  // × RebuildSource::fold_cost; for 2: the audit index and the registry against health and
  // instances); each group folds every decoded batch on its own thread into its own StoreBatch.
  // 2 uses both cores of the reference machine (BENCHMARKS.md "Rebuild").
  size_t fold_threads = 2;
  // Metadata and watermark requests, each (Kafka unreachable fails within about this).
  int metadata_timeout_ms = 10000;
  // No message for this long while partitions are short of their targets: fail (never hang).
  int stall_timeout_ms = 30000;
  // Topics with a retention by design (the probes topic): a head dropped by it is expected, so
  // it is not warned about (`dcm projections verify` compares only what is younger than its
  // cutoff).
  std::vector<std::string> windowed_topics;
  // Called about every progress_interval_ms and once at the end.
  std::function<void(const RebuildProgress&)> on_progress;
  int progress_interval_ms = 250;
};

struct ProjectionRebuildStats {
  std::string name;
  int64_t events = 0;    // applied
  int64_t poison = 0;    // skipped: undecodable, or Apply said kCorruption
  TopicOffsets reached;  // next offset per topic and partition, as written to the store
};

struct RebuildResult {
  std::vector<ProjectionRebuildStats> projections;  // in the order of the sources
  int64_t messages = 0;                             // consumed within the targets
  double seconds = 0;
  // Partitions whose head was dropped by retention (low watermark > 0), and targets beyond the
  // end of the log: the rebuilt state cannot equal the live one.
  std::vector<std::string> warnings;
};

class Rebuilder {
 public:
  Rebuilder(RebuildOptions options, Store* store);

  // Folds every source into the store. Errors: Kafka unreachable (kUnavailable / kTimeout), no
  // progress within stall_timeout_ms (kTimeout), a projection failing with anything but
  // kCorruption, a store write failing.
  Result<RebuildResult> Run(const std::vector<RebuildSource>& sources);

 private:
  RebuildOptions options_;
  Store* store_;
};

// Every projection of the catalog (projections/projection_catalog.h) built on `store` with no
// waiters and no listeners: what a rebuild folds (nobody waits for its outcomes).
ProjectionSet BuildProjectionSet(Store* store, const Topics& topics, Metrics* metrics);

// Projection i of `set` as a rebuild source up to the end of its topics (no targets).
RebuildSource SourceOf(const ProjectionSet& set, size_t i);

// The offsets `entry`'s projection stored in `live`, per topic: the rebuild targets that put a
// rebuild at the live store's log position.
Result<TopicOffsets> LiveTargets(const Store& live, const ProjectionEntry& entry);

// One projection, live against rebuilt: digests of its prefix and, when they differ, the first
// differing key.
struct ProjectionComparison {
  std::string name;
  std::string live_digest;
  std::string rebuilt_digest;
  std::optional<KeyDifference> first_difference;  // set when the digests differ
  bool match() const { return live_digest == rebuilt_digest; }
};
// `cutoff_ms` > 0: entries that expire before it (ProjectionEntry::expires, probe retention) are
// left out on both sides.
Result<ProjectionComparison> CompareProjection(const Store& live, const Store& rebuilt,
                                               const ProjectionEntry& entry, int64_t cutoff_ms = 0);

}  // namespace dcm
