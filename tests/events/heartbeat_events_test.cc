// Heartbeat record codec (SPEC §8): dcm.provider.heartbeat_recorded v1.
#include "events/heartbeat_events.h"

#include <gtest/gtest.h>

#include <string>

namespace dcm {
namespace {

constexpr int64_t kT0 = 1767225600000;

HeartbeatRecord SampleRecord() {
  HeartbeatRecord r;
  r.record_id = "8e1f2a3b-4c5d-4e6f-8a7b-9c0d1e2f3a4b";
  r.time_ms = kT0 + 250;
  r.provider_id = "edge-7";
  r.seq = kT0 + 250;
  r.registration_seq = 12;
  r.result = BeatResult::kHealthy;
  r.beats = 12;
  r.last_beat_time_ms = kT0 + 250;
  r.timeout_ms = 12000;
  return r;
}

CloudEvent WithData(std::string data) {
  CloudEvent e = EncodeHeartbeatRecord(SampleRecord(), "dcm/prober/dcm-1");
  e.data = std::move(data);
  return e;
}

TEST(HeartbeatEventsTest, RecordRoundTripsWithItsIdTimeAndSubject) {
  const HeartbeatRecord r = SampleRecord();
  const CloudEvent e = EncodeHeartbeatRecord(r, "dcm/prober/dcm-1");
  EXPECT_EQ(e.type, "dcm.provider.heartbeat_recorded");
  EXPECT_EQ(e.id, r.record_id);
  EXPECT_EQ(e.subject, "edge-7");
  EXPECT_EQ(e.schema_version, 1);
  EXPECT_EQ(e.actor, "dcm/prober");
  auto decoded = DecodeHeartbeatRecord(e);
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
  EXPECT_EQ(*decoded, r);
}

TEST(HeartbeatEventsTest, ExpiryAndForwardedUnhealthyRecordsRoundTrip) {
  for (BeatResult result : {BeatResult::kExpired, BeatResult::kReportedUnhealthy}) {
    HeartbeatRecord r = SampleRecord();
    r.result = result;
    r.forwarded = result == BeatResult::kReportedUnhealthy;
    auto decoded = DecodeHeartbeatRecord(EncodeHeartbeatRecord(r, "dcm/prober/dcm-2"));
    ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
    EXPECT_EQ(*decoded, r);
  }
  EXPECT_STREQ(BeatResultName(BeatResult::kExpired), "heartbeat_expired");
}

TEST(HeartbeatEventsTest, ARecordWithoutForwardedIsTheOwnersAndFreshIdsAreMadeWhenNoneGiven) {
  HeartbeatRecord r = SampleRecord();
  r.record_id.clear();
  const CloudEvent e = EncodeHeartbeatRecord(r, "dcm/prober/dcm-1");
  EXPECT_EQ(e.id.size(), 36u);
  EXPECT_EQ(e.data.find("forwarded"), std::string::npos);
  auto decoded = DecodeHeartbeatRecord(e);
  ASSERT_TRUE(decoded.has_value());
  EXPECT_FALSE(decoded->forwarded);
}

TEST(HeartbeatEventsTest, ABothProvidersRecordSaysSoAndOthersKeepTheirBytes) {
  HeartbeatRecord r = SampleRecord();
  const CloudEvent plain = EncodeHeartbeatRecord(r, "dcm/prober/dcm-1");
  EXPECT_EQ(plain.data.find("both"), std::string::npos);
  r.both = true;
  const CloudEvent both = EncodeHeartbeatRecord(r, "dcm/prober/dcm-1");
  EXPECT_TRUE(both.data.ends_with(R"("both":true})")) << both.data;
  auto decoded = DecodeHeartbeatRecord(both);
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
  EXPECT_EQ(*decoded, r);
}

TEST(HeartbeatEventsTest, MalformedDataIsCorruptionNotACrash) {
  for (const char* data :
       {"[]", "{}", "not json",
        R"({"provider_id":"edge-7","seq":1,"registration_seq":1,"result":"maybe","beats":1,)"
        R"("last_beat_time_ms":1,"timeout_ms":1})",
        R"({"provider_id":"","seq":1,"registration_seq":1,"result":"healthy","beats":1,)"
        R"("last_beat_time_ms":1,"timeout_ms":1})",
        R"({"provider_id":"edge-7","seq":-1,"registration_seq":1,"result":"healthy","beats":1,)"
        R"("last_beat_time_ms":1,"timeout_ms":1})",
        R"({"provider_id":"edge-7","seq":1,"registration_seq":1,"result":"healthy","beats":1,)"
        R"("last_beat_time_ms":1,"timeout_ms":1,"forwarded":"yes"})",
        R"({"provider_id":"edge-7","seq":1,"registration_seq":1,"result":"healthy","beats":1,)"
        R"("last_beat_time_ms":1,"timeout_ms":1,"both":1})"}) {
    SCOPED_TRACE(data);
    auto decoded = DecodeHeartbeatRecord(WithData(data));
    ASSERT_FALSE(decoded.has_value());
    EXPECT_EQ(decoded.error().code, ErrorCode::kCorruption);
  }
}

TEST(HeartbeatEventsTest, ANewerSchemaVersionOrAnotherTypeIsRefused) {
  CloudEvent newer = EncodeHeartbeatRecord(SampleRecord(), "dcm/prober/dcm-1");
  newer.schema_version = 2;
  EXPECT_FALSE(DecodeHeartbeatRecord(newer).has_value());
  CloudEvent other = newer;
  other.schema_version = 1;
  other.type = "dcm.provider.health_probed";
  EXPECT_FALSE(DecodeHeartbeatRecord(other).has_value());
}

}  // namespace
}  // namespace dcm
