// The golden CloudEvents in events/golden/ are the public contract of the topics (SPEC §4): SPs
// produce registration requests shaped like them to dcm.provider-requests and read outcomes shaped
// like them from dcm.providers; health consumers read dcm.health; instance consumers read
// dcm.instances; SPs produce dcm.status.{service_type} to dcm.status. This test proves every file
// decodes with today's decoders, re-encodes to exactly the same bytes (minified; SP status events
// are only decoded: we never produce them), and that every event type has one.
//
// Old logs keep older schema versions forever (SPEC §4), so a golden of an older version stays
// when its type moves on (`<type>.v1.json` next to `<type>.v2.json`). Each such file must have a
// twin of the latest version with the same name otherwise: the old one must decode to the same
// typed event, re-encode to the twin's bytes, and upcast (events/upcast.h) to the twin exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "events/cloud_event.h"
#include "events/federation_events.h"
#include "events/health_events.h"
#include "events/heartbeat_events.h"
#include "events/instance_events.h"
#include "events/json_read.h"
#include "events/provider_events.h"
#include "events/upcast.h"
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

bool IsRequestType(std::string_view type) { return RequestKindOfType(type).has_value(); }

bool IsStatusType(std::string_view type) { return type.starts_with(event_type::kStatusPrefix); }

int CurrentSchemaVersion(std::string_view type) {
  if (type == event_type::kHealthProbed) return kHealthProbedSchemaVersion;
  if (type == event_type::kHealthChanged) return kHealthChangedSchemaVersion;
  if (type == event_type::kPeerHealthProbed) return kPeerHealthProbedSchemaVersion;
  if (type == event_type::kPeerHealthChanged) return kPeerHealthChangedSchemaVersion;
  if (type == event_type::kHeartbeatRecorded) return kHeartbeatRecordedSchemaVersion;
  if (IsInstanceEventType(type)) return kInstanceEventSchemaVersion;
  if (IsStatusType(type)) return kSpStatusEventSchemaVersion;
  if (IsFederationRequestType(type) || IsFederationOutcomeType(type)) {
    return kFederationEventSchemaVersion;
  }
  return kProviderEventSchemaVersion;
}

