#include "src/common/config.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

namespace dcm {
namespace {

using Strings = std::vector<std::string>;

TEST(SplitListTest, TrimsBlanksAndDropsEmptyItems) {
  EXPECT_EQ(SplitList("vm, container ,\tdatabase"), (Strings{"vm", "container", "database"}));
  EXPECT_EQ(SplitList("a,,b,"), (Strings{"a", "b"}));
  EXPECT_EQ(SplitList(""), Strings{});
  EXPECT_EQ(SplitList(" , "), Strings{});
  EXPECT_EQ(SplitList("one"), Strings{"one"});
}

Config DevConfig() {
  Config c;
  c.dev = true;
  return c;
}

TEST(ValidateConfigTest, AcceptsDefaultsInDevMode) { EXPECT_TRUE(ValidateConfig(DevConfig())); }

TEST(ValidateConfigTest, RequiresBrokersOutsideDevMode) {
  Config c;
  auto status = ValidateConfig(c);
  ASSERT_FALSE(status);
  EXPECT_EQ(status.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(status.error().message.find("--kafka-brokers"), std::string::npos);
  c.kafka_brokers = "k1:9092";
  c.auth.disabled = true;
  EXPECT_TRUE(ValidateConfig(c));
}

// SPEC §7: writes answer 503 within --write-timeout (default 5 s); 100ms..60s.
TEST(ValidateConfigTest, WriteTimeoutDefaultsToFiveSecondsAndMustBe100msTo60s) {
  Config c = DevConfig();
  EXPECT_EQ(c.write_timeout, std::chrono::milliseconds(5000));
  c.write_timeout = std::chrono::milliseconds(99);
  auto status = ValidateConfig(c);
  ASSERT_FALSE(status);
  EXPECT_NE(status.error().message.find("--write-timeout"), std::string::npos);
  c.write_timeout = std::chrono::milliseconds(60001);
  EXPECT_FALSE(ValidateConfig(c));
  c.write_timeout = std::chrono::milliseconds(100);
  EXPECT_TRUE(ValidateConfig(c));
}

// SPEC §6: outside --dev, no auth setting is a startup error that says what to set.
TEST(ValidateConfigTest, RefusesToRunWithoutAuthenticationOutsideDevMode) {
  Config c;
  c.kafka_brokers = "k1:9092";
  auto status = ValidateConfig(c);
  ASSERT_FALSE(status);
  for (const char* hint : {"AUTH_JWKS_FILE", "AUTH_ISSUER_URL", "AUTH_DISABLED=true"}) {
    EXPECT_NE(status.error().message.find(hint), std::string::npos) << hint;
  }
  c.auth.jwks_file = "/etc/dcm/jwks.json";
  EXPECT_TRUE(ValidateConfig(c));
  c.auth.jwks_file.clear();
  c.auth.issuer_url = "https://idp.example.com/realms/dcm";
  EXPECT_TRUE(ValidateConfig(c));
  c.auth.issuer_url.clear();
  c.tls = ApiTlsConfig{"api.pem", "api.key", "clients-ca.pem"};
  EXPECT_TRUE(ValidateConfig(c)) << "client certificates alone are an auth configuration";
}

TEST(ValidateConfigTest, DevModeRunsWithoutAuthenticationUnlessConfigured) {
  Config c = DevConfig();
  EXPECT_FALSE(c.AuthConfigured());
  c.auth.jwks_file = "jwks.json";
  EXPECT_TRUE(c.AuthConfigured());
  EXPECT_TRUE(ValidateConfig(c));
}

TEST(ValidateConfigTest, RejectsContradictoryOrIncompleteTrustSettings) {
  Config c = DevConfig();
  c.auth.disabled = true;
  c.auth.jwks_file = "jwks.json";
  EXPECT_FALSE(ValidateConfig(c)) << "AUTH_DISABLED with a JWKS file";
  c = DevConfig();
  c.tls.cert_file = "api.pem";
  EXPECT_FALSE(ValidateConfig(c)) << "a certificate without its key";
  c = DevConfig();
  c.tls.client_ca_file = "ca.pem";
  EXPECT_FALSE(ValidateConfig(c)) << "mTLS without TLS";
  c = DevConfig();
  c.auth.cert_roles = "admin=dcm-admin";
  EXPECT_FALSE(ValidateConfig(c)) << "certificate roles without client certificates";
  c = DevConfig();
  c.outbound.sp_client_key_file = "sp.key";
  EXPECT_FALSE(ValidateConfig(c)) << "an SP client key without its certificate";
  c = DevConfig();
  c.auth.issuer_url = "ftp://idp";
  EXPECT_FALSE(ValidateConfig(c));
}

// The issuer's keys decide who is admin: never fetched over plain HTTP across a network.
TEST(ValidateConfigTest, AnIssuerOverPlainHttpMustBeOnLoopback) {
  Config c = DevConfig();
  c.auth.issuer_url = "http://idp.example.com/realms/dcm";
  auto status = ValidateConfig(c);
  ASSERT_FALSE(status);
  EXPECT_NE(status.error().message.find("must be https://"), std::string::npos);
  c.auth.issuer_url = "http://127.0.0.1:8081/realms/dcm";
  EXPECT_TRUE(ValidateConfig(c));
  c.auth.issuer_url = "https://idp.example.com/realms/dcm";
  EXPECT_TRUE(ValidateConfig(c));
}

TEST(ValidateConfigTest, RejectsListenWithoutPort) {
  Config c = DevConfig();
  c.listen = "localhost";
  EXPECT_FALSE(ValidateConfig(c));
}

TEST(ValidateConfigTest, RejectsEmptyServiceTypes) {
  Config c = DevConfig();
  c.service_types.clear();
  EXPECT_FALSE(ValidateConfig(c));
}

TEST(ValidateConfigTest, RejectsPartitionsOutOfRange) {
  Config c = DevConfig();
  c.partitions = 0;
  EXPECT_FALSE(ValidateConfig(c));
  c.partitions = 1025;
  EXPECT_FALSE(ValidateConfig(c));
  c.partitions = 1024;
  EXPECT_TRUE(ValidateConfig(c));
}

TEST(ValidateConfigTest, ReadWaitIsBetweenZeroAndBelowTheHandlerTimeout) {
  Config c = DevConfig();
  EXPECT_EQ(c.read_wait, std::chrono::seconds(5));
  c.read_wait = std::chrono::milliseconds(-1);
  EXPECT_FALSE(ValidateConfig(c));
  c.read_wait = std::chrono::milliseconds(0);  // answer 503 at once when behind
  EXPECT_TRUE(ValidateConfig(c));
  c.read_wait = std::chrono::seconds(25);
  EXPECT_TRUE(ValidateConfig(c));
  c.read_wait = std::chrono::milliseconds(25001);
  EXPECT_FALSE(ValidateConfig(c));
}

TEST(ValidateConfigTest, RejectsEmptyTopicPrefix) {
  Config c = DevConfig();
  c.topics.prefix.clear();
  EXPECT_FALSE(ValidateConfig(c));
}

TEST(TopicsTest, NamesFollowThePrefix) {
  Topics t;
  EXPECT_EQ(t.ProviderRequests(), "dcm.provider-requests");
  EXPECT_EQ(t.Providers(), "dcm.providers");
  EXPECT_EQ(t.Status(), "dcm.status");
  EXPECT_EQ(t.DeadLetter(), "dcm.dead-letter");
  t.prefix = "test.";
  EXPECT_EQ(t.Providers(), "test.providers");
}

TEST(HealthEventsRetentionTest, ReadsGoDurationsLikeTheDefaultAndTheSoakWindow) {
  EXPECT_EQ(ParseHealthEventsRetention("168h").value(), std::chrono::hours(168));
  EXPECT_EQ(ParseHealthEventsRetention("2m").value(), std::chrono::minutes(2));
  EXPECT_EQ(ParseHealthEventsRetention("1h30m").value(), std::chrono::minutes(90));
  EXPECT_EQ(ParseHealthEventsRetention("1s").value(), std::chrono::seconds(1));
  EXPECT_EQ(Config().health_events_retention, std::chrono::hours(168));
}

TEST(HealthEventsRetentionTest, RefusesWhatIsNotADurationOfAtLeastOneSecond) {
  for (const char* bad : {"", "0", "500ms", "-1h", "7d", "forever", "168", "1e3h"}) {
    auto parsed = ParseHealthEventsRetention(bad);
    ASSERT_FALSE(parsed.has_value()) << bad;
    EXPECT_EQ(parsed.error().code, ErrorCode::kInvalidArgument) << bad;
    EXPECT_NE(parsed.error().message.find("HEALTH_EVENTS_RETENTION"), std::string::npos) << bad;
  }
}

TEST(HealthEventsRetentionTest, ValidateConfigRefusesARetentionUnderOneSecond) {
  Config c = DevConfig();
  c.health_events_retention = std::chrono::milliseconds(999);
  auto status = ValidateConfig(c);
  ASSERT_FALSE(status.has_value());
  EXPECT_NE(status.error().message.find("HEALTH_EVENTS_RETENTION"), std::string::npos);
}

}  // namespace
TEST(ValidateConfigTest, ProviderGcIsOffOrAtLeastTheHeartbeatTimeout) {
  Config c = DevConfig();
  EXPECT_EQ(c.health.provider_gc_after.count(), 0) << "off by default (SPEC §8)";
  c.health.provider_gc_after = c.health.heartbeat_timeout;
  EXPECT_TRUE(ValidateConfig(c));
  c.health.provider_gc_after = c.health.heartbeat_timeout - std::chrono::milliseconds(1);
  auto status = ValidateConfig(c);
  ASSERT_FALSE(status.has_value());
  EXPECT_NE(status.error().message.find("PROVIDER_GC_AFTER"), std::string::npos);
}

TEST(ValidateConfigTest, RejectsLimitsOutOfRange) {
  for (auto change : std::vector<std::function<void(LimitsConfig&)>>{
           [](LimitsConfig& l) { l.max_connections = 0; },
           [](LimitsConfig& l) { l.heavy_read_threads = -1; },
           [](LimitsConfig& l) { l.heavy_read_threads = 257; },
           [](LimitsConfig& l) { l.heavy_read_queue = 0; },
           [](LimitsConfig& l) { l.heavy_read_timeout = std::chrono::milliseconds(0); }}) {
    Config c = DevConfig();
    change(c.limits);
    EXPECT_FALSE(ValidateConfig(c));
  }
  Config c = DevConfig();
  c.limits.max_connections_per_client = 0;  // no per-client cap
  EXPECT_TRUE(ValidateConfig(c));
}

TEST(SplitDescriptorsTest, LeavesTheProberAndAReserveTheirShareAndTheApiTheRest) {
  const DescriptorBudget b = SplitDescriptors(20000, true, 4096, 256);
  EXPECT_EQ(b.reserve, 1024u);
  EXPECT_EQ(b.probe_idle, 9488u);  // what ProbeClient derived alone before
  EXPECT_EQ(b.probe_in_flight, 4096u);
  EXPECT_EQ(b.api, 20000u - 1024 - 9488 - 4096 - 256);
  EXPECT_GE(b.api, 5000u) << "--max-connections 5000 fits under a 20,000 limit";
  EXPECT_EQ(b.reserve + b.probe_idle + b.probe_in_flight + 256 + b.api, b.nofile);
}

TEST(SplitDescriptorsTest, WithoutProbingTheApiGetsAllButTheReserve) {
  const DescriptorBudget b = SplitDescriptors(20000, false, 4096, 256);
  EXPECT_EQ(b.probe_idle, 0u);
  EXPECT_EQ(b.probe_in_flight, 0u);
  EXPECT_EQ(b.api, 20000u - 1024 - 256);
}

TEST(SplitDescriptorsTest, ASmallLimitStillLeavesTheApiAFloor) {
  const DescriptorBudget b = SplitDescriptors(1024, true, 4096, 256);
  EXPECT_EQ(b.reserve, 256u);
  EXPECT_EQ(b.api, kMinApiConnections);
}

}  // namespace dcm
