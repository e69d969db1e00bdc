// HeartbeatTracker (SPEC §8): who is Ready, when a provider expires, and which beats are
// recorded. Times are plain milliseconds handed in (a fake clock); no threads, no sleeps.
#include "consumers/heartbeat_tracker.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace dcm {
namespace {

using std::chrono::milliseconds;

constexpr int64_t kT0 = 1767225600000;
const std::optional<HealthRecord> kNoProjection;

class HeartbeatTrackerTest : public testing::Test {
 protected:
  HeartbeatTrackerTest() : tracker_(HeartbeatOptions{milliseconds(12000), milliseconds(60000)}) {
    tracker_.Upsert("edge-1", 1, kNoProjection);
  }

  BeatOutcome BeatAt(int64_t at_ms, BeatResult result = BeatResult::kHealthy,
                     const std::optional<HealthRecord>& projected = std::nullopt) {
    auto out = tracker_.Beat("edge-1", result, at_ms, projected, "r-" + std::to_string(at_ms));
    EXPECT_TRUE(out.has_value());
    return out ? *out : BeatOutcome{};
  }

  HeartbeatTracker tracker_;
};

TEST_F(HeartbeatTrackerTest, TheFirstBeatMakesItReadyAndIsRecordedWithItsTransition) {
  const BeatOutcome out = BeatAt(kT0);
  EXPECT_EQ(out.health.status, HealthStatus::kReady);
  ASSERT_TRUE(out.record.has_value());
  EXPECT_EQ(out.record->result, BeatResult::kHealthy);
  EXPECT_EQ(out.record->last_beat_time_ms, kT0);
  EXPECT_EQ(out.record->timeout_ms, 12000);
  EXPECT_EQ(out.record->registration_seq, 1);
  EXPECT_FALSE(out.record->forwarded);
  ASSERT_TRUE(out.change.has_value());
  EXPECT_EQ(out.change->to, HealthStatus::kReady);
}

TEST_F(HeartbeatTrackerTest, SteadyBeatsAreCoalescedIntoOneRecordPerRecordEvery) {
  BeatAt(kT0);
  int recorded = 0;
  int64_t beats_in_records = 0;
  for (int64_t t = kT0 + 5000; t <= kT0 + 180000; t += 5000) {  // 36 beats over 3 minutes
    const BeatOutcome out = BeatAt(t);
    EXPECT_EQ(out.health.status, HealthStatus::kReady);
    EXPECT_FALSE(out.change.has_value());
    if (out.record) {
      ++recorded;
      beats_in_records += out.record->beats;
      EXPECT_EQ((t - kT0) % 60000, 0) << "recorded only once the last record is 1m old";
    }
  }
  EXPECT_EQ(recorded, 3);
  EXPECT_EQ(beats_in_records, 36) << "each record counts the beats it stands for";
}

TEST_F(HeartbeatTrackerTest, ItExpiresTwelveSecondsAfterTheLastBeatNotBefore) {
  BeatAt(kT0);
  BeatAt(kT0 + 5000);  // coalesced
  EXPECT_EQ(tracker_.NextDeadline(), kT0 + 17000);
  EXPECT_TRUE(tracker_.Due(kT0 + 16999).empty());
  EXPECT_FALSE(tracker_.Expire("edge-1", kT0 + 16999, kNoProjection, "x").has_value());
  ASSERT_EQ(tracker_.Due(kT0 + 17000), std::vector<std::string>{"edge-1"});
  auto expired = tracker_.Expire("edge-1", kT0 + 17000, kNoProjection, "x");
  ASSERT_TRUE(expired.has_value());
  EXPECT_EQ(expired->health.status, HealthStatus::kUnavailable);
  EXPECT_EQ(expired->health.last_transition_reason, "heartbeat_expired");
  ASSERT_TRUE(expired->record.has_value());
  EXPECT_EQ(expired->record->result, BeatResult::kExpired);
  EXPECT_EQ(expired->record->last_beat_time_ms, kT0 + 5000) << "the beat it timed";
  EXPECT_EQ(expired->record->beats, 1) << "the coalesced beat is accounted for";
  ASSERT_TRUE(expired->change.has_value());
  EXPECT_EQ(expired->change->reason, "heartbeat_expired");
  // Decided once.
  EXPECT_TRUE(tracker_.Due(kT0 + 30000).empty());
  EXPECT_FALSE(tracker_.NextDeadline().has_value());
  EXPECT_FALSE(tracker_.Expire("edge-1", kT0 + 30000, kNoProjection, "y").has_value());
}

TEST_F(HeartbeatTrackerTest, TheNextBeatAfterAnExpiryIsRecordedAndMakesItReadyAgain) {
  BeatAt(kT0);
  ASSERT_TRUE(tracker_.Expire("edge-1", kT0 + 12000, kNoProjection, "x").has_value());
  const BeatOutcome out = BeatAt(kT0 + 13000);
  EXPECT_EQ(out.health.status, HealthStatus::kReady);
  ASSERT_TRUE(out.record.has_value());
  ASSERT_TRUE(out.change.has_value());
  EXPECT_EQ(out.change->from, HealthStatus::kUnavailable);
  EXPECT_EQ(tracker_.NextDeadline(), kT0 + 25000);
}

TEST_F(HeartbeatTrackerTest, AStatusChangeReportedByABeatIsRecordedAtOnce) {
  BeatAt(kT0);
  const BeatOutcome out = BeatAt(kT0 + 5000, BeatResult::kReportedUnhealthy);
  EXPECT_EQ(out.health.status, HealthStatus::kUnhealthy);
  ASSERT_TRUE(out.record.has_value());
  EXPECT_EQ(out.record->result, BeatResult::kReportedUnhealthy);
  ASSERT_TRUE(out.change.has_value());
}

TEST_F(HeartbeatTrackerTest, AReRegistrationIsRecordedOnItsNextBeat) {
  BeatAt(kT0);
  BeatAt(kT0 + 5000);
  tracker_.Upsert("edge-1", 7, kNoProjection);
  const BeatOutcome out = BeatAt(kT0 + 10000);
  ASSERT_TRUE(out.record.has_value());
  EXPECT_EQ(out.record->registration_seq, 7);
  EXPECT_EQ(out.health.registration_seq, 7);
}

TEST_F(HeartbeatTrackerTest, ABeatForwardedByAnotherInstancePostponesTheExpiry) {
  BeatAt(kT0);
  // Another instance recorded a beat at +10 s; the local projection folded it.
  HealthRecord projected;
  HeartbeatRecord forwarded;
  forwarded.provider_id = "edge-1";
  forwarded.registration_seq = 1;
  forwarded.time_ms = forwarded.seq = forwarded.last_beat_time_ms = kT0 + 10000;
  forwarded.forwarded = true;
  FoldHeartbeat(projected, forwarded);
  EXPECT_FALSE(tracker_.Expire("edge-1", kT0 + 12000, projected, "x").has_value());
  EXPECT_EQ(tracker_.NextDeadline(), kT0 + 22000);
  EXPECT_TRUE(tracker_.Expire("edge-1", kT0 + 22000, projected, "x").has_value());
}

TEST_F(HeartbeatTrackerTest, ForwardedBeatsArmANeverBeatenOrExpiredProviderOnRefresh) {
  // Every beat of edge-1 went to another instance: only the projection knows of them.
  auto forwarded_at = [](int64_t at_ms, const std::optional<HealthRecord>& base) {
    HealthRecord projected = base.value_or(HealthRecord{});
    HeartbeatRecord h;
    h.provider_id = "edge-1";
    h.registration_seq = 1;
    h.time_ms = h.seq = h.last_beat_time_ms = at_ms;
    h.forwarded = true;
    FoldHeartbeat(projected, h);
    return projected;
  };
  EXPECT_EQ(tracker_.Unarmed(), std::vector<std::string>{"edge-1"});
  const HealthRecord first = forwarded_at(kT0, std::nullopt);
  tracker_.Refresh("edge-1", first);
  EXPECT_TRUE(tracker_.Unarmed().empty());
  EXPECT_EQ(tracker_.NextDeadline(), kT0 + 12000);
  ASSERT_TRUE(tracker_.Expire("edge-1", kT0 + 12000, first, "x").has_value());
  // Expired here; a forwarded beat revives it in the projection, and a refresh re-arms it.
  EXPECT_EQ(tracker_.Unarmed(), std::vector<std::string>{"edge-1"});
  HealthRecord expired = first;
  HeartbeatRecord expiry;
  expiry.provider_id = "edge-1";
  expiry.registration_seq = 1;
  expiry.result = BeatResult::kExpired;
  expiry.time_ms = expiry.seq = kT0 + 12000;
  expiry.last_beat_time_ms = kT0;
  FoldHeartbeat(expired, expiry);
  const HealthRecord revived = forwarded_at(kT0 + 20000, expired);
  tracker_.Refresh("edge-1", revived);
  EXPECT_TRUE(tracker_.Unarmed().empty());
  EXPECT_EQ(tracker_.NextDeadline(), kT0 + 32000);
}

// The log of a provider the previous owner recorded a beat of at `at_ms`.
HealthRecord LoggedBeat(int64_t at_ms, bool forwarded = false) {
  HealthRecord logged;
  HeartbeatRecord beat;
  beat.provider_id = "edge-1";
  beat.registration_seq = 1;
  beat.time_ms = beat.seq = beat.last_beat_time_ms = at_ms;
  beat.forwarded = forwarded;
  FoldHeartbeat(logged, beat);
  return logged;
}

TEST(HeartbeatTrackerTakeoverTest, ATakenOverProviderKnownOnlyFromTheLogExpiresRecordEveryLater) {
  // The previous owner recorded a beat at T0 and may have taken (coalesced) beats up to
  // T0 + 1m without recording them: the log cannot tell, so the bound is T0 + 1m + 12 s, whenever
  // this instance took over (not from when it joined).
  const HealthRecord logged = LoggedBeat(kT0);
  HeartbeatTracker tracker(HeartbeatOptions{milliseconds(12000), milliseconds(60000)});
  tracker.Upsert("edge-1", 1, logged);
  EXPECT_EQ(tracker.NextDeadline(), kT0 + 72000);
  EXPECT_TRUE(tracker.Due(kT0 + 71999).empty());
  EXPECT_FALSE(tracker.Expire("edge-1", kT0 + 71999, logged, "x").has_value());
  auto expired = tracker.Expire("edge-1", kT0 + 72000, logged, "x");
  ASSERT_TRUE(expired.has_value());
  EXPECT_EQ(expired->health.status, HealthStatus::kUnavailable);
  EXPECT_EQ(expired->record->last_beat_time_ms, kT0) << "it times the logged beat";
}

TEST(HeartbeatTrackerTakeoverTest, ALiveProviderWhoseOwnerCrashedIsNotExpiredBeforeItsBeatsMove) {
  // Logged beat at T0; the crashed owner took beats every 5 s up to T0 + 55 s (coalesced, never
  // recorded). This instance takes over at T0 + 58 s; the provider's beats reach it at T0 + 66 s.
  const HealthRecord logged = LoggedBeat(kT0);
  HeartbeatTracker tracker(HeartbeatOptions{milliseconds(12000), milliseconds(60000)});
  tracker.Upsert("edge-1", 1, logged);
  for (int64_t t = kT0 + 58000; t < kT0 + 66000; t += 100) {
    ASSERT_TRUE(tracker.Due(t).empty()) << "expired a live provider at T0 + " << (t - kT0);
  }
  auto beat = tracker.Beat("edge-1", BeatResult::kHealthy, kT0 + 66000, logged, "b");
  ASSERT_TRUE(beat.has_value());
  EXPECT_EQ(beat->health.status, HealthStatus::kReady);
  EXPECT_FALSE(beat->change.has_value());
  // Its own beat: the normal rule from now on.
  EXPECT_EQ(tracker.NextDeadline(), kT0 + 78000);
}

TEST(HeartbeatTrackerTakeoverTest, OnceItTakesABeatItselfTheLastBeatPlusTimeoutApplies) {
  const HealthRecord logged = LoggedBeat(kT0);
  HeartbeatTracker tracker(HeartbeatOptions{milliseconds(12000), milliseconds(60000)});
  tracker.Upsert("edge-1", 1, logged);
  ASSERT_TRUE(tracker.Beat("edge-1", BeatResult::kHealthy, kT0 + 3000, logged, "b").has_value());
  EXPECT_EQ(tracker.NextDeadline(), kT0 + 15000);
  EXPECT_TRUE(tracker.Due(kT0 + 14999).empty());
  EXPECT_TRUE(tracker.Expire("edge-1", kT0 + 15000, logged, "x").has_value());
}

TEST(HeartbeatTrackerTakeoverTest, ForwardedBeatsPastTheLogBoundAreTimedAsUsual) {
  HeartbeatTracker tracker(HeartbeatOptions{milliseconds(12000), milliseconds(60000)});
  tracker.Upsert("edge-1", 1, LoggedBeat(kT0));
  // Beats forwarded by other instances, known from the projection only: the later of the bound
  // and the last beat.
  const HealthRecord early = LoggedBeat(kT0 + 30000, true);
  tracker.Refresh("edge-1", early);
  EXPECT_EQ(tracker.NextDeadline(), kT0 + 72000);
  const HealthRecord late = LoggedBeat(kT0 + 70000, true);
  tracker.Refresh("edge-1", late);
  EXPECT_EQ(tracker.NextDeadline(), kT0 + 82000);
  EXPECT_TRUE(tracker.Expire("edge-1", kT0 + 82000, late, "x").has_value());
}

TEST(HeartbeatTrackerTakeoverTest, AProviderTheLogNeverSawBeatHasNoLogBound) {
  // Its first beat is a transition, always recorded: no owner can have taken an unrecorded one.
  HeartbeatTracker tracker(HeartbeatOptions{milliseconds(12000), milliseconds(60000)});
  tracker.Upsert("edge-1", 1, kNoProjection);
  const HealthRecord forwarded = LoggedBeat(kT0, true);
  tracker.Refresh("edge-1", forwarded);
  EXPECT_EQ(tracker.NextDeadline(), kT0 + 12000);
}

TEST(HeartbeatTrackerTakeoverTest, AnAlreadyExpiredProviderIsNotExpiredTwiceByTheNextOwner) {
  HealthRecord logged;
  HeartbeatRecord beat;
  beat.provider_id = "edge-1";
  beat.registration_seq = 1;
  beat.time_ms = beat.seq = beat.last_beat_time_ms = kT0;
  FoldHeartbeat(logged, beat);
  HeartbeatRecord expiry = beat;
  expiry.result = BeatResult::kExpired;
  expiry.time_ms = expiry.seq = kT0 + 12000;
  FoldHeartbeat(logged, expiry);
  HeartbeatTracker tracker(HeartbeatOptions{milliseconds(12000), milliseconds(60000)});
  tracker.Upsert("edge-1", 1, logged);
  EXPECT_TRUE(tracker.Due(kT0 + 60000).empty());
  EXPECT_FALSE(tracker.Expire("edge-1", kT0 + 60000, logged, "x").has_value());
}

TEST_F(HeartbeatTrackerTest, UnrecordedBeatsAreRecordedBeforeHandingOver) {
  BeatAt(kT0);
  BeatAt(kT0 + 5000);
  BeatAt(kT0 + 10000);
  auto records = tracker_.Unrecorded(kT0 + 11000);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].beats, 2);
  EXPECT_EQ(records[0].last_beat_time_ms, kT0 + 10000);
  EXPECT_TRUE(tracker_.Unrecorded(kT0 + 12000).empty());
}

