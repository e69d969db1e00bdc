// Thin RAII wrappers over librdkafka's C API: the only place in the code base that includes
// rdkafka.h (kafka.cc, kafka_consumer.cc, with mock_cluster.cc and topic_admin.cc). Everything
// above sees our own types.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "src/common/result.h"

struct rd_kafka_s;
struct rd_kafka_queue_s;
struct rd_kafka_message_s;

namespace dcm {

// Client settings shared by every producer and consumer of one process.
struct KafkaOptions {
  std::string brokers;
  std::string client_id = "dcm";
  // Consumer long-poll; the mock needs ~5-10 ms (see Config::fetch_wait_max_ms and
  // kMockFetchWaitMs).
  int fetch_wait_max_ms = 100;
  // Consumer-group session timeout (registrar failover time).
  int session_timeout_ms = 10000;
  // Assign()ed consumers only (a group member never pauses), 0: off. A consumer that received
  // nothing for idle_after_ms, or whose next records a producer of this process wrote, unassigns
  // its partitions, keeping its positions, for this long at most. Meanwhile it takes the records
  // this process's producers had acknowledged there, and assigns its partitions again when one
  // it was not handed is missing (consumers/local_deliveries.h). `dcm serve` sets it on
  // librdkafka's mock only (Config::mock_idle_pause_ms): there every idle consumer costs ~200
  // empty fetches a second, and a busy one a fetch for every message set written.
  int idle_pause_ms = 0;
  // How long without a message before that pause; 0: idle_pause_ms.
  int idle_after_ms = 0;
  // With the idle pause: take what this process's producers had acknowledged from their delivery
  // reports. Off: a delivery only ends the pause (the consumer then fetches it), for a reader
  // whose records another thread of this process folds first (the registry runner behind the
  // registrar).
  bool take_deliveries = true;
  // Extra librdkafka properties (name -> value), applied last.
  std::map<std::string, std::string> extra;
};

struct KafkaPosition {
  int32_t partition = -1;
  int64_t offset = -1;
  // The record's timestamp from the acknowledgement (-1: unknown): the CreateTime it was sent
  // with, or the broker's LogAppendTime when the topic keeps that instead (log_append_time).
  // librdkafka's mock reports a LogAppendTime of 1234 for every record, yet keeps the CreateTime.
  int64_t timestamp_ms = -1;
  bool log_append_time = false;
};

// The content-type header Producer::Produce adds to every record.
inline constexpr char kContentTypeHeader[] = "content-type";
inline constexpr char kCloudEventsJson[] = "application/cloudevents+json";

struct KafkaMessage {
  std::string topic;
  int32_t partition = 0;
  int64_t offset = 0;
  int64_t timestamp_ms = 0;
  std::string key;
  std::string value;
  std::vector<std::pair<std::string, std::string>> headers;
};

using KafkaHandle = rd_kafka_s;

// Error from a librdkafka error code: kUnavailable for transport/broker trouble, kTimeout for
// timeouts, kInternal otherwise.
Error FromKafka(int error_code, const std::string& context);

// Milliseconds of a monotonic clock: when produces were queued (InFlight, KafkaMonitor).
int64_t SteadyNowMs();

// The produces of one producer not yet acknowledged (nor failed), with when each was queued: the
// age of the oldest tells a stalled broker (consumers/kafka_monitor.h). Thread-safe.
class InFlight {
 public:
  uint64_t Add(int64_t now_ms);
  void Remove(uint64_t token);
  // When the oldest unacknowledged produce was queued; nullopt when none is.
  std::optional<int64_t> OldestMs() const;
  size_t Size() const;

 private:
  mutable std::mutex mu_;
  uint64_t next_ = 0;
  std::map<uint64_t, int64_t> started_;  // token -> queued at; tokens grow with time
};

// Producer: idempotent, acks=all (SPEC §5.2: a 2xx is in Kafka before the reply), linger 1 ms on
// the command path (../shared/KAFKA-NOTES.md: the default 5 ms costs 5 ms per command; 1 ms
// batched concurrent commands for +25% registrations/s on the mock, BENCHMARKS.md). A background
// thread serves delivery reports; callbacks run on it and must be quick. Thread-safe.
class Producer {
 public:
  using OnDelivery = std::function<void(Result<KafkaPosition>)>;

