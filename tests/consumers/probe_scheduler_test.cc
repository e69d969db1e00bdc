// ProbeScheduler with time passed in (no clock, no sleeps): jittered first probes and intervals,
// probes at once after (re-)registration, backoff while Unavailable, bounded in-flight work,
// stale completions dropped, and takeover keeping the previous owner's phase and sequence.
#include "consumers/probe_scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "consumers/kafka.h"

namespace dcm {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

const TimePoint kT0 = TimePoint(milliseconds(1767225600000));

ScheduleOptions Options(size_t max_in_flight = 4096) {
  ScheduleOptions o;
  o.interval = seconds(10);
  o.base_backoff = seconds(10);
  o.max_backoff = seconds(300);
  o.failure_threshold = 3;
  o.success_threshold = 1;
  o.max_in_flight = max_in_flight;
  return o;
}

ProbeTarget Target(const std::string& id, int64_t reg = 1) {
  return ProbeTarget{id, "http://" + id + "/health", reg};
}

ProbeResponse Response(int status, std::string body) {
  ProbeResponse r;
  r.http_status = status;
  r.body = std::move(body);
  return r;
}
ProbeResponse Healthy() { return Response(200, R"({"status":"healthy"})"); }
ProbeResponse Refused() { return ProbeResponse{ProbeFailure::kConnect, 0, "", 100, "refused"}; }

double Ms(TimePoint a, TimePoint b) {
  return static_cast<double>(std::chrono::duration_cast<milliseconds>(a - b).count());
}

// Runs one provider for `rounds` probes, answering each with `answer`, and returns each probe's
// start time (its due time: the test jumps straight there).
std::vector<TimePoint> ProbeRounds(ProbeScheduler& s, int rounds, const ProbeResponse& answer) {
  std::vector<TimePoint> starts;
  for (int i = 0; i < rounds; ++i) {
    auto due = s.NextDue();
    EXPECT_TRUE(due.has_value());
    if (!due) break;
    auto tasks = s.TakeDue(*due, nullptr);
    EXPECT_EQ(tasks.size(), 1u);
    if (tasks.empty()) break;
    starts.push_back(*due);
    EXPECT_TRUE(s.Complete(tasks[0], answer, *due + milliseconds(5), "p").has_value());
  }
  return starts;
}

TEST(ProbeSchedulerTest, FirstProbesLandAtRandomPointsWithinTheInterval) {
  ProbeScheduler s(Options(), 1);
  for (int i = 0; i < 1000; ++i)
    s.Upsert(Target("sp-" + std::to_string(i)), std::nullopt, kT0, false);
  EXPECT_TRUE(s.TakeDue(kT0 - milliseconds(1), nullptr).empty());
  std::vector<double> offsets;
  TimePoint now = kT0;
  while (auto due = s.NextDue()) {
    auto tasks = s.TakeDue(*due, nullptr);
    for (size_t i = 0; i < tasks.size(); ++i) offsets.push_back(Ms(*due, kT0));
    for (const auto& t : tasks) s.Remove(t.id);
    now = *due;
  }
  ASSERT_EQ(offsets.size(), 1000u);
  EXPECT_GE(*std::min_element(offsets.begin(), offsets.end()), 0);
  EXPECT_LT(*std::max_element(offsets.begin(), offsets.end()), 10000);
  // Spread: every tenth of the interval holds some of them.
  std::set<int> deciles;
  for (double o : offsets) deciles.insert(static_cast<int>(o / 1000));
  EXPECT_EQ(deciles.size(), 10u);
}

TEST(ProbeSchedulerTest, LaterIntervalsVaryByTenPercent) {
  ProbeScheduler s(Options(), 2);
  s.Upsert(Target("sp-1"), std::nullopt, kT0, false);
  auto starts = ProbeRounds(s, 200, Healthy());
  ASSERT_EQ(starts.size(), 200u);
  std::set<int64_t> gaps;
  for (size_t i = 1; i < starts.size(); ++i) {
    const double gap = Ms(starts[i], starts[i - 1]);
    EXPECT_GE(gap, 9000);
    EXPECT_LE(gap, 11000);
    gaps.insert(static_cast<int64_t>(gap));
  }
  EXPECT_GT(gaps.size(), 50u) << "intervals should vary";
}

TEST(ProbeSchedulerTest, ARegistrationIsProbedAtOnce) {
  ProbeScheduler s(Options(), 3);
  s.Upsert(Target("sp-1"), std::nullopt, kT0, /*registered_now=*/true);
  auto tasks = s.TakeDue(kT0, nullptr);
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].url, "http://sp-1/health");
}

