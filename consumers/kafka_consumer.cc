// Consumer (consumers/kafka.h): assignment, the idle pause and what it takes from
// LocalDeliveries meanwhile, batches, seeks and watermarks.
#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <chrono>

#include "consumers/kafka.h"
#include "consumers/kafka_internal.h"
#include "consumers/local_deliveries.h"
#include "src/common/log.h"

namespace dcm {
namespace {

using kafka_internal::LogCallback;
using kafka_internal::NewConf;
using kafka_internal::NewPartitionList;
using kafka_internal::PartitionOffsets;
using kafka_internal::ToKafkaMessage;

void RebalanceCallback(rd_kafka_t* rk, rd_kafka_resp_err_t err,
                       rd_kafka_topic_partition_list_t* partitions, void* opaque) {
  auto* consumer = static_cast<Consumer*>(opaque);
  if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
    std::map<std::string, std::vector<int32_t>> by_topic;
    for (int i = 0; i < partitions->cnt; ++i) {
      by_topic[partitions->elems[i].topic].push_back(partitions->elems[i].partition);
    }
    for (const auto& [topic, ids] : by_topic) {
      std::map<int32_t, int64_t> offsets;
      if (consumer->rebalance().on_assign) offsets = consumer->rebalance().on_assign(topic, ids);
      for (int i = 0; i < partitions->cnt; ++i) {
        auto& elem = partitions->elems[i];
        if (topic != elem.topic) continue;
        auto it = offsets.find(elem.partition);
        elem.offset = it == offsets.end() ? RD_KAFKA_OFFSET_BEGINNING : it->second;
      }
    }
    rd_kafka_assign(rk, partitions);
    if (consumer->rebalance().pause_assigned) rd_kafka_pause_partitions(rk, partitions);
    consumer->MarkAssigned();
  } else {
    if (consumer->rebalance().on_revoke) consumer->rebalance().on_revoke();
    rd_kafka_assign(rk, nullptr);
  }
}

}  // namespace

Result<std::unique_ptr<Consumer>> Consumer::Create(const KafkaOptions& options,
                                                   const std::string& group_id) {
  std::map<std::string, std::string> settings = {
      {"enable.auto.commit", "false"},
      {"enable.auto.offset.store", "false"},
      {"auto.offset.reset", "earliest"},
      {"enable.partition.eof", "false"},
      {"fetch.wait.max.ms", std::to_string(options.fetch_wait_max_ms)},
      {"fetch.error.backoff.ms", "50"},
      // Fetch sizes stay librdkafka's: max.partition.fetch.bytes (1 MiB) grows by itself for a
      // larger record, up to fetch.max.bytes (50 MiB) and receive.message.max.bytes (100 MB), so
      // poison larger than the producer's limit (1.2 MB in the e2e test) is fetched and
      // dead-lettered rather than stalling its partition.
      {"session.timeout.ms", std::to_string(options.session_timeout_ms)},
      {"heartbeat.interval.ms", std::to_string(std::max(500, options.session_timeout_ms / 4))},
      {"partition.assignment.strategy", "range"},
  };
  // librdkafka wants a group.id even for assign()-only consumers; one that never subscribes
  // never joins the group, so a per-consumer id costs nothing.
  settings["group.id"] = group_id.empty() ? options.client_id + "-assign" : group_id;
  ASSIGN_OR_RETURN(rd_kafka_conf_t * conf, NewConf(options, settings));
  rd_kafka_conf_set_log_cb(conf, LogCallback);
  std::unique_ptr<Consumer> consumer(new Consumer());
  if (!group_id.empty()) {
    rd_kafka_conf_set_rebalance_cb(conf, RebalanceCallback);
    rd_kafka_conf_set_opaque(conf, consumer.get());
  }
  char errstr[512];
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
  if (!rk) {
    rd_kafka_conf_destroy(conf);
    return MakeError(ErrorCode::kUnavailable, std::string("kafka consumer: ") + errstr);
  }
  consumer->rk_ = rk;
  consumer->closed_ = group_id.empty();
  consumer->idle_pause_ = std::chrono::milliseconds(options.idle_pause_ms);
  consumer->idle_after_ = std::chrono::milliseconds(
      options.idle_after_ms > 0 ? options.idle_after_ms : options.idle_pause_ms);
  consumer->fetch_wait_ms_ = options.fetch_wait_max_ms;
  consumer->take_deliveries_ = options.take_deliveries;
  consumer->last_data_ = std::chrono::steady_clock::now();
  rd_kafka_poll_set_consumer(rk);
  consumer->queue_ = rd_kafka_queue_get_consumer(rk);
  return consumer;
}

Consumer::~Consumer() {
  Close();
  if (queue_) rd_kafka_queue_destroy(queue_);
  if (rk_) rd_kafka_destroy(rk_);
}

void Consumer::Close() {
  if (listener_) LocalDeliveries::Instance().Unregister(listener_);
  listener_ = 0;
  idle_paused_ = false;
  if (!closed_ && rk_) rd_kafka_consumer_close(rk_);
  closed_ = true;
}

void Consumer::MarkAssigned() {
  assigned_once_ = true;
  RestartIdle();
}

