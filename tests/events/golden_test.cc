// The golden CloudEvents in events/golden/ are the public contract of the topics (SPEC §4): SPs
// produce registration requests shaped like them to dcm.provider-requests and read outcomes shaped
// like them from dcm.providers; health consumers read dcm.health; instance consumers read
// dcm.instances; SPs produce dcm.status.{service_type} to dcm.status. This test proves every file
// decodes with today's decoders, re-encodes to exactly the same bytes (minified; SP status events
// are only decoded: we never produce them), and that every event type has one.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "events/cloud_event.h"
#include "events/health_events.h"
#include "events/instance_events.h"
#include "events/json_read.h"
#include "events/provider_events.h"
#include "src/common/time_format.h"
#include "src/common/uuid.h"

#ifndef GOLDEN_DIR
#error "GOLDEN_DIR must point at events/golden"
#endif

namespace dcm {
namespace {

const std::vector<std::string> kServiceTypes = {"vm",      "container", "database",
                                                "cluster", "storage",   "network"};

struct Golden {
  std::string file;  // file name only
  std::string json;  // as stored (pretty-printed)
};

std::vector<Golden> LoadGoldens() {
  std::vector<Golden> out;
  for (const auto& entry : std::filesystem::directory_iterator(GOLDEN_DIR)) {
    if (entry.path().extension() != ".json") continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream buffer;
    buffer << in.rdbuf();
    out.push_back({entry.path().filename().string(), buffer.str()});
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.file < b.file; });
  return out;
}

std::string Minified(const std::string& json) {
  auto parsed = ParseJson(json);
  EXPECT_TRUE(parsed.has_value());
  return parsed ? Minify(*parsed) : "";
}

bool IsRequestType(std::string_view type) {
  return type == event_type::kRegistrationRequested || type == event_type::kUpdateRequested ||
         type == event_type::kIdChangeRequested || type == event_type::kDeletionRequested;
}

bool IsStatusType(std::string_view type) { return type.starts_with(event_type::kStatusPrefix); }

int CurrentSchemaVersion(std::string_view type) {
  if (type.starts_with("dcm.provider.health_")) return kHealthEventSchemaVersion;
  if (IsInstanceEventType(type)) return kInstanceEventSchemaVersion;
  if (IsStatusType(type)) return kSpStatusEventSchemaVersion;
  return kProviderEventSchemaVersion;
}

void ExpectSameRequest(const ProviderRequest& a, const ProviderRequest& b) {
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.request_id, b.request_id);
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.spec, b.spec);
  EXPECT_EQ(a.new_id, b.new_id);
  EXPECT_EQ(a.force, b.force);
  EXPECT_EQ(a.requested_by, b.requested_by);
}

// Decodes `event` with the typed decoder and re-encodes it with the typed encoder.
CloudEvent ReEncode(const CloudEvent& event) {
  const auto time_ms = ParseRfc3339(event.time);
  EXPECT_TRUE(time_ms.has_value());
  if (IsRequestType(event.type)) {
    auto request = DecodeProviderRequest(event, kServiceTypes);
    EXPECT_TRUE(request.has_value()) << request.error().message;
    if (!request) return {};
    CloudEvent again = EncodeProviderRequest(*request, event.source, *time_ms);
    auto request_again = DecodeProviderRequest(again, kServiceTypes);
    EXPECT_TRUE(request_again.has_value());
    if (request_again) {
      ExpectSameRequest(*request_again, *request);
    }
    return again;
  }
  if (event.type == event_type::kHealthProbed) {
    auto probe = DecodeHealthProbe(event);
    EXPECT_TRUE(probe.has_value()) << probe.error().message;
    if (!probe) return {};
    EXPECT_EQ(probe->time_ms, *time_ms);
    CloudEvent again = EncodeHealthProbe(*probe, event.source);
    auto probe_again = DecodeHealthProbe(again);
    EXPECT_TRUE(probe_again.has_value());
    if (probe_again) {
      EXPECT_EQ(*probe_again, *probe);
    }
    return again;
  }
  if (event.type == event_type::kHealthChanged) {
    auto change = DecodeHealthChange(event);
    EXPECT_TRUE(change.has_value()) << change.error().message;
    if (!change) return {};
    CloudEvent again = EncodeHealthChange(*change, event.source);
    auto change_again = DecodeHealthChange(again);
    EXPECT_TRUE(change_again.has_value());
    if (change_again) {
      EXPECT_EQ(*change_again, *change);
    }
    return again;
  }
  if (IsInstanceEventType(event.type)) {
    auto decoded = DecodeInstanceEvent(event);
    EXPECT_TRUE(decoded.has_value()) << decoded.error().message;
    if (!decoded) return {};
    EXPECT_EQ(decoded->time_ms, *time_ms);
    CloudEvent again = EncodeInstanceEvent(*decoded);
    auto decoded_again = DecodeInstanceEvent(again);
    EXPECT_TRUE(decoded_again.has_value());
    if (decoded_again) {
      EXPECT_EQ(*decoded_again, *decoded);
    }
    return again;
  }
  auto outcome = DecodeProviderOutcome(event);
  EXPECT_TRUE(outcome.has_value()) << outcome.error().message;
  if (!outcome) return {};
  CloudEvent again = EncodeProviderOutcome(*outcome, event.source, *time_ms);
  auto outcome_again = DecodeProviderOutcome(again);
  EXPECT_TRUE(outcome_again.has_value());
  if (outcome_again) {
    EXPECT_EQ(*outcome_again, *outcome);
  }
  return again;
}

