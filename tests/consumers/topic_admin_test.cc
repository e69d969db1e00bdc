// The topic set a fresh deployment gets: partition counts per topic (SPEC §4, issue #16).
#include "consumers/topic_admin.h"

#include <gtest/gtest.h>

#include <map>

namespace dcm {
namespace {

std::map<std::string, int> PartitionsByTopic(const Config& config) {
  std::map<std::string, int> out;
  for (const auto& t : ProjectTopics(config)) out[t.name] = t.partitions;
  return out;
}

TEST(ProjectTopicsTest, TheProviderTopicsHaveOnePartitionWhateverThePartitionsFlag) {
  Config config;
  config.partitions = 8;
  const auto topics = PartitionsByTopic(config);
  EXPECT_EQ(topics.at(config.topics.ProviderRequests()), 1);
  EXPECT_EQ(topics.at(config.topics.Providers()), 1);
  EXPECT_EQ(topics.at(config.topics.DeadLetter()), 1);
}

TEST(ProjectTopicsTest, TheFederationTopicsHaveOnePartitionSoCapacityIsDecidedInTotalOrder) {
  Config config;
  config.partitions = 8;
  const auto topics = PartitionsByTopic(config);
  EXPECT_EQ(topics.at(config.topics.FederationRequests()), 1);
  EXPECT_EQ(topics.at(config.topics.Federation()), 1);
}

TEST(ProjectTopicsTest, TopicsThatSplitWorkOrTakeSpWritesHaveThePartitionsFlag) {
  Config config;
  config.partitions = 8;
  config.topics.prefix = "t.";
  const auto topics = PartitionsByTopic(config);
  for (const auto& name :
       {config.topics.Health(), config.topics.HealthProbes(), config.topics.InstanceRequests(),
        config.topics.Instances(), config.topics.Status()}) {
    ASSERT_EQ(topics.count(name), 1u) << name;
    EXPECT_EQ(topics.at(name), 8) << name;
  }
  EXPECT_EQ(topics.size(), 10u);
}

TEST(ProjectTopicsTest, OnlyTheProbesTopicHasARetentionAndItIsHealthEventsRetention) {
  Config config;
  config.health_events_retention = std::chrono::minutes(2);
  for (const auto& t : ProjectTopics(config)) {
    EXPECT_EQ(t.retention_ms, t.name == config.topics.HealthProbes() ? 120000 : -1) << t.name;
  }
}

}  // namespace
}  // namespace dcm