void Consumer::RestartIdle() {
  idle_paused_ = false;
  last_data_ = std::chrono::steady_clock::now();
}

void Consumer::Listen() {
  if (listener_) LocalDeliveries::Instance().Unregister(listener_);
  listener_ = 0;
  if (idle_pause_.count() <= 0 || assigned_.empty()) return;
  std::vector<std::string> topics;
  for (const auto& [topic, partitions] : assigned_) topics.push_back(topic);
  listener_ = LocalDeliveries::Instance().Register(std::move(topics), take_deliveries_);
}

void Consumer::SetPaused(bool paused) {
  if (paused) {
    rd_kafka_assign(rk_, nullptr);  // assigned_ holds where each partition goes on
    return;
  }
  rd_kafka_topic_partition_list_t* list = NewPartitionList(assigned_);
  rd_kafka_assign(rk_, list);
  rd_kafka_topic_partition_list_destroy(list);
}

bool Consumer::Consumed(const std::string& topic, int32_t partition, int64_t offset) {
  auto t = assigned_.find(topic);
  if (t == assigned_.end()) return true;
  auto p = t->second.find(partition);
  if (p == t->second.end()) return true;
  if (offset < p->second) return false;
  p->second = offset + 1;
  return true;
}

void Consumer::StartPause(std::chrono::steady_clock::time_point now) {
  // A wake from before the pause only costs one more look at LocalDeliveries.
  SetPaused(true);
  idle_paused_ = true;
  pause_ends_ = now + idle_pause_;
}

int Consumer::IdleTimeout(int timeout_ms) {
  using std::chrono::milliseconds;
  auto now = std::chrono::steady_clock::now();
  if (!idle_paused_) {
    if (now - last_data_ < idle_after_ || now < active_until_ || !Fetched()) return timeout_ms;
    StartPause(now);
  }
  auto deadline = std::min(pause_ends_, now + milliseconds(std::max(timeout_ms, 0)));
  if (missing_since_)
    deadline = std::min(deadline, *missing_since_ + milliseconds(kMissingGraceMs));
  const bool woken = LocalDeliveries::Instance().Wait(listener_, deadline);
  now = std::chrono::steady_clock::now();
  // Still paused: a delivery is taken from LocalDeliveries (TakeDelivered).
  if (now < pause_ends_ && (take_deliveries_ || !woken)) return 0;
  EndIdlePause();
  // Woken without taking deliveries, the data is at the broker: stay until it comes (idle_after
  // at most). At the pause's end, a look of a few fetches at what others produced.
  const milliseconds window =
      woken ? idle_after_ : milliseconds(std::max(2 * fetch_wait_ms_ + 5, kIdleLookMinMs));
  active_until_ = now + window;
  return std::min(timeout_ms, static_cast<int>(window.count()));
}

std::vector<KafkaMessage> Consumer::TakeDelivered(size_t max) {
  const auto now = std::chrono::steady_clock::now();
  std::optional<LocalDeliveries::TimePoint> oldest_kept;
  auto taken = LocalDeliveries::Instance().Take(listener_, assigned_, std::max<size_t>(max, 1),
                                                &oldest_kept);
  missing_since_ = oldest_kept;
  if (!taken.empty()) {
    last_data_ = now;
    // Not while records of other processes are being fetched: those would wait for the pause.
    if (!idle_paused_ && now >= active_until_ && now - last_fetched_ >= idle_after_) {
      StartPause(now);
    }
  } else if (idle_paused_ && oldest_kept &&
             now - *oldest_kept >= std::chrono::milliseconds(kMissingGraceMs)) {
    EndIdlePause();  // another process wrote before what was delivered here: fetch that
  }
  return taken;
}

bool Consumer::Fetched() const {
  for (const auto& [topic, partitions] : assigned_) {
    for (const auto& [partition, offset] : partitions) {
      if (HighWatermark(topic, partition) < 0) return false;  // no fetch answered yet
    }
  }
  return true;
}

void Consumer::EndIdlePause() {
  SetPaused(false);
  idle_paused_ = false;
}

Status Consumer::Assign(const std::string& topic, const std::map<int32_t, int64_t>& offsets) {
  return AssignTopics({{topic, offsets}});
}

Status Consumer::AssignTopics(const PartitionOffsets& offsets) {
  RestartIdle();
  assigned_ = offsets;
  rd_kafka_topic_partition_list_t* list = NewPartitionList(assigned_);
  const auto err = rd_kafka_assign(rk_, list);
  rd_kafka_topic_partition_list_destroy(list);
  if (err) return tl::unexpected(FromKafka(err, "assign"));
  Listen();
  return OkStatus();
}

Status Consumer::Subscribe(const std::string& topic, Rebalance rebalance) {
  rebalance_ = std::move(rebalance);
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(list, topic.c_str(), RD_KAFKA_PARTITION_UA);
  const auto err = rd_kafka_subscribe(rk_, list);
  rd_kafka_topic_partition_list_destroy(list);
  if (err) return tl::unexpected(FromKafka(err, "subscribe " + topic));
  return OkStatus();
}

