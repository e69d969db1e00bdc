// EventReader: reads event topics directly, for `dcm events` (src/cli/events_cmd.cc) and tools.
// It has its own assign()-only consumer (no group, no commits), so it never disturbs the
// control plane's consumers, and works the same on the embedded mock and on a real cluster.
//
//   plan ──▶ for each partition of each topic: [low, high) watermarks; start offset:
//            beginning → low
//            since T   → offsets-for-times(T − margin), or a scan from low where the broker
//                        cannot answer (librdkafka's mock: always -1, ../shared/KAFKA-NOTES.md)
//   read ──▶ assign every partition at its start; consume; decode each record as a CloudEvent
//            and filter on the event's own `time` (what users see), subject and type
//   end  ──▶ without follow: each partition at the high watermark taken at plan time; with
//            follow: when Stop() is called
//
// Kafka timestamps (producer CreateTime) only skip ahead: the filter is the CloudEvent time,
// and the seek lands `since_margin` earlier because the two clocks differ slightly.
//
// Records that are not CloudEvents (poison) are counted and sampled in ReadStats, never fatal.
// Thread-safety: Run() on one thread; Stop() from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "consumers/kafka.h"
#include "events/cloud_event.h"
#include "src/common/result.h"

namespace dcm {

struct EventReaderOptions {
  std::vector<std::string> topics{};
  // Unix ms, inclusive bounds on the CloudEvent `time`. Unset: from the beginning / no end.
  std::optional<int64_t> since_ms{};
  std::optional<int64_t> until_ms{};
  // Exact subject; empty matches all.
  std::string subject{};
  // Exact type, or a prefix ending in '*' ("dcm.provider.*"); empty matches all.
  std::string type{};
  // Keep reading past the high watermarks until Stop().
  bool follow = false;
  // Bound on each broker query (metadata, watermarks, offsets-for-times): an unreachable
  // cluster fails within about this long instead of hanging.
  int query_timeout_ms = 10000;
  // Without follow: a partition that has not reached its end after this long with no record
  // arriving is given up (reported in ReadStats::warnings). Guards against gaps at the end of
  // a partition (transaction markers) that would otherwise never deliver the last offset.
  int stall_timeout_ms = 15000;
  // How much earlier than `since` offsets-for-times seeks: producer timestamps and event times
  // differ slightly. (`until` only filters: records produced late, say replayed goldens, may
  // carry older event times, so every partition is read to its end.)
  std::chrono::milliseconds clock_margin{std::chrono::minutes(1)};
};

struct ReadEvent {
  CloudEvent event;
  std::string raw;  // the record value as stored
  std::string topic;
  int32_t partition = 0;
  int64_t offset = 0;
  int64_t time_ms = 0;       // the CloudEvent time (the Kafka timestamp if unparsable)
  int64_t timestamp_ms = 0;  // the Kafka record timestamp
};

// Sorts by (event time, topic, partition, offset): a deterministic order across partitions.
void SortByEventTime(std::vector<ReadEvent>& events);

struct ReadStats {
  size_t events = 0;                // delivered to the callback
  size_t partitions = 0;            // assigned (non-empty, or all with follow)
  size_t records = 0;               // read from Kafka
  size_t skipped_before_since = 0;  // scanned records whose event time was before `since`
  size_t skipped_after_until = 0;
  size_t filtered = 0;                          // not matching subject/type
  size_t poison = 0;                            // not CloudEvents
  std::vector<std::string> poison_samples;      // the first few: "topic/partition@offset: reason"
  std::vector<std::string> scanned_partitions;  // "topic/partition": since by a scan
  std::vector<std::string> missing_topics;
  std::vector<std::string> warnings;
};

class EventReader {
 public:
  using OnEvent = std::function<void(ReadEvent)>;

  static Result<std::unique_ptr<EventReader>> Create(const KafkaOptions& kafka,
                                                     EventReaderOptions options);
  ~EventReader();

  // Plans, then reads; `on_event` gets each matching event in partition order (not sorted),
  // on this thread. Returns once every partition reached its end (follow: after Stop()).
  // Errors: kUnavailable/kTimeout when the cluster cannot be reached or fails mid-read.
  Status Run(const OnEvent& on_event);
  // Makes Run() return soon (within about one poll, 200 ms). Thread-safe.
  void Stop() { stopping_ = true; }
  const ReadStats& stats() const { return stats_; }

  static constexpr size_t kMaxPoisonSamples = 5;

 private:
  struct PartitionPlan;
  EventReader(EventReaderOptions options, std::unique_ptr<Consumer> consumer);

  Result<std::vector<PartitionPlan>> Plan();
  Status PlanTopic(const std::string& topic, std::vector<PartitionPlan>* plans);
  Status PlanSince(const std::string& topic, std::vector<PartitionPlan>* plans);
  void Handle(KafkaMessage message, PartitionPlan* plan, const OnEvent& on_event);

  EventReaderOptions options_;
  std::unique_ptr<Consumer> consumer_;
  std::atomic<bool> stopping_{false};
  ReadStats stats_;
};

}  // namespace dcm
