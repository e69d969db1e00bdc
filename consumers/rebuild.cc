#include "consumers/rebuild.h"

#include <fmt/format.h>
#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "projections/audit_projection.h"
#include "projections/health_projection.h"
#include "projections/instance_projection.h"
#include "projections/registry_projection.h"
#include "src/common/log.h"

namespace dcm {
namespace {

using Clock = std::chrono::steady_clock;

// One consume batch, decoded once for every projection that reads it. Owns the librdkafka
// messages: keys and values are read in place (no copy) until the fold is done with them.
struct DecodedBatch {
  struct Entry {
    rd_kafka_message_t* raw = nullptr;
    int topic = 0;  // index into the rebuild's topic list
    Result<CloudEvent> event = MakeError(ErrorCode::kInternal, "not decoded");
  };
  std::vector<Entry> entries;
  // Partitions the consumer found complete without a message at target - 1 (offset gaps of
  // transaction markers): (topic index, partition).
  std::vector<std::pair<int, int32_t>> completed;

  DecodedBatch() = default;
  DecodedBatch(const DecodedBatch&) = delete;
  DecodedBatch& operator=(const DecodedBatch&) = delete;
  ~DecodedBatch() {
    for (auto& e : entries) rd_kafka_message_destroy(e.raw);
  }
};

// Single producer, single consumer, bounded: the consume thread feeds one per fold group.
// Closing it ends the group's fold (with an error, or because the group finished).
class BatchQueue {
 public:
  explicit BatchQueue(size_t depth) : depth_(depth) {}

  // False when the queue was closed (the fold gave up).
  bool Push(std::shared_ptr<const DecodedBatch> batch) {
    std::unique_lock lock(mu_);
    not_full_.wait(lock, [&] { return closed_ || items_.size() < depth_; });
    if (closed_) return false;
    items_.push_back(std::move(batch));
    not_empty_.notify_one();
    return true;
  }

  // nullptr on timeout or when closed; `error` tells which.
  std::shared_ptr<const DecodedBatch> Pop(std::chrono::milliseconds timeout,
                                          std::optional<Error>* error) {
    std::unique_lock lock(mu_);
    not_empty_.wait_for(lock, timeout, [&] { return closed_ || !items_.empty(); });
    if (!items_.empty()) {
      auto batch = std::move(items_.front());
      items_.pop_front();
      not_full_.notify_one();
      return batch;
    }
    if (closed_) *error = error_;
    return nullptr;
  }

  bool Closed() {
    std::lock_guard lock(mu_);
    return closed_;
  }

  void Close(std::optional<Error> error = std::nullopt) {
    std::lock_guard lock(mu_);
    closed_ = true;
    if (error && !error_) error_ = std::move(error);
    not_full_.notify_all();
    not_empty_.notify_all();
  }

