#include "consumers/kafka.h"

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <chrono>
#include <future>

#include "consumers/local_deliveries.h"
#include "events/event_limits.h"
#include "src/common/log.h"
#include "src/common/thread_name.h"

namespace dcm {
namespace {

Status SetConf(rd_kafka_conf_t* conf, const std::string& name, const std::string& value) {
  char errstr[512];
  if (rd_kafka_conf_set(conf, name.c_str(), value.c_str(), errstr, sizeof(errstr)) !=
      RD_KAFKA_CONF_OK) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "kafka config " + name + "=" + value + ": " + errstr);
  }
  return OkStatus();
}

Result<rd_kafka_conf_t*> NewConf(const KafkaOptions& options,
                                 const std::map<std::string, std::string>& settings) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  std::map<std::string, std::string> all = {
      {"bootstrap.servers", options.brokers},
      {"client.id", options.client_id},
      {"log.connection.close", "false"},
      {"reconnect.backoff.max.ms", "1000"},
  };
  for (const auto& [k, v] : settings) all[k] = v;
  for (const auto& [k, v] : options.extra) all[k] = v;
  for (const auto& [k, v] : all) {
    if (auto status = SetConf(conf, k, v); !status) {
      rd_kafka_conf_destroy(conf);
      return tl::unexpected(status.error());
    }
  }
  return conf;
}

void LogCallback(const rd_kafka_t*, int level, const char* fac, const char* buf) {
  static auto logger = Logger("kafka");
  if (level <= 3) {
    logger->error("facility={} msg=\"{}\"", fac, buf);
  } else if (level <= 4) {
    logger->warn("facility={} msg=\"{}\"", fac, buf);
  } else {
    logger->debug("facility={} msg=\"{}\"", fac, buf);
  }
}

using PartitionOffsets = std::map<std::string, std::map<int32_t, int64_t>>;

// A librdkafka partition list of topic -> partition -> offset (the caller destroys it).
rd_kafka_topic_partition_list_t* NewPartitionList(const PartitionOffsets& offsets) {
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(0);
  for (const auto& [topic, partitions] : offsets) {
    for (const auto& [partition, offset] : partitions) {
      rd_kafka_topic_partition_list_add(list, topic.c_str(), partition)->offset = offset;
    }
  }
  return list;
}

// What Produce gives librdkafka with each record, back in its delivery report.
struct Sending {
  Producer::OnDelivery done;
  int64_t created_ms = -1;  // the CreateTime stamped on the record
};

