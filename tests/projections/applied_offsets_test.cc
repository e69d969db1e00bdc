// AppliedOffsets: what the projection runners publish and consumers wait on. Waits here never
// block for long: every deadline is now or already reached.
#include "projections/applied_offsets.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace dcm {
namespace {

TEST(AppliedOffsetsTest, KeepsTheHighestOffsetPublishedPerPartition) {
  AppliedOffsets applied;
  EXPECT_EQ(applied.Next("p", "t", 0), 0);
  applied.Publish("p", "t", 0, 7);
  applied.Publish("p", "t", 0, 5);
  EXPECT_EQ(applied.Next("p", "t", 0), 7);
  EXPECT_EQ(applied.Next("p", "t", 1), 0);
  EXPECT_EQ(applied.Next("q", "t", 0), 0);
}

TEST(AppliedOffsetsTest, TheObserverHearsEveryOffsetThatGrewAndNoOther) {
  AppliedOffsets applied;
  std::vector<std::string> heard;
  applied.SetObserver([&heard](const std::string& projection, const std::string& topic,
                               int32_t partition, int64_t next) {
    heard.push_back(projection + "/" + topic + "/" + std::to_string(partition) + "=" +
                    std::to_string(next));
  });
  applied.Publish("p", "t", 0, 7);
  applied.Publish("p", "t", 0, 7);  // no change
  applied.Publish("p", "t", 0, 5);  // older
  applied.Publish("p", "t", 1, 2);
  EXPECT_EQ(heard, (std::vector<std::string>{"p/t/0=7", "p/t/1=2"}));
}

TEST(AppliedOffsetsTest, WaitForReturnsAtOnceWhenEveryTargetIsReached) {
  AppliedOffsets applied;
  applied.Publish("p", "t", 0, 3);
  applied.Publish("p", "t", 1, 0);
  EXPECT_TRUE(applied.WaitFor("p", "t", {{0, 3}, {1, 0}}, std::chrono::steady_clock::now()));
  EXPECT_TRUE(applied.WaitFor("p", "t", {}, std::chrono::steady_clock::now()));
}

TEST(AppliedOffsetsTest, WaitForGivesUpAtItsDeadlineOrWhenToldToStop) {
  AppliedOffsets applied;
  applied.Publish("p", "t", 0, 2);
  EXPECT_FALSE(applied.WaitFor("p", "t", {{0, 3}}, std::chrono::steady_clock::now()));
  EXPECT_FALSE(applied.WaitFor("p", "t", {{2, 0}}, std::chrono::steady_clock::now()));
  EXPECT_FALSE(applied.WaitFor("p", "t", {{0, 3}},
                               std::chrono::steady_clock::now() + std::chrono::hours(1),
                               [] { return false; }));
}

TEST(AppliedOffsetsTest, AWaiterWakesWhenTheOffsetIsPublished) {
  AppliedOffsets applied;
  std::thread publisher([&] { applied.Publish("p", "t", 0, 4); });
  EXPECT_TRUE(applied.WaitFor("p", "t", {{0, 4}},
                              std::chrono::steady_clock::now() + std::chrono::seconds(30)));
  publisher.join();
}

}  // namespace
}  // namespace dcm