 private:
  const size_t depth_;
  std::mutex mu_;
  std::condition_variable not_full_, not_empty_;
  std::deque<std::shared_ptr<const DecodedBatch>> items_;
  bool closed_ = false;
  std::optional<Error> error_;
};

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

constexpr int kPollMs = 100;

// The low and high watermarks of partitions [0, partitions) of `topic`: two ListOffsets requests
// for the whole topic (offsets-for-times with Kafka's special times "earliest" and "latest")
// instead of a round trip per partition (1,152 partitions took 0.2 s of a 6 s rebuild). A
// partition either answer leaves out is asked on its own.
Result<std::vector<std::pair<int64_t, int64_t>>> Watermarks(const Consumer& consumer,
                                                            const std::string& topic,
                                                            int partitions, int timeout_ms) {
  std::map<int32_t, int64_t> earliest, latest;
  for (int32_t p = 0; p < partitions; ++p) {
    earliest[p] = RD_KAFKA_OFFSET_BEGINNING;
    latest[p] = RD_KAFKA_OFFSET_END;
  }
  auto low = consumer.OffsetsForTimes(topic, earliest, timeout_ms);
  auto high = consumer.OffsetsForTimes(topic, latest, timeout_ms);
  std::vector<std::pair<int64_t, int64_t>> marks;
  for (int32_t p = 0; p < partitions; ++p) {
    if (low && high && (*low)[p] >= 0 && (*high)[p] >= (*low)[p]) {
      marks.emplace_back((*low)[p], (*high)[p]);
      continue;
    }
    ASSIGN_OR_RETURN(auto one, consumer.QueryWatermarks(topic, p, timeout_ms));
    marks.push_back(one);
  }
  return marks;
}

Status BuildPlan(const std::vector<RebuildSource>& sources, Consumer& consumer, int timeout_ms,
                 Plan& plan, std::vector<std::string>& warnings) {
  std::map<std::string, int> index;
  for (const auto& source : sources) {
    for (const auto& topic : source.topics) {
      if (index.emplace(topic, static_cast<int>(plan.topics.size())).second) {
        plan.topics.push_back(topic);
      }
    }
  }
  plan.ranges.resize(plan.topics.size());
  plan.readers_of_topic.resize(plan.topics.size());
  for (size_t t = 0; t < plan.topics.size(); ++t) {
    const auto& topic = plan.topics[t];
    ASSIGN_OR_RETURN(int partitions, TopicPartitionCount(consumer.handle(), topic, timeout_ms));
    if (partitions == 0) warnings.push_back("topic " + topic + " does not exist: nothing to fold");
    ASSIGN_OR_RETURN(auto marks, Watermarks(consumer, topic, partitions, timeout_ms));
    for (const auto& [low, high] : marks) {
      plan.ranges[t].push_back(PartitionRange{low, high, 0, low});
    }
  }
  for (size_t j = 0; j < sources.size(); ++j) {
    for (const auto& topic : sources[j].topics) {
      const int t = index[topic];
      auto& ranges = plan.ranges[t];
      ReaderState reader{j, t, {}, {}, std::vector<char>(ranges.size(), 0)};
      for (int32_t p = 0; p < static_cast<int32_t>(ranges.size()); ++p) {
        int64_t target = ranges[p].high;
        if (sources[j].targets) {
          const auto by_topic = sources[j].targets->find(topic);
          target = 0;
          if (by_topic != sources[j].targets->end()) {
            const auto it = by_topic->second.find(p);
            if (it != by_topic->second.end()) target = it->second;
          }
        }
        if (target > ranges[p].high) {
          warnings.push_back(fmt::format(
              "{}/{}: the target offset {} is beyond the end of the log ({}): the rebuild stops "
              "short of it",
              topic, p, target, ranges[p].high));
          target = ranges[p].high;
        }
        reader.target.push_back(target);
        reader.next.push_back(ranges[p].low);
        ranges[p].end = std::max(ranges[p].end, target);
      }
      plan.readers_of_topic[t].push_back(plan.readers.size());
      plan.readers.push_back(std::move(reader));
    }
  }
  for (size_t t = 0; t < plan.topics.size(); ++t) {
    for (size_t p = 0; p < plan.ranges[t].size(); ++p) {
      auto& range = plan.ranges[t][p];
      if (range.low > 0 && range.end > 0) {
        warnings.push_back(fmt::format(
            "{}/{}: retention dropped offsets [0, {}): a rebuild cannot reproduce the live state",
            plan.topics[t], p, range.low));
      }
      if (range.end > range.low) {
        plan.total += range.end - range.low;
        ++plan.open_partitions;
      }
    }
  }
  return OkStatus();
}

Status AssignAll(rd_kafka_t* rk, const Plan& plan) {
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(1);
  for (size_t t = 0; t < plan.topics.size(); ++t) {
    for (size_t p = 0; p < plan.ranges[t].size(); ++p) {
      const auto& range = plan.ranges[t][p];
      if (range.end <= range.low) continue;
      rd_kafka_topic_partition_list_add(list, plan.topics[t].c_str(), static_cast<int32_t>(p))
          ->offset = range.low;
    }
  }
  const auto err = rd_kafka_assign(rk, list);
  rd_kafka_topic_partition_list_destroy(list);
  if (err) return tl::unexpected(FromKafka(err, "assign"));
  return OkStatus();
}

// The consume thread: fetch, decode once, hand over. Runs until every partition is delivered up
// to its end or the queue is closed.
class ConsumeLoop {
 public:
  ConsumeLoop(rd_kafka_t* rk, const Plan& plan, size_t batch_size, std::vector<BatchQueue*> queues)
      : rk_(rk), plan_(plan), batch_size_(batch_size), queues_(std::move(queues)) {
    for (size_t t = 0; t < plan.topics.size(); ++t) {
      auto& delivered = delivered_.emplace_back();
      for (const auto& range : plan.ranges[t]) {
        delivered.push_back(range.low);
        if (range.end > range.low) ++open_;
      }
    }
  }