TEST_F(HeartbeatTrackerTest, ANeverBeatingProviderStaysPendingAndNeverExpires) {
  EXPECT_FALSE(tracker_.NextDeadline().has_value());
  EXPECT_TRUE(tracker_.Due(kT0 + 3600000).empty());
  EXPECT_FALSE(tracker_.Beat("unknown", BeatResult::kHealthy, kT0, kNoProjection, "x"));
}

TEST(HeartbeatTrackerGcTest, AnExpiredProviderIsDueForGcAfterItsLastBeatOncePerRegistration) {
  HeartbeatTracker tracker(HeartbeatOptions{milliseconds(12000), milliseconds(60000),
                                            /*gc_after=*/milliseconds(20000)});
  tracker.Upsert("edge-1", 0, kNoProjection);  // the first decision of a log has seq 0
  ASSERT_TRUE(tracker.Beat("edge-1", BeatResult::kHealthy, kT0, kNoProjection, "b1"));
  EXPECT_TRUE(tracker.GcDue(kT0 + 30000).empty()) << "not expired yet: never collected";
  ASSERT_TRUE(tracker.Expire("edge-1", kT0 + 12000, kNoProjection, "x").has_value());
  EXPECT_TRUE(tracker.GcDue(kT0 + 19999).empty());
  auto due = tracker.GcDue(kT0 + 20000);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].id, "edge-1");
  EXPECT_EQ(due[0].registration_seq, 0);
  EXPECT_EQ(due[0].last_beat_ms, kT0);
  EXPECT_TRUE(tracker.GcDue(kT0 + 25000).empty()) << "asked once per registration";
  tracker.Upsert("edge-1", 9, kNoProjection);  // registered again, then silent again
  ASSERT_EQ(tracker.GcDue(kT0 + 26000).size(), 1u);
}