  static Result<std::unique_ptr<Producer>> Create(const KafkaOptions& options);
  ~Producer();

  static constexpr int32_t kAnyPartition = -1;  // RD_KAFKA_PARTITION_UA: the partitioner picks

  // Queues one message; `on_delivery` runs once with the partition and offset, or the error.
  // `partition` is explicit when the caller must know where a key lands (KeyPartition). A
  // message over kMaxEventBytes (key + value + headers, events/event_limits.h) is not queued:
  // `on_delivery` gets kPayloadTooLarge at once.
  void Produce(const std::string& topic, const std::string& key, const std::string& value,
               const std::vector<std::pair<std::string, std::string>>& headers,
               OnDelivery on_delivery, int32_t partition = kAnyPartition,
               int64_t timestamp_ms = 0);  // CreateTime; 0: now
  // Produces; the future resolves once the broker acknowledged the message (or it failed), so a
  // caller can commit its own progress only after what it produced is safe.
  std::future<Status> ProduceAcked(
      const std::string& topic, const std::string& key, const std::string& value,
      const std::vector<std::pair<std::string, std::string>>& headers = {});
  // Produces; the future resolves with the partition and offset the broker acknowledged (or the
  // error).
  std::future<Result<KafkaPosition>> ProducePositioned(const std::string& topic,
                                                       const std::string& key,
                                                       const std::string& value);
  // Produces and waits for the delivery report.
  Result<KafkaPosition> ProduceSync(
      const std::string& topic, const std::string& key, const std::string& value,
      const std::vector<std::pair<std::string, std::string>>& headers = {});
  Status Flush(int timeout_ms);
  KafkaHandle* handle() const { return rk_; }
  // When the oldest message still waiting for its delivery report was queued (SteadyNowMs).
  std::optional<int64_t> OldestUnackedMs() const { return in_flight_.OldestMs(); }
  // Asks a broker for the cluster's metadata (no topics): OK when one answers in `timeout_ms`.
  Status ProbeBrokers(int timeout_ms) const;

 private:
  Producer() = default;
  KafkaHandle* rk_ = nullptr;
  InFlight in_flight_;
  std::atomic<bool> running_{true};
  std::thread poller_;
};

// Consumer: one rd_kafka consumer. Either Assign() partitions explicitly (projection runners:
// every instance folds every partition) or Subscribe() to a group (the registrar: one owner).
// Not thread-safe: one thread polls it.
class Consumer {
 public:
  // Called from inside ConsumeBatch when the group assigns or revokes partitions. On assign
  // the callback returns the offset to start each partition from.
  struct Rebalance {
    std::function<std::map<int32_t, int64_t>(const std::string& topic,
                                             const std::vector<int32_t>& partitions)>
        on_assign;
    std::function<void()> on_revoke;
    // Membership only: assigned partitions are paused, so nothing is fetched (the prober uses
    // the group to split providers, not to read).
    bool pause_assigned = false;
  };

  static constexpr int64_t kBeginning = -2;  // RD_KAFKA_OFFSET_BEGINNING

  // `group_id` empty: no group (use Assign).
  static Result<std::unique_ptr<Consumer>> Create(const KafkaOptions& options,
                                                  const std::string& group_id);
  ~Consumer();