  void Run() {
    rd_kafka_queue_t* queue = rd_kafka_queue_get_consumer(rk_);
    std::vector<rd_kafka_message_t*> raw(batch_size_);
    while (open_ > 0) {
      ssize_t n = rd_kafka_consume_batch_queue(queue, 0, raw.data(), raw.size());
      if (n <= 0) {
        rd_kafka_message_t* first = rd_kafka_consume_queue(queue, kPollMs);
        if (!first) {
          if (!PushCompletedByPosition()) break;
          continue;
        }
        raw[0] = first;
        const ssize_t more = rd_kafka_consume_batch_queue(queue, 0, raw.data() + 1, raw.size() - 1);
        n = 1 + std::max<ssize_t>(more, 0);
      }
      if (!PushToAll(Decode(raw.data(), static_cast<size_t>(n)))) break;
    }
    rd_kafka_queue_destroy(queue);
  }

 private:
  int TopicIndex(rd_kafka_topic_t* rkt) {
    auto it = topic_of_.find(rkt);
    if (it != topic_of_.end()) return it->second;
    const std::string name = rd_kafka_topic_name(rkt);
    int index = -1;
    for (size_t t = 0; t < plan_.topics.size(); ++t) {
      if (plan_.topics[t] == name) index = static_cast<int>(t);
    }
    topic_of_.emplace(rkt, index);
    return index;
  }

  std::unique_ptr<DecodedBatch> Decode(rd_kafka_message_t** raw, size_t n) {
    auto batch = std::make_unique<DecodedBatch>();
    batch->entries.reserve(n);
    static auto logger = Logger("rebuild");
    for (size_t i = 0; i < n; ++i) {
      rd_kafka_message_t* m = raw[i];
      const int t = m->err ? -1 : TopicIndex(m->rkt);
      if (t < 0 || m->partition < 0 ||
          static_cast<size_t>(m->partition) >= plan_.ranges[t].size() ||
          m->offset >= plan_.ranges[t][m->partition].end) {
        if (m->err && m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
          logger->warn("msg=\"consumer error\" error=\"{}\"", rd_kafka_message_errstr(m));
        }
        rd_kafka_message_destroy(m);  // an error, or beyond the target: not part of the rebuild
        continue;
      }
      MarkDelivered(t, m->partition, m->offset + 1);
      auto& entry = batch->entries.emplace_back();
      entry.raw = m;
      entry.topic = t;
      entry.event = DecodeCloudEvent(
          std::string_view(static_cast<const char*>(m->payload ? m->payload : ""), m->len));
    }
    return batch;
  }

  void MarkDelivered(int t, int32_t p, int64_t next) {
    auto& delivered = delivered_[t][p];
    const int64_t end = plan_.ranges[t][p].end;
    if (delivered < end && next >= end) {
      --open_;
      Pause(t, p);
    }
    delivered = std::max(delivered, next);
  }

  void Pause(int t, int32_t p) {
    rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(list, plan_.topics[t].c_str(), p);
    rd_kafka_pause_partitions(rk_, list);  // best effort: later messages are dropped anyway
    rd_kafka_topic_partition_list_destroy(list);
  }

  // Offsets may have gaps (transaction markers on a real broker): a partition whose fetch
  // position passed its end without a message at end - 1 is complete too. False when closed.
  bool PushCompletedByPosition() {
    auto batch = std::make_unique<DecodedBatch>();
    for (size_t t = 0; t < plan_.topics.size(); ++t) {
      for (size_t p = 0; p < plan_.ranges[t].size(); ++p) {
        const int64_t end = plan_.ranges[t][p].end;
        if (delivered_[t][p] >= end || end <= plan_.ranges[t][p].low) continue;
        rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(list, plan_.topics[t].c_str(), static_cast<int32_t>(p));
        if (rd_kafka_position(rk_, list) == RD_KAFKA_RESP_ERR_NO_ERROR &&
            list->elems[0].offset >= end) {
          MarkDelivered(static_cast<int>(t), static_cast<int32_t>(p), end);
          batch->completed.emplace_back(static_cast<int>(t), static_cast<int32_t>(p));
        }
        rd_kafka_topic_partition_list_destroy(list);
      }
    }
    if (batch->completed.empty()) return !AllClosed();
    return PushToAll(std::move(batch));
  }

