// The upcaster chain (events/upcast.h): older schema versions are rewritten step by step to the
// latest, events already there pass untouched, and anything else is poison (kCorruption).
#include "events/upcast.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "events/health_events.h"
#include "events/provider_events.h"

namespace dcm {
namespace {

constexpr char kThing[] = "test.thing.happened";

CloudEvent Event(std::string type, int version, std::string data) {
  CloudEvent e;
  e.id = "e-1";
  e.source = "test";
  e.type = std::move(type);
  e.time = "2026-01-01T00:00:00.000Z";
  e.schema_version = version;
  e.data = std::move(data);
  return e;
}

// Test steps: each records in the data which step ran, so the order is visible.
Result<std::string> ThingV1ToV2(std::string_view data) {
  return std::string(data.substr(0, data.size() - 1)) + R"(,"v2":true})";
}
Result<std::string> ThingV2ToV3(std::string_view data) {
  return std::string(data.substr(0, data.size() - 1)) + R"(,"v3":true})";
}
Result<std::string> FailingStep(std::string_view) {
  return MakeError(ErrorCode::kInvalidArgument, "cannot read this");
}

Upcaster ThingUpcaster() {
  const UpcastStep steps[] = {{kThing, 1, &ThingV1ToV2}, {kThing, 2, &ThingV2ToV3}};
  auto upcaster = Upcaster::Create(steps);
  EXPECT_TRUE(upcaster.has_value());
  return std::move(*upcaster);
}

CloudEvent ProbeV1(std::string latency) {
  return Event(event_type::kHealthProbed, 1,
               R"({"provider_id":"a","seq":3,"registration_seq":1,"url":"http://a/health",)"
               R"("failure_class":null,"http_status":200,"latency_ms":)" +
                   latency + R"(,"failure_threshold":3,"success_threshold":1})");
}

// --- the chain ---------------------------------------------------------------------------------

TEST(UpcasterTest, AppliesEveryStepFromTheEventsVersionToTheLatestInOrder) {
  const Upcaster upcaster = ThingUpcaster();
  EXPECT_EQ(upcaster.LatestSchemaVersion(kThing), 3);
  CloudEvent from_v1 = Event(kThing, 1, R"({"a":1})");
  ASSERT_TRUE(upcaster.UpcastToLatest(from_v1).has_value());
  EXPECT_EQ(from_v1.schema_version, 3);
  EXPECT_EQ(from_v1.data, R"({"a":1,"v2":true,"v3":true})");
  CloudEvent from_v2 = Event(kThing, 2, R"({"a":1})");
  ASSERT_TRUE(upcaster.UpcastToLatest(from_v2).has_value());
  EXPECT_EQ(from_v2.schema_version, 3);
  EXPECT_EQ(from_v2.data, R"({"a":1,"v3":true})");
}

TEST(UpcasterTest, EventAtTheLatestVersionPassesUntouchedWithoutACopy) {
  const Upcaster upcaster = ThingUpcaster();
  CloudEvent latest = Event(kThing, 3, R"({"a":1,"padding":"longer than any small string"})");
  const CloudEvent before = latest;
  const char* buffer = latest.data.data();
  ASSERT_TRUE(upcaster.UpcastToLatest(latest).has_value());
  EXPECT_EQ(latest, before);
  EXPECT_EQ(latest.data.data(), buffer) << "the data was reassigned";
  std::string storage;
  auto data = upcaster.DataAtLatestVersion(latest, storage);
  ASSERT_TRUE(data.has_value());
  EXPECT_EQ(data->data(), buffer) << "the view must be the event's own data";
  EXPECT_TRUE(storage.empty());
}

TEST(UpcasterTest, DataAtLatestVersionOfAnOlderEventIsTheUpcastDataInStorage) {
  const Upcaster upcaster = ThingUpcaster();
  const CloudEvent v2 = Event(kThing, 2, R"({"a":1})");
  std::string storage;
  auto data = upcaster.DataAtLatestVersion(v2, storage);
  ASSERT_TRUE(data.has_value());
  EXPECT_EQ(*data, R"({"a":1,"v3":true})");
  EXPECT_EQ(data->data(), storage.data());
  EXPECT_EQ(v2.data, R"({"a":1})") << "the event itself is not changed";
}

TEST(UpcasterTest, NewerVersionThanTheBuildReadsIsPoison) {
  const Upcaster upcaster = ThingUpcaster();
  CloudEvent future = Event(kThing, 4, R"({"a":1})");
  auto status = upcaster.UpcastToLatest(future);
  ASSERT_FALSE(status.has_value());
  EXPECT_EQ(status.error().code, ErrorCode::kCorruption);
  EXPECT_EQ(status.error().message,
            "schemaversion 4 of test.thing.happened is newer than this build reads (latest 3)");
  EXPECT_EQ(future.schema_version, 4) << "unchanged on error";
}

TEST(UpcasterTest, VersionZeroOrNegativeIsPoison) {
  const Upcaster upcaster = ThingUpcaster();
  for (int version : {0, -1, -2147483647}) {
    SCOPED_TRACE(version);
    CloudEvent event = Event(kThing, version, R"({"a":1})");
    const CloudEvent before = event;
    auto status = upcaster.UpcastToLatest(event);
    ASSERT_FALSE(status.has_value());
    EXPECT_EQ(status.error().code, ErrorCode::kCorruption);
    EXPECT_NE(status.error().message.find("is not a schema version"), std::string::npos)
        << status.error().message;
    EXPECT_EQ(event, before);
  }
}

TEST(UpcasterTest, TypeWithoutStepsIsAtVersionOne) {
  const Upcaster upcaster = ThingUpcaster();
  EXPECT_EQ(upcaster.LatestSchemaVersion("dcm.unknown.type"), 1);
  CloudEvent v1 = Event("dcm.unknown.type", 1, R"({"x":1})");
  ASSERT_TRUE(upcaster.UpcastToLatest(v1).has_value());
  EXPECT_EQ(v1.data, R"({"x":1})");
  CloudEvent v2 = Event("dcm.unknown.type", 2, R"({"x":1})");
  auto status = upcaster.UpcastToLatest(v2);
  ASSERT_FALSE(status.has_value());
  EXPECT_EQ(status.error().code, ErrorCode::kCorruption);
  EXPECT_EQ(status.error().message,
            "schemaversion 2 of dcm.unknown.type is newer than this build reads (latest 1)");
}

TEST(UpcasterTest, StepFailureIsPoisonNamingTheVersionsAndLeavesTheEventUnchanged) {
  const UpcastStep steps[] = {{kThing, 1, &ThingV1ToV2}, {kThing, 2, &FailingStep}};
  auto upcaster = Upcaster::Create(steps);
  ASSERT_TRUE(upcaster.has_value());
  CloudEvent event = Event(kThing, 1, R"({"a":1})");
  const CloudEvent before = event;
  auto status = upcaster->UpcastToLatest(event);
  ASSERT_FALSE(status.has_value());
  EXPECT_EQ(status.error().code, ErrorCode::kCorruption) << "whatever code the step returned";
  EXPECT_EQ(status.error().message,
            "upcasting schemaversion 1 of test.thing.happened to 3: cannot read this");
  EXPECT_EQ(event, before);
}

TEST(UpcasterTest, CreateRejectsChainsThatDoNotStartAtOneOrHaveGaps) {
  const std::vector<std::vector<UpcastStep>> broken = {
      {{kThing, 2, &ThingV2ToV3}},                             // does not start at 1
      {{kThing, 1, &ThingV1ToV2}, {kThing, 3, &ThingV2ToV3}},  // gap
      {{kThing, 1, &ThingV1ToV2}, {kThing, 1, &ThingV2ToV3}},  // duplicate
      {{kThing, 0, &ThingV1ToV2}},                             // version 0
      {{kThing, 1, nullptr}},                                  // no function
      {{"", 1, &ThingV1ToV2}},                                 // no type
  };
  for (size_t i = 0; i < broken.size(); ++i) {
    SCOPED_TRACE(i);
    auto upcaster = Upcaster::Create(broken[i]);
    ASSERT_FALSE(upcaster.has_value());
    EXPECT_EQ(upcaster.error().code, ErrorCode::kInvalidArgument);
  }
  const UpcastStep two_types[] = {
      {kThing, 1, &ThingV1ToV2}, {"test.other", 1, &ThingV1ToV2}, {kThing, 2, &ThingV2ToV3}};
  auto upcaster = Upcaster::Create(two_types);
  ASSERT_TRUE(upcaster.has_value()) << upcaster.error().message;
  EXPECT_EQ(upcaster->LatestSchemaVersion(kThing), 3);
  EXPECT_EQ(upcaster->LatestSchemaVersion("test.other"), 2);
}

// --- the built-in chain ------------------------------------------------------------------------

TEST(BuiltInUpcasterTest, KnowsHealthProbedAtVersion3AndEveryOtherTypeAtVersion1) {
  ASSERT_TRUE(Upcaster::Create(BuiltInUpcastSteps()).has_value());
  EXPECT_EQ(LatestSchemaVersion(event_type::kHealthProbed), 3);
  EXPECT_EQ(LatestSchemaVersion(event_type::kHealthProbed), kHealthProbedSchemaVersion);
  EXPECT_EQ(LatestSchemaVersion(event_type::kHealthChanged), kHealthChangedSchemaVersion);
  EXPECT_EQ(LatestSchemaVersion(event_type::kRegistered), kProviderEventSchemaVersion);
  EXPECT_EQ(LatestSchemaVersion("dcm.no.such_type"), 1);
}

TEST(BuiltInUpcasterTest, HealthProbedV1BecomesV3WithMicrosecondsInTheSamePosition) {
  CloudEvent event = ProbeV1("5000.125");
  ASSERT_TRUE(UpcastToLatest(event).has_value());
  EXPECT_EQ(event.schema_version, 3);  // v2's data: v3 only adds the optional state
  EXPECT_EQ(event.data,
            R"({"provider_id":"a","seq":3,"registration_seq":1,"url":"http://a/health",)"
            R"("failure_class":null,"http_status":200,"latency_us":5000125,)"
            R"("failure_threshold":3,"success_threshold":1})");
}

TEST(BuiltInUpcasterTest, HealthProbedV1LatencyIsRoundedToTheNearestMicrosecond) {
  struct Case {
    const char* ms;
    int64_t us;
  };
  for (const Case& c :
       {Case{"0", 0}, Case{"7", 7'000}, Case{"1.875", 1'875}, Case{"0.0004", 0}, Case{"0.0006", 1},
        Case{"2.4996", 2'500}, Case{"4.095", 4'095}, Case{"0.1234", 123}, Case{"1e3", 1'000'000},
        Case{"1000000000", 1'000'000'000'000}}) {
    SCOPED_TRACE(c.ms);
    CloudEvent event = ProbeV1(c.ms);
    ASSERT_TRUE(UpcastToLatest(event).has_value());
    EXPECT_NE(event.data.find(R"("latency_us":)" + std::to_string(c.us) + ","), std::string::npos)
        << event.data;
  }
}

TEST(BuiltInUpcasterTest, HealthProbedV1StepKeepsEveryOtherMemberAndDropsStrayLatencies) {
  auto upcast = UpcastHealthProbedV1ToV2(
      R"({"a":"x\"y","latency_us":99,"latency_ms":2.5,"b":[1,{"c":null}],"latency_ms":9})");
  ASSERT_TRUE(upcast.has_value()) << upcast.error().message;
  EXPECT_EQ(*upcast, R"({"a":"x\"y","latency_us":2500,"b":[1,{"c":null}]})");
  auto without = UpcastHealthProbedV1ToV2(R"({"provider_id":"a"})");
  ASSERT_TRUE(without.has_value());
  EXPECT_EQ(*without, R"({"provider_id":"a"})");
}

