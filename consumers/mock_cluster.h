// MockCluster: librdkafka's embedded Kafka-protocol cluster on loopback ports (dev mode,
// `dcm dev-kafka`, integration tests). Events live in memory; each partition keeps at most
// ~5 MiB (../shared/KAFKA-NOTES.md). The mock has no Admin API, so topics are created here.
// Thread-safe (the mock runs on its own thread).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "consumers/topic_admin.h"
#include "src/common/result.h"

struct rd_kafka_s;
struct rd_kafka_mock_cluster_s;

namespace dcm {

class MockCluster {
 public:
  static Result<std::unique_ptr<MockCluster>> Create(int brokers = 1);
  ~MockCluster();

  const std::string& bootstrap() const { return bootstrap_; }
  Status CreateTopic(const std::string& name, int partitions);
  Status CreateTopics(const std::vector<TopicSpec>& topics);
  // Fault injection for tests (broker ids start at 1).
  void SetBrokerDown(int broker_id);
  void SetBrokerUp(int broker_id);
  // The next `count` requests of Kafka API `api_key` (0 = Produce, 1 = Fetch, 3 = Metadata) fail
  // with the Kafka error code `error` (e.g. 19 = NOT_ENOUGH_REPLICAS, retriable).
  void PushRequestErrors(int api_key, int count, int error);
  // Every answer of the broker is delayed by `rtt_ms` (0: none).
  void SetBrokerRtt(int broker_id, int rtt_ms);

 private:
  MockCluster() = default;
  rd_kafka_s* rk_ = nullptr;
  rd_kafka_mock_cluster_s* cluster_ = nullptr;
  std::string bootstrap_;
};

}  // namespace dcm
