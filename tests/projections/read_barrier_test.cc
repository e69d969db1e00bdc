#include "projections/read_barrier.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include "projections/applied_offsets.h"
#include "src/common/config.h"

namespace dcm {
namespace {

using std::chrono::milliseconds;

// Topic indices as in Topics::EventTopics().
constexpr uint8_t kProviderRequests = 0;
constexpr uint8_t kProviders = 1;
constexpr uint8_t kInstances = 4;

class ReadBarrierTest : public ::testing::Test {
 protected:
  ReadBarrierTest()
      : barrier_(topics_.EventTopics(),
                 {{"registry", {topics_.Providers()}, topics_.Providers()},
                  {"health", {topics_.Health()}, ""},
                  {"instances", {topics_.Instances()}, topics_.Instances()},
                  {"audit", topics_.EventTopics(), ""}},
                 &clock_, milliseconds(5000)) {}

  // A read of `names` with `min`: nullopt while it waits, else whether it caught up.
  struct Read {
    std::optional<bool> outcome;
    ReadPosition position;
  };
  std::shared_ptr<Read> Start(std::initializer_list<std::string_view> names,
                              const ReadPosition& min = {}) {
    auto read = std::make_shared<Read>();
    const uint32_t mask = barrier_.Mask(names);
    ReadPosition acknowledged;
    if (barrier_.CaughtUp(mask, min, &acknowledged)) {
      read->outcome = true;
    } else {
      barrier_.Keep(mask, acknowledged, min, [read](bool caught_up) { read->outcome = caught_up; });
    }
    read->position = acknowledged;
    read->position.Merge(min);
    return read;
  }

