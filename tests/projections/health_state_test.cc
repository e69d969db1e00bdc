// The health state machine (SPEC §3.2, seed sp-health-check's table) as a pure fold: every row,
// the threshold, resets, hysteresis and the backoff schedule. Times are fixed values; no clock.
#include "projections/health_state.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace dcm {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

constexpr int64_t kT0 = 1767225600000;  // 2026-01-01T00:00:00Z

class Folder {
 public:
  explicit Folder(int failure_threshold = 3, int success_threshold = 1)
      : failures_(failure_threshold), successes_(success_threshold) {
    record_.provider_id = "sp-1";
  }

  // Folds the next probe (seq +1, 10 s later) with `failure`, for registration `reg`.
  FoldResult Next(ProbeFailure failure, int64_t reg = 1) {
    HealthProbe p;
    p.probe_id = "probe-" + std::to_string(++seq_);
    p.seq = seq_;
    p.time_ms = kT0 + seq_ * 10000;
    p.provider_id = "sp-1";
    p.registration_seq = reg;
    p.failure = failure;
    p.http_status = failure == ProbeFailure::kNone || failure == ProbeFailure::kBadBody ||
                            failure == ProbeFailure::kReportedUnhealthy
                        ? 200
                    : failure == ProbeFailure::kHttpStatus ? 503
                                                           : 0;
    p.error = failure == ProbeFailure::kNone ? "" : "boom";
    p.failure_threshold = failures_;
    p.success_threshold = successes_;
    probes_.push_back(p);
    return FoldProbe(record_, p);
  }
  void Repeat(ProbeFailure failure, int n) {
    for (int i = 0; i < n; ++i) Next(failure);
  }

  HealthRecord record_;
  std::vector<HealthProbe> probes_;
  int64_t seq_ = 0;

 private:
  int failures_;
  int successes_;
};

constexpr ProbeFailure kHealthy = ProbeFailure::kNone;
constexpr ProbeFailure kTimeout = ProbeFailure::kTimeout;
constexpr ProbeFailure kUnhealthy = ProbeFailure::kReportedUnhealthy;

TEST(HealthStateTest, NeverProbedIsPending) {
  HealthRecord r;
  EXPECT_EQ(r.status, HealthStatus::kPending);
  EXPECT_EQ(EffectiveHealthStatus(nullptr, 1), HealthStatus::kPending);
}

TEST(HealthStateTest, Ok200HealthyMakesPendingReadyAndNamesTheProbe) {
  Folder f;
  auto result = f.Next(kHealthy);
  ASSERT_TRUE(result.applied);
  EXPECT_EQ(f.record_.status, HealthStatus::kReady);
  ASSERT_TRUE(result.change.has_value());
  EXPECT_EQ(result.change->from, HealthStatus::kPending);
  EXPECT_EQ(result.change->to, HealthStatus::kReady);
  EXPECT_EQ(result.change->reason, "healthy probe");
  EXPECT_EQ(result.change->probe_ids, std::vector<std::string>{"probe-1"});
  EXPECT_EQ(result.change->seq, 1);
  EXPECT_EQ(f.record_.last_transition_time_ms, kT0 + 10000);
  EXPECT_EQ(f.record_.consecutive_successes, 1);
}

TEST(HealthStateTest, Ok200UnhealthyMakesUnhealthyAtOnceAndResetsTheFailureCounter) {
  Folder f;
  f.Next(kHealthy);
  f.Repeat(kTimeout, 2);
  EXPECT_EQ(f.record_.consecutive_failures, 2);
  auto result = f.Next(kUnhealthy);
  EXPECT_EQ(f.record_.status, HealthStatus::kUnhealthy);
  EXPECT_EQ(f.record_.consecutive_failures, 0);
  ASSERT_TRUE(result.change.has_value());
  EXPECT_EQ(result.change->reason, "provider reported unhealthy");
  EXPECT_EQ(result.change->probe_ids, std::vector<std::string>{"probe-4"});
  // The counter really restarted: two more failures stay below the threshold.
  f.Repeat(kTimeout, 2);
  EXPECT_EQ(f.record_.status, HealthStatus::kUnhealthy);
}

