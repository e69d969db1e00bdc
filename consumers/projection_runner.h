// ProjectionRunner: feeds one topic (or several: the audit index reads every event topic), every
// partition, into one Projection.
//
//   Start: load stored offsets ─▶ assign all partitions there (or the beginning) ─▶ thread:
//     poll batch ─▶ decode (unless Projection::SkipsRaw) ─▶ Apply × n (poison → dead letter)
//     ─▶ offsets into the same batch ─▶ Store::Write ─▶ AfterCommit ─▶ poll batch ...
//
// A batch that fails (a store write or read failing: disk full, a corrupt file; a dead letter
// Kafka did not take) is not committed: the runner seeks back to its first record, reports
// itself unhealthy (/readyz), and tries the same records again with backoff (250 ms doubling to
// 5 s) until it succeeds. A failing store never dead-letters a valid event (SPEC §7).
//
// Retention gaps (SPEC §7): a partition whose needed offset (the stored one, or 0 for a fresh
// store) is below the log's start, or whose records jump past the next expected offset (the
// consumer fell behind the retention and librdkafka reset it to the earliest), is reported in
// Gaps(): counted, logged and named by /readyz. Topics whose records expire by design
// (RunnerOptions::expiring_topics: the probes topic) are not gaps.
//
// Not a consumer group: every instance folds every partition, because every instance serves
// reads. Restarts resume from the offsets stored with the state, so nothing is applied twice or
// skipped (SPEC §5.3). Thread-safety: Start/Stop from one thread; the status getters from any.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "consumers/kafka.h"
#include "consumers/retention_gap.h"
#include "projections/applied_offsets.h"
#include "projections/projection.h"
#include "src/common/metrics.h"
#include "src/common/retry.h"

namespace dcm {

struct RunnerOptions {
  std::string topic;
  std::string dead_letter_topic;
  KafkaOptions kafka;
  size_t batch_size = 2000;                   // messages per poll and per RocksDB write batch
  std::vector<std::string> more_topics = {};  // read with `topic` by the same consumer
  AppliedOffsets* applied = nullptr;          // published to after each write (may be null)
  // Topics with a retention by design (HEALTH_EVENTS_RETENTION): their lost head is no gap.
  std::vector<std::string> expiring_topics = {};
  // Added to the niceness of the runner's thread (ProjectionEntry::background); 0: unchanged.
  int nice = 0;
};

class ProjectionRunner {
 public:
  ProjectionRunner(RunnerOptions options, Store* store, Projection* projection, Producer* producer,
                   Metrics* metrics);
  ~ProjectionRunner();

  Status Start();
  void Stop();

  // True once every partition reached the high watermark it had at start (SPEC §3.5 /readyz).
  bool CaughtUp() const { return caught_up_.load(); }
  // False while its last batch failed and is being retried (see above).
  bool Healthy() const { return healthy_.load(); }
  // Messages not yet applied, summed over partitions (from the last fetch's watermarks).
  int64_t Lag() const;
  uint64_t Applied() const { return applied_.load(); }
  // Records this projection needed that retention dropped (see above).
  const RetentionGaps& Gaps() const { return gaps_; }

 private:
  using TopicPartition = std::pair<std::string, int32_t>;
  void Run();
  // Applies and commits `messages`; `first` receives the first offset applied per partition (the
  // batch's start, to seek back to when it fails).
  Status ProcessBatch(const std::vector<KafkaMessage>& messages,
                      std::map<TopicPartition, int64_t>& first);
  // Moves this partition's next offset past `m` (recording the batch's first offset and the
  // touched partitions); false when `m` was read before (re-delivered after a seek).
  bool Advance(const KafkaMessage& m, std::map<TopicPartition, int64_t>& first,
               std::map<TopicPartition, int64_t>& touched);
  // The batch was not written: the projection forgets what it kept for AfterCommit (a second
  // writer, the registrar, would otherwise complete the wrong waiters). Under LockBatch. Returns
  // `failed`.
  Status Abandon(Status failed);
  // After a failed batch: seek back to `first`, report, and wait the backoff (or until Stop).
  void Retry(const std::map<TopicPartition, int64_t>& first, const Error& error, int failures);
  void UpdateProgress();
  void Publish(const std::map<std::pair<std::string, int32_t>, int64_t>& next);
  // Reports [from, to) of `tp` as a gap unless its topic expires by design.
  void ReportGap(const TopicPartition& tp, int64_t from, int64_t to);

  RunnerOptions options_;
  Store* store_;
  Projection* projection_;
  Producer* producer_;
  Metrics* metrics_;
  std::unique_ptr<Consumer> consumer_;
  std::thread thread_;
  std::atomic<bool> running_{false};
  std::atomic<bool> caught_up_{false};
  std::atomic<bool> healthy_{true};
  std::atomic<uint64_t> applied_{0};
  std::atomic<int64_t> lag_{0};
  RetryWait retry_wait_;                       // Retry's backoff, cut short by Stop
  std::vector<std::string> topics_;            // topic, then more_topics
  std::map<TopicPartition, int64_t> next_;     // runner thread only
  std::map<TopicPartition, int64_t> targets_;  // high watermarks at start
  Gauge* lag_gauge_ = nullptr;
  Counter* failures_counter_ = nullptr;
  RetentionGaps gaps_;
};

}  // namespace dcm