// Our copy of a record librdkafka fetched or acknowledged, with `timestamp_ms` as its time.
KafkaMessage ToKafkaMessage(const rd_kafka_message_t* m, int64_t timestamp_ms) {
  KafkaMessage msg;
  msg.topic = rd_kafka_topic_name(m->rkt);
  msg.partition = m->partition;
  msg.offset = m->offset;
  msg.timestamp_ms = timestamp_ms;
  if (m->key) msg.key.assign(static_cast<const char*>(m->key), m->key_len);
  if (m->payload) msg.value.assign(static_cast<const char*>(m->payload), m->len);
  rd_kafka_headers_t* hdrs = nullptr;
  if (rd_kafka_message_headers(m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR && hdrs) {
    const char* name;
    const void* value;
    size_t size;
    for (size_t h = 0; !rd_kafka_header_get_all(hdrs, h, &name, &value, &size); ++h) {
      msg.headers.emplace_back(
          name, value ? std::string(static_cast<const char*>(value), size) : std::string());
    }
  }
  return msg;
}

void DeliveryReport(rd_kafka_t*, const rd_kafka_message_t* message, void*) {
  std::unique_ptr<Sending> sending(static_cast<Sending*>(message->_private));
  if (!message->err && sending) {
    // As the log holds it: the acknowledgement's timestamp is the broker's (the mock's: 1234).
    LocalDeliveries::Instance().Delivered(rd_kafka_topic_name(message->rkt), [&] {
      return ToKafkaMessage(message, sending->created_ms);
    });
  }
  if (!sending || !sending->done) return;
  if (message->err) {
    sending->done(tl::unexpected(FromKafka(message->err, "delivery")));
  } else {
    rd_kafka_timestamp_type_t type;
    const int64_t timestamp = rd_kafka_message_timestamp(message, &type);
    sending->done(KafkaPosition{message->partition, message->offset, timestamp,
                                type == RD_KAFKA_TIMESTAMP_LOG_APPEND_TIME});
  }
}

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

int64_t SteadyNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

uint64_t InFlight::Add(int64_t now_ms) {
  std::lock_guard lock(mu_);
  started_.emplace(next_, now_ms);
  return next_++;
}

void InFlight::Remove(uint64_t token) {
  std::lock_guard lock(mu_);
  started_.erase(token);
}

std::optional<int64_t> InFlight::OldestMs() const {
  std::lock_guard lock(mu_);
  if (started_.empty()) return std::nullopt;
  return started_.begin()->second;
}

size_t InFlight::Size() const {
  std::lock_guard lock(mu_);
  return started_.size();
}

Error FromKafka(int error_code, const std::string& context) {
  const auto err = static_cast<rd_kafka_resp_err_t>(error_code);
  ErrorCode code = ErrorCode::kUnavailable;
  if (err == RD_KAFKA_RESP_ERR__TIMED_OUT || err == RD_KAFKA_RESP_ERR__MSG_TIMED_OUT ||
      err == RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT) {
    code = ErrorCode::kTimeout;
  } else if (err == RD_KAFKA_RESP_ERR__INVALID_ARG || err == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE) {
    code = ErrorCode::kInvalidArgument;
  }
  return Error{code, "kafka " + context + ": " + rd_kafka_err2str(err), {}};
}

Result<std::unique_ptr<Producer>> Producer::Create(const KafkaOptions& options) {
  ASSIGN_OR_RETURN(rd_kafka_conf_t * conf,
                   NewConf(options, {{"enable.idempotence", "true"},
                                     {"acks", "all"},
                                     {"linger.ms", "1"},
                                     {"message.timeout.ms", "30000"},
                                     {"queue.buffering.max.messages", "1000000"}}));
  rd_kafka_conf_set_dr_msg_cb(conf, DeliveryReport);
  rd_kafka_conf_set_log_cb(conf, LogCallback);
  char errstr[512];
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
  if (!rk) {
    rd_kafka_conf_destroy(conf);
    return MakeError(ErrorCode::kUnavailable, std::string("kafka producer: ") + errstr);
  }
  std::unique_ptr<Producer> producer(new Producer());
  producer->rk_ = rk;
  producer->poller_ = NamedThread("kafka-poll", [p = producer.get()] {
    while (p->running_.load()) {
      if (rd_kafka_poll(p->rk_, 50) > 0) LocalDeliveries::Instance().Notify();
    }
  });
  return producer;
}

Producer::~Producer() {
  running_ = false;
  if (poller_.joinable()) poller_.join();
  if (rk_) {
    rd_kafka_flush(rk_, 5000);
    LocalDeliveries::Instance().Notify();
    rd_kafka_destroy(rk_);
  }
}

void Producer::Produce(const std::string& topic, const std::string& key, const std::string& value,
                       const std::vector<std::pair<std::string, std::string>>& headers,
                       OnDelivery on_delivery, int32_t partition, int64_t timestamp_ms) {
  size_t bytes = key.size() + value.size();
  for (const auto& [name, val] : headers) bytes += name.size() + val.size();
  if (bytes > kMaxEventBytes) {
    on_delivery(
        MakeError(ErrorCode::kPayloadTooLarge, "event of " + std::to_string(bytes) + " bytes for " +
                                                   topic + " exceeds the limit of " +
                                                   std::to_string(kMaxEventBytes) + " bytes"));
    return;
  }
  const uint64_t token = in_flight_.Add(SteadyNowMs());
  // Stamped here rather than by librdkafka, so that the delivery report knows it.
  if (timestamp_ms == 0) {
    timestamp_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  }
  auto* opaque =
      new Sending{.done =
                      [this, token, done = std::move(on_delivery)](Result<KafkaPosition> result) {
                        in_flight_.Remove(token);
                        done(std::move(result));
                      },
                  .created_ms = timestamp_ms};
  rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
  for (int attempt = 0; attempt < 200; ++attempt) {
    rd_kafka_headers_t* hdrs = rd_kafka_headers_new(headers.size() + 1);
    rd_kafka_header_add(hdrs, kContentTypeHeader, -1, kCloudEventsJson, -1);
    for (const auto& [name, val] : headers) {
      rd_kafka_header_add(hdrs, name.data(), static_cast<ssize_t>(name.size()), val.data(),
                          static_cast<ssize_t>(val.size()));
    }
    err = rd_kafka_producev(rk_, RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_PARTITION(partition),
                            RD_KAFKA_V_KEY(key.data(), key.size()),
                            RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()),
                            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(hdrs),
                            RD_KAFKA_V_TIMESTAMP(timestamp_ms), RD_KAFKA_V_OPAQUE(opaque),
                            RD_KAFKA_V_END);
    if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return;  // ownership of hdrs and opaque passed on
    rd_kafka_headers_destroy(hdrs);
    if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // back-pressure: let it drain
  }
  std::unique_ptr<Sending> failed(opaque);
  failed->done(tl::unexpected(FromKafka(err, "produce to " + topic)));
}

