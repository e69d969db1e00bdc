#include "consumers/kafka.h"

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <chrono>
#include <future>

#include "consumers/kafka_internal.h"
#include "consumers/local_deliveries.h"
#include "events/event_limits.h"
#include "src/common/log.h"
#include "src/common/thread_name.h"

namespace dcm {
namespace {

using kafka_internal::LogCallback;
using kafka_internal::NewConf;
using kafka_internal::ToKafkaMessage;

// Wall-clock milliseconds: the CreateTime Produce stamps on a record by default.
int64_t WallNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// What Produce gives librdkafka with each record, back in its delivery report.
struct Sending {
  Producer::OnDelivery done;
  int64_t created_ms = -1;  // the CreateTime stamped on the record
};

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

}  // namespace

namespace kafka_internal {

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

rd_kafka_topic_partition_list_t* NewPartitionList(const PartitionOffsets& offsets) {
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(0);
  for (const auto& [topic, partitions] : offsets) {
    for (const auto& [partition, offset] : partitions) {
      rd_kafka_topic_partition_list_add(list, topic.c_str(), partition)->offset = offset;
    }
  }
  return list;
}

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

}  // namespace kafka_internal

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
  if (timestamp_ms == 0) timestamp_ms = WallNowMs();
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

KafkaOptions ProviderCommandOptions(KafkaOptions options) {
  options.extra.emplace("max.in.flight.requests.per.connection", "1");
  return options;
}

KafkaOptions ProviderOutcomeOptions(KafkaOptions options) {
  options = ProviderCommandOptions(std::move(options));
  options.extra.emplace("linger.ms", "0");
  return options;
}

KafkaOptions MockFetchWaitOptions(KafkaOptions options, bool on_mock, int mock_wait_ms) {
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
