#include "projections/outcome_waiters.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dcm {
namespace {

CloudEvent Outcome(const std::string& id) {
  CloudEvent e;
  e.id = id;
  e.type = "dcm.provider.registered";
  return e;
}

struct Recorder {
  std::vector<Result<CloudEvent>> calls;
  OutcomeWaiters::Callback Callback() {
    return [this](Result<CloudEvent> r) { calls.push_back(std::move(r)); };
  }
};

TEST(OutcomeWaitersTest, CompleteCallsBackOnceWithTheOutcome) {
  OutcomeWaiters waiters;
  Recorder rec;
  waiters.Expect("req-1", 1000, rec.Callback());
  EXPECT_EQ(waiters.Pending(), 1u);
  waiters.Complete("req-1", Outcome("out-1"));
  ASSERT_EQ(rec.calls.size(), 1u);
  ASSERT_TRUE(rec.calls[0].has_value());
  EXPECT_EQ(rec.calls[0]->id, "out-1");
  EXPECT_EQ(waiters.Pending(), 0u);
  // Duplicates, late failures and expiry find no waiter.
  waiters.Complete("req-1", Outcome("out-1"));
  waiters.Fail("req-1", Error{ErrorCode::kUnavailable, "late", {}});
  waiters.Expire(1000000);
  EXPECT_EQ(rec.calls.size(), 1u);
}

TEST(OutcomeWaitersTest, CompleteOfUnknownRequestIsANoOp) {
  OutcomeWaiters waiters;
  Recorder rec;
  waiters.Expect("req-1", 1000, rec.Callback());
  waiters.Complete("someone-elses-request", Outcome("x"));
  EXPECT_TRUE(rec.calls.empty());
  EXPECT_EQ(waiters.Pending(), 1u);
}

TEST(OutcomeWaitersTest, ExpireFailsOnlyWaitersAtOrPastTheirDeadline) {
  OutcomeWaiters waiters;
  Recorder early, late;
  waiters.Expect("early", 100, early.Callback());
  waiters.Expect("late", 200, late.Callback());
  waiters.Expire(99);
  EXPECT_TRUE(early.calls.empty());
  waiters.Expire(100);
  ASSERT_EQ(early.calls.size(), 1u);
  ASSERT_FALSE(early.calls[0].has_value());
  EXPECT_EQ(early.calls[0].error().code, ErrorCode::kTimeout);
  EXPECT_NE(early.calls[0].error().message.find("may still take effect"), std::string::npos);
  EXPECT_TRUE(late.calls.empty());
  EXPECT_EQ(waiters.Pending(), 1u);
  waiters.Expire(250);
  ASSERT_EQ(late.calls.size(), 1u);
  EXPECT_EQ(late.calls[0].error().code, ErrorCode::kTimeout);
  EXPECT_EQ(waiters.Pending(), 0u);
  // An expired waiter is gone: a late outcome does not call it again.
  waiters.Complete("early", Outcome("x"));
  EXPECT_EQ(early.calls.size(), 1u);
}

TEST(OutcomeWaitersTest, FailPropagatesTheError) {
  OutcomeWaiters waiters;
  Recorder rec;
  waiters.Expect("req-1", 1000, rec.Callback());
  waiters.Fail("req-1", Error{ErrorCode::kUnavailable, "produce failed: broker down", {}});
  ASSERT_EQ(rec.calls.size(), 1u);
  ASSERT_FALSE(rec.calls[0].has_value());
  EXPECT_EQ(rec.calls[0].error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(rec.calls[0].error().message, "produce failed: broker down");
  EXPECT_EQ(waiters.Pending(), 0u);
}

TEST(OutcomeWaitersTest, CallbacksRunOutsideTheLockAndMayReenter) {
  OutcomeWaiters waiters;
  size_t pending_seen = 99;
  bool second_called = false;
  waiters.Expect("req-1", 100, [&](Result<CloudEvent>) {
    pending_seen = waiters.Pending();  // would deadlock if called under the lock
    waiters.Expect("req-2", 500, [&](Result<CloudEvent>) { second_called = true; });
  });
  waiters.Expire(100);
  EXPECT_EQ(pending_seen, 0u);
  EXPECT_EQ(waiters.Pending(), 1u);
  waiters.Complete("req-2", Outcome("x"));
  EXPECT_TRUE(second_called);
}

TEST(OutcomeWaitersTest, APositionedWaiterLearnsWhereTheOutcomeIsAndFailuresHaveNoPosition) {
  OutcomeWaiters waiters;
  std::vector<std::pair<bool, OutcomePosition>> calls;
  auto record = [&calls](Result<CloudEvent> r, OutcomePosition at) {
    calls.emplace_back(r.has_value(), at);
  };
  waiters.ExpectPositioned("req-1", 1000, record);
  waiters.ExpectPositioned("req-2", 1000, record);
  waiters.ExpectPositioned("req-3", 10, record);
  waiters.Complete("req-1", Outcome("out-1"), OutcomePosition{3, 41});
  waiters.Fail("req-2", Error{ErrorCode::kUnavailable, "no", {}});
  waiters.Expire(10);
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_TRUE(calls[0].first);
  EXPECT_EQ(calls[0].second.partition, 3);
  EXPECT_EQ(calls[0].second.offset, 41);
  for (size_t i = 1; i < 3; ++i) {
    EXPECT_FALSE(calls[i].first);
    EXPECT_EQ(calls[i].second.partition, -1);
  }
}

}  // namespace
}  // namespace dcm