  Status Assign(const std::string& topic, const std::map<int32_t, int64_t>& offsets);
  // Assigns partitions of several topics at once (topic -> partition -> start offset), replacing
  // the current assignment (Assign takes one topic only).
  Status AssignTopics(const std::map<std::string, std::map<int32_t, int64_t>>& offsets);
  Status Subscribe(const std::string& topic, Rebalance rebalance);
  // Moves the fetch position of an assigned partition (to re-read a batch that did not commit).
  Status Seek(const std::string& topic, int32_t partition, int64_t offset);
  // Up to `max` messages, waiting at most `timeout_ms`. Per-message errors (partition EOF etc.)
  // are skipped; a fatal consumer error is returned.
  Result<std::vector<KafkaMessage>> ConsumeBatch(size_t max, int timeout_ms);
  // Cached high watermark of a partition (from the last fetch), or -1 if unknown.
  int64_t HighWatermark(const std::string& topic, int32_t partition) const;
  // Asks the broker for the low and high watermarks.
  Result<std::pair<int64_t, int64_t>> QueryWatermarks(const std::string& topic, int32_t partition,
                                                      int timeout_ms) const;
  // Kafka's offsets-for-times: for each partition of `topic` in `times_ms` (partition -> unix
  // ms), the earliest offset whose record timestamp is at or after that time, or -1 when the
  // broker names none. librdkafka's mock answers -1 for every partition, without an error
  // (../shared/KAFKA-NOTES.md), so callers must be ready to scan instead.
  Result<std::map<int32_t, int64_t>> OffsetsForTimes(const std::string& topic,
                                                     const std::map<int32_t, int64_t>& times_ms,
                                                     int timeout_ms) const;
  // Whether the group has assigned this member at least once, partitions or none (a member of a
  // one-partition group that is not its owner is assigned nothing, and no on_assign is called).
  bool AssignedOnce() const { return assigned_once_; }
  // Whether it dropped its partitions for being idle (KafkaOptions::idle_pause_ms).
  bool IdlePaused() const { return idle_paused_; }
  // Ends a ConsumeBatch waiting for its first message now (it returns nothing), or the next one
  // at once. Any thread.
  void Wake();
  // Leaves the group (revoking its partitions) before destruction.
  void Close();
  KafkaHandle* handle() const { return rk_; }
  // Internal: the rebalance trampoline needs these.
  Rebalance& rebalance() { return rebalance_; }
  void MarkAssigned();

 private:
  Consumer() = default;
  // How long to block for the first message, after pausing or resuming the idle consumer.
  int IdleTimeout(int timeout_ms);
  // Unassigns every partition until `now` + idle_pause_ (LocalDeliveries wakes it earlier).
  void StartPause(std::chrono::steady_clock::time_point now);
  void EndIdlePause();
  // The records this process's producers had acknowledged that continue the positions
  // (LocalDeliveries); pauses when there are some, resumes when one before them is missing.
  std::vector<KafkaMessage> TakeDelivered(size_t max);
  // Registers with LocalDeliveries for the assigned topics (the pause is on).
  void Listen();
  // A new assignment is not paused: it starts a fresh idle period.
  void RestartIdle();
  // Pauses (unassigns) or resumes (assigns at their positions) every partition Assign or
  // AssignTopics gave (assigned_).
  void SetPaused(bool paused);
  // Moves the partition's position past `offset` (ConsumeBatch returned it); false, when the
  // position is already past it (a fetched copy of a record taken from LocalDeliveries).
  bool Consumed(const std::string& topic, int32_t partition, int64_t offset);
  // Whether every assigned partition had a fetch answered (its high watermark is known).
  bool Fetched() const;
  // The shortest look at the broker after a pause that no delivery ended.
  static constexpr int kIdleLookMinMs = 10;
  // How long a delivered record may wait for the one before it (other producers of this process
  // report in their own time) before the consumer fetches that one instead.
  static constexpr int kMissingGraceMs = 5;