  bool AllClosed() const {
    for (BatchQueue* queue : queues_) {
      if (!queue->Closed()) return false;
    }
    return true;
  }

  // Hands the batch to every fold group still running; false once none is.
  bool PushToAll(std::shared_ptr<const DecodedBatch> batch) {
    bool any = false;
    for (BatchQueue* queue : queues_) any = queue->Push(batch) || any;
    return any;
  }

  rd_kafka_t* rk_;
  const Plan& plan_;
  const size_t batch_size_;
  std::vector<BatchQueue*> queues_;
  std::vector<std::vector<int64_t>> delivered_;  // [topic][partition]: next offset handed over
  size_t open_ = 0;
  std::unordered_map<rd_kafka_topic_t*, int> topic_of_;
};

// Progress shared by the fold groups: each publishes how far it is; one of them reports.
struct ProgressBoard {
  explicit ProgressBoard(size_t groups) : done(groups), total(groups, 0) {}
  std::vector<std::atomic<int64_t>> done;
  std::vector<int64_t> total;
  int64_t messages = 0;  // of the whole rebuild
  Clock::time_point start = Clock::now();

  // The slowest group's share of the whole rebuild.
  RebuildProgress Snapshot() const {
    double fraction = 1.0;
    for (size_t g = 0; g < done.size(); ++g) {
      if (total[g] > 0) {
        fraction =
            std::min(fraction, static_cast<double>(done[g].load()) / static_cast<double>(total[g]));
      }
    }
    RebuildProgress progress;
    progress.total = messages;
    progress.done = static_cast<int64_t>(fraction * static_cast<double>(messages));
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (seconds > 0) progress.events_per_s = static_cast<double>(progress.done) / seconds;
    if (progress.events_per_s > 0 && progress.done < messages) {
      progress.eta_s = static_cast<double>(messages - progress.done) / progress.events_per_s;
    }
    return progress;
  }
};

// One fold group: a subset of the projections, folded on one thread with its own StoreBatch.
// Groups share the decoded batches (read-only) and the Store (RocksDB takes concurrent writes;
// projections write disjoint prefixes).
class FoldLoop {
 public:
  FoldLoop(const RebuildOptions& options, Store* store, const std::vector<RebuildSource>& sources,
           Plan plan, ProgressBoard* board, size_t group)
      : options_(options),
        store_(store),
        sources_(sources),
        plan_(std::move(plan)),
        board_(board),
        group_(group) {
    applied_.resize(sources.size());
    stats_.resize(sources.size());
    for (size_t j = 0; j < sources.size(); ++j) stats_[j].name = sources[j].projection->Name();
    for (const auto& reader : plan_.readers) {
      if (std::find(members_.begin(), members_.end(), reader.projection) == members_.end()) {
        members_.push_back(reader.projection);
      }
    }
    board_->total[group_] = plan_.total;
  }

  // Folds until every partition of this group reached its targets. Closes `queue` on return, so
  // the consume thread stops feeding it.
  Status Run(BatchQueue& queue) {
    auto status = Loop(queue);
    queue.Close(status ? std::nullopt : std::optional<Error>(status.error()));
    for (const auto& reader : plan_.readers) {
      auto& reached = stats_[reader.projection].reached[plan_.topics[reader.topic]];
      for (size_t p = 0; p < reader.next.size(); ++p) {
        reached[static_cast<int32_t>(p)] = reader.next[p];
      }
    }
    return status;
  }

  // This group's projections' statistics (the others stay empty).
  const std::vector<ProjectionRebuildStats>& stats() const { return stats_; }