TEST(HealthStateTest, FailuresKeepTheStateUntilTheThresholdThenUnavailable) {
  Folder f;
  f.Next(kHealthy);
  EXPECT_FALSE(f.Next(kTimeout).change.has_value());
  EXPECT_FALSE(f.Next(kTimeout).change.has_value());
  EXPECT_EQ(f.record_.status, HealthStatus::kReady);
  EXPECT_EQ(f.record_.consecutive_failures, 2);
  auto third = f.Next(kTimeout);
  EXPECT_EQ(f.record_.status, HealthStatus::kUnavailable);
  ASSERT_TRUE(third.change.has_value());
  EXPECT_EQ(third.change->from, HealthStatus::kReady);
  EXPECT_EQ(third.change->reason, "3 consecutive failures (timeout)");
  EXPECT_EQ(third.change->probe_ids, (std::vector<std::string>{"probe-2", "probe-3", "probe-4"}));
  // Further failures keep it Unavailable without another change.
  EXPECT_FALSE(f.Next(kTimeout).change.has_value());
  EXPECT_EQ(f.record_.consecutive_failures, 4);
}

TEST(HealthStateTest, UnavailableExactlyWhenFailuresReachTheThreshold) {
  for (int threshold : {1, 2, 5, 10}) {
    SCOPED_TRACE(threshold);
    Folder f(threshold);
    for (int i = 1; i < threshold; ++i) {
      f.Next(kTimeout);
      EXPECT_EQ(f.record_.status, HealthStatus::kPending) << "after " << i << " failures";
    }
    f.Next(kTimeout);
    EXPECT_EQ(f.record_.status, HealthStatus::kUnavailable);
  }
}

TEST(HealthStateTest, EveryTransportAndResponseFailureCountsTowardsTheThreshold) {
  for (auto failure :
       {ProbeFailure::kTimeout, ProbeFailure::kConnect, ProbeFailure::kDns, ProbeFailure::kTls,
        ProbeFailure::kBlocked, ProbeFailure::kHttpStatus, ProbeFailure::kBadBody}) {
    SCOPED_TRACE(std::string(ProbeFailureName(failure)));
    Folder f;
    f.Next(kHealthy);
    f.Repeat(failure, 3);
    EXPECT_EQ(f.record_.status, HealthStatus::kUnavailable);
    EXPECT_EQ(f.record_.last_result, ProbeFailureName(failure));
    EXPECT_EQ(f.record_.last_error, "boom");
  }
}

TEST(HealthStateTest, AHealthyProbeResetsTheFailureCounter) {
  Folder f;
  f.Next(kHealthy);
  f.Repeat(kTimeout, 2);
  f.Next(kHealthy);
  EXPECT_EQ(f.record_.consecutive_failures, 0);
  f.Repeat(kTimeout, 2);
  EXPECT_EQ(f.record_.status, HealthStatus::kReady);
}

TEST(HealthStateTest, OneHealthyProbeRecoversUnavailableAndUnhealthy) {
  Folder f;
  f.Repeat(kTimeout, 5);
  ASSERT_EQ(f.record_.status, HealthStatus::kUnavailable);
  auto recovered = f.Next(kHealthy);
  EXPECT_EQ(f.record_.status, HealthStatus::kReady);
  ASSERT_TRUE(recovered.change.has_value());
  EXPECT_EQ(recovered.change->from, HealthStatus::kUnavailable);

  f.Next(kUnhealthy);
  ASSERT_EQ(f.record_.status, HealthStatus::kUnhealthy);
  f.Next(kHealthy);
  EXPECT_EQ(f.record_.status, HealthStatus::kReady);
}

TEST(HealthStateTest, UnhealthyFailsLikeAnyStateUntilTheThreshold) {
  Folder f;
  f.Next(kUnhealthy);
  f.Repeat(kTimeout, 2);
  EXPECT_EQ(f.record_.status, HealthStatus::kUnhealthy);
  f.Next(kTimeout);
  EXPECT_EQ(f.record_.status, HealthStatus::kUnavailable);
}