Status Consumer::Seek(const std::string& topic, int32_t partition, int64_t offset) {
  if (listener_) {
    if (auto t = assigned_.find(topic); t != assigned_.end()) {
      if (auto p = t->second.find(partition); p != t->second.end()) p->second = offset;
    }
  }
  if (idle_paused_) EndIdlePause();
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(list, topic.c_str(), partition)->offset = offset;
  rd_kafka_error_t* error = rd_kafka_seek_partitions(rk_, list, 5000);
  Status status = OkStatus();
  if (error) {
    status = tl::unexpected(FromKafka(rd_kafka_error_code(error), "seek " + topic));
    rd_kafka_error_destroy(error);
  } else if (list->elems[0].err) {
    status = tl::unexpected(FromKafka(list->elems[0].err, "seek " + topic));
  }
  rd_kafka_topic_partition_list_destroy(list);
  return status;
}

Result<std::vector<KafkaMessage>> Consumer::ConsumeBatch(size_t max, int timeout_ms) {
  if (listener_) {
    // Against the mock: what this process produced comes from the acknowledgements, and the
    // partitions are unassigned while it does (LocalDeliveries).
    if (auto taken = TakeDelivered(max); !taken.empty()) return taken;
    timeout_ms = IdleTimeout(timeout_ms);
    if (idle_paused_) {
      if (auto taken = TakeDelivered(max); !taken.empty()) return taken;
    }
  }
  // consume_batch_queue waits until the batch is full or the timeout passes, which would add
  // the whole timeout to every command's latency. So: block for the first message only, then
  // take whatever else is already fetched without waiting.
  rd_kafka_message_t* first = rd_kafka_consume_queue(queue_, timeout_ms);
  if (!first) return std::vector<KafkaMessage>();
  if (listener_) last_data_ = std::chrono::steady_clock::now();
  if (raw_.size() < std::max<size_t>(max, 1)) raw_.resize(std::max<size_t>(max, 1));
  std::vector<rd_kafka_message_t*>& raw = raw_;
  raw[0] = first;
  ssize_t n = 1;
  if (max > 1) {
    const ssize_t more = rd_kafka_consume_batch_queue(queue_, 0, raw.data() + 1, max - 1);
    if (more > 0) n += more;
  }
  std::vector<KafkaMessage> out;
  out.reserve(static_cast<size_t>(n));
  bool fetched_new = false;  // not a copy of a record taken from LocalDeliveries
  static auto logger = Logger("kafka");
  for (ssize_t i = 0; i < n; ++i) {
    rd_kafka_message_t* m = raw[i];
    if (m->err) {
      if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        logger->warn("msg=\"consumer error\" error=\"{}\"", rd_kafka_message_errstr(m));
      }
    } else if (!listener_ || Consumed(rd_kafka_topic_name(m->rkt), m->partition, m->offset)) {
      rd_kafka_timestamp_type_t ts_type;
      out.push_back(ToKafkaMessage(m, rd_kafka_message_timestamp(m, &ts_type)));
      fetched_new = true;
    }
    rd_kafka_message_destroy(m);
  }
  if (fetched_new && take_deliveries_) last_fetched_ = std::chrono::steady_clock::now();
  // Fetched before the pause and handed out while paused: fetch on from after these.
  if (idle_paused_ && !out.empty()) EndIdlePause();
  return out;
}

void Consumer::Wake() { rd_kafka_queue_yield(queue_); }

int64_t Consumer::HighWatermark(const std::string& topic, int32_t partition) const {
  int64_t low = -1, high = -1;
  if (rd_kafka_get_watermark_offsets(rk_, topic.c_str(), partition, &low, &high)) return -1;
  return high;
}

Result<std::pair<int64_t, int64_t>> Consumer::QueryWatermarks(const std::string& topic,
                                                              int32_t partition,
                                                              int timeout_ms) const {
  int64_t low = -1, high = -1;
  const auto err =
      rd_kafka_query_watermark_offsets(rk_, topic.c_str(), partition, &low, &high, timeout_ms);
  if (err) return tl::unexpected(FromKafka(err, "watermarks of " + topic));
  return std::make_pair(low, high);
}

Result<std::map<int32_t, int64_t>> Consumer::OffsetsForTimes(
    const std::string& topic, const std::map<int32_t, int64_t>& times_ms, int timeout_ms) const {
  rd_kafka_topic_partition_list_t* list =
      rd_kafka_topic_partition_list_new(static_cast<int>(times_ms.size()));
  for (const auto& [partition, time_ms] : times_ms) {
    rd_kafka_topic_partition_list_add(list, topic.c_str(), partition)->offset = time_ms;
  }
  const auto err = rd_kafka_offsets_for_times(rk_, list, timeout_ms);
  std::map<int32_t, int64_t> out;
  for (int i = 0; i < list->cnt; ++i) {
    const auto& elem = list->elems[i];
    out[elem.partition] = elem.err ? -1 : elem.offset;
  }
  rd_kafka_topic_partition_list_destroy(list);
  if (err) return tl::unexpected(FromKafka(err, "offsets for times of " + topic));
  return out;
}

}  // namespace dcm