TEST(HeartbeatTrackerGcTest, NothingIsCollectedWhenGcIsOff) {
  HeartbeatTracker tracker(HeartbeatOptions{milliseconds(12000), milliseconds(60000)});
  tracker.Upsert("edge-1", 1, kNoProjection);
  ASSERT_TRUE(tracker.Beat("edge-1", BeatResult::kHealthy, kT0, kNoProjection, "b1"));
  ASSERT_TRUE(tracker.Expire("edge-1", kT0 + 12000, kNoProjection, "x").has_value());
  EXPECT_TRUE(tracker.GcDue(kT0 + 86400000).empty());
}

// Liveness `both` (SPEC §8): the provider is probed too; the tracker decides its expiry alone.
class BothTrackerTest : public testing::Test {
 protected:
  BothTrackerTest() : tracker_(HeartbeatOptions{milliseconds(12000), milliseconds(60000)}) {
    // The projection: probed Ready, never beaten.
    HealthProbe probe;
    probe.probe_id = "p0";
    probe.provider_id = "edge-1";
    probe.time_ms = probe.seq = kT0 - 1000;
    probe.registration_seq = 1;
    FoldProbe(projected_, probe);
    tracker_.Upsert("edge-1", 1, projected_, /*both=*/true);
  }

  // A probe folded into the projection (as the prober's own probes are).
  void ProbeAt(int64_t at_ms, ProbeFailure failure) {
    HealthProbe probe;
    probe.probe_id = "p-" + std::to_string(at_ms);
    probe.provider_id = "edge-1";
    probe.time_ms = probe.seq = at_ms;
    probe.registration_seq = 1;
    probe.failure = failure;
    FoldProbe(projected_, probe);
  }

