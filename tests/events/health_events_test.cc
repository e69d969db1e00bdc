// Health event codecs and the classification of a probe's HTTP answer (SPEC §3.2).
#include "events/health_events.h"

#include <gtest/gtest.h>

#include <string>

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

TEST(HealthEventsTest, MalformedProbeDataIsCorruption) {
  CloudEvent base = EncodeHealthProbe(SampleProbe(), "x");
  for (const char* data :
       {R"({})",
        R"({"provider_id":"a","seq":"1","registration_seq":1,"failure_threshold":3,)"
        R"("success_threshold":1})",
        R"({"provider_id":"a","seq":1,"registration_seq":1,"failure_threshold":0,)"
        R"("success_threshold":1})",
        R"({"provider_id":"a","seq":1,"registration_seq":1,"failure_threshold":3,)"
        R"("success_threshold":1,"http_status":42})",
        R"({"provider_id":"a","seq":1,"registration_seq":1,"failure_threshold":3,)"
        R"("success_threshold":1,"latency_ms":-1})"}) {
    SCOPED_TRACE(data);
    CloudEvent e = base;
    e.data = data;
    auto r = DecodeHealthProbe(e);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code, ErrorCode::kCorruption);
  }
}

}  // namespace
}  // namespace dcm
