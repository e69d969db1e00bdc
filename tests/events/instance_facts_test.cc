// The typed instance events (events/instance_facts.h): every golden decodes to its alternative
// and encodes back to the same bytes; the decode table covers every type of the catalogue.
#include "events/instance_facts.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <variant>

#include "events/json_read.h"

#ifndef GOLDEN_DIR
#error "GOLDEN_DIR must point at events/golden"
#endif

namespace dcm {
namespace {

std::string ReadAll(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

TEST(InstanceFactsTest, EveryInstanceGoldenRoundTripsThroughItsTypedFactByteForByte) {
  std::set<std::string> seen;
  for (const auto& entry : std::filesystem::directory_iterator(GOLDEN_DIR)) {
    auto event = DecodeCloudEvent(ReadAll(entry.path()));
    ASSERT_TRUE(event.has_value()) << entry.path();
    if (!IsInstanceEvent(*event)) continue;
    seen.insert(event->type);
    auto fact = DecodeInstanceFact(*event);
    ASSERT_TRUE(fact.has_value()) << entry.path() << ": " << fact.error().message;
    EXPECT_STREQ(TypeOf(*fact), event->type.c_str());
    EXPECT_EQ(EnvelopeOf(*fact).event_id, event->id);
    EXPECT_EQ(EncodeCloudEvent(EncodeInstanceFact(*fact)), EncodeCloudEvent(*event))
        << entry.path();
    // The typed fact keeps every field the flat decoder reads from the golden.
    auto flat = DecodeInstanceEvent(*event);
    ASSERT_TRUE(flat.has_value());
    EXPECT_EQ(ToInstanceEvent(*fact), *flat) << entry.path();
  }
  EXPECT_EQ(seen.size(), std::size(kInstanceEventTypes));  // every type has a golden
}

TEST(InstanceFactsTest, EveryCatalogueTypeConvertsToTheAlternativeTaggedWithIt) {
  for (const char* type : kInstanceEventTypes) {
    InstanceEvent flat;
    flat.type = type;
    flat.root = "root-1";
    auto fact = ToInstanceFact(flat);
    ASSERT_TRUE(fact.has_value()) << type;
    EXPECT_STREQ(TypeOf(*fact), type);
    EXPECT_EQ(EnvelopeOf(*fact).root, "root-1");
    EXPECT_EQ(ToInstanceEvent(*fact), flat) << type;
  }
}

// The saga record stores the operation_started as the flat event: every parameter a request can
// carry survives the typed fold's round trip, so the stored bytes stay as they were.
TEST(InstanceFactsTest, AnOperationStartedKeepsEveryParameterOfItsRequest) {
  InstanceEvent flat;
  flat.type = event_type::kOperationStarted;
  flat.event_id = "e-1";
  flat.source = "dcm/test";
  flat.subject = "root-1";
  flat.time_ms = 1700000000000;
  flat.actor = "alice";
  flat.request_id = "req-1";
  flat.root = "root-1";
  flat.operation = OperationName(Operation::kRehydrateCatalogItemInstance);
  flat.catalog_item_instance_id = "c-1";
  flat.resource_id = "res-1";
  flat.old_resource_id = "res-0";
  flat.new_resource_id = "res-2";
  flat.instance_id = "i-1";
  flat.provider_name = "p-1";
  flat.service_type = "vm";
  flat.display_name = "web";
  flat.spec = R"({"cpu":2})";
  flat.deferred = true;
  flat.force = true;
  flat.prefer_local = true;
  auto fact = ToInstanceFact(flat);
  ASSERT_TRUE(fact.has_value());
  ASSERT_TRUE(std::holds_alternative<OperationStarted>(*fact));
  EXPECT_EQ(ToInstanceEvent(*fact), flat);
}

TEST(InstanceFactsTest, AnUnknownTypeDoesNotConvert) {
  InstanceEvent flat;
  flat.type = "dcm.instance.unknown";
  auto fact = ToInstanceFact(flat);
  ASSERT_FALSE(fact.has_value());
  EXPECT_EQ(fact.error().code, ErrorCode::kCorruption);
}

TEST(InstanceFactsTest, AFieldItsTypeDoesNotCarryIsDropped) {
  InstanceEvent flat;
  flat.type = event_type::kCatalogItemInstanceDeleted;
  flat.catalog_item_instance_id = "c-1";
  flat.outcome = "gone";  // only cleanup.attempted carries an outcome
  auto fact = ToInstanceFact(flat);
  ASSERT_TRUE(fact.has_value());
  ASSERT_TRUE(std::holds_alternative<CatalogItemInstanceDeleted>(*fact));
  EXPECT_EQ(std::get<CatalogItemInstanceDeleted>(*fact).catalog_item_instance_id, "c-1");
  EXPECT_EQ(ToInstanceEvent(*fact).outcome, "");
}

TEST(InstanceFactsTest, OverloadedVisitsTheAlternativeHeld) {
  InstanceFact fact = CleanupAttempted{};
  std::get<CleanupAttempted>(fact).outcome = "gone";
  const std::string seen =
      std::visit(Overloaded{[](const CleanupAttempted& a) { return a.outcome; },
                            [](const auto&) { return std::string("other"); }},
                 fact);
  EXPECT_EQ(seen, "gone");
}

}  // namespace
}  // namespace dcm