TEST(ProbeSchedulerTest, AReRegistrationProbesAtOnceAndResetsWithTheNextProbe) {
  ProbeScheduler s(Options(), 4);
  s.Upsert(Target("sp-1", 1), std::nullopt, kT0, true);
  ProbeRounds(s, 5, Refused());
  ASSERT_EQ(s.Record("sp-1")->status, HealthStatus::kUnavailable);
  const TimePoint later = kT0 + seconds(60);
  ASSERT_GT(*s.NextDue(), later) << "backing off";
  // Same registration again (a reconcile): nothing changes.
  EXPECT_FALSE(s.Upsert(Target("sp-1", 1), std::nullopt, later, false));
  EXPECT_TRUE(s.TakeDue(later, nullptr).empty());
  // A newer registration with a new endpoint: probe now, and report the URL change.
  ProbeTarget moved{"sp-1", "http://elsewhere/health", 2};
  EXPECT_TRUE(s.Upsert(moved, std::nullopt, later, true));
  auto tasks = s.TakeDue(later, nullptr);
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].url, "http://elsewhere/health");
  auto done = s.Complete(tasks[0], Healthy(), later, "p");
  ASSERT_TRUE(done.has_value());
  EXPECT_EQ(done->probe.registration_seq, 2);
  ASSERT_TRUE(done->change.has_value());
  EXPECT_EQ(done->change->reason, "re-registered; healthy probe");
  EXPECT_EQ(s.Record("sp-1")->status, HealthStatus::kReady);
}

TEST(ProbeSchedulerTest, AReRegistrationDuringAProbeProbesRightAfterIt) {
  ProbeScheduler s(Options(), 5);
  s.Upsert(Target("sp-1", 1), std::nullopt, kT0, true);
  auto tasks = s.TakeDue(kT0, nullptr);
  ASSERT_EQ(tasks.size(), 1u);
  s.Upsert(Target("sp-1", 2), std::nullopt, kT0 + milliseconds(10), true);
  EXPECT_TRUE(s.TakeDue(kT0 + milliseconds(10), nullptr).empty()) << "one probe at a time";
  auto done = s.Complete(tasks[0], Healthy(), kT0 + milliseconds(20), "p1");
  ASSERT_TRUE(done);
  EXPECT_EQ(done->probe.registration_seq, 1) << "that probe checked the old registration";
  auto again = s.TakeDue(kT0 + milliseconds(20), nullptr);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].registration_seq, 2);
}

TEST(ProbeSchedulerTest, UnavailableProvidersBackOffExponentiallyWithJitter) {
  ProbeScheduler s(Options(), 6);
  s.Upsert(Target("sp-1"), std::nullopt, kT0, true);
  auto starts = ProbeRounds(s, 10, Refused());
  ASSERT_EQ(starts.size(), 10u);
  // Probes 1-3 at the interval (the third makes it Unavailable), then 10, 20, 40, 80, 160,
  // 300, 300 s, each ±10%.
  const double expected_s[] = {10, 10, 10, 20, 40, 80, 160, 300, 300};
  for (size_t i = 1; i < starts.size(); ++i) {
    const double gap_s = Ms(starts[i], starts[i - 1]) / 1000;
    EXPECT_GE(gap_s, expected_s[i - 1] * 0.9 - 0.01) << "gap " << i;
    EXPECT_LE(gap_s, expected_s[i - 1] * 1.1 + 0.01) << "gap " << i;
  }
  EXPECT_EQ(s.Record("sp-1")->status, HealthStatus::kUnavailable);
  // Recovery returns to the interval.
  auto recovered = ProbeRounds(s, 3, Healthy());
  EXPECT_EQ(s.Record("sp-1")->status, HealthStatus::kReady);
  EXPECT_LE(Ms(recovered[2], recovered[1]), 11000);
}

TEST(ProbeSchedulerTest, InFlightWorkIsBoundedAndLagIsReported) {
  ProbeScheduler s(Options(/*max_in_flight=*/3), 7);
  for (int i = 0; i < 5; ++i) s.Upsert(Target("sp-" + std::to_string(i)), std::nullopt, kT0, true);
  std::vector<std::chrono::microseconds> lags;
  auto first = s.TakeDue(kT0 + milliseconds(40), &lags);
  EXPECT_EQ(first.size(), 3u);
  EXPECT_EQ(s.in_flight(), 3u);
  EXPECT_EQ(lags, std::vector<std::chrono::microseconds>(3, milliseconds(40)));
  EXPECT_TRUE(s.TakeDue(kT0 + seconds(1), nullptr).empty()) << "full";
  ASSERT_TRUE(s.Complete(first[0], Healthy(), kT0 + seconds(1), "p"));
  lags.clear();
  auto second = s.TakeDue(kT0 + seconds(1), &lags);
  EXPECT_EQ(second.size(), 1u);
  EXPECT_EQ(lags, std::vector<std::chrono::microseconds>{seconds(1)});
}

TEST(ProbeSchedulerTest, CompletionsOfRemovedOrRevokedProvidersAreDropped) {
  ProbeScheduler s(Options(), 8);
  s.Upsert(Target("a"), std::nullopt, kT0, true);
  s.Upsert(Target("b"), std::nullopt, kT0, true);
  auto tasks = s.TakeDue(kT0, nullptr);
  ASSERT_EQ(tasks.size(), 2u);
  const auto& a = tasks[0].id == "a" ? tasks[0] : tasks[1];
  const auto& b = tasks[0].id == "a" ? tasks[1] : tasks[0];
  s.Remove("a");
  EXPECT_FALSE(s.Complete(a, Healthy(), kT0, "p").has_value());
  s.Clear();
  s.Upsert(Target("b"), std::nullopt, kT0, true);  // re-assigned after a rebalance
  EXPECT_FALSE(s.Complete(b, Healthy(), kT0, "p").has_value()) << "a task of the old assignment";
  EXPECT_EQ(s.in_flight(), 0u);
}