  KafkaHandle* rk_ = nullptr;
  rd_kafka_queue_s* queue_ = nullptr;
  Rebalance rebalance_;
  bool closed_ = false;
  bool assigned_once_ = false;
  // Assign/AssignTopics' partitions, each with the next offset to return (while the idle pause
  // is on; otherwise the assigned one).
  std::map<std::string, std::map<int32_t, int64_t>> assigned_;
  // Idle pause (KafkaOptions::idle_pause_ms; zero: off).
  std::chrono::milliseconds idle_pause_{0};
  std::chrono::milliseconds idle_after_{0};
  int fetch_wait_ms_ = 0;
  bool take_deliveries_ = true;
  std::chrono::steady_clock::time_point last_data_;
  // When a fetch last brought a record no producer of this process had delivered.
  std::chrono::steady_clock::time_point last_fetched_;
  std::chrono::steady_clock::time_point pause_ends_;
  std::chrono::steady_clock::time_point active_until_;  // no pause before (after a resume)
  // When the oldest delivered record that waits for a missing one before it arrived.
  std::optional<std::chrono::steady_clock::time_point> missing_since_;
  bool idle_paused_ = false;
  uint64_t listener_ = 0;                 // LocalDeliveries id while assigned, pause on
  std::vector<rd_kafka_message_s*> raw_;  // ConsumeBatch's buffer, kept between calls
};

// The partition of `key` among `partitions`: Java-client-compatible murmur2 (Kafka's default
// partitioner), so other clients and tools agree on where a provider's events live.
int32_t KeyPartition(std::string_view key, int32_t partitions);

// The provider command path's producers (HTTP requests to the one-partition request topic; the
// registrar's outcomes: ProviderOutcomeOptions): one request in flight per connection. What arrives
// while a request is out goes in the next one, so batches grow with the load, and
// librdkafka 2.0.2's idempotent producer does not spin its broker thread while several requests are
// out (a third of `dcm serve`'s CPU under registration load; BENCHMARKS.md, issue #16). Not for the
// instance sagas: each fact waits for its ack, and queueing behind the request in flight raised
// rehydration p99 by half.
KafkaOptions ProviderCommandOptions(KafkaOptions options);
// The registrar's outcomes: as ProviderCommandOptions, but sent without lingering. A batch's
// outcomes are produced together once it is decided, and its commit waits for their acks, so a
// linger would only add to every registration's wait (BENCHMARKS.md, issue #16, session 25).
KafkaOptions ProviderOutcomeOptions(KafkaOptions options);

// The consumer long-poll to use against librdkafka's mock cluster: the mock holds an empty fetch
// for the whole fetch.wait.max.ms even when data arrives meanwhile, so each consumer hop costs up
// to that much latency (../shared/KAFKA-NOTES.md). Short polls are cheap on loopback.
inline constexpr int kMockFetchWaitMs = 5;
// The registrar's long-poll against the mock (MockFetchWaitOptions). Every registration that
// reaches the registrar while its fetch finds nothing waits out the rest of that fetch, so the
// one consumer a write waits for polls shorter than the others (1.16x registrations/s at 64
// clients; BENCHMARKS.md, issue #16, session 22).
inline constexpr int kMockRegistrarFetchWaitMs = 1;
// The background folds' long-poll against the mock (audit and health: no write's answer waits
// for them). Each fetch of theirs that finds nothing costs the mock a request and a timer; 20 ms
// instead of 5: 0.90x CPU per registration at 64 clients, the idle client unchanged
// (BENCHMARKS.md, issue #16, session 32).
inline constexpr int kMockBackgroundFetchWaitMs = 20;

// A consumer's options on the mock (`on_mock`): a long-poll of `mock_wait_ms` when > 0, else
// `options` unchanged. A real broker answers as soon as data arrives: there the wait stays.
KafkaOptions MockFetchWaitOptions(KafkaOptions options, bool on_mock, int mock_wait_ms);

// True when `handle` talks to librdkafka's mock cluster (`dcm serve --dev`, `dcm dev-kafka`): its
// cluster id starts with "mockCluster". False on a real cluster, or when no cluster id arrives
// within `timeout_ms`.
bool IsMockCluster(KafkaHandle* handle, int timeout_ms);

// The number of partitions of `topic`, or 0 if it does not exist. Uses an all-topics metadata
// request, which (unlike a per-topic one) never auto-creates the topic.
Result<int> TopicPartitionCount(KafkaHandle* handle, const std::string& topic, int timeout_ms);

}  // namespace dcm