  // A beat, with the record it produced (if any) folded into the projection.
  BeatOutcome BeatAt(int64_t at_ms) {
    auto out = tracker_.Beat("edge-1", BeatResult::kHealthy, at_ms, projected_, "b");
    EXPECT_TRUE(out.has_value());
    if (out && out->record) FoldHeartbeat(projected_, *out->record);
    return out ? *out : BeatOutcome{};
  }

  HeartbeatTracker tracker_;
  HealthRecord projected_;
};

TEST_F(BothTrackerTest, TheFirstBeatIsRecordedAsBothThoughTheStatusStaysReady) {
  EXPECT_FALSE(tracker_.NextDeadline().has_value()) << "expiry starts with the first beat";
  const BeatOutcome out = BeatAt(kT0);
  ASSERT_TRUE(out.record.has_value()) << "the projection must learn of two signals at once";
  EXPECT_TRUE(out.record->both);
  EXPECT_FALSE(out.change.has_value());
  EXPECT_EQ(out.health.status, HealthStatus::kReady);
  EXPECT_TRUE(projected_.both);
  EXPECT_EQ(tracker_.NextDeadline(), kT0 + 12000);
}

TEST_F(BothTrackerTest, ABeatDoesNotRecoverAProviderWhoseProbesFail) {
  BeatAt(kT0);
  for (int64_t t : {kT0 + 1000, kT0 + 2000, kT0 + 3000}) ProbeAt(t, ProbeFailure::kTimeout);
  ASSERT_EQ(projected_.status, HealthStatus::kUnavailable);
  const BeatOutcome out = BeatAt(kT0 + 5000);
  EXPECT_EQ(out.health.status, HealthStatus::kUnavailable) << "the reply shows both signals";
  EXPECT_FALSE(out.change.has_value());
}

