#include "consumers/topic_admin.h"

#include <librdkafka/rdkafka.h>

#include "src/common/log.h"

namespace dcm {
namespace {

constexpr int kTimeoutMs = 15000;

Status CreateWithAdminApi(rd_kafka_t* rk, const std::vector<TopicSpec>& missing,
                          int replication_factor) {
  std::vector<rd_kafka_NewTopic_t*> specs;
  char errstr[512];
  for (const auto& t : missing) {
    auto* nt = rd_kafka_NewTopic_new(t.name.c_str(), t.partitions, replication_factor, errstr,
                                     sizeof(errstr));
    if (!nt) {
      for (auto* s : specs) rd_kafka_NewTopic_destroy(s);
      return MakeError(ErrorCode::kInvalidArgument, "topic " + t.name + ": " + errstr);
    }
    rd_kafka_NewTopic_set_config(nt, "cleanup.policy", "delete");
    rd_kafka_NewTopic_set_config(nt, "retention.ms", std::to_string(t.retention_ms).c_str());
    specs.push_back(nt);
  }
  rd_kafka_queue_t* queue = rd_kafka_queue_new(rk);
  rd_kafka_AdminOptions_t* options = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
  rd_kafka_AdminOptions_set_operation_timeout(options, kTimeoutMs, errstr, sizeof(errstr));
  rd_kafka_CreateTopics(rk, specs.data(), specs.size(), options, queue);
  rd_kafka_event_t* event = rd_kafka_queue_poll(queue, kTimeoutMs + 5000);
  Status status = OkStatus();
  if (!event) {
    status = MakeError(ErrorCode::kTimeout, "CreateTopics timed out");
  } else if (rd_kafka_event_error(event)) {
    status = MakeError(ErrorCode::kUnavailable,
                       std::string("CreateTopics: ") + rd_kafka_event_error_string(event));
  } else {
    size_t count = 0;
    const auto* result = rd_kafka_event_CreateTopics_result(event);
    const auto** topics = rd_kafka_CreateTopics_result_topics(result, &count);
    for (size_t i = 0; i < count && status; ++i) {
      const auto err = rd_kafka_topic_result_error(topics[i]);
      if (err && err != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
        status = MakeError(ErrorCode::kUnavailable, std::string("create topic ") +
                                                        rd_kafka_topic_result_name(topics[i]) +
                                                        ": " + rd_kafka_err2str(err));
      }
    }
  }
  if (event) rd_kafka_event_destroy(event);
  rd_kafka_AdminOptions_destroy(options);
  rd_kafka_queue_destroy(queue);
  for (auto* s : specs) rd_kafka_NewTopic_destroy(s);
  return status;
}

}  // namespace

std::vector<TopicSpec> ProjectTopics(const Config& config) {
  return {
      {config.topics.ProviderRequests(), 1},
      // One partition: every instance folds all of dcm.providers (no work is split by its
      // partitions), so more would only fan each batch of the registrar's outcomes out into more
      // message sets and every reader's fetch into more partitions (BENCHMARKS.md, issue #16).
      // A topic that already has more keeps working: the registry's fold is order-free.
      {config.topics.Providers(), 1},
      {config.topics.Status(), config.partitions},
      {config.topics.InstanceRequests(), config.partitions},
      {config.topics.Instances(), config.partitions},
      {config.topics.Health(), config.partitions},
      // Probes alone have a retention (SPEC §7): at 10k providers every 10 s they are ~86M
      // events a day, while transitions and every other fact are kept forever.
      {config.topics.HealthProbes(), config.partitions, config.health_events_retention.count()},
      {config.topics.DeadLetter(), 1},
      // SPEC §10: one partition, so one FederationWorker decides capacity in total order; the
      // outcomes on one partition too: every instance folds all of them (like dcm.providers).
      {config.topics.FederationRequests(), 1},
      {config.topics.Federation(), 1},
  };
}

Status EnsureTopics(const KafkaOptions& options, const std::vector<TopicSpec>& topics,
                    const std::string& requests_topic, int replication_factor) {
  auto logger = Logger("topics");
  ASSIGN_OR_RETURN(auto producer, Producer::Create(options));
  auto check_requests_topic = [&](int partitions) -> Status {
    if (partitions == 1) return OkStatus();
    return MakeError(ErrorCode::kInvalidArgument,
                     "topic " + requests_topic + " has " + std::to_string(partitions) +
                         " partitions; it must have exactly 1 so that one registrar decides "
                         "every registration in order (SPEC §4). Recreate it with 1 partition.");
  };
  std::vector<TopicSpec> missing;
  for (const auto& t : topics) {
    ASSIGN_OR_RETURN(int count, TopicPartitionCount(producer->handle(), t.name, kTimeoutMs));
    if (count == 0) {
      missing.push_back(t);
    } else if (t.name == requests_topic) {
      RETURN_IF_ERROR(check_requests_topic(count));  // before creating anything
    }
  }
  if (!missing.empty()) {
    for (const auto& t : missing) {
      logger->info("msg=\"creating topic\" topic={} partitions={}", t.name, t.partitions);
    }
    if (auto status = CreateWithAdminApi(producer->handle(), missing, replication_factor);
        !status) {
      return MakeError(
          status.error().code,
          status.error().message + " (on the embedded cluster, topics come from `dcm dev-kafka`)");
    }
  }
  ASSIGN_OR_RETURN(int requests_partitions,
                   TopicPartitionCount(producer->handle(), requests_topic, kTimeoutMs));
  return check_requests_topic(requests_partitions);
}

}  // namespace dcm