int32_t KeyPartition(std::string_view key, int32_t partitions) {
  // The murmur2 partitioner reads neither the topic nor the opaques (rdkafka_msg.c).
  return rd_kafka_msg_partitioner_murmur2(nullptr, key.data(), key.size(), partitions, nullptr,
                                          nullptr);
}

Result<KafkaPosition> Producer::ProduceSync(
    const std::string& topic, const std::string& key, const std::string& value,
    const std::vector<std::pair<std::string, std::string>>& headers) {
  auto promise = std::make_shared<std::promise<Result<KafkaPosition>>>();
  auto future = promise->get_future();
  Produce(topic, key, value, headers,
          [promise](Result<KafkaPosition> result) { promise->set_value(std::move(result)); });
  return future.get();  // bounded by message.timeout.ms
}

std::future<Result<KafkaPosition>> Producer::ProducePositioned(const std::string& topic,
                                                               const std::string& key,
                                                               const std::string& value) {
  auto promise = std::make_shared<std::promise<Result<KafkaPosition>>>();
  auto future = promise->get_future();
  Produce(topic, key, value, {},
          [promise](Result<KafkaPosition> result) { promise->set_value(std::move(result)); });
  return future;
}

std::future<Status> Producer::ProduceAcked(
    const std::string& topic, const std::string& key, const std::string& value,
    const std::vector<std::pair<std::string, std::string>>& headers) {
  auto promise = std::make_shared<std::promise<Status>>();
  auto future = promise->get_future();
  Produce(topic, key, value, headers, [promise](Result<KafkaPosition> result) {
    promise->set_value(result ? OkStatus() : Status(tl::unexpected(result.error())));
  });
  return future;
}

Status Producer::ProbeBrokers(int timeout_ms) const {
  const rd_kafka_metadata_t* metadata = nullptr;
  // all_topics=0 without a topic: only what this handle already knows; the broker must answer.
  const auto err = rd_kafka_metadata(rk_, /*all_topics=*/0, nullptr, &metadata, timeout_ms);
  if (err) return tl::unexpected(FromKafka(err, "metadata"));
  rd_kafka_metadata_destroy(metadata);
  return OkStatus();
}

Status Producer::Flush(int timeout_ms) {
  const auto err = rd_kafka_flush(rk_, timeout_ms);
  LocalDeliveries::Instance().Notify();
  if (err) return tl::unexpected(FromKafka(err, "flush"));
  return OkStatus();
}

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
  listener_ = LocalDeliveries::Instance().Register(std::move(topics), /*offers=*/true);
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
  LocalDeliveries::Instance().Rearm(listener_);
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
  LocalDeliveries::Instance().Wait(listener_, deadline);
  now = std::chrono::steady_clock::now();
  // Still paused: a delivery is taken from LocalDeliveries (TakeDelivered).
  if (now < pause_ends_) return 0;
  EndIdlePause();
  // At the pause's end, a look of a few fetches at what others produced.
  const milliseconds window(std::max(2 * fetch_wait_ms_ + 5, kIdleLookMinMs));
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
    if (!idle_paused_ && now >= active_until_) StartPause(now);
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
    }
    rd_kafka_message_destroy(m);
  }
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

KafkaOptions ProviderCommandOptions(KafkaOptions options) {
  options.extra.emplace("max.in.flight.requests.per.connection", "1");
  return options;
}

KafkaOptions ProviderOutcomeOptions(KafkaOptions options) {
  options = ProviderCommandOptions(std::move(options));
  options.extra.emplace("linger.ms", "0");
  return options;
}

KafkaOptions RegistrarConsumerOptions(KafkaOptions options, bool on_mock, int mock_wait_ms) {
  if (on_mock && mock_wait_ms > 0) options.fetch_wait_max_ms = mock_wait_ms;
  return options;
}

bool IsMockCluster(KafkaHandle* handle, int timeout_ms) {
  char* id = rd_kafka_clusterid(handle, timeout_ms);
  if (!id) return false;
  const bool mock = std::string_view(id).starts_with("mockCluster");
  rd_kafka_mem_free(handle, id);
  return mock;
}

Result<int> TopicPartitionCount(KafkaHandle* handle, const std::string& topic, int timeout_ms) {
  const rd_kafka_metadata_t* metadata = nullptr;
  const auto err = rd_kafka_metadata(handle, /*all_topics=*/1, nullptr, &metadata, timeout_ms);
  if (err) return tl::unexpected(FromKafka(err, "metadata"));
  int count = 0;
  for (int i = 0; i < metadata->topic_cnt; ++i) {
    const auto& t = metadata->topics[i];
    if (topic == t.topic && t.err == RD_KAFKA_RESP_ERR_NO_ERROR) count = t.partition_cnt;
  }
  rd_kafka_metadata_destroy(metadata);
  return count;
}

}  // namespace dcm
