#include "consumers/mock_cluster.h"

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <vector>

namespace dcm {

Result<std::unique_ptr<MockCluster>> MockCluster::Create(int brokers) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  char errstr[512];
  rd_kafka_conf_set(conf, "client.id", "dcm-mock-cluster", errstr, sizeof(errstr));
  rd_kafka_conf_set(conf, "log_level", "3", errstr, sizeof(errstr));  // no "no bootstrap" notice
  // The handle only hosts the cluster; it never connects anywhere.
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
  if (!rk) {
    rd_kafka_conf_destroy(conf);
    return MakeError(ErrorCode::kUnavailable, std::string("mock cluster handle: ") + errstr);
  }
  std::unique_ptr<MockCluster> mock(new MockCluster());
  mock->rk_ = rk;
  mock->cluster_ = rd_kafka_mock_cluster_new(rk, brokers);
  if (!mock->cluster_) return MakeError(ErrorCode::kUnavailable, "could not start mock cluster");
  mock->bootstrap_ = rd_kafka_mock_cluster_bootstraps(mock->cluster_);
  return mock;
}

MockCluster::~MockCluster() {
  if (cluster_) rd_kafka_mock_cluster_destroy(cluster_);
  if (rk_) rd_kafka_destroy(rk_);
}

Status MockCluster::CreateTopic(const std::string& name, int partitions) {
  const auto err = rd_kafka_mock_topic_create(cluster_, name.c_str(), partitions, 1);
  if (err) {
    return MakeError(ErrorCode::kUnavailable, "mock topic " + name + ": " + rd_kafka_err2str(err));
  }
  return OkStatus();
}

Status MockCluster::CreateTopics(const std::vector<TopicSpec>& topics) {
  for (const auto& topic : topics) RETURN_IF_ERROR(CreateTopic(topic.name, topic.partitions));
  return OkStatus();
}

void MockCluster::SetBrokerDown(int broker_id) {
  rd_kafka_mock_broker_set_down(cluster_, broker_id);
}

void MockCluster::SetBrokerUp(int broker_id) { rd_kafka_mock_broker_set_up(cluster_, broker_id); }

void MockCluster::PushRequestErrors(int api_key, int count, int error) {
  std::vector<rd_kafka_resp_err_t> errors(static_cast<size_t>(count),
                                          static_cast<rd_kafka_resp_err_t>(error));
  rd_kafka_mock_push_request_errors_array(cluster_, static_cast<int16_t>(api_key), errors.size(),
                                          errors.data());
}

void MockCluster::SetBrokerRtt(int broker_id, int rtt_ms) {
  rd_kafka_mock_broker_set_rtt(cluster_, broker_id, rtt_ms);
}

}  // namespace dcm
