// The plan of a rebuild (consumers/rebuild.h): which partitions to read from where to where, and
// which projection reads what. Built once from the watermarks before any message is consumed;
// each fold group then works on its own Subplan.
//
//   sources ─▶ topics (deduplicated) ─▶ watermarks per partition ─▶ a reader per (projection,
//   topic) with its targets ─▶ ranges' ends = max target ─▶ warnings (retention, short logs)
//
// Thread-safety: plain data; the consume thread reads the full plan, each fold thread owns its
// Subplan.
#pragma once

#include <librdkafka/rdkafka.h>

#include <cstdint>
#include <string>
#include <vector>

#include "consumers/kafka.h"
#include "consumers/rebuild.h"
#include "src/common/result.h"

namespace dcm::rebuild_detail {

// Per (topic, partition) of the whole rebuild.
struct PartitionRange {
  int64_t low = 0;
  int64_t high = 0;
  int64_t end = 0;       // max target over the projections reading the topic
  int64_t position = 0;  // next offset the fold has not seen
};

// One projection's view of one topic.
struct ReaderState {
  size_t projection = 0;              // index into the sources
  int topic = 0;                      // index into the topic list
  std::vector<int64_t> target, next;  // by partition
  std::vector<char> touched;          // by partition, in the current batch
};

// Everything the consume thread and the fold loop share (read-only once running, except the
// consume thread's own `delivered`).
struct Plan {
  std::vector<std::string> topics;
  std::vector<std::vector<PartitionRange>> ranges;    // [topic][partition]
  std::vector<ReaderState> readers;                   // every (projection, topic)
  std::vector<std::vector<size_t>> readers_of_topic;  // [topic] -> indexes into readers
  int64_t total = 0;
  size_t open_partitions = 0;  // ranges with position < end
};

// Reads the watermarks of every topic the sources fold and sets each reader's targets.
// `warnings` gets what makes the rebuilt state differ from the live one.
// A partition whose head retention dropped is warned about, unless its topic is one of
// `windowed_topics` (retention by design: the probes topic).
Status BuildPlan(const std::vector<RebuildSource>& sources, Consumer& consumer, int timeout_ms,
                 Plan& plan, std::vector<std::string>& warnings,
                 const std::vector<std::string>& windowed_topics = {});

// Assigns every partition with something to read, at its low watermark.
Status AssignAll(rd_kafka_t* rk, const Plan& plan);

// The part of `full` that the projections in `members` read: their readers, and every
// partition's end recomputed from their targets alone.
Plan Subplan(const Plan& full, const std::vector<size_t>& members);

// Splits the projections into `groups` sets of about equal work (messages to fold × fold cost),
// largest first.
std::vector<std::vector<size_t>> SplitIntoGroups(const Plan& plan,
                                                 const std::vector<RebuildSource>& sources,
                                                 size_t groups);

}  // namespace dcm::rebuild_detail
