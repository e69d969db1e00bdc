// Health event codecs and the classification of a probe's HTTP answer (SPEC §3.2).
#include "events/health_events.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <utility>

#include "src/common/json_writer.h"

namespace dcm {
namespace {

constexpr int64_t kT0 = 1767225600000;

HealthProbe SampleProbe() {
  HealthProbe p;
  p.probe_id = "5b0c7d1e-2f3a-4b5c-8d6e-7f8091a2b3c4";
  p.time_ms = kT0 + 512;
  p.provider_id = "vm-1";
  p.seq = 7;
  p.registration_seq = 3;
  p.url = "http://sp/health";
  p.failure = ProbeFailure::kHttpStatus;
  p.http_status = 503;
  p.latency_us = 1234;
  p.error = "HTTP 503";
  return p;
}

ProbeResponse Answer(int status, std::string body) {
  ProbeResponse r;
  r.http_status = status;
  r.body = std::move(body);
  return r;
}

TEST(HealthEventsTest, ProbeRoundTripsWithItsEventIdAndTime) {
  const HealthProbe p = SampleProbe();
  CloudEvent e = EncodeHealthProbe(p, "dcm/prober/x");
  EXPECT_EQ(e.type, "dcm.provider.health_probed");
  EXPECT_EQ(e.subject, "vm-1");
  EXPECT_EQ(e.id, p.probe_id);
  EXPECT_EQ(e.time, "2026-01-01T00:00:00.512Z");
  auto decoded = DecodeHealthProbe(e);
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
  EXPECT_EQ(*decoded, p);
}

TEST(HealthEventsTest, BlockedProbeRoundTripsWithItsFailureClassAndReason) {
  HealthProbe p = SampleProbe();
  p.failure = ProbeFailure::kBlocked;
  p.http_status = 0;
  p.latency_us = 40;
  p.error = "127.0.0.1 is in 127.0.0.0/8 (loopback), refused by the outbound policy";
  CloudEvent e = EncodeHealthProbe(p, "dcm/prober/x");
  EXPECT_NE(e.data.find(R"("failure_class":"blocked")"), std::string::npos) << e.data;
  EXPECT_NE(e.data.find(R"("http_status":null)"), std::string::npos) << e.data;
  auto decoded = DecodeHealthProbe(e);
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
  EXPECT_EQ(*decoded, p);
  EXPECT_EQ(
      ClassifyHealthResponse(ProbeResponse{ProbeFailure::kBlocked, 0, "", 40, p.error}).failure,
      ProbeFailure::kBlocked);
}

TEST(HealthEventsTest, HealthyProbeHasNullFailureClassAndAFreshIdWhenNoneGiven) {
  HealthProbe p = SampleProbe();
  p.probe_id.clear();
  p.failure = ProbeFailure::kNone;
  p.http_status = 200;
  p.error.clear();
  CloudEvent e = EncodeHealthProbe(p, "dcm/prober/x");
  EXPECT_EQ(e.id.size(), 36u);
  EXPECT_NE(e.data.find(R"("failure_class":null)"), std::string::npos) << e.data;
  auto decoded = DecodeHealthProbe(e);
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(decoded->failure, ProbeFailure::kNone);
}

TEST(HealthEventsTest, ChangeRoundTripsWithADeterministicId) {
  HealthChange c{"vm-1",
                 kT0,
                 HealthStatus::kReady,
                 HealthStatus::kUnavailable,
                 "3 consecutive failures (timeout)",
                 9,
                 {"p1", "p2", "p3"}};
  CloudEvent a = EncodeHealthChange(c, "dcm/prober/a");
  CloudEvent b = EncodeHealthChange(c, "dcm/prober/b");
  EXPECT_EQ(a.id, b.id) << "re-emitting the same change gives the same event id";
  auto decoded = DecodeHealthChange(a);
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(*decoded, c);
}

TEST(HealthEventsTest, StatusNamesParseCaseInsensitively) {
  EXPECT_EQ(ParseHealthStatus("ready"), HealthStatus::kReady);
  EXPECT_EQ(ParseHealthStatus("UNAVAILABLE"), HealthStatus::kUnavailable);
  EXPECT_EQ(ParseHealthStatus("Pending"), HealthStatus::kPending);
  EXPECT_FALSE(ParseHealthStatus("Readyy").has_value());
  EXPECT_FALSE(ParseHealthStatus("").has_value());
  for (auto s : {HealthStatus::kPending, HealthStatus::kReady, HealthStatus::kUnhealthy,
                 HealthStatus::kUnavailable}) {
    EXPECT_EQ(ParseHealthStatus(HealthStatusName(s)), s);
  }
}

TEST(HealthEventsTest, FailureClassNamesAreTheEventSpelling) {
  for (auto [failure, name] : {std::pair{ProbeFailure::kTimeout, "timeout"},
                               {ProbeFailure::kConnect, "connect"},
                               {ProbeFailure::kDns, "dns"},
                               {ProbeFailure::kTls, "tls"},
                               {ProbeFailure::kBlocked, "blocked"},
                               {ProbeFailure::kHttpStatus, "http_status"},
                               {ProbeFailure::kBadBody, "bad_body"},
                               {ProbeFailure::kReportedUnhealthy, "reported_unhealthy"}}) {
    EXPECT_EQ(ProbeFailureName(failure), name);
    EXPECT_EQ(ParseProbeFailure(name), failure);
  }
}

TEST(HealthEventsTest, ClassifiesTheSeedsResponseTable) {
  EXPECT_EQ(
      ClassifyHealthResponse(Answer(200, R"({"status":"healthy","version":"v1.2.3"})")).failure,
      ProbeFailure::kNone);
  EXPECT_EQ(ClassifyHealthResponse(Answer(200, R"({"status":"Healthy"})")).failure,
            ProbeFailure::kNone);
  EXPECT_EQ(ClassifyHealthResponse(Answer(200, R"({"status":"unhealthy","uptime":3600})")).failure,
            ProbeFailure::kReportedUnhealthy);
  for (const char* bad : {R"({"status":"ok"})", "OK", "", "[]", R"({"status":1})", "{}",
                          R"({"status":"healthy")", "\xff\xfe"}) {
    SCOPED_TRACE(bad);
    auto r = ClassifyHealthResponse(Answer(200, bad));
    EXPECT_EQ(r.failure, ProbeFailure::kBadBody);
    EXPECT_FALSE(r.error.empty());
  }
  auto unavailable = ClassifyHealthResponse(Answer(503, R"({"status":"healthy"})"));
  EXPECT_EQ(unavailable.failure, ProbeFailure::kHttpStatus);
  EXPECT_EQ(unavailable.error, "HTTP 503");
  ProbeResponse timeout;
  timeout.failure = ProbeFailure::kTimeout;
  timeout.error = "no response in 5000 ms";
  EXPECT_EQ(ClassifyHealthResponse(timeout).failure, ProbeFailure::kTimeout);
}

TEST(HealthEventsTest, BadBodyErrorIsBoundedWhateverTheProviderSends) {
  auto r = ClassifyHealthResponse(Answer(200, R"({"status":")" + std::string(10000, 'x') + "\"}"));
  EXPECT_EQ(r.failure, ProbeFailure::kBadBody);
  EXPECT_LT(r.error.size(), 200u);
}

TEST(HealthEventsTest, BadBodyErrorCarriesNoControlCharactersFromTheProvider) {
  auto r = ClassifyHealthResponse(Answer(200, R"({"status":"\u001b[2J\u202eok\r\n"})"));
  EXPECT_EQ(r.failure, ProbeFailure::kBadBody);
  EXPECT_EQ(r.error, "status is '\xEF\xBF\xBD[2J\xEF\xBF\xBDok', not healthy or unhealthy");
}

TEST(HealthEventsTest, MalformedProbeDataIsCorruption) {
  CloudEvent base = EncodeHealthProbe(SampleProbe(), "x");
  constexpr char kValid[] =
      R"({"provider_id":"a","seq":1,"registration_seq":1,"failure_threshold":3,)"
      R"("success_threshold":1)";
  for (auto [version, data] : std::initializer_list<std::pair<int, std::string>>{
           {2, R"({})"},
           {2, R"({"provider_id":"a","seq":"1","registration_seq":1,"failure_threshold":3,)"
               R"("success_threshold":1})"},
           {2, R"({"provider_id":"a","seq":1,"registration_seq":1,"failure_threshold":0,)"
               R"("success_threshold":1})"},
           {2, std::string(kValid) + R"(,"http_status":42})"},
           {2, std::string(kValid) + R"(,"latency_us":-1})"},
           {2, std::string(kValid) + R"(,"latency_us":1.5})"},
           {2, std::string(kValid) + R"(,"latency_us":"15"})"},
           {2, std::string(kValid) + R"(,"latency_us":1000000000001})"},
           {1, std::string(kValid) + R"(,"latency_ms":-1})"},
           {1, std::string(kValid) + R"(,"latency_ms":"1.5"})"},
           {1, std::string(kValid) + R"(,"latency_ms":1e10})"},
           {1, R"({})"},
           {1, R"([])"},
           {1, R"({"provider_id":)"},
       }) {
    SCOPED_TRACE(data);
    CloudEvent e = base;
    e.schema_version = version;
    e.data = data;
    auto r = DecodeHealthProbe(e);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code, ErrorCode::kCorruption);
  }
}

// What builds before schema v2 wrote: latency_ms as a float, in the same position.
CloudEvent EncodeAsVersion1(const HealthProbe& p) {
  CloudEvent e = EncodeHealthProbe(p, "dcm/prober/x");
  const std::string v2_field = R"("latency_us":)" + std::to_string(p.latency_us);
  JsonWriter ms;
  ms.Double(static_cast<double>(p.latency_us) / 1000.0);
  e.data.replace(e.data.find(v2_field), v2_field.size(), R"("latency_ms":)" + ms.str());
  e.schema_version = 1;
  return e;
}

TEST(HealthEventsTest, ProbesAreWrittenAsVersion3WithIntegerMicroseconds) {
  const CloudEvent e = EncodeHealthProbe(SampleProbe(), "dcm/prober/x");
  EXPECT_EQ(e.schema_version, 3);
  EXPECT_EQ(e.schema_version, kHealthProbedSchemaVersion);
  EXPECT_NE(e.data.find(R"("latency_us":1234,)"), std::string::npos) << e.data;
  EXPECT_EQ(e.data.find("latency_ms"), std::string::npos) << e.data;
}

TEST(HealthEventsTest, Version1ProbeDecodesToTheSameProbeAsItsVersion2Twin) {
  for (int64_t latency_us :
       {int64_t{0}, int64_t{1}, int64_t{999}, int64_t{1234}, int64_t{4095}, int64_t{5'000'125},
        int64_t{300'000'000}, int64_t{1'000'000'000'000}}) {
    SCOPED_TRACE(latency_us);
    HealthProbe p = SampleProbe();
    p.latency_us = latency_us;
    const CloudEvent v1 = EncodeAsVersion1(p);
    ASSERT_EQ(v1.data.find("latency_us"), std::string::npos) << v1.data;
    auto decoded = DecodeHealthProbe(v1);
    ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
    EXPECT_EQ(*decoded, p);
    EXPECT_EQ(EncodeHealthProbe(*decoded, "dcm/prober/x"), EncodeHealthProbe(p, "dcm/prober/x"));
  }
}

TEST(HealthEventsTest, Version1ProbeWithoutLatencyDecodesWithZeroLatency) {
  HealthProbe p = SampleProbe();
  p.latency_us = 0;
  CloudEvent v1 = EncodeAsVersion1(p);
  const std::string field = R"("latency_ms":0,)";
  ASSERT_NE(v1.data.find(field), std::string::npos) << v1.data;
  v1.data.erase(v1.data.find(field), field.size());
  auto decoded = DecodeHealthProbe(v1);
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
  EXPECT_EQ(*decoded, p);
}

TEST(HealthEventsTest, ProbeOfANewerSchemaVersionIsPoisonNamingBothVersions) {
  CloudEvent e = EncodeHealthProbe(SampleProbe(), "x");
  e.schema_version = 4;
  auto r = DecodeHealthProbe(e);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kCorruption);
  EXPECT_EQ(r.error().message,
            "schemaversion 4 of dcm.provider.health_probed is newer than this build reads "
            "(latest 3)");
}

