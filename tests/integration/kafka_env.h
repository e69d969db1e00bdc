// Where integration tests find Kafka: the real cluster named by KAFKA_BROKERS when set, else an
// embedded mock cluster. Topics get a unique prefix per test binary run, so runs never collide.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "consumers/mock_cluster.h"
#include "consumers/topic_admin.h"
#include "src/common/config.h"
#include "src/common/result.h"
#include "src/common/uuid.h"

namespace dcm::testing {

// The value of `result`, or abort with its error: for fixture set-up, where a failure is the
// environment's, not the code under test's.
template <class T>
T OrDie(Result<T> result) {
  if (!result) {
    fprintf(stderr, "fixture set-up failed: %s\n", result.error().message.c_str());
    abort();
  }
  return std::move(*result);
}

class KafkaEnv {
 public:
  // `providers_partitions`: dcm.providers as a deployment made before it had one partition.
  static std::unique_ptr<KafkaEnv> Create(int partitions = 4, int providers_partitions = 1) {
    auto env = std::unique_ptr<KafkaEnv>(new KafkaEnv());
    env->config.topics.prefix = "it-" + NewUuidV4().substr(0, 8) + ".";
    env->config.partitions = partitions;
    auto topics = ProjectTopics(env->config);
    for (auto& topic : topics) {
      if (topic.name == env->config.topics.Providers()) topic.partitions = providers_partitions;
    }
    const char* brokers = std::getenv("KAFKA_BROKERS");
    if (brokers && *brokers) {
      env->kafka.brokers = brokers;
      env->kafka.session_timeout_ms = 6000;
      auto status = EnsureTopics(env->kafka, topics, env->config.topics.ProviderRequests(), 1);
      if (!status) return nullptr;
    } else {
      auto mock = MockCluster::Create(1);
      if (!mock) return nullptr;
      env->mock = std::move(*mock);
      if (!env->mock->CreateTopics(topics)) return nullptr;
      env->kafka.brokers = env->mock->bootstrap();
      env->kafka.fetch_wait_max_ms = 10;  // KAFKA-NOTES: the mock waits the full long-poll
      env->kafka.session_timeout_ms = 4000;
    }
    env->kafka.client_id = "dcm-it";
    return env;
  }

  std::unique_ptr<MockCluster> mock;  // null on a real cluster
  KafkaOptions kafka;
  Config config;
};

}  // namespace dcm::testing