TEST_F(BothTrackerTest, AnExpiryIsDecidedOnceThoughLaterProbesOverwriteTheLastResult) {
  BeatAt(kT0);
  auto expired = tracker_.Expire("edge-1", kT0 + 12000, projected_, "x");
  ASSERT_TRUE(expired.has_value());
  ASSERT_TRUE(expired->record.has_value());
  EXPECT_TRUE(expired->record->both);
  ASSERT_TRUE(expired->change.has_value());
  EXPECT_EQ(expired->change->reason, "heartbeat_expired");
  FoldHeartbeat(projected_, *expired->record);
  ProbeAt(kT0 + 13000, ProbeFailure::kNone);  // last_result "healthy" again
  EXPECT_EQ(projected_.status, HealthStatus::kUnavailable);
  EXPECT_TRUE(tracker_.Due(kT0 + 60000).empty());
  EXPECT_FALSE(tracker_.Expire("edge-1", kT0 + 60000, projected_, "y").has_value());
  HeartbeatTracker next(HeartbeatOptions{milliseconds(12000), milliseconds(60000)});
  next.Upsert("edge-1", 1, projected_, true);  // a takeover from the log
  EXPECT_TRUE(next.Due(kT0 + 600000).empty());
  const BeatOutcome back = BeatAt(kT0 + 14000);
  ASSERT_TRUE(back.change.has_value());
  EXPECT_EQ(back.change->to, HealthStatus::kReady);
}

}  // namespace
}  // namespace dcm