 private:
  Status Loop(BatchQueue& queue) {
    auto last_progress = Clock::now(), last_report = last_progress;
    const bool reporter = group_ == 0 && options_.on_progress;
    while (plan_.open_partitions > 0) {
      std::optional<Error> error;
      auto batch = queue.Pop(std::chrono::milliseconds(kPollMs), &error);
      const auto now = Clock::now();
      if (!batch) {
        if (error) return tl::unexpected(*error);
        if (queue.Closed()) return MakeError(ErrorCode::kInternal, "the rebuild was stopped");
        if (now - last_progress > std::chrono::milliseconds(options_.stall_timeout_ms)) {
          return MakeError(ErrorCode::kTimeout, StallMessage());
        }
        continue;
      }
      last_progress = now;
      RETURN_IF_ERROR(Fold(*batch));
      board_->done[group_].store(done_);
      if (reporter &&
          now - last_report >= std::chrono::milliseconds(options_.progress_interval_ms)) {
        last_report = now;
        options_.on_progress(board_->Snapshot());
      }
    }
    return OkStatus();
  }

  std::string StallMessage() const {
    for (size_t t = 0; t < plan_.topics.size(); ++t) {
      for (size_t p = 0; p < plan_.ranges[t].size(); ++p) {
        const auto& range = plan_.ranges[t][p];
        if (range.position < range.end) {
          return fmt::format(
              "no event for {} ms: {}/{} is at offset {} of target {} (Kafka unreachable?)",
              options_.stall_timeout_ms, plan_.topics[t], p, range.position, range.end);
        }
      }
    }
    return "no progress";
  }

  void Advance(int t, int32_t p, int64_t next) {
    auto& range = plan_.ranges[t][p];
    const int64_t capped = std::min(next, range.end);
    if (capped <= range.position) return;
    done_ += capped - range.position;
    const bool was_open = range.position < range.end;
    range.position = capped;
    if (was_open && range.position >= range.end) --plan_.open_partitions;
  }

  Status Fold(const DecodedBatch& decoded) {
    for (const auto& entry : decoded.entries) {
      const int32_t p = entry.raw->partition;
      if (entry.raw->offset >= plan_.ranges[entry.topic][p].end) continue;  // another group's
      RETURN_IF_ERROR(FoldOne(entry));
      Advance(entry.topic, p, entry.raw->offset + 1);
    }
    for (const auto& [t, p] : decoded.completed) Advance(t, p, plan_.ranges[t][p].end);
    for (auto& reader : plan_.readers) {
      for (size_t p = 0; p < reader.touched.size(); ++p) {
        if (!reader.touched[p]) continue;
        reader.touched[p] = 0;
        store_->PutOffset(batch_, stats_[reader.projection].name, plan_.topics[reader.topic],
                          static_cast<int32_t>(p), reader.next[p]);
      }
    }
    if (batch_.Count() > 0) RETURN_IF_ERROR(store_->Write(batch_));
    for (const size_t j : members_) {
      // A rebuild's projections have no waiters or listeners (BuildProjectionSet), so
      // AfterCommit only drops its per-batch state: it gets one empty placeholder per applied
      // event instead of a copy of each (a copy cost ~10% of the fold).
      placeholders_.resize(applied_[j]);
      sources_[j].projection->AfterCommit(placeholders_);
      applied_[j] = 0;
    }
    return OkStatus();
  }