TEST(ProbeSchedulerTest, TakeoverKeepsThePreviousOwnersPhaseAndSequence) {
  ProbeScheduler s(Options(), 9);
  HealthRecord record;
  record.provider_id = "sp-1";
  record.status = HealthStatus::kReady;
  record.seq = 41;
  record.registration_seq = 1;
  record.last_probe_time_ms =
      std::chrono::duration_cast<milliseconds>((kT0 - seconds(3)).time_since_epoch()).count();
  s.Upsert(Target("sp-1"), record, kT0, false);
  ASSERT_TRUE(s.NextDue().has_value());
  EXPECT_EQ(*s.NextDue(), kT0 + seconds(7)) << "10 s after the last probe";
  auto tasks = s.TakeDue(*s.NextDue(), nullptr);
  ASSERT_EQ(tasks.size(), 1u);
  auto done = s.Complete(tasks[0], Healthy(), kT0 + seconds(7), "p42");
  ASSERT_TRUE(done);
  EXPECT_EQ(done->probe.seq, done->probe.time_ms) << "time-based once past the record's 41";
  EXPECT_EQ(done->probe.failure_threshold, 3);
  EXPECT_EQ(done->probe.success_threshold, 1);
  EXPECT_FALSE(done->change.has_value()) << "still Ready";
}

TEST(ProbeSchedulerTest, TakeoverSpreadsOverdueProvidersOverOneInterval) {
  ProbeScheduler s(Options(), 10);
  HealthRecord record;
  record.status = HealthStatus::kReady;
  record.seq = 5;
  record.registration_seq = 1;
  record.last_probe_time_ms =
      std::chrono::duration_cast<milliseconds>((kT0 - seconds(60)).time_since_epoch()).count();
  for (int i = 0; i < 100; ++i) s.Upsert(Target("sp-" + std::to_string(i)), record, kT0, false);
  EXPECT_GE(*s.NextDue(), kT0);
  EXPECT_TRUE(s.TakeDue(kT0 + seconds(10), nullptr).size() == 100u);
}

TEST(ProbeSchedulerTest, ARegistrationNewerThanTheRecordIsProbedAtOnceOnTakeover) {
  ProbeScheduler s(Options(), 11);
  HealthRecord record;
  record.status = HealthStatus::kUnavailable;
  record.seq = 9;
  record.registration_seq = 1;
  record.last_probe_time_ms =
      std::chrono::duration_cast<milliseconds>(kT0.time_since_epoch()).count();
  s.Upsert(Target("sp-1", /*reg=*/2), record, kT0, false);
  EXPECT_EQ(s.TakeDue(kT0, nullptr).size(), 1u);
}

TEST(ProbeSchedulerTest, SeqsStayStrictlyIncreasingWhenTheRecordIsAheadOfTheClock) {
  ProbeScheduler s(Options(), 13);
  HealthRecord record;
  record.status = HealthStatus::kReady;
  record.registration_seq = 1;
  record.seq = std::chrono::duration_cast<milliseconds>((kT0 + seconds(60)).time_since_epoch())
                   .count();  // written by an owner whose clock runs a minute ahead
  s.Upsert(Target("sp-1"), record, kT0, true);
  auto tasks = s.TakeDue(kT0, nullptr);
  auto first = s.Complete(tasks[0], Healthy(), kT0, "p1");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->probe.seq, record.seq + 1);
  tasks = s.TakeDue(*s.NextDue(), nullptr);
  auto second = s.Complete(tasks[0], Healthy(), kT0 + seconds(10), "p2");
  ASSERT_TRUE(second);
  EXPECT_EQ(second->probe.seq, record.seq + 2);
}

TEST(ProbeSchedulerTest, CompletionClassifiesTheBody) {
  ProbeScheduler s(Options(), 12);
  s.Upsert(Target("sp-1"), std::nullopt, kT0, true);
  auto tasks = s.TakeDue(kT0, nullptr);
  auto done = s.Complete(tasks[0], Response(200, R"({"status":"ok"})"), kT0, "p");
  ASSERT_TRUE(done);
  EXPECT_EQ(done->probe.failure, ProbeFailure::kBadBody);
  EXPECT_EQ(done->probe.http_status, 200);
}

TEST(KeyPartitionTest, IsStableAndSpreadsKeys) {
  EXPECT_EQ(KeyPartition("sp-1", 12), KeyPartition("sp-1", 12));
  std::map<int32_t, int> counts;
  for (int i = 0; i < 12000; ++i) {
    const int32_t p = KeyPartition("provider-" + std::to_string(i), 12);
    ASSERT_GE(p, 0);
    ASSERT_LT(p, 12);
    ++counts[p];
  }
  ASSERT_EQ(counts.size(), 12u);
  for (const auto& [p, n] : counts) EXPECT_GT(n, 800) << p;
}

}  // namespace
}  // namespace dcm
