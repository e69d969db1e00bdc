// The rebuild's fold groups (consumers/rebuild.h): each folds a subset of the projections from
// the shared decoded batches, on its own thread, into its own StoreBatch; one of them reports
// progress for all.
//
//   BatchQueue ─▶ Fold: Apply each event to every projection of the group reading its topic ─▶
//   offsets into the same StoreBatch ─▶ Store::Write ─▶ AfterCommit ─▶ next batch, until every
//   partition of the group reached its targets
//
// Thread-safety: a FoldLoop runs on one thread; groups share the Store (RocksDB takes concurrent
// writes; projections write disjoint prefixes) and the ProgressBoard (atomics).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "consumers/rebuild.h"
#include "consumers/rebuild_plan.h"
#include "consumers/rebuild_queue.h"

namespace dcm::rebuild_detail {

// Progress shared by the fold groups: each publishes how far it is; one of them reports.
struct ProgressBoard {
  explicit ProgressBoard(size_t groups) : done(groups), total(groups, 0) {}
  std::vector<std::atomic<int64_t>> done;
  std::vector<int64_t> total;
  int64_t messages = 0;  // of the whole rebuild
  Clock::time_point start = Clock::now();

  // The slowest group's share of the whole rebuild.
  RebuildProgress Snapshot() const;
};

// One fold group: a subset of the projections, folded on one thread with its own StoreBatch.
class FoldLoop {
 public:
  FoldLoop(const RebuildOptions& options, Store* store, const std::vector<RebuildSource>& sources,
           Plan plan, ProgressBoard* board, size_t group);

  // Folds until every partition of this group reached its targets. Closes `queue` on return, so
  // the consume thread stops feeding it.
  Status Run(BatchQueue& queue);

  // This group's projections' statistics (the others stay empty).
  const std::vector<ProjectionRebuildStats>& stats() const { return stats_; }

 private:
  Status Loop(BatchQueue& queue);
  std::string StallMessage() const;
  void Advance(int t, int32_t p, int64_t next);
  Status Fold(const DecodedBatch& decoded);
  Status FoldOne(const DecodedBatch::Entry& entry);

  const RebuildOptions& options_;
  Store* store_;
  const std::vector<RebuildSource>& sources_;
  Plan plan_;
  ProgressBoard* board_;
  const size_t group_;
  StoreBatch batch_;
  std::vector<size_t> members_;  // the sources this group folds
  std::vector<size_t> applied_;  // per source, this batch
  std::vector<CloudEvent> placeholders_;
  std::vector<ProjectionRebuildStats> stats_;
  int64_t done_ = 0;
};

}  // namespace dcm::rebuild_detail