TEST(GoldenTest, EveryGoldenDecodesAndReEncodesToTheSameBytes) {
  const auto goldens = LoadGoldens();
  ASSERT_FALSE(goldens.empty()) << "no golden files in " << GOLDEN_DIR;
  for (const auto& golden : goldens) {
    SCOPED_TRACE(golden.file);
    auto event = DecodeCloudEvent(golden.json);
    ASSERT_TRUE(event.has_value()) << event.error().message;
    EXPECT_EQ(event->schema_version, CurrentSchemaVersion(event->type));
    if (IsStatusType(event->type)) {
      auto status = DecodeSpStatusEvent(*event);
      EXPECT_TRUE(status.has_value()) << status.error().message;
      continue;
    }
    const CloudEvent again = ReEncode(*event);
    EXPECT_EQ(again, *event);
    EXPECT_EQ(EncodeCloudEvent(again), Minified(golden.json));
  }
}

TEST(GoldenTest, FileNamesStateTypeAndSchemaVersion) {
  for (const auto& golden : LoadGoldens()) {
    SCOPED_TRACE(golden.file);
    auto event = DecodeCloudEvent(golden.json);
    ASSERT_TRUE(event.has_value()) << event.error().message;
    const std::string prefix = event->type + ".v" + std::to_string(event->schema_version) + ".";
    EXPECT_TRUE(golden.file.starts_with(prefix)) << "expected a name starting with " << prefix;
  }
}

TEST(GoldenTest, OutcomeGoldensCarryTheirDeterministicEventId) {
  for (const auto& golden : LoadGoldens()) {
    auto event = DecodeCloudEvent(golden.json);
    ASSERT_TRUE(event.has_value()) << golden.file;
    if (!IsProviderOutcomeType(event->type)) continue;
    auto outcome = DecodeProviderOutcome(*event);
    ASSERT_TRUE(outcome.has_value()) << golden.file;
    EXPECT_EQ(event->id, OutcomeEventId(outcome->request_id)) << golden.file;
  }
}

TEST(GoldenTest, EveryProviderEventTypeHasAGolden) {
  std::set<std::string> covered;
  for (const auto& golden : LoadGoldens()) {
    auto event = DecodeCloudEvent(golden.json);
    ASSERT_TRUE(event.has_value()) << golden.file;
    covered.insert(event->type);
  }
  for (const char* type :
       {event_type::kRegistrationRequested, event_type::kUpdateRequested,
        event_type::kIdChangeRequested, event_type::kDeletionRequested, event_type::kRegistered,
        event_type::kUpdated, event_type::kIdChanged, event_type::kDeleted, event_type::kRejected,
        event_type::kHealthProbed, event_type::kHealthChanged}) {
    EXPECT_TRUE(covered.count(type)) << "no golden for " << type;
  }
}

TEST(GoldenTest, InstanceGoldensOfARequestCarryTheirDeterministicEventId) {
  for (const auto& golden : LoadGoldens()) {
    auto event = DecodeCloudEvent(golden.json);
    ASSERT_TRUE(event.has_value()) << golden.file;
    if (!IsInstanceEventType(event->type)) continue;
    auto decoded = DecodeInstanceEvent(*event);
    ASSERT_TRUE(decoded.has_value()) << golden.file;
    if (decoded->request_id.empty()) continue;
    const std::string expected =
        event->type == event_type::kOperationRequested
            ? decoded->request_id
            : DeterministicUuid(decoded->request_id + "/" + event->type + "/" + event->subject);
    EXPECT_EQ(event->id, expected) << golden.file;
  }
}

TEST(GoldenTest, EveryInstanceEventTypeAndTheSpStatusEventHaveAGolden) {
  std::set<std::string> covered;
  for (const auto& golden : LoadGoldens()) {
    auto event = DecodeCloudEvent(golden.json);
    ASSERT_TRUE(event.has_value()) << golden.file;
    covered.insert(event->type);
  }
  for (const char* type : kInstanceEventTypes) {
    EXPECT_TRUE(covered.count(type)) << "no golden for " << type;
  }
  EXPECT_TRUE(covered.count(std::string(event_type::kStatusPrefix) + "vm"))
      << "no golden for dcm.status.vm";
}

TEST(GoldenTest, SpStatusGoldenDecodesToItsInstanceAndStatus) {
  std::ifstream in(std::filesystem::path(GOLDEN_DIR) / "dcm.status.vm.v1.json");
  std::stringstream buffer;
  buffer << in.rdbuf();
  auto event = DecodeCloudEvent(buffer.str());
  ASSERT_TRUE(event.has_value()) << event.error().message;
  auto status = DecodeSpStatusEvent(*event);
  ASSERT_TRUE(status.has_value()) << status.error().message;
  EXPECT_EQ(status->service_type, "vm");
  EXPECT_EQ(status->instance_id, event->subject);
  EXPECT_EQ(status->status, "RUNNING");
  EXPECT_FALSE(status->message.empty());
}

}  // namespace
}  // namespace dcm