TEST(HealthStateTest, SuccessThresholdAddsHysteresis) {
  Folder f(/*failure_threshold=*/3, /*success_threshold=*/3);
  f.Repeat(kTimeout, 3);
  ASSERT_EQ(f.record_.status, HealthStatus::kUnavailable);
  EXPECT_FALSE(f.Next(kHealthy).change.has_value());
  EXPECT_FALSE(f.Next(kHealthy).change.has_value());
  EXPECT_EQ(f.record_.status, HealthStatus::kUnavailable);
  auto third = f.Next(kHealthy);
  EXPECT_EQ(f.record_.status, HealthStatus::kReady);
  ASSERT_TRUE(third.change.has_value());
  EXPECT_EQ(third.change->reason, "3 consecutive healthy probes");
  EXPECT_EQ(third.change->probe_ids, (std::vector<std::string>{"probe-4", "probe-5", "probe-6"}));
  // A failure in the middle of a recovery starts the count again.
  f.Repeat(kTimeout, 3);
  f.Repeat(kHealthy, 2);
  f.Next(kTimeout);
  f.Repeat(kHealthy, 2);
  EXPECT_EQ(f.record_.status, HealthStatus::kUnavailable);
}

TEST(HealthStateTest, DuplicateAndOlderProbesAreIgnored) {
  Folder f;
  f.Next(kHealthy);
  f.Next(kTimeout);
  const HealthRecord before = f.record_;
  for (const auto& probe : f.probes_) {
    EXPECT_FALSE(FoldProbe(f.record_, probe).applied);
  }
  EXPECT_EQ(f.record_, before);
}

TEST(HealthStateTest, ReRegistrationResetsCountersAndStatus) {
  Folder f;
  f.Repeat(kTimeout, 5);
  ASSERT_EQ(f.record_.status, HealthStatus::kUnavailable);
  // The first probe of registration 2 fails: counters restart from it, the state is Pending.
  auto failed = f.Next(kTimeout, /*reg=*/2);
  EXPECT_EQ(f.record_.status, HealthStatus::kPending);
  EXPECT_EQ(f.record_.consecutive_failures, 1);
  EXPECT_EQ(f.record_.registration_seq, 2);
  ASSERT_TRUE(failed.change.has_value());
  EXPECT_EQ(failed.change->reason, "re-registered");
  // A healthy first probe of registration 3 goes straight to Ready.
  auto healthy = f.Next(kHealthy, /*reg=*/3);
  EXPECT_EQ(f.record_.status, HealthStatus::kReady);
  ASSERT_TRUE(healthy.change.has_value());
  EXPECT_EQ(healthy.change->reason, "re-registered; healthy probe");
  // A Ready provider re-registering and still healthy does not change state.
  EXPECT_FALSE(f.Next(kHealthy, /*reg=*/4).change.has_value());
}

TEST(HealthStateTest, ProbeDelayIsTheIntervalUnlessUnavailable) {
  HealthRecord r;
  for (auto status : {HealthStatus::kPending, HealthStatus::kReady, HealthStatus::kUnhealthy}) {
    r.status = status;
    r.consecutive_failures = 2;
    EXPECT_EQ(ProbeDelay(r, 3, seconds(10), seconds(10), minutes(5)), seconds(10));
  }
}

TEST(HealthStateTest, UnavailableBacksOffExponentiallyUpToTheMaximum) {
  HealthRecord r;
  r.status = HealthStatus::kUnavailable;
  std::vector<int64_t> delays_s;
  for (int failures = 3; failures <= 12; ++failures) {
    r.consecutive_failures = failures;
    delays_s.push_back(
        std::chrono::duration_cast<seconds>(ProbeDelay(r, 3, seconds(1), seconds(10), minutes(5)))
            .count());
  }
  EXPECT_EQ(delays_s, (std::vector<int64_t>{10, 20, 40, 80, 160, 300, 300, 300, 300, 300}));
  r.consecutive_failures = 1000000;  // no overflow however long it stays down
  EXPECT_EQ(ProbeDelay(r, 3, seconds(1), seconds(10), minutes(5)), minutes(5));
}

TEST(HealthStateTest, EffectiveStatusIsPendingUntilTheCurrentRegistrationIsProbed) {
  Folder f;
  f.Next(kHealthy, /*reg=*/4);
  EXPECT_EQ(EffectiveHealthStatus(&f.record_, 4), HealthStatus::kReady);
  EXPECT_EQ(EffectiveHealthStatus(&f.record_, 3), HealthStatus::kReady);
  EXPECT_EQ(EffectiveHealthStatus(&f.record_, 5), HealthStatus::kPending);
}

