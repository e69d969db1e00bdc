// SummarizeEvent (events/event_summary.h): every golden event has its own wording, a few exact
// strings pin the tone, and bad data of any kind gives a line instead of a failure.
#include "events/event_summary.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "events/cloud_event.h"
#include "events/health_events.h"
#include "events/instance_events.h"

#ifndef GOLDEN_DIR
#error "GOLDEN_DIR must point at events/golden"
#endif

namespace dcm {
namespace {

CloudEvent LoadGolden(const std::string& file) {
  std::ifstream in(std::filesystem::path(GOLDEN_DIR) / file, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  auto event = DecodeCloudEvent(buffer.str());
  EXPECT_TRUE(event.has_value()) << file;
  return event ? *event : CloudEvent{};
}

std::vector<std::string> GoldenFiles() {
  std::vector<std::string> out;
  for (const auto& entry : std::filesystem::directory_iterator(GOLDEN_DIR)) {
    if (entry.path().extension() == ".json") out.push_back(entry.path().filename().string());
  }
  return out;
}

bool IsOneLine(const std::string& text) { return text.find('\n') == std::string::npos; }

TEST(EventSummaryTest, EveryGoldenHasASpecificOneLineSummary) {
  const auto files = GoldenFiles();
  ASSERT_GE(files.size(), 30u);
  for (const auto& file : files) {
    SCOPED_TRACE(file);
    const std::string summary = SummarizeEvent(LoadGolden(file));
    EXPECT_FALSE(summary.empty());
    EXPECT_EQ(summary.find("no summary for this type"), std::string::npos) << summary;
    EXPECT_EQ(summary.find("undecodable"), std::string::npos) << summary;
    EXPECT_EQ(summary.find("(invalid: "), std::string::npos) << summary;
    EXPECT_TRUE(IsOneLine(summary));
    EXPECT_LE(summary.size(), kMaxSummaryBytes);
  }
}

TEST(EventSummaryTest, GoldenSummariesReadAsDocumented) {
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"dcm.provider.health_changed.v1.json",
       "health Ready → Unavailable after 3 failures (timeout)"},
      {"dcm.provider.health_probed.v1.json", "probe failed: timeout (no response in 5000 ms)"},
      {"dcm.provider.health_probed.v1.healthy.json", "probe healthy in 1.9 ms (HTTP 200)"},
      {"dcm.provider.registered.v1.json",
       "registered vm-east-1 (vm) at https://vm-east-1.sp.example.com:8443/api/v1alpha1/vms"},
      {"dcm.provider.updated.v1.json", "updated vm-east-1"},
      {"dcm.provider.deleted.v1.json", "deregistered vm-east-1"},
      {"dcm.provider.rejected.v1.json",
       "registration rejected: provider name 'vm-east-1' is already registered with id "
       "'3f6c1b2a-8d4e-4f70-9a1b-2c3d4e5f6a70'"},
      {"dcm.provider.id_change_requested.v1.json", "id change requested: 3f6c1b2a… → vm-east-1"},
      {"dcm.provider.deletion_requested.v1.json", "deletion requested: vm-east-1"},
      {"dcm.catalog_item_instance.rehydrated.v1.json",
       "rehydrated: resource 5f3a9c2e… replaced by 9d8c7b6a… on sim-vm-0"},
      {"dcm.cleanup.parked.v1.json",
       "cleanup of resource 5f3a9c2e… on sim-vm-0 parked: provider Unavailable"},
      {"dcm.cleanup.attempted.v1.json",
       "cleanup of resource 5f3a9c2e… on sim-vm-0 attempt failed (3/5): DELETE answered 503"},
      {"dcm.instance.operation_failed.v1.json",
       "rehydrate_catalog_item_instance 7c1e5a2b… failed: policy_rejected (policy manager "
       "rejected the request: region eu-west-9 is closed)"},
      {"dcm.status.vm.v1.json", "SP status RUNNING: VM booted in 2.4 s"},
      {"dcm.provider.heartbeat_recorded.v1.json", "heartbeat healthy (12 beats)"},
      {"dcm.provider.heartbeat_recorded.v1.expired.json",
       "heartbeat expired: no beat for 12000 ms"},
      {"dcm.provider.heartbeat_recorded.v1.forwarded.json",
       "heartbeat reported unhealthy (1 beat, forwarded)"},
      {"dcm.provider.heartbeat_recorded.v1.both.json", "heartbeat expired: no beat for 12000 ms"},
      {"dcm.peer.health_changed.v1.json",
       "peer health Ready → Unavailable after 3 failures (connect)"},
      {"dcm.peer.health_probed.v1.json", "peer probe failed: connect (connection refused)"},
  };
  for (const auto& [file, summary] : expected) {
    EXPECT_EQ(SummarizeEvent(LoadGolden(file)), summary) << file;
  }
}

TEST(EventSummaryTest, ProbeSummaryReadsTheTypedStructNotTheWireFields) {
  HealthProbe probe;
  probe.provider_id = "sp-1";
  probe.url = "http://127.0.0.1:1/health";
  probe.http_status = 200;
  probe.latency_us = 12'400;
  EXPECT_EQ(SummarizeEvent(EncodeHealthProbe(probe, "dcm/prober/test")),
            "probe healthy in 12 ms (HTTP 200)");
  probe.failure = ProbeFailure::kHttpStatus;
  probe.http_status = 503;
  probe.error = "";
  EXPECT_EQ(SummarizeEvent(EncodeHealthProbe(probe, "dcm/prober/test")),
            "probe failed: http_status (HTTP 503)");
  probe.failure = ProbeFailure::kBlocked;
  probe.http_status = 0;
  probe.error = "127.0.0.1 is in 127.0.0.0/8 (loopback), refused by the outbound policy";
  EXPECT_EQ(SummarizeEvent(EncodeHealthProbe(probe, "dcm/prober/test")),
            "probe failed: blocked (127.0.0.1 is in 127.0.0.0/8 (loopback), refused by the "
            "outbound policy)");
}

TEST(EventSummaryTest, HealthChangeWithOtherReasonFollowsAColon) {
  HealthChange change;
  change.provider_id = "sp-1";
  change.from = HealthStatus::kReady;
  change.to = HealthStatus::kUnhealthy;
  change.reason = "provider reported unhealthy";
  EXPECT_EQ(SummarizeEvent(EncodeHealthChange(change, "dcm/prober/test")),
            "health Ready → Unhealthy: provider reported unhealthy");
}

TEST(EventSummaryTest, InvalidRegistrationRequestStillSummarises) {
  CloudEvent event = LoadGolden("dcm.provider.registration_requested.v1.json");
  event.data = R"({"name":"x","endpoint":"ftp://x","service_type":"vm"})";
  const std::string summary = SummarizeEvent(event);
  EXPECT_TRUE(summary.starts_with("registration requested (invalid: ")) << summary;
}

TEST(EventSummaryTest, MalformedDataGivesUndecodableLineForEveryKnownType) {
  std::vector<std::string> types(std::begin(kInstanceEventTypes), std::end(kInstanceEventTypes));
  for (const char* type :
       {"dcm.provider.registered", "dcm.provider.updated", "dcm.provider.rejected",
        "dcm.provider.deleted", "dcm.provider.id_changed", "dcm.provider.health_probed",
        "dcm.provider.health_changed", "dcm.provider.registration_requested",
        "dcm.provider.deletion_requested", "dcm.provider.id_change_requested",
        "dcm.provider.update_requested", "dcm.status.vm", "dcm.provider.heartbeat_recorded"}) {
    types.push_back(type);
  }
  for (const auto& type : types) {
    for (const std::string data : {R"({})", R"({"provider":7,"seq":"x","id":[]})"}) {
      SCOPED_TRACE(type + " " + data);
      CloudEvent event;
      event.id = "e1";
      event.source = "test";
      event.type = type;
      event.time = "2026-01-01T00:00:00.000Z";
      event.data = data;
      const std::string summary = SummarizeEvent(event);
      EXPECT_FALSE(summary.empty());
      EXPECT_TRUE(IsOneLine(summary));
      EXPECT_TRUE(summary.starts_with(type + " (undecodable data: ") ||
                  summary.find("(invalid: ") != std::string::npos)
          << summary;
    }
  }
}

TEST(EventSummaryTest, NewerSchemaVersionIsUndecodableNotACrash) {
  CloudEvent event = LoadGolden("dcm.provider.registered.v1.json");
  event.schema_version = 99;
  EXPECT_TRUE(SummarizeEvent(event).starts_with("dcm.provider.registered (undecodable data: "));
}

TEST(EventSummaryTest, UnknownTypeGivesGenericLine) {
  CloudEvent event;
  event.type = "com.example.something";
  EXPECT_EQ(SummarizeEvent(event), "com.example.something (no summary for this type)");
}

TEST(EventSummaryTest, ControlCharactersAndLongTextStayOnOneBoundedLine) {
  CloudEvent event;
  event.type = "dcm.status.vm";
  event.time = "2026-01-01T00:00:00.000Z";
  event.data = R"({"id":"i-1","status":"failed","message":"line one\nline two\r\t)" +
               std::string(1000, 'x') + R"("})";
  const std::string summary = SummarizeEvent(event);
  EXPECT_TRUE(IsOneLine(summary));
  EXPECT_EQ(summary.find('\r'), std::string::npos);
  EXPECT_LE(summary.size(), kMaxSummaryBytes);
  EXPECT_TRUE(summary.starts_with("SP status FAILED: line one line two")) << summary;
}

TEST(EventSummaryTest, ShortIdAbbreviatesOnlyUuids) {
  EXPECT_EQ(ShortId("5f3a9c2e-1b4d-4e6f-9a8b-7c6d5e4f3a21"), "5f3a9c2e…");
  EXPECT_EQ(ShortId("vm-east-1"), "vm-east-1");
  EXPECT_EQ(ShortId(""), "");
}

}  // namespace
}  // namespace dcm