TEST(HealthEventsTest, AProbeCarryingItsStateRoundTripsAsV3) {
  HealthProbe p = SampleProbe();
  p.state = CarriedHealthState{.status = HealthStatus::kUnavailable,
                               .registration_seq = 4,
                               .consecutive_failures = 3,
                               .consecutive_successes = 0,
                               .last_transition_time_ms = kT0,
                               .last_transition_reason = "3 consecutive failures (timeout)",
                               .last_error = "no response",
                               .last_error_time_ms = kT0,
                               .earlier_streak_probe_ids = {"p1", "p2"}};
  const CloudEvent e = EncodeHealthProbe(p, "dcm/prober/a");
  EXPECT_EQ(e.schema_version, 3);
  auto decoded = DecodeHealthProbe(e);
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
  EXPECT_EQ(*decoded, p);
  p.state->last_error.clear();  // optional members: absent when unset, read back as unset
  p.state->last_error_time_ms = 0;
  p.state->earlier_streak_probe_ids.clear();
  auto again = DecodeHealthProbe(EncodeHealthProbe(p, "dcm/prober/a"));
  ASSERT_TRUE(again.has_value()) << again.error().message;
  EXPECT_EQ(*again, p);
}

TEST(HealthEventsTest, AMalformedCarriedStateIsPoison) {
  const CloudEvent good = EncodeHealthProbe(SampleProbe(), "x");
  const std::string head = good.data.substr(0, good.data.size() - 1);
  for (
      const char* state :
      {R"("nope")",
       R"({"status":"Sleepy","registration_seq":1,"consecutive_failures":0,)"
       R"("consecutive_successes":0,"last_transition_time_ms":0,)"
       R"("earlier_streak_probe_ids":[]})",
       R"({"status":"Ready","registration_seq":1,"consecutive_failures":-1,)"
       R"("consecutive_successes":0,"last_transition_time_ms":0,"earlier_streak_probe_ids":[]})",
       R"({"status":"Ready","registration_seq":1,"consecutive_failures":0,)"
       R"("consecutive_successes":0,"last_transition_time_ms":0})",
       R"({"status":"Ready","registration_seq":1,"consecutive_failures":0,)"
       R"("consecutive_successes":0,"last_transition_time_ms":0,"earlier_streak_probe_ids":[7]})"}) {
    CloudEvent e = good;
    e.data = head + R"(,"state":)" + state + "}";
    auto r = DecodeHealthProbe(e);
    ASSERT_FALSE(r.has_value()) << state;
    EXPECT_EQ(r.error().code, ErrorCode::kCorruption) << state;
  }
}

TEST(HealthEventsTest, AV2ProbeIsReadAsV3WithoutAState) {
  CloudEvent e = EncodeHealthProbe(SampleProbe(), "x");
  e.schema_version = 2;
  auto r = DecodeHealthProbe(e);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(*r, SampleProbe());
  EXPECT_FALSE(r->state.has_value());
}

TEST(HealthEventsTest, HealthChangedStaysAtVersion1AndRejectsVersion2) {
  HealthChange c{"vm-1", kT0, HealthStatus::kReady, HealthStatus::kUnavailable, "r", 9, {"p1"}};
  CloudEvent e = EncodeHealthChange(c, "dcm/prober/a");
  EXPECT_EQ(e.schema_version, kHealthChangedSchemaVersion);
  EXPECT_EQ(e.schema_version, 1);
  e.schema_version = 2;
  auto r = DecodeHealthChange(e);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kCorruption);
}

}  // namespace
}  // namespace dcm