  Status FoldOne(const DecodedBatch::Entry& entry) {
    const rd_kafka_message_t* m = entry.raw;
    for (const size_t r : plan_.readers_of_topic[entry.topic]) {
      ReaderState& reader = plan_.readers[r];
      const int32_t p = m->partition;
      if (m->offset < reader.next[p] || m->offset >= reader.target[p]) continue;
      reader.next[p] = m->offset + 1;
      reader.touched[p] = 1;
      auto& stats = stats_[reader.projection];
      if (!entry.event) {
        ++stats.poison;
        continue;
      }
      rd_kafka_timestamp_type_t ts_type;
      const EventPosition position{
          plan_.topics[entry.topic],
          p,
          m->offset,
          rd_kafka_message_timestamp(m, &ts_type),
          std::string_view(static_cast<const char*>(m->key ? m->key : ""), m->key_len),
          std::string_view(static_cast<const char*>(m->payload ? m->payload : ""), m->len)};
      Projection* projection = sources_[reader.projection].projection;
      if (auto status = projection->Apply(*entry.event, position, batch_); !status) {
        if (status.error().code != ErrorCode::kCorruption) {
          return MakeError(status.error().code,
                           fmt::format("{} at {}/{}@{}: {}", stats.name, position.topic, p,
                                       m->offset, status.error().message));
        }
        ++stats.poison;
        continue;
      }
      ++stats.events;
      ++applied_[reader.projection];
    }
    return OkStatus();
  }

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

// The part of `full` that the projections in `members` read: their readers, and every
// partition's end recomputed from their targets alone.
Plan Subplan(const Plan& full, const std::vector<size_t>& members) {
  Plan sub;
  sub.topics = full.topics;
  sub.ranges = full.ranges;
  for (auto& by_partition : sub.ranges) {
    for (auto& range : by_partition) range.end = 0;
  }
  sub.readers_of_topic.resize(full.topics.size());
  for (const auto& reader : full.readers) {
    if (std::find(members.begin(), members.end(), reader.projection) == members.end()) continue;
    for (size_t p = 0; p < reader.target.size(); ++p) {
      auto& range = sub.ranges[reader.topic][p];
      range.end = std::max(range.end, reader.target[p]);
    }
    sub.readers_of_topic[reader.topic].push_back(sub.readers.size());
    sub.readers.push_back(reader);
  }
  for (auto& by_partition : sub.ranges) {
    for (auto& range : by_partition) {
      if (range.end > range.low) {
        sub.total += range.end - range.low;
        ++sub.open_partitions;
      }
    }
  }
  return sub;
}

// Splits the projections into `groups` sets of about equal work (messages to fold × fold cost),
// largest first.
std::vector<std::vector<size_t>> SplitIntoGroups(const Plan& plan,
                                                 const std::vector<RebuildSource>& sources,
                                                 size_t groups) {
  const size_t projections = sources.size();
  std::vector<double> work(projections, 0);
  for (const auto& reader : plan.readers) {
    for (size_t p = 0; p < reader.target.size(); ++p) {
      work[reader.projection] += static_cast<double>(std::max<int64_t>(
                                     0, reader.target[p] - plan.ranges[reader.topic][p].low)) *
                                 sources[reader.projection].fold_cost;
    }
  }
  std::vector<size_t> order(projections);
  for (size_t j = 0; j < projections; ++j) order[j] = j;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return work[a] > work[b]; });
  groups = std::max<size_t>(1, std::min(groups, projections));
  std::vector<std::vector<size_t>> out(groups);
  std::vector<double> load(groups, 0);
  for (size_t j : order) {
    const size_t g = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    out[g].push_back(j);
    load[g] += work[j] + 1;
  }
  return out;
}

}  // namespace

Rebuilder::Rebuilder(RebuildOptions options, Store* store)
    : options_(std::move(options)), store_(store) {}

