// Liveness by heartbeat (SPEC §8) on the health state machine: FoldHeartbeat as a pure fold of
// heartbeat records, and the stored record with a beat time. Times are fixed values; no clock.
#include <gtest/gtest.h>

#include <string>

#include "projections/health_state.h"

namespace dcm {
namespace {

constexpr int64_t kT0 = 1767225600000;  // 2026-01-01T00:00:00Z

HeartbeatRecord Beat(int64_t at_ms, BeatResult result = BeatResult::kHealthy, int64_t reg = 1) {
  HeartbeatRecord h;
  h.record_id = "hb-" + std::to_string(at_ms);
  h.time_ms = at_ms;
  h.provider_id = "edge-1";
  h.seq = at_ms;
  h.registration_seq = reg;
  h.result = result;
  h.last_beat_time_ms = at_ms;
  h.timeout_ms = 12000;
  return h;
}

HeartbeatRecord Expiry(int64_t at_ms, int64_t last_beat_ms, int64_t reg = 1) {
  HeartbeatRecord h = Beat(at_ms, BeatResult::kExpired, reg);
  h.beats = 0;
  h.last_beat_time_ms = last_beat_ms;
  return h;
}

TEST(HeartbeatFoldTest, TheFirstBeatMakesANewProviderReady) {
  HealthRecord r;
  auto folded = FoldHeartbeat(r, Beat(kT0));
  EXPECT_TRUE(folded.applied);
  ASSERT_TRUE(folded.change.has_value());
  EXPECT_EQ(folded.change->from, HealthStatus::kPending);
  EXPECT_EQ(folded.change->to, HealthStatus::kReady);
  EXPECT_EQ(folded.change->reason, "heartbeat");
  EXPECT_EQ(folded.change->probe_ids, std::vector<std::string>{"hb-" + std::to_string(kT0)});
  EXPECT_EQ(r.status, HealthStatus::kReady);
  EXPECT_EQ(r.last_beat_time_ms, kT0);
  EXPECT_EQ(r.last_result, "healthy");
  EXPECT_EQ(r.registration_seq, 1);
  EXPECT_EQ(r.seq, 0) << "heartbeats leave the probe sequence alone";
  EXPECT_EQ(EffectiveHealthStatus(&r, 1), HealthStatus::kReady);
}

TEST(HeartbeatFoldTest, AnExpiryMakesItUnavailableWithReasonHeartbeatExpiredAndABeatRecovers) {
  HealthRecord r;
  FoldHeartbeat(r, Beat(kT0));
  auto expired = FoldHeartbeat(r, Expiry(kT0 + 12000, kT0));
  ASSERT_TRUE(expired.change.has_value());
  EXPECT_EQ(expired.change->to, HealthStatus::kUnavailable);
  EXPECT_EQ(expired.change->reason, "heartbeat_expired");
  EXPECT_EQ(r.last_transition_reason, "heartbeat_expired");
  EXPECT_EQ(r.last_transition_time_ms, kT0 + 12000);
  EXPECT_EQ(r.last_result, "heartbeat_expired");
  EXPECT_EQ(r.consecutive_failures, 1);
  EXPECT_EQ(r.last_error_time_ms, kT0 + 12000);
  auto again = FoldHeartbeat(r, Beat(kT0 + 20000));
  ASSERT_TRUE(again.change.has_value());
  EXPECT_EQ(again.change->from, HealthStatus::kUnavailable);
  EXPECT_EQ(again.change->to, HealthStatus::kReady);
  EXPECT_EQ(r.consecutive_failures, 0);
}

TEST(HeartbeatFoldTest, AnUnhealthyBeatMakesItUnhealthyAndAHealthyOneReadyAgain) {
  HealthRecord r;
  FoldHeartbeat(r, Beat(kT0));
  auto unhealthy = FoldHeartbeat(r, Beat(kT0 + 5000, BeatResult::kReportedUnhealthy));
  ASSERT_TRUE(unhealthy.change.has_value());
  EXPECT_EQ(unhealthy.change->to, HealthStatus::kUnhealthy);
  EXPECT_EQ(unhealthy.change->reason, "provider reported unhealthy");
  EXPECT_EQ(r.last_result, "reported_unhealthy");
  auto healthy = FoldHeartbeat(r, Beat(kT0 + 10000));
  ASSERT_TRUE(healthy.change.has_value());
  EXPECT_EQ(healthy.change->to, HealthStatus::kReady);
}

TEST(HeartbeatFoldTest, DuplicateAndOlderBeatsAreSkipped) {
  HealthRecord r;
  FoldHeartbeat(r, Beat(kT0 + 5000));
  const HealthRecord before = r;
  EXPECT_FALSE(FoldHeartbeat(r, Beat(kT0 + 5000)).applied);
  EXPECT_FALSE(FoldHeartbeat(r, Beat(kT0, BeatResult::kReportedUnhealthy)).applied);
  EXPECT_EQ(r, before);
}

TEST(HeartbeatFoldTest, AnExpiryThatDidNotSeeANewerBeatIsSkipped) {
  // A forwarded beat lands in the log before the owner's expiry, which timed an older beat.
  HealthRecord r;
  FoldHeartbeat(r, Beat(kT0));
  FoldHeartbeat(r, Beat(kT0 + 11000));
  auto stale = FoldHeartbeat(r, Expiry(kT0 + 12000, kT0));
  EXPECT_FALSE(stale.applied);
  EXPECT_EQ(r.status, HealthStatus::kReady);
}

TEST(HeartbeatFoldTest, ARepeatedExpiryChangesNothing) {
  HealthRecord r;
  FoldHeartbeat(r, Beat(kT0));
  FoldHeartbeat(r, Expiry(kT0 + 12000, kT0));
  auto repeated = FoldHeartbeat(r, Expiry(kT0 + 12000, kT0));
  EXPECT_FALSE(repeated.change.has_value());
  EXPECT_EQ(r.status, HealthStatus::kUnavailable);
}

TEST(HeartbeatFoldTest, ANewerRegistrationResetsTheCountersAndAnOlderOnesRecordIsSkipped) {
  HealthRecord r;
  FoldHeartbeat(r, Beat(kT0, BeatResult::kHealthy, 1));
  FoldHeartbeat(r, Beat(kT0 + 5000, BeatResult::kHealthy, 1));
  EXPECT_EQ(r.consecutive_successes, 2);
  auto reset = FoldHeartbeat(r, Beat(kT0 + 6000, BeatResult::kHealthy, 2));
  EXPECT_TRUE(reset.applied);
  EXPECT_EQ(r.registration_seq, 2);
  EXPECT_EQ(r.consecutive_successes, 1);
  EXPECT_FALSE(FoldHeartbeat(r, Beat(kT0 + 9000, BeatResult::kHealthy, 1)).applied);
}

TEST(HeartbeatFoldTest, TheRecordKeepsItsBytesWithoutABeatAndStoresTheBeatTimeWithOne) {
  HealthRecord r;
  r.provider_id = "sp-1";
  const std::string without = EncodeHealthRecord(r);
  EXPECT_EQ(without.find("last_beat_time_ms"), std::string::npos);
  EXPECT_TRUE(without.ends_with(R"("streak_probe_ids":[]})")) << without;
  FoldHeartbeat(r, Beat(kT0));
  const std::string with = EncodeHealthRecord(r);
  EXPECT_TRUE(with.ends_with(R"("streak_probe_ids":[],"last_beat_time_ms":1767225600000})"))
      << with;
  auto decoded = DecodeHealthRecord(with);
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(*decoded, r);
}

}  // namespace
}  // namespace dcm