TEST(HealthStateTest, RecordsRoundTripThroughStorage) {
  Folder f;
  f.Next(kHealthy);
  f.Repeat(kTimeout, 4);
  auto decoded = DecodeHealthRecord(EncodeHealthRecord(f.record_));
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
  EXPECT_EQ(*decoded, f.record_);
  for (const char* bad : {"", "{", "[]", R"({"status":"Ready"})"}) {
    auto result = DecodeHealthRecord(bad);
    ASSERT_FALSE(result.has_value()) << bad;
    EXPECT_EQ(result.error().code, ErrorCode::kCorruption);
  }
}

TEST(HealthStateTest, StoredRecordBytesStayTheSame) {
  // Live stores hold these bytes, and `dcm projections verify` compares them with a rebuild's:
  // the encoding must not change between releases.
  HealthRecord r;
  r.provider_id = "sp-\"1\"";
  r.status = HealthStatus::kUnavailable;
  r.seq = 42;
  r.registration_seq = 3;
  r.consecutive_failures = 3;
  r.consecutive_successes = 0;
  r.last_probe_time_ms = 1767225600123;
  r.last_probe_id = "p-42";
  r.last_result = "timeout";
  r.last_http_status = 503;
  r.last_latency_us = -1;
  r.last_transition_time_ms = 1767225600000;
  r.last_transition_reason = "3 failures";
  r.last_error = "tab\there \xC3\xA9";
  r.last_error_time_ms = 1767225600123;
  r.streak_probe_ids = {"p-40", "p-41", "p-42"};
  EXPECT_EQ(
      EncodeHealthRecord(r),
      R"({"provider_id":"sp-\"1\"","status":"Unavailable","seq":42,"registration_seq":3,)"
      R"("consecutive_failures":3,"consecutive_successes":0,"last_probe_time_ms":1767225600123,)"
      R"("last_probe_id":"p-42","last_result":"timeout","last_http_status":503,)"
      R"("last_latency_us":-1,"last_transition_time_ms":1767225600000,)"
      R"("last_transition_reason":"3 failures","last_error":"tab\there )"
      "\xC3\xA9"
      R"(","last_error_time_ms":1767225600123,"streak_probe_ids":["p-40","p-41","p-42"]})");
  EXPECT_EQ(EncodeHealthRecord(HealthRecord{}),
            R"({"provider_id":"","status":"Pending","seq":0,"registration_seq":-1,)"
            R"("consecutive_failures":0,"consecutive_successes":0,"last_probe_time_ms":0,)"
            R"("last_probe_id":"","last_result":"","last_http_status":0,"last_latency_us":0,)"
            R"("last_transition_time_ms":0,"last_transition_reason":"","last_error":"",)"
            R"("last_error_time_ms":0,"streak_probe_ids":[]})");
}

TEST(HealthStateTest, ReplayingTheSameProbesWithDuplicatesGivesTheSameRecord) {
  std::mt19937 random(7);
  Folder live;
  const ProbeFailure choices[] = {kHealthy, kTimeout, kUnhealthy, ProbeFailure::kConnect};
  for (int i = 0; i < 500; ++i) live.Next(choices[random() % 4], 1 + i / 100);
  HealthRecord replayed;
  replayed.provider_id = "sp-1";
  for (size_t i = 0; i < live.probes_.size(); ++i) {
    FoldProbe(replayed, live.probes_[i]);
    if (random() % 3 == 0) FoldProbe(replayed, live.probes_[i]);  // a duplicated batch
    if (i > 0 && random() % 5 == 0) FoldProbe(replayed, live.probes_[i - 1]);
  }
  EXPECT_EQ(replayed, live.record_);
}

// Probe retention (HEALTH_EVENTS_RETENTION): the prober's events carry the state they fold to
// (health_probed v3), as ProbeScheduler::Complete writes them.
std::vector<HealthProbe> CarryingStates(const std::vector<HealthProbe>& probes,
                                        HealthRecord& record) {
  std::vector<HealthProbe> out;
  for (HealthProbe p : probes) {
    FoldProbe(record, p);
    p.state = CarriedStateOf(record);
    out.push_back(std::move(p));
  }
  return out;
}

HealthRecord FoldFrom(const std::vector<HealthProbe>& probes, size_t from, size_t to) {
  HealthRecord r;
  for (size_t i = from; i < to; ++i) FoldProbe(r, probes[i]);
  return r;
}