Result<RebuildResult> Rebuilder::Run(const std::vector<RebuildSource>& sources) {
  KafkaOptions kafka = options_.kafka;
  // Large fetches (../shared/KAFKA-NOTES.md: batch consume with big fetch sizes, 1.1M msg/s).
  for (const auto& [k, v] :
       std::map<std::string, std::string>{{"fetch.max.bytes", "52428800"},
                                          {"max.partition.fetch.bytes", "4194304"},
                                          {"queued.min.messages", "200000"},
                                          {"queued.max.messages.kbytes", "65536"}}) {
    kafka.extra.emplace(k, v);  // the caller's properties win
  }
  ASSIGN_OR_RETURN(auto consumer, Consumer::Create(kafka, ""));
  Plan plan;
  RebuildResult result;
  RETURN_IF_ERROR(
      BuildPlan(sources, *consumer, options_.metadata_timeout_ms, plan, result.warnings));
  RETURN_IF_ERROR(AssignAll(consumer->handle(), plan));
  const auto groups = SplitIntoGroups(plan, sources, options_.fold_threads);
  Logger("rebuild")->info(
      "msg=\"rebuild started\" projections={} topics={} events={} fold_threads={}", sources.size(),
      plan.topics.size(), plan.total, groups.size());

  ProgressBoard board(groups.size());
  board.messages = plan.total;
  std::vector<std::unique_ptr<BatchQueue>> queues;
  std::vector<BatchQueue*> queue_ptrs;
  std::vector<std::unique_ptr<FoldLoop>> folds;
  for (size_t g = 0; g < groups.size(); ++g) {
    queues.push_back(std::make_unique<BatchQueue>(options_.queue_depth));
    queue_ptrs.push_back(queues.back().get());
    folds.push_back(
        std::make_unique<FoldLoop>(options_, store_, sources, Subplan(plan, groups[g]), &board, g));
  }
  ConsumeLoop consume(consumer->handle(), plan, options_.batch_size, queue_ptrs);
  std::thread consume_thread([&] { consume.Run(); });
  std::vector<Status> statuses(groups.size());
  std::vector<std::thread> fold_threads;
  for (size_t g = 1; g < groups.size(); ++g) {
    fold_threads.emplace_back([&, g] {
      statuses[g] = folds[g]->Run(*queues[g]);
      if (!statuses[g]) {
        for (auto& q : queues) q->Close();  // one group failed: stop them all
      }
    });
  }
  statuses[0] = folds[0]->Run(*queues[0]);
  if (!statuses[0]) {
    for (auto& q : queues) q->Close();
  }
  for (auto& t : fold_threads) t.join();
  for (auto& q : queues) q->Close();  // unblocks the consume thread if a fold stopped early
  consume_thread.join();
  // Drop what the consume thread queued after the folds stopped: its messages belong to the
  // consumer, which must outlive them.
  for (auto& q : queues) {
    for (std::optional<Error> ignored; q->Pop(std::chrono::milliseconds(0), &ignored);) {
    }
  }
  for (const auto& status : statuses) {
    if (!status) return tl::unexpected(status.error());
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - board.start).count();
  result.projections.resize(sources.size());
  for (const auto& fold : folds) {
    for (size_t j : groups[&fold - &folds[0]]) result.projections[j] = fold->stats()[j];
  }
  result.messages = plan.total;  // every group reached its targets: all of them were folded
  if (options_.on_progress) options_.on_progress(board.Snapshot());
  return result;
}

std::vector<ProjectionSpec> ProjectionSpecs(const Topics& topics) {
  // Fold costs from `rebuild_bench rebuild --only NAME` on the benchmark log (2026-11-23, before
  // the decoded caches, which cut health and instances alike): µs of fold-thread CPU per event,
  // audit 3.3, health 2.9, instances 16, registry 6, sp-status 1.7.
  return {
      {RegistryProjection::kName, RegistryProjection::kPrefix, {topics.Providers()}, 2},
      {HealthProjection::kName, HealthProjection::kPrefix, {topics.Health()}, 1},
      {InstanceProjection::kName, InstanceProjection::kPrefix, {topics.Instances()}, 5},
      {SpStatusProjection::kName, SpStatusProjection::kPrefix, {topics.Status()}, 0.5},
      {AuditProjection::kName, AuditProjection::kPrefix, topics.EventTopics(), 1},
  };
}

ProjectionSet BuildProjectionSet(Store* store, const Topics& topics, Metrics* metrics) {
  ProjectionSet set;
  set.specs = ProjectionSpecs(topics);
  set.projections.push_back(std::make_unique<RegistryProjection>(store, nullptr, metrics));
  set.projections.push_back(std::make_unique<HealthProjection>(store, metrics));
  set.projections.push_back(std::make_unique<InstanceProjection>(store, nullptr, metrics));
  set.projections.push_back(std::make_unique<SpStatusProjection>(store, metrics));
  set.projections.push_back(std::make_unique<AuditProjection>(store, topics.Providers(), metrics));
  return set;
}

Result<TopicOffsets> LiveTargets(const Store& live, const ProjectionSpec& spec) {
  TopicOffsets targets;
  for (const auto& topic : spec.topics) {
    ASSIGN_OR_RETURN(targets[topic], live.LoadOffsets(spec.name, topic));
  }
  return targets;
}

Result<ProjectionComparison> CompareProjection(const Store& live, const Store& rebuilt,
                                               const ProjectionSpec& spec) {
  ProjectionComparison comparison;
  comparison.name = spec.name;
  ASSIGN_OR_RETURN(comparison.live_digest, live.Digest(spec.prefix));
  ASSIGN_OR_RETURN(comparison.rebuilt_digest, rebuilt.Digest(spec.prefix));
  if (!comparison.match()) {
    ASSIGN_OR_RETURN(comparison.first_difference,
                     Store::FirstDifference(live, rebuilt, spec.prefix));
  }
  return comparison;
}

}  // namespace dcm
