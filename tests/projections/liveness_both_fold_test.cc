// Liveness `both` (SPEC §8) on the health state machine: a provider probed and beating is
// Unavailable when either signal is failing, Ready only when neither is; the fold keeps the two
// signals apart so the projection, a replay and the prober's carried states agree. Times are
// fixed values; no clock.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "projections/health_state.h"

namespace dcm {
namespace {

constexpr int64_t kT0 = 1767225600000;  // 2026-01-01T00:00:00Z

HealthProbe Probe(int64_t at_ms, ProbeFailure failure = ProbeFailure::kNone, int64_t reg = 1) {
  HealthProbe p;
  p.probe_id = "p-" + std::to_string(at_ms);
  p.time_ms = at_ms;
  p.provider_id = "edge-1";
  p.seq = at_ms;
  p.registration_seq = reg;
  p.url = "http://edge-1/health";
  p.failure = failure;
  p.http_status = failure == ProbeFailure::kNone ? 200 : 0;
  p.error = failure == ProbeFailure::kNone ? "" : "connection refused";
  return p;
}

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
  h.both = true;
  return h;
}

HeartbeatRecord Expiry(int64_t at_ms, int64_t last_beat_ms) {
  HeartbeatRecord h = Beat(at_ms, BeatResult::kExpired);
  h.beats = 0;
  h.last_beat_time_ms = last_beat_ms;
  return h;
}

constexpr auto kRefused = ProbeFailure::kConnect;

// A provider probed Ready and beaten once: two-signal mode, Ready.
HealthRecord ReadyOnBoth() {
  HealthRecord r;
  FoldProbe(r, Probe(kT0));
  FoldHeartbeat(r, Beat(kT0 + 100));
  return r;
}

TEST(LivenessBothFoldTest, AProviderNeverBeatenIsReadyOnProbesAloneAndKeepsItsBytes) {
  HealthRecord r;
  auto folded = FoldProbe(r, Probe(kT0));
  ASSERT_TRUE(folded.change.has_value());
  EXPECT_EQ(r.status, HealthStatus::kReady);
  EXPECT_FALSE(r.both) << "expiry starts with the first beat";
  EXPECT_FALSE(HeartbeatExpired(r));
  EXPECT_EQ(EncodeHealthRecord(r).find("liveness"), std::string::npos);
}

TEST(LivenessBothFoldTest, TheFirstBeatKeepsWhatTheProbesSaidAndSwitchesToTwoSignals) {
  HealthRecord r;
  FoldProbe(r, Probe(kT0));
  auto folded = FoldHeartbeat(r, Beat(kT0 + 100));
  EXPECT_TRUE(folded.applied);
  EXPECT_FALSE(folded.change.has_value()) << "Ready on probes, Ready on beats: no transition";
  EXPECT_TRUE(r.both);
  EXPECT_EQ(r.probe_status, HealthStatus::kReady);
  EXPECT_EQ(r.beat_status, HealthStatus::kReady);
  EXPECT_EQ(r.last_result, "healthy") << "the probes' last result stays theirs";
  EXPECT_EQ(r.consecutive_successes, 1) << "beats never touch the probe counters";
}

TEST(LivenessBothFoldTest, FailingProbesMakeItUnavailableAndArrivingBeatsDoNotRecoverIt) {
  HealthRecord r = ReadyOnBoth();
  FoldProbe(r, Probe(kT0 + 10000, kRefused));
  FoldProbe(r, Probe(kT0 + 20000, kRefused));
  EXPECT_EQ(r.status, HealthStatus::kReady) << "below the threshold the state is kept";
  auto tripped = FoldProbe(r, Probe(kT0 + 30000, kRefused));
  ASSERT_TRUE(tripped.change.has_value());
  EXPECT_EQ(tripped.change->to, HealthStatus::kUnavailable);
  EXPECT_EQ(tripped.change->reason, "3 consecutive failures (connect)");
  for (int64_t t = kT0 + 31000; t < kT0 + 60000; t += 5000) {
    auto beat = FoldHeartbeat(r, Beat(t));
    EXPECT_TRUE(beat.applied);
    EXPECT_FALSE(beat.change.has_value());
    EXPECT_EQ(r.status, HealthStatus::kUnavailable);
  }
  EXPECT_EQ(r.consecutive_failures, 3) << "beats never touch the probe counters";
  EXPECT_EQ(r.probe_status, HealthStatus::kUnavailable);
  EXPECT_EQ(r.beat_status, HealthStatus::kReady);
}

TEST(LivenessBothFoldTest, AnExpiredHeartbeatMakesItUnavailableAndHealthyProbesDoNotRecoverIt) {
  HealthRecord r = ReadyOnBoth();
  auto expired = FoldHeartbeat(r, Expiry(kT0 + 12100, kT0 + 100));
  ASSERT_TRUE(expired.change.has_value());
  EXPECT_EQ(expired.change->to, HealthStatus::kUnavailable);
  EXPECT_EQ(expired.change->reason, "heartbeat_expired");
  for (int64_t t = kT0 + 20000; t < kT0 + 60000; t += 10000) {
    auto probe = FoldProbe(r, Probe(t));
    EXPECT_FALSE(probe.change.has_value());
    EXPECT_EQ(r.status, HealthStatus::kUnavailable);
  }
  EXPECT_EQ(r.last_result, "healthy");
  EXPECT_TRUE(HeartbeatExpired(r)) << "a later probe result does not hide the expiry";
  EXPECT_EQ(r.last_transition_reason, "heartbeat_expired");
}

TEST(LivenessBothFoldTest, ItIsReadyAgainOnlyWhenBothSignalsRecover) {
  HealthRecord r = ReadyOnBoth();
  FoldHeartbeat(r, Expiry(kT0 + 12100, kT0 + 100));
  for (int64_t t : {kT0 + 13000, kT0 + 14000, kT0 + 15000}) FoldProbe(r, Probe(t, kRefused));
  EXPECT_EQ(r.probe_status, HealthStatus::kUnavailable);
  auto beat = FoldHeartbeat(r, Beat(kT0 + 16000));
  EXPECT_FALSE(beat.change.has_value()) << "the probes still fail";
  EXPECT_EQ(r.status, HealthStatus::kUnavailable);
  auto probe = FoldProbe(r, Probe(kT0 + 25000));
  ASSERT_TRUE(probe.change.has_value());
  EXPECT_EQ(probe.change->from, HealthStatus::kUnavailable);
  EXPECT_EQ(probe.change->to, HealthStatus::kReady);
  EXPECT_EQ(probe.change->reason, "healthy probe");

  // The other order: probes recover first, then the beat.
  FoldHeartbeat(r, Expiry(kT0 + 28000, kT0 + 16000));
  for (int64_t t : {kT0 + 29000, kT0 + 30000, kT0 + 31000}) FoldProbe(r, Probe(t, kRefused));
  EXPECT_FALSE(FoldProbe(r, Probe(kT0 + 41000)).change.has_value()) << "the beat is still out";
  auto back = FoldHeartbeat(r, Beat(kT0 + 42000));
  ASSERT_TRUE(back.change.has_value());
  EXPECT_EQ(back.change->to, HealthStatus::kReady);
  EXPECT_EQ(back.change->reason, "heartbeat");
}

TEST(LivenessBothFoldTest, UnhealthyOnEitherSideIsUnhealthyAndUnavailableWins) {
  HealthRecord r = ReadyOnBoth();
  auto unhealthy = FoldHeartbeat(r, Beat(kT0 + 5000, BeatResult::kReportedUnhealthy));
  ASSERT_TRUE(unhealthy.change.has_value());
  EXPECT_EQ(r.status, HealthStatus::kUnhealthy);
  for (int64_t t : {kT0 + 6000, kT0 + 7000, kT0 + 8000}) FoldProbe(r, Probe(t, kRefused));
  EXPECT_EQ(r.status, HealthStatus::kUnavailable);
  FoldProbe(r, Probe(kT0 + 9000));
  EXPECT_EQ(r.status, HealthStatus::kUnhealthy) << "the beat still says unhealthy";
  FoldHeartbeat(r, Beat(kT0 + 10000));
  EXPECT_EQ(r.status, HealthStatus::kReady);
}

TEST(LivenessBothFoldTest, ProbesBackOffOnTheProbesStatusAlone) {
  const std::chrono::milliseconds interval(10000), base(10000), max(300000);
  HealthRecord expired = ReadyOnBoth();
  FoldHeartbeat(expired, Expiry(kT0 + 12100, kT0 + 100));
  ASSERT_EQ(expired.status, HealthStatus::kUnavailable);
  EXPECT_EQ(ProbeDelay(expired, 3, interval, base, max), interval);
  EXPECT_EQ(CarriedStateOf(expired).status, HealthStatus::kReady)
      << "a probe carries what the probes say";
  HealthRecord failing = ReadyOnBoth();
  for (int i = 1; i <= 5; ++i) FoldProbe(failing, Probe(kT0 + i * 1000, kRefused));
  EXPECT_EQ(ProbeDelay(failing, 3, interval, base, max), std::chrono::milliseconds(40000));
}

TEST(LivenessBothFoldTest, AProbeOfANewerRegistrationGoesBackToOneSignal) {
  HealthRecord r = ReadyOnBoth();
  FoldHeartbeat(r, Expiry(kT0 + 12100, kT0 + 100));
  FoldProbe(r, Probe(kT0 + 20000, ProbeFailure::kNone, 2));
  EXPECT_FALSE(r.both);
  EXPECT_EQ(r.status, HealthStatus::kReady);
  EXPECT_FALSE(HeartbeatExpired(r));
  EXPECT_EQ(EncodeHealthRecord(r).find("liveness"), std::string::npos);
  auto beat = FoldHeartbeat(r, Beat(kT0 + 21000, BeatResult::kHealthy, 2));
  EXPECT_TRUE(beat.applied);
  EXPECT_TRUE(r.both);
  EXPECT_EQ(r.probe_status, HealthStatus::kReady);
}

TEST(LivenessBothFoldTest, ABeatOfANewerRegistrationIsPendingUntilProbed) {
  HealthRecord r = ReadyOnBoth();
  FoldHeartbeat(r, Beat(kT0 + 5000, BeatResult::kHealthy, 2));
  EXPECT_TRUE(r.both);
  EXPECT_EQ(r.probe_status, HealthStatus::kPending);
  EXPECT_EQ(r.status, HealthStatus::kPending);
  FoldProbe(r, Probe(kT0 + 6000, ProbeFailure::kNone, 2));
  EXPECT_EQ(r.status, HealthStatus::kReady);
}

TEST(LivenessBothFoldTest, TheStoredRecordNamesBothSignalsAndReadsBack) {
  HealthRecord r = ReadyOnBoth();
  FoldHeartbeat(r, Expiry(kT0 + 12100, kT0 + 100));
  const std::string json = EncodeHealthRecord(r);
  EXPECT_TRUE(json.ends_with(R"("last_beat_time_ms":1767225600100,"liveness":"both",)"
                             R"("probe_status":"Ready","beat_status":"Unavailable"})"))
      << json;
  auto decoded = DecodeHealthRecord(json);
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(*decoded, r);
  std::string bad = json;
  bad.replace(bad.find("\"Unavailable\"}"), 13, "\"Sleepy\"");
  EXPECT_FALSE(DecodeHealthRecord(bad).has_value()) << bad;
}

// The prober's way: its scheduler copy takes the beats' signal from the projection, folds each
// probe and writes the probe's state into the event; the projection folds that. It must reach
// the record a plain fold of the same events reaches, and name the same transitions.
TEST(LivenessBothFoldTest, CarriedProbesFoldToWhatPlainProbesFoldTo) {
  using Event = std::variant<HealthProbe, HeartbeatRecord>;
  const std::vector<Event> log = {
      Probe(kT0),
      Beat(kT0 + 500),
      Probe(kT0 + 10000, kRefused),
      Beat(kT0 + 10500, BeatResult::kReportedUnhealthy),
      Probe(kT0 + 20000, kRefused),
      Probe(kT0 + 30000, kRefused),
      Beat(kT0 + 30500),
      Expiry(kT0 + 42600, kT0 + 30500),
      Probe(kT0 + 50000),
      Probe(kT0 + 60000, ProbeFailure::kReportedUnhealthy),
      Beat(kT0 + 61000),
      Probe(kT0 + 70000),
  };
  HealthRecord plain, projected, scheduler;
  for (const Event& event : log) {
    if (const auto* beat = std::get_if<HeartbeatRecord>(&event)) {
      auto a = FoldHeartbeat(plain, *beat);
      auto b = FoldHeartbeat(projected, *beat);
      EXPECT_EQ(a.change, b.change);
      continue;
    }
    HealthProbe probe = std::get<HealthProbe>(event);
    auto a = FoldProbe(plain, probe);
    AdoptBeatSignal(scheduler, projected);
    auto decided = FoldProbe(scheduler, probe);
    probe.state = CarriedStateOf(scheduler);
    auto b = FoldProbe(projected, probe);
    EXPECT_EQ(a.change, b.change) << probe.probe_id;
    EXPECT_EQ(a.change, decided.change) << "the prober's health_changed, " << probe.probe_id;
    EXPECT_EQ(plain.status, projected.status) << probe.probe_id;
  }
  EXPECT_EQ(plain, projected);
  EXPECT_EQ(projected.status, HealthStatus::kReady);
}

}  // namespace
}  // namespace dcm
