// WriteWatch: which waiting writes answer 503 within the write timeout (SPEC §7).
#include "consumers/write_watch.h"

#include <gtest/gtest.h>

namespace dcm {
namespace {

using std::chrono::milliseconds;

TEST(WriteWatchTest, ARequestKafkaDoesNotAcknowledgeWithinTheWriteTimeoutIsDue) {
  WriteWatch watch(milliseconds(5000), true);
  watch.Submitted("a", 1000);
  EXPECT_TRUE(watch.Due(5999, true).empty());
  auto due = watch.Due(6000, true);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].first, "a");
  EXPECT_EQ(due[0].second.code, ErrorCode::kUnavailable);
  EXPECT_NE(due[0].second.message.find("did not acknowledge the request within 5s"),
            std::string::npos);
  EXPECT_EQ(watch.Pending(), 0u);  // answered once
  EXPECT_TRUE(watch.Due(99999, false).empty());
}

TEST(WriteWatchTest, AnAcknowledgedWriteWithoutOutcomeIsDueAtTheWriteTimeoutSayingWhy) {
  WriteWatch watch(milliseconds(5000), true);
  watch.Submitted("a", 0);
  watch.Acked("a");
  watch.Submitted("b", 0);
  watch.Acked("b");
  EXPECT_TRUE(watch.Due(4999, true).empty());
  auto stalled = watch.Due(5000, false);
  ASSERT_EQ(stalled.size(), 2u);
  EXPECT_NE(stalled[0].second.message.find("unreachable or stalled"), std::string::npos);
  watch.Submitted("c", 10000);
  watch.Acked("c");
  auto failing_over = watch.Due(15000, true);
  ASSERT_EQ(failing_over.size(), 1u);
  EXPECT_NE(failing_over[0].second.message.find("no outcome within 5s"), std::string::npos);
}

TEST(WriteWatchTest, WithoutTheOutcomeBoundAnAcknowledgedWriteWaitsWhileKafkaAnswers) {
  WriteWatch watch(milliseconds(5000), false);  // instance writes: sagas call SPs
  watch.Submitted("a", 0);
  watch.Acked("a");
  EXPECT_TRUE(watch.Due(60000, true).empty());
  EXPECT_EQ(watch.Due(60000, false).size(), 1u);
  watch.Submitted("b", 0);
  EXPECT_EQ(watch.Due(5000, true).size(), 1u) << "not acknowledged: due anyway";
}

TEST(WriteWatchTest, AStalledKafkaFailsNoWriteBeforeTheWriteTimeout) {
  WriteWatch watch(milliseconds(5000), true);
  watch.Submitted("a", 0);
  watch.Acked("a");
  watch.Submitted("b", 0);
  EXPECT_TRUE(watch.Due(4999, false).empty());
  EXPECT_EQ(watch.Due(5000, false).size(), 2u);
}

TEST(WriteWatchTest, AnAnsweredWriteIsForgotten) {
  WriteWatch watch(milliseconds(100), true);
  watch.Submitted("a", 0);
  watch.Done("a");
  watch.Acked("a");  // a late delivery report for an answered write: nothing to do
  EXPECT_EQ(watch.Pending(), 0u);
  EXPECT_TRUE(watch.Due(1000, false).empty());
}

}  // namespace
}  // namespace dcm
