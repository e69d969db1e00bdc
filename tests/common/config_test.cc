#include "src/common/config.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dcm {
namespace {

using Strings = std::vector<std::string>;

TEST(SplitListTest, TrimsBlanksAndDropsEmptyItems) {
  EXPECT_EQ(SplitList("vm, container ,\tdatabase"), (Strings{"vm", "container", "database"}));
  EXPECT_EQ(SplitList("a,,b,"), (Strings{"a", "b"}));
  EXPECT_EQ(SplitList(""), Strings{});
  EXPECT_EQ(SplitList(" , "), Strings{});
  EXPECT_EQ(SplitList("one"), Strings{"one"});
}

Config DevConfig() {
  Config c;
  c.dev = true;
  return c;
}

TEST(ValidateConfigTest, AcceptsDefaultsInDevMode) { EXPECT_TRUE(ValidateConfig(DevConfig())); }

TEST(ValidateConfigTest, RequiresBrokersOutsideDevMode) {
  Config c;
  auto status = ValidateConfig(c);
  ASSERT_FALSE(status);
  EXPECT_EQ(status.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(status.error().message.find("--kafka-brokers"), std::string::npos);
  c.kafka_brokers = "k1:9092";
  EXPECT_TRUE(ValidateConfig(c));
}

TEST(ValidateConfigTest, RejectsListenWithoutPort) {
  Config c = DevConfig();
  c.listen = "localhost";
  EXPECT_FALSE(ValidateConfig(c));
}

TEST(ValidateConfigTest, RejectsEmptyServiceTypes) {
  Config c = DevConfig();
  c.service_types.clear();
  EXPECT_FALSE(ValidateConfig(c));
}

TEST(ValidateConfigTest, RejectsPartitionsOutOfRange) {
  Config c = DevConfig();
  c.partitions = 0;
  EXPECT_FALSE(ValidateConfig(c));
  c.partitions = 1025;
  EXPECT_FALSE(ValidateConfig(c));
  c.partitions = 1024;
  EXPECT_TRUE(ValidateConfig(c));
}

TEST(ValidateConfigTest, RejectsEmptyTopicPrefix) {
  Config c = DevConfig();
  c.topics.prefix.clear();
  EXPECT_FALSE(ValidateConfig(c));
}

TEST(TopicsTest, NamesFollowThePrefix) {
  Topics t;
  EXPECT_EQ(t.ProviderRequests(), "dcm.provider-requests");
  EXPECT_EQ(t.Providers(), "dcm.providers");
  EXPECT_EQ(t.Status(), "dcm.status");
  EXPECT_EQ(t.DeadLetter(), "dcm.dead-letter");
  t.prefix = "test.";
  EXPECT_EQ(t.Providers(), "test.providers");
}

}  // namespace
}  // namespace dcm