void ExpectSameRequest(const ProviderRequest& a, const ProviderRequest& b) {
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.request_id, b.request_id);
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.spec, b.spec);
  EXPECT_EQ(a.new_id, b.new_id);
  EXPECT_EQ(a.force, b.force);
  EXPECT_EQ(a.registration_seq, b.registration_seq);
  EXPECT_EQ(a.last_heartbeat_time, b.last_heartbeat_time);
  EXPECT_EQ(a.gc_after_ms, b.gc_after_ms);
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
  const HealthSubject& health = event.type.starts_with("dcm.peer.") ? kPeerHealth : kProviderHealth;
  if (event.type == health.probed_type) {
    auto probe = DecodeHealthProbe(event, health);
    EXPECT_TRUE(probe.has_value()) << probe.error().message;
    if (!probe) return {};
    EXPECT_EQ(probe->time_ms, *time_ms);
    CloudEvent again = EncodeHealthProbe(*probe, event.source, health);
    auto probe_again = DecodeHealthProbe(again, health);
    EXPECT_TRUE(probe_again.has_value());
    if (probe_again) {
      EXPECT_EQ(*probe_again, *probe);
    }
    return again;
  }
  if (event.type == health.changed_type) {
    auto change = DecodeHealthChange(event, health);
    EXPECT_TRUE(change.has_value()) << change.error().message;
    if (!change) return {};
    CloudEvent again = EncodeHealthChange(*change, event.source, health);
    auto change_again = DecodeHealthChange(again, health);
    EXPECT_TRUE(change_again.has_value());
    if (change_again) {
      EXPECT_EQ(*change_again, *change);
    }
    return again;
  }
  if (event.type == event_type::kHeartbeatRecorded) {
    auto heartbeat = DecodeHeartbeatRecord(event);
    EXPECT_TRUE(heartbeat.has_value()) << heartbeat.error().message;
    if (!heartbeat) return {};
    EXPECT_EQ(heartbeat->time_ms, *time_ms);
    CloudEvent again = EncodeHeartbeatRecord(*heartbeat, event.source);
    auto heartbeat_again = DecodeHeartbeatRecord(again);
    EXPECT_TRUE(heartbeat_again.has_value());
    if (heartbeat_again) {
      EXPECT_EQ(*heartbeat_again, *heartbeat);
    }
    return again;
  }
  if (IsInstanceEvent(event)) {
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
  if (IsFederationRequestType(event.type)) {
    auto request = DecodeFederationRequest(event);
    EXPECT_TRUE(request.has_value()) << request.error().message;
    if (!request) return {};
    EXPECT_EQ(EnvelopeOf(*request).time_ms, *time_ms);
    CloudEvent again = EncodeFederationRequest(*request);
    auto request_again = DecodeFederationRequest(again);
    EXPECT_TRUE(request_again.has_value());
    if (request_again) {
      EXPECT_EQ(*request_again, *request);
    }
    return again;
  }
  if (IsFederationOutcomeType(event.type)) {
    auto outcome = DecodeFederationOutcome(event);
    EXPECT_TRUE(outcome.has_value()) << outcome.error().message;
    if (!outcome) return {};
    CloudEvent again = EncodeFederationOutcome(*outcome);
    auto outcome_again = DecodeFederationOutcome(again);
    EXPECT_TRUE(outcome_again.has_value());
    if (outcome_again) {
      EXPECT_EQ(*outcome_again, *outcome);
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

// The golden of the latest schema version that `older` (a golden of an older version) stands
// next to: the same file name with ".v<latest>." for ".v<version>.".
std::string TwinFileName(const Golden& older, const CloudEvent& event) {
  const std::string from = ".v" + std::to_string(event.schema_version) + ".";
  const std::string to = ".v" + std::to_string(CurrentSchemaVersion(event.type)) + ".";
  std::string name = older.file;
  const size_t at = name.find(from);
  if (at != std::string::npos) name.replace(at, from.size(), to);
  return name;
}

const Golden* FindGolden(const std::vector<Golden>& goldens, const std::string& file) {
  for (const auto& golden : goldens) {
    if (golden.file == file) return &golden;
  }
  return nullptr;
}

TEST(GoldenTest, EveryLatestVersionGoldenDecodesAndReEncodesToTheSameBytes) {
  const auto goldens = LoadGoldens();
  ASSERT_FALSE(goldens.empty()) << "no golden files in " << GOLDEN_DIR;
  for (const auto& golden : goldens) {
    SCOPED_TRACE(golden.file);
    auto event = DecodeCloudEvent(golden.json);
    ASSERT_TRUE(event.has_value()) << event.error().message;
    ASSERT_LE(event->schema_version, CurrentSchemaVersion(event->type));
    if (event->schema_version < CurrentSchemaVersion(event->type)) continue;  // tests below
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

TEST(GoldenTest, SchemaVersionConstantsAgreeWithTheUpcastChains) {
  for (const auto& golden : LoadGoldens()) {
    auto event = DecodeCloudEvent(golden.json);
    ASSERT_TRUE(event.has_value()) << golden.file;
    EXPECT_EQ(LatestSchemaVersion(event->type), CurrentSchemaVersion(event->type)) << event->type;
  }
}

TEST(GoldenTest, EveryOlderVersionGoldenHasALatestVersionTwin) {
  const auto goldens = LoadGoldens();
  int older = 0;
  for (const auto& golden : goldens) {
    auto event = DecodeCloudEvent(golden.json);
    ASSERT_TRUE(event.has_value()) << golden.file;
    if (event->schema_version == CurrentSchemaVersion(event->type)) continue;
    ++older;
    const std::string twin = TwinFileName(golden, *event);
    EXPECT_NE(FindGolden(goldens, twin), nullptr) << golden.file << " has no twin " << twin;
  }
  EXPECT_GE(older, 2) << "the health_probed v1 goldens are kept: old logs hold them";
}

TEST(GoldenTest, OlderVersionGoldensDecodeReEncodeAndUpcastToTheirLatestTwin) {
  const auto goldens = LoadGoldens();
  for (const auto& golden : goldens) {
    auto old_event = DecodeCloudEvent(golden.json);
    ASSERT_TRUE(old_event.has_value()) << golden.file;
    if (old_event->schema_version == CurrentSchemaVersion(old_event->type)) continue;
    SCOPED_TRACE(golden.file);
    const Golden* twin = FindGolden(goldens, TwinFileName(golden, *old_event));
    ASSERT_NE(twin, nullptr);
    auto twin_event = DecodeCloudEvent(twin->json);
    ASSERT_TRUE(twin_event.has_value()) << twin_event.error().message;
    // A current writer given what the old event decodes to writes the twin, byte for byte.
    EXPECT_EQ(EncodeCloudEvent(ReEncode(*old_event)), Minified(twin->json));
    // The upcaster turns the old envelope into the twin exactly (data bytes included).
    CloudEvent upcast = *old_event;
    ASSERT_TRUE(UpcastToLatest(upcast).has_value());
    EXPECT_EQ(upcast, *twin_event);
    if (old_event->type == event_type::kHealthProbed) {
      auto old_probe = DecodeHealthProbe(*old_event);
      auto twin_probe = DecodeHealthProbe(*twin_event);
      ASSERT_TRUE(old_probe.has_value()) << old_probe.error().message;
      ASSERT_TRUE(twin_probe.has_value()) << twin_probe.error().message;
      EXPECT_EQ(*old_probe, *twin_probe);
    }
  }
}

Result<HealthProbe> DecodeProbeGolden(const std::string& file) {
  std::ifstream in(std::filesystem::path(GOLDEN_DIR) / file);
  std::stringstream buffer;
  buffer << in.rdbuf();
  auto event = DecodeCloudEvent(buffer.str());
  if (!event) return tl::unexpected(event.error());
  return DecodeHealthProbe(*event);
}

TEST(GoldenTest, HealthProbedV1GoldensReadTheirMillisecondsAsTheV2Microseconds) {
  struct Case {
    std::string v1, v2;
    int64_t latency_us;
  };
  for (const Case& c :
       {Case{"dcm.provider.health_probed.v1.json", "dcm.provider.health_probed.v2.json", 5'000'125},
        Case{"dcm.provider.health_probed.v1.healthy.json",
             "dcm.provider.health_probed.v2.healthy.json", 1'875}}) {
    SCOPED_TRACE(c.v1);
    auto v1 = DecodeProbeGolden(c.v1);
    auto v2 = DecodeProbeGolden(c.v2);
    ASSERT_TRUE(v1.has_value()) << v1.error().message;
    ASSERT_TRUE(v2.has_value()) << v2.error().message;
    EXPECT_EQ(v1->latency_us, c.latency_us);
    EXPECT_EQ(*v1, *v2);
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
        event_type::kIdChangeRequested, event_type::kDeletionRequested,
        event_type::kExpiryRequested, event_type::kRegistered, event_type::kUpdated,
        event_type::kIdChanged, event_type::kDeleted, event_type::kExpired, event_type::kRejected,
        event_type::kHealthProbed, event_type::kHealthChanged, event_type::kHeartbeatRecorded,
        event_type::kPeerHealthProbed, event_type::kPeerHealthChanged}) {
    EXPECT_TRUE(covered.count(type)) << "no golden for " << type;
  }
}

TEST(GoldenTest, EveryFederationEventTypeHasAGolden) {
  std::set<std::string> covered;
  for (const auto& golden : LoadGoldens()) {
    auto event = DecodeCloudEvent(golden.json);
    ASSERT_TRUE(event.has_value()) << golden.file;
    covered.insert(event->type);
  }
  auto check = [&](const auto& family) {
    std::visit([&](const auto& typed) { EXPECT_TRUE(covered.count(typed.kType)) << typed.kType; },
               family);
  };
  // Every alternative of both families (a new one without a golden fails here).
  [&]<size_t... I>(std::index_sequence<I...>) {
    (check(FederationRequest(std::in_place_index<I>)), ...);
  }
  (std::make_index_sequence<std::variant_size_v<FederationRequest>>());
  [&]<size_t... I>(std::index_sequence<I...>) {
    (check(FederationOutcome(std::in_place_index<I>)), ...);
  }
  (std::make_index_sequence<std::variant_size_v<FederationOutcome>>());
}

TEST(GoldenTest, FederationOutcomeGoldensCarryTheirDeterministicEventId) {
  for (const auto& golden : LoadGoldens()) {
    auto event = DecodeCloudEvent(golden.json);
    ASSERT_TRUE(event.has_value()) << golden.file;
    if (!IsFederationOutcomeType(event->type) || IsInstanceEvent(*event)) continue;
    auto outcome = DecodeFederationOutcome(*event);
    ASSERT_TRUE(outcome.has_value()) << golden.file;
    EXPECT_EQ(event->id, FederationOutcomeId(BaseOf(*outcome).request_id)) << golden.file;
  }
}

TEST(GoldenTest, InstanceGoldensOfARequestCarryTheirDeterministicEventId) {
  for (const auto& golden : LoadGoldens()) {
    auto event = DecodeCloudEvent(golden.json);
    ASSERT_TRUE(event.has_value()) << golden.file;
    if (!IsInstanceEvent(*event)) continue;
    auto decoded = DecodeInstanceEvent(*event);
    ASSERT_TRUE(decoded.has_value()) << golden.file;
    if (decoded->request_id.empty()) continue;
    const std::string peer = decoded->peer.empty() ? "" : "/" + decoded->peer;
    const std::string expected = event->type == event_type::kOperationRequested
                                     ? decoded->request_id
                                     : DeterministicUuid(decoded->request_id + "/" + event->type +
                                                         "/" + event->subject + peer);
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