// Thresholds 3/2, registrations changing, every kind of result: every branch of the fold.
std::vector<HealthProbe> RandomProbes(uint32_t seed, int n) {
  std::mt19937 random(seed);
  Folder live(3, 2);
  const ProbeFailure choices[] = {kHealthy, kHealthy, kTimeout, kUnhealthy, ProbeFailure::kConnect};
  for (int i = 0; i < n; ++i) live.Next(choices[random() % 5], 1 + i / 60);
  return live.probes_;
}

TEST(HealthStateTest, FoldingAnySuffixOfCarryingProbesGivesTheLiveRecord) {
  HealthRecord live;
  const auto probes = CarryingStates(RandomProbes(11, 240), live);
  EXPECT_EQ(FoldFrom(probes, 0, probes.size()), live);
  for (size_t end : {size_t{1}, size_t{7}, size_t{61}, size_t{150}, probes.size()}) {
    const HealthRecord at_end = FoldFrom(probes, 0, end);
    for (size_t start = 0; start < end; ++start) {
      ASSERT_EQ(FoldFrom(probes, start, end), at_end) << "suffix [" << start << ", " << end << ")";
    }
  }
}

TEST(HealthStateTest, AProbeCarryingItsStateFoldsToWhatThePureFoldComputes) {
  const auto plain = RandomProbes(23, 300);
  HealthRecord live;
  const auto carrying = CarryingStates(plain, live);
  HealthRecord pure, adopted;
  for (size_t i = 0; i < plain.size(); ++i) {
    const auto a = FoldProbe(pure, plain[i]);
    const auto b = FoldProbe(adopted, carrying[i]);
    ASSERT_EQ(adopted, pure) << "probe " << i;
    ASSERT_EQ(a.applied, b.applied);
    ASSERT_EQ(a.change.has_value(), b.change.has_value()) << "probe " << i;
    if (a.change) {
      EXPECT_EQ(a.change->to, b.change->to);
      EXPECT_EQ(a.change->reason, b.change->reason);
      EXPECT_EQ(a.change->probe_ids, b.change->probe_ids);
    }
  }
}

TEST(HealthStateTest, CarryingProbesIgnoreDuplicatesAndOlderCopies) {
  HealthRecord live;
  const auto probes = CarryingStates(RandomProbes(5, 120), live);
  std::mt19937 random(3);
  HealthRecord replayed;
  for (size_t i = 40; i < probes.size(); ++i) {  // a suffix, with copies
    FoldProbe(replayed, probes[i]);
    if (random() % 3 == 0) FoldProbe(replayed, probes[i]);
    if (random() % 4 == 0) FoldProbe(replayed, probes[i - 1 - random() % 10]);
  }
  EXPECT_EQ(replayed, live);
}

// An upgraded deployment: probes without a state (v1/v2, on dcm.health, kept forever), then the
// new build's carrying probes (on the probes topic, whose head retention drops).
TEST(HealthStateTest, AnUpgradedLogFoldsToTheLiveRecordWhateverHeadOfTheNewProbesIsGone) {
  const auto all = RandomProbes(17, 200);
  HealthRecord live;
  std::vector<HealthProbe> old_probes(all.begin(), all.begin() + 90);
  for (const auto& p : old_probes) FoldProbe(live, p);
  const auto new_probes =
      CarryingStates(std::vector<HealthProbe>(all.begin() + 90, all.end()), live);
  for (size_t dropped = 0; dropped < new_probes.size(); ++dropped) {
    HealthRecord rebuilt;
    for (const auto& p : old_probes) FoldProbe(rebuilt, p);
    for (size_t i = dropped; i < new_probes.size(); ++i) FoldProbe(rebuilt, new_probes[i]);
    ASSERT_EQ(rebuilt, live) << dropped << " new probes dropped";
    // The two topics interleave in any order: the new probes first, then the old ones.
    HealthRecord reordered;
    for (size_t i = dropped; i < new_probes.size(); ++i) FoldProbe(reordered, new_probes[i]);
    for (const auto& p : old_probes) FoldProbe(reordered, p);
    ASSERT_EQ(reordered, live) << dropped << " new probes dropped, topics reordered";
  }
}

}  // namespace
}  // namespace dcm