TEST(BuiltInUpcasterTest, MalformedHealthProbedV1DataIsPoisonNotACrash) {
  for (const std::string& data :
       {std::string(""), std::string("{"), std::string("[]"), std::string("null"),
        std::string(R"({"latency_ms":"1.5"})"), std::string(R"({"latency_ms":-0.5})"),
        std::string(R"({"latency_ms":1e10})"), std::string(R"({"latency_ms":null})"),
        std::string("{\"url\":\"\xff\"}"), std::string(200, '[') + std::string(200, ']')}) {
    SCOPED_TRACE(data);
    CloudEvent event = Event(event_type::kHealthProbed, 1, data);
    const CloudEvent before = event;
    auto status = UpcastToLatest(event);
    ASSERT_FALSE(status.has_value());
    EXPECT_EQ(status.error().code, ErrorCode::kCorruption);
    EXPECT_NE(status.error().message.find("upcasting schemaversion 1 of "
                                          "dcm.provider.health_probed to 2"),
              std::string::npos)
        << status.error().message;
    EXPECT_EQ(event, before);
  }
}

TEST(BuiltInUpcasterTest, UpcastV1ProbeDecodesLikeTheV1EventItself) {
  const CloudEvent v1 = ProbeV1("12.5");
  CloudEvent v2 = v1;
  ASSERT_TRUE(UpcastToLatest(v2).has_value());
  auto from_v1 = DecodeHealthProbe(v1);
  auto from_v2 = DecodeHealthProbe(v2);
  ASSERT_TRUE(from_v1.has_value()) << from_v1.error().message;
  ASSERT_TRUE(from_v2.has_value()) << from_v2.error().message;
  EXPECT_EQ(*from_v1, *from_v2);
  EXPECT_EQ(from_v1->latency_us, 12500);
}

}  // namespace
}  // namespace dcm