  Topics topics_;
  FakeClock clock_;
  ReadBarrier barrier_;
};

TEST_F(ReadBarrierTest, AReadOnAnInstanceThatAcknowledgedNothingGoesOnAtOnce) {
  auto read = Start({"audit", "registry"});
  EXPECT_EQ(read->outcome, true);
  EXPECT_TRUE(read->position.empty());
  EXPECT_EQ(barrier_.Pending(), 0u);
}

TEST_F(ReadBarrierTest, AnEventsReadWaitsUntilTheAuditAppliedTheAcknowledgedWrite) {
  barrier_.Applied("audit", topics_.ProviderRequests(), 0, 4);
  barrier_.Applied("audit", topics_.Providers(), 0, 4);
  barrier_.Acknowledge(topics_.ProviderRequests(), 0, 5);  // the request at offset 4
  barrier_.Acknowledge(topics_.Providers(), 0, 5);         // its outcome at offset 4

  auto read = Start({"audit"});
  EXPECT_FALSE(read->outcome.has_value());
  EXPECT_EQ(barrier_.RunDue(), 0u);
  barrier_.Applied("audit", topics_.Providers(), 0, 5);
  EXPECT_EQ(barrier_.RunDue(), 0u);  // the request is not indexed yet
  barrier_.Applied("audit", topics_.ProviderRequests(), 0, 5);
  EXPECT_EQ(barrier_.RunDue(), 1u);
  EXPECT_EQ(read->outcome, true);
  // The read's position is what it reflects: both acknowledged records.
  ASSERT_EQ(read->position.entries().size(), 2u);
  EXPECT_EQ(read->position.entries()[0], (PositionEntry{kProviderRequests, 0, 5}));
  EXPECT_EQ(read->position.entries()[1], (PositionEntry{kProviders, 0, 5}));
  // Caught up now: the next read goes on at once.
  EXPECT_EQ(Start({"audit"})->outcome, true);
}

TEST_F(ReadBarrierTest, TheProjectionThatCompletedAWriteIsNotWaitedForOnItsOwnOutcome) {
  // The registrar folded the outcome itself: the registry runner has not published it yet.
  barrier_.Applied("registry", topics_.Providers(), 0, 4);
  barrier_.Acknowledge(topics_.ProviderRequests(), 0, 5);
  barrier_.Acknowledge(topics_.Providers(), 0, 5);
  EXPECT_EQ(Start({"registry", "health"})->outcome, true);
  // A position asked for explicitly (another instance's write) is waited for.
  ReadPosition min;
  min.Raise(kProviders, 0, 5);
  auto read = Start({"registry", "health"}, min);
  EXPECT_FALSE(read->outcome.has_value());
  barrier_.Applied("registry", topics_.Providers(), 0, 5);
  EXPECT_EQ(barrier_.RunDue(), 1u);
  EXPECT_EQ(read->outcome, true);
}

TEST_F(ReadBarrierTest, AReadWaitsOnlyForTopicsItsProjectionsFold) {
  barrier_.Acknowledge(topics_.Instances(), 3, 8);
  EXPECT_EQ(Start({"registry", "health"})->outcome, true);
  EXPECT_EQ(Start({"instances"})->outcome, true);  // it completed the write
  auto audit = Start({"audit"});
  EXPECT_FALSE(audit->outcome.has_value());
  barrier_.Applied("audit", topics_.Instances(), 2, 100);  // another partition
  EXPECT_EQ(barrier_.RunDue(), 0u);
  barrier_.Applied("audit", topics_.Instances(), 3, 8);
  EXPECT_EQ(barrier_.RunDue(), 1u);
  EXPECT_EQ(audit->outcome, true);
}

TEST_F(ReadBarrierTest, AReadThatDoesNotCatchUpGivesUpAtTheReadWait) {
  ReadPosition min;
  min.Raise(kInstances, 0, 10);
  auto read = Start({"instances"}, min);
  clock_.Advance(milliseconds(4999));
  EXPECT_EQ(barrier_.RunDue(), 0u);
  EXPECT_FALSE(read->outcome.has_value());
  clock_.Advance(milliseconds(1));
  EXPECT_EQ(barrier_.RunDue(), 1u);
  EXPECT_EQ(read->outcome, false);
  EXPECT_EQ(barrier_.Pending(), 0u);
}

TEST_F(ReadBarrierTest, WaitsAreCountedByHowTheyEnded) {
  Metrics metrics;
  ReadBarrier barrier(topics_.EventTopics(), {{"audit", topics_.EventTopics(), ""}}, &clock_,
                      milliseconds(100), &metrics);
  barrier.Acknowledge(topics_.Providers(), 0, 1);
  const uint32_t mask = barrier.Mask({"audit"});
  for (int i = 0; i < 2; ++i) {
    ReadPosition acknowledged;
    ASSERT_FALSE(barrier.CaughtUp(mask, {}, &acknowledged));
    barrier.Keep(mask, acknowledged, {}, [](bool) {});
  }
  clock_.Advance(milliseconds(100));
  EXPECT_EQ(barrier.RunDue(), 2u);
  ReadPosition acknowledged;
  ASSERT_FALSE(barrier.CaughtUp(mask, {}, &acknowledged));
  barrier.Keep(mask, acknowledged, {}, [](bool) {});
  barrier.Applied("audit", topics_.Providers(), 0, 1);
  EXPECT_EQ(barrier.RunDue(), 1u);
  const std::string text = metrics.RenderPrometheus();
  EXPECT_NE(text.find("dcm_read_waits_total{result=\"timed_out\"} 2"), std::string::npos) << text;
  EXPECT_NE(text.find("dcm_read_waits_total{result=\"caught_up\"} 1"), std::string::npos) << text;
}

TEST_F(ReadBarrierTest, AReadWaitOfZeroAnswersAtTheFirstLookWhenBehind) {
  ReadBarrier barrier(topics_.EventTopics(), {{"audit", topics_.EventTopics(), ""}}, &clock_,
                      milliseconds(0));
  barrier.Acknowledge(topics_.Providers(), 0, 1);
  std::optional<bool> outcome;
  ReadPosition acknowledged;
  const uint32_t mask = barrier.Mask({"audit"});
  ASSERT_FALSE(barrier.CaughtUp(mask, {}, &acknowledged));
  barrier.Keep(mask, acknowledged, {}, [&](bool caught_up) { outcome = caught_up; });
  EXPECT_EQ(barrier.RunDue(), 1u);
  EXPECT_EQ(outcome, false);
}

TEST_F(ReadBarrierTest, KeepRunsAReadThatCaughtUpSinceItWasChecked) {
  barrier_.Acknowledge(topics_.Providers(), 0, 3);
  const uint32_t mask = barrier_.Mask({"audit"});
  ReadPosition acknowledged;
  ASSERT_FALSE(barrier_.CaughtUp(mask, {}, &acknowledged));
  barrier_.Applied("audit", topics_.Providers(), 0, 3);  // between the check and the keep
  std::optional<bool> outcome;
  barrier_.Keep(mask, acknowledged, {}, [&](bool caught_up) { outcome = caught_up; });
  EXPECT_EQ(outcome, true);
  EXPECT_EQ(barrier_.Pending(), 0u);
}

TEST_F(ReadBarrierTest, ManyWaitingReadsEachRunOnceWhenTheirPartitionArrives) {
  std::vector<std::shared_ptr<Read>> reads;
  for (int32_t p = 0; p < 8; ++p) {
    ReadPosition min;
    min.Raise(kInstances, p, 1);
    reads.push_back(Start({"audit"}, min));
  }
  for (int32_t p = 0; p < 8; p += 2) barrier_.Applied("audit", topics_.Instances(), p, 1);
  EXPECT_EQ(barrier_.RunDue(), 4u);
  for (int32_t p = 0; p < 8; ++p) EXPECT_EQ(reads[p]->outcome.has_value(), p % 2 == 0) << p;
  EXPECT_EQ(barrier_.Pending(), 4u);
  clock_.Advance(milliseconds(5000));
  EXPECT_EQ(barrier_.RunDue(), 4u);
  for (int32_t p = 1; p < 8; p += 2) EXPECT_EQ(reads[p]->outcome, false) << p;
}

TEST_F(ReadBarrierTest, UnknownTopicsAndProjectionsAreIgnored) {
  barrier_.Acknowledge("dcm.dead-letter", 0, 5);
  barrier_.Applied("rebuild", topics_.Providers(), 0, 5);
  EXPECT_TRUE(barrier_.Acknowledged().empty());
  EXPECT_EQ(barrier_.Mask({"nope"}), 0u);
  EXPECT_EQ(Start({"audit"})->outcome, true);
}

TEST_F(ReadBarrierTest, StopReleasesEveryWaitingReadAsNotCaughtUp) {
  ReadPosition min;
  min.Raise(kProviders, 0, 1);
  auto read = Start({"registry"}, min);
  barrier_.Stop();
  EXPECT_EQ(read->outcome, false);
}

// The thread: an applied batch wakes it (no RunDue by hand). Real threads, no sleeps: the
// future's timeout only bounds a broken build.
TEST_F(ReadBarrierTest, ThePublishedBatchOfARunnerReleasesAWaitingReadOnTheBarrierThread) {
  AppliedOffsets applied;
  applied.SetObserver(
      [this](const std::string& projection, const std::string& topic, int32_t partition,
             int64_t next) { barrier_.Applied(projection, topic, partition, next); });
  barrier_.Start();
  barrier_.Acknowledge(topics_.Providers(), 0, 2);
  std::promise<bool> done;
  const uint32_t mask = barrier_.Mask({"audit"});
  ReadPosition acknowledged;
  ASSERT_FALSE(barrier_.CaughtUp(mask, {}, &acknowledged));
  barrier_.Keep(mask, acknowledged, {}, [&](bool caught_up) { done.set_value(caught_up); });
  applied.Publish("audit", topics_.Providers(), 0, 2);
  auto future = done.get_future();
  ASSERT_EQ(future.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_TRUE(future.get());
  barrier_.Stop();
}

}  // namespace
}  // namespace dcm
