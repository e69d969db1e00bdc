// Instance event codecs (SPEC §3.3): operation requests, saga facts, cleanup facts, SP status.
#include "events/instance_events.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "src/common/uuid.h"

namespace dcm {
namespace {

constexpr int64_t kT0 = 1767225600000;  // 2026-01-01T00:00:00.000Z
constexpr char kRoot[] = "7c1e5a2b-3d4f-4a6b-8c9d-0e1f2a3b4c5d";
constexpr char kRequest[] = "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c60";
constexpr char kResource[] = "5f3a9c2e-1b4d-4e6f-9a8b-7c6d5e4f3a21";
constexpr char kNewResource[] = "9d8c7b6a-5e4f-4a3b-8c2d-1e0f9a8b7c6d";
constexpr char kProviderId[] = "3f6c1b2a-8d4e-4f70-9a1b-2c3d4e5f6a70";
constexpr char kSpec[] = R"({"service_type":"vm","cpu":2})";

InstanceEvent Base(const char* type) {
  InstanceEvent e;
  e.type = type;
  e.source = "dcm/instance-worker/test";
  e.time_ms = kT0 + 42;
  e.request_id = kRequest;
  e.root = kRoot;
  return e;
}

// A valid event of `type` with exactly the fields its type requires, plus a few optional ones.
InstanceEvent Sample(const std::string& type) {
  InstanceEvent e = Base(type.c_str());
  if (type.starts_with("dcm.instance.operation_")) {
    e.operation = OperationName(Operation::kCreateCatalogItemInstance);
    e.catalog_item_instance_id = kRoot;
  }
  if (type == event_type::kOperationRequested) {
    e.request_id.clear();
    e.event_id = kRequest;
    e.spec = kSpec;
    e.display_name = "web-1";
  } else if (type == event_type::kOperationFailed) {
    e.http_status = 406;
    e.reason = "policy_rejected";
    e.error = "rejected";
  } else if (type == event_type::kResourcePlaced) {
    e.resource_id = kResource;
    e.provider_name = "sim-vm-0";
    e.provider_id = kProviderId;
    e.service_type = "vm";
    e.intent = kSpec;
    e.spec = R"({"service_type":"vm","cpu":2,"region":"eu-1"})";
    e.policy = "builtin";
  } else if (type == event_type::kResourceDeleted) {
    e.resource_id = kResource;
    e.deferred = true;
  } else if (type == event_type::kResourceLost) {
    e.resource_id = kResource;
    e.provider_name = "sim-vm-0";
    e.provider_id = kProviderId;
    e.reason = "provider_expired";
  } else if (type == event_type::kInstanceCreated) {
    e.instance_id = kResource;
    e.provider_name = "sim-vm-0";
    e.provider_id = kProviderId;
    e.service_type = "vm";
    e.spec = kSpec;
    e.status = "PROVISIONING";
    e.http_status = 201;
  } else if (type == event_type::kInstanceCreateFailed ||
             type == event_type::kInstanceDeleteFailed) {
    e.instance_id = kResource;
    e.provider_name = "sim-vm-0";
    e.error = "SP answered 500";
    e.http_status = 500;
  } else if (type == event_type::kInstanceDeleted) {
    e.request_id.clear();
    e.instance_id = kResource;
    e.provider_name = "sim-vm-0";
    e.provider_id = kProviderId;
    e.force = true;
  } else if (type == event_type::kCleanupEnqueued) {
    e.instance_id = kResource;
    e.provider_name = "sim-vm-0";
    e.provider_id = kProviderId;
    e.service_type = "vm";
    e.requested_at_ms = kT0 + 7;
    e.status = kCleanupPending;
  } else if (type == event_type::kCleanupParked) {
    e.request_id.clear();
    e.instance_id = kResource;
    e.provider_name = "sim-vm-0";
    e.status = kCleanupPendingProvider;
  } else if (type == event_type::kCleanupAttempted) {
    e.request_id.clear();
    e.instance_id = kResource;
    e.outcome = "failed";
    e.status = kCleanupPending;
    e.retry_count = 2;
    e.max_retries = 5;
    e.http_status = 503;
  } else if (type == event_type::kCleanupFailed) {
    e.request_id.clear();
    e.instance_id = kResource;
    e.retry_count = 5;
    e.max_retries = 5;
    e.error = "DELETE answered 503";
    e.status = kCleanupFailedStatus;
  } else if (type == event_type::kCleanupRetried) {
    e.instance_id = kResource;
  } else if (type == event_type::kCatalogItemInstanceCreated) {
    e.catalog_item_instance_id = kRoot;
    e.resource_id = kResource;
    e.spec = kSpec;
    e.provider_name = "sim-vm-0";
  } else if (type == event_type::kCatalogItemInstanceRehydrated) {
    e.catalog_item_instance_id = kRoot;
    e.old_resource_id = kResource;
    e.new_resource_id = kNewResource;
    e.provider_name = "sim-vm-0";
  } else if (type == event_type::kCatalogItemInstanceDeleted) {
    e.catalog_item_instance_id = kRoot;
  } else if (type.starts_with("dcm.reservation.") || type.starts_with("dcm.contract.")) {
    // A peer placement's steps (SPEC §10): each carries every field any of them requires.
    e.resource_id = kResource;
    e.peer = "enclave-b";
    e.reservation_id = kNewResource;
    e.flavor_id = "fl-container";
    e.contract_id = kRoot;
    e.instance_id = kResource;
    e.reason = "no_capacity";
    e.expires_at_ms = kT0 + 30000;
  }
  return e;
}

// `event` with its data replaced by `data` (the envelope kept).
CloudEvent WithData(CloudEvent event, std::string data) {
  event.data = std::move(data);
  return event;
}

// `data` (a JSON object text) with `"key":<value>` removed or replaced.
std::string Without(const std::string& data, const std::string& key) {
  const std::string needle = "\"" + key + "\":";
  const size_t start = data.find(needle);
  if (start == std::string::npos) return data;
  size_t end = start + needle.size();
  int depth = 0;
  bool in_string = false;
  for (; end < data.size(); ++end) {
    const char c = data[end];
    if (in_string) {
      if (c == '\\') {
        ++end;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '{' || c == '[') ++depth;
    if (c == '}' || c == ']') {
      if (depth == 0) break;
      --depth;
    }
    if (c == ',' && depth == 0) break;
  }
  std::string out = data.substr(0, start) + data.substr(end);
  // Fix the separators left behind: ",," / "{," / ",}".
  for (const char* bad : {",,", "{,", ",}"}) {
    if (size_t at = out.find(bad); at != std::string::npos) {
      out.erase(bad[0] == '{' ? at + 1 : at, 1);
    }
  }
  return out;
}

std::string Replaced(const std::string& data, const std::string& key, const std::string& value) {
  std::string without = Without(data, key);
  return without.substr(0, without.size() - 1) + (without.size() > 2 ? "," : "") + "\"" + key +
         "\":" + value + "}";
}

std::vector<std::string> SplitWords(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t space = text.find(' ', start);
    if (space == std::string::npos) space = text.size();
    out.push_back(text.substr(start, space - start));
    start = space + 1;
  }
  return out;
}

// The fields each type requires (SPEC §3.3, docs/events.md), as the decoder must enforce them.
std::vector<std::string> RequiredFields(const std::string& type) {
  if (type == event_type::kOperationRequested) return SplitWords("operation root");
  if (type == event_type::kOperationStarted || type == event_type::kOperationCompleted) {
    return SplitWords("request_id root operation");
  }
  if (type == event_type::kOperationFailed) {
    return SplitWords("request_id root operation http_status reason error");
  }
  if (type == event_type::kResourcePlaced) {
    return SplitWords(
        "request_id root resource_id provider_name provider_id service_type intent spec policy");
  }
  if (type == event_type::kResourceDeleted) return SplitWords("root resource_id");
  if (type == event_type::kResourceLost) {
    return SplitWords("request_id root resource_id provider_name provider_id reason");
  }
  if (type == event_type::kInstanceCreated) {
    return SplitWords(
        "request_id root instance_id provider_name provider_id service_type spec status");
  }
  if (type == event_type::kInstanceCreateFailed || type == event_type::kInstanceDeleteFailed) {
    return SplitWords("request_id root instance_id provider_name error");
  }
  if (type == event_type::kInstanceDeleted) {
    return SplitWords("root instance_id provider_name provider_id");
  }
  if (type == event_type::kCleanupEnqueued) {
    return SplitWords("root instance_id provider_name provider_id service_type requested_at");
  }
  if (type == event_type::kCleanupParked) {
    return SplitWords("root instance_id provider_name status");
  }
  if (type == event_type::kCleanupAttempted) {
    return SplitWords("root instance_id outcome status retry_count max_retries");
  }
  if (type == event_type::kCleanupFailed) {
    return SplitWords("root instance_id retry_count max_retries error");
  }
  if (type == event_type::kCleanupRetried) return SplitWords("request_id root instance_id");
  if (type == event_type::kCatalogItemInstanceCreated) {
    return SplitWords("request_id root catalog_item_instance_id resource_id spec provider_name");
  }
  if (type == event_type::kCatalogItemInstanceRehydrated) {
    return SplitWords(
        "request_id root catalog_item_instance_id old_resource_id new_resource_id provider_name");
  }
  if (type == event_type::kCatalogItemInstanceDeleted) {
    return SplitWords("request_id root catalog_item_instance_id");
  }
  if (type == event_type::kRemoteReservationRequested) {
    return SplitWords("request_id root resource_id peer reservation_id flavor_id");
  }
  if (type == event_type::kRemoteReservationHeld) {
    return SplitWords("request_id root resource_id peer reservation_id expires_at");
  }
  if (type == event_type::kRemoteReservationRefused) {
    return SplitWords("request_id root resource_id peer reservation_id reason");
  }
  if (type == event_type::kRemoteContractSigned) {
    return SplitWords(
        "request_id root resource_id peer reservation_id contract_id instance_id expires_at");
  }
  if (type == event_type::kRemoteContractRenewed) {
    return SplitWords("root resource_id peer contract_id expires_at");
  }
  if (type == event_type::kRemoteContractExpired || type == event_type::kRemoteContractRevoked) {
    return SplitWords("root resource_id peer contract_id reason");
  }
  if (type == event_type::kRemoteContractTerminated) {
    return SplitWords("root resource_id peer contract_id");
  }
  ADD_FAILURE() << "no required fields listed for " << type;
  return {};
}

TEST(InstanceEventsTest, EveryTypeRoundTripsThroughItsCloudEvent) {
  for (const char* type : kInstanceEventTypes) {
    SCOPED_TRACE(type);
    InstanceEvent e = Sample(type);
    CloudEvent encoded = EncodeInstanceEvent(e);
    EXPECT_EQ(encoded.type, type);
    EXPECT_EQ(encoded.time, "2026-01-01T00:00:00.042Z");
    EXPECT_EQ(encoded.schema_version, kInstanceEventSchemaVersion);
    auto decoded = DecodeInstanceEvent(encoded);
    ASSERT_TRUE(decoded.has_value()) << decoded.error().message << "\n" << encoded.data;
    // What Encode filled in: the id, the subject and (operation_requested) the request id.
    e.event_id = encoded.id;
    e.subject = encoded.subject;
    if (e.type == event_type::kOperationRequested) e.request_id = encoded.id;
    EXPECT_EQ(*decoded, e);
    EXPECT_EQ(EncodeInstanceEvent(*decoded), encoded);
  }
}

TEST(InstanceEventsTest, DataCarriesNonEmptyFieldsInDeclarationOrderWithObjectsRaw) {
  InstanceEvent e = Sample(event_type::kResourcePlaced);
  e.event_id = "e1";
  EXPECT_EQ(EncodeInstanceEvent(e).data,
            std::string(R"({"request_id":")") + kRequest + R"(","root":")" + kRoot +
                R"(","resource_id":")" + kResource +
                R"(","provider_name":"sim-vm-0","provider_id":")" + kProviderId +
                R"(","service_type":"vm","spec":{"service_type":"vm","cpu":2,"region":"eu-1"},)"
                R"("intent":{"service_type":"vm","cpu":2},"policy":"builtin"})");
}

TEST(InstanceEventsTest, CleanupTypesWriteTheirCountersEvenWhenZeroOtherTypesOnlyNonZero) {
  InstanceEvent parked = Sample(event_type::kCleanupParked);
  EXPECT_NE(EncodeInstanceEvent(parked).data.find(R"("retry_count":0,"max_retries":0)"),
            std::string::npos);
  InstanceEvent completed = Sample(event_type::kOperationCompleted);
  EXPECT_EQ(EncodeInstanceEvent(completed).data.find("retry_count"), std::string::npos);
  EXPECT_EQ(EncodeInstanceEvent(completed).data.find("http_status"), std::string::npos);
  completed.max_retries = 3;
  const CloudEvent encoded = EncodeInstanceEvent(completed);
  EXPECT_NE(encoded.data.find(R"("max_retries":3)"), std::string::npos);
  auto decoded = DecodeInstanceEvent(encoded);
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
  EXPECT_EQ(decoded->max_retries, 3);
}

TEST(InstanceEventsTest, RequestedAtTravelsAsAnRfc3339String) {
  CloudEvent e = EncodeInstanceEvent(Sample(event_type::kCleanupEnqueued));
  EXPECT_NE(e.data.find(R"("requested_at":"2026-01-01T00:00:00.007Z")"), std::string::npos)
      << e.data;
}

TEST(InstanceEventsTest, FlagsAreWrittenOnlyWhenTrue) {
  InstanceEvent e = Sample(event_type::kResourceDeleted);
  EXPECT_NE(EncodeInstanceEvent(e).data.find(R"("deferred":true)"), std::string::npos);
  e.deferred = false;
  EXPECT_EQ(EncodeInstanceEvent(e).data.find("deferred"), std::string::npos);
  EXPECT_EQ(EncodeInstanceEvent(e).data.find("force"), std::string::npos);
  EXPECT_EQ(EncodeInstanceEvent(e).data.find("prefer_local"), std::string::npos);
}

TEST(InstanceEventsTest, PreferLocalTravelsOnARehydrateRequestOnlyWhenTrue) {
  InstanceEvent e = Sample(event_type::kOperationRequested);
  e.operation = OperationName(Operation::kRehydrateResource);
  e.prefer_local = true;
  const CloudEvent encoded = EncodeInstanceEvent(e);
  EXPECT_NE(encoded.data.find(R"("prefer_local":true)"), std::string::npos) << encoded.data;
  auto decoded = DecodeInstanceEvent(encoded);
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
  EXPECT_TRUE(decoded->prefer_local);
  e.prefer_local = false;
  EXPECT_EQ(EncodeInstanceEvent(e).data.find("prefer_local"), std::string::npos);
}

TEST(InstanceEventsTest, SubjectDerivesFromTheTypesEntityWhenEmpty) {
  EXPECT_EQ(EncodeInstanceEvent(Sample(event_type::kOperationStarted)).subject, kRoot);
  EXPECT_EQ(EncodeInstanceEvent(Sample(event_type::kResourcePlaced)).subject, kResource);
  EXPECT_EQ(EncodeInstanceEvent(Sample(event_type::kInstanceCreated)).subject, kResource);
  EXPECT_EQ(EncodeInstanceEvent(Sample(event_type::kCleanupFailed)).subject, kResource);
  EXPECT_EQ(EncodeInstanceEvent(Sample(event_type::kCatalogItemInstanceRehydrated)).subject, kRoot);
  InstanceEvent explicit_subject = Sample(event_type::kResourcePlaced);
  explicit_subject.subject = "other";
  EXPECT_EQ(EncodeInstanceEvent(explicit_subject).subject, "other");
}

TEST(InstanceEventsTest, FactsOfOneRequestGetDeterministicIds) {
  InstanceEvent e = Sample(event_type::kInstanceCreated);
  const CloudEvent a = EncodeInstanceEvent(e);
  e.source = "dcm/instance-worker/another-owner";
  e.time_ms += 1000;
  const CloudEvent b = EncodeInstanceEvent(e);
  EXPECT_EQ(a.id, b.id) << "a re-decided request re-emits the same event id";
  EXPECT_EQ(a.id, DeterministicUuid(std::string(kRequest) + "/" + event_type::kInstanceCreated +
                                    "/" + kResource));
  EXPECT_TRUE(IsUuid(a.id));

  InstanceEvent other_subject = Sample(event_type::kInstanceCreated);
  other_subject.instance_id = kNewResource;
  EXPECT_NE(EncodeInstanceEvent(other_subject).id, a.id);
  InstanceEvent other_type = Sample(event_type::kInstanceCreateFailed);
  EXPECT_NE(EncodeInstanceEvent(other_type).id, a.id);
}

TEST(InstanceEventsTest, FactsWithoutARequestGetFreshIdsAndAnExplicitIdWins) {
  InstanceEvent e = Sample(event_type::kCleanupAttempted);
  ASSERT_TRUE(e.request_id.empty());
  const std::string a = EncodeInstanceEvent(e).id;
  EXPECT_TRUE(IsUuid(a));
  EXPECT_NE(EncodeInstanceEvent(e).id, a);
  e.event_id = "11111111-2222-4333-8444-555555555555";
  EXPECT_EQ(EncodeInstanceEvent(e).id, e.event_id);
}

TEST(InstanceEventsTest, OperationRequestIsItsOwnRequestId) {
  InstanceEvent e = Sample(event_type::kOperationRequested);
  e.event_id.clear();
  e.request_id = kRequest;
  const CloudEvent encoded = EncodeInstanceEvent(e);
  EXPECT_EQ(encoded.id, kRequest);
  EXPECT_EQ(encoded.data.find("request_id"), std::string::npos) << encoded.data;
  auto decoded = DecodeInstanceEvent(encoded);
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
  EXPECT_EQ(decoded->request_id, kRequest);
  EXPECT_EQ(decoded->event_id, kRequest);
  // A request_id in its data is not its identity and is ignored.
  auto with_field = DecodeInstanceEvent(
      WithData(encoded, Replaced(encoded.data, "request_id", R"("someone-else")")));
  ASSERT_TRUE(with_field.has_value()) << with_field.error().message;
  EXPECT_EQ(with_field->request_id, kRequest);
}

TEST(InstanceEventsTest, OperationNamesRoundTrip) {
  for (auto op : {Operation::kCreateCatalogItemInstance, Operation::kDeleteCatalogItemInstance,
                  Operation::kRehydrateCatalogItemInstance, Operation::kCreateResource,
                  Operation::kDeleteResource, Operation::kRehydrateResource,
                  Operation::kCreateServiceTypeInstance, Operation::kDeleteServiceTypeInstance,
                  Operation::kRetryCleanup}) {
    EXPECT_EQ(ParseOperation(OperationName(op)), op) << OperationName(op);
  }
  EXPECT_EQ(std::string(OperationName(Operation::kRehydrateCatalogItemInstance)),
            "rehydrate_catalog_item_instance");
  EXPECT_EQ(ParseOperation("Create_Resource"), std::nullopt);
  EXPECT_EQ(ParseOperation(""), std::nullopt);
}

TEST(InstanceEventsTest, EachRequiredFieldMissingIsCorruption) {
  for (const char* type : kInstanceEventTypes) {
    const CloudEvent encoded = EncodeInstanceEvent(Sample(type));
    for (const std::string& field : RequiredFields(type)) {
      SCOPED_TRACE(std::string(type) + " without " + field);
      const std::string data = Without(encoded.data, field);
      ASSERT_NE(data, encoded.data) << "the sample lacks " << field;
      auto decoded = DecodeInstanceEvent(WithData(encoded, data));
      ASSERT_FALSE(decoded.has_value()) << data;
      EXPECT_EQ(decoded.error().code, ErrorCode::kCorruption);
      EXPECT_EQ(decoded.error().message, std::string(type) + ": " + field + " is required");
    }
  }
}

TEST(InstanceEventsTest, EmptyRequiredStringIsMissing) {
  const CloudEvent e = EncodeInstanceEvent(Sample(event_type::kResourceDeleted));
  auto decoded = DecodeInstanceEvent(WithData(e, Replaced(e.data, "resource_id", R"("")")));
  ASSERT_FALSE(decoded.has_value());
  EXPECT_EQ(decoded.error().message, "dcm.resource.deleted: resource_id is required");
}

TEST(InstanceEventsTest, FieldOfTheWrongJsonTypeIsCorruption) {
  const CloudEvent placed = EncodeInstanceEvent(Sample(event_type::kResourcePlaced));
  const CloudEvent attempted = EncodeInstanceEvent(Sample(event_type::kCleanupAttempted));
  const CloudEvent enqueued = EncodeInstanceEvent(Sample(event_type::kCleanupEnqueued));
  const CloudEvent deleted = EncodeInstanceEvent(Sample(event_type::kResourceDeleted));
  const struct {
    const CloudEvent* event;
    const char* field;
    const char* value;
  } cases[] = {
      {&placed, "root", "42"},
      {&placed, "provider_name", "null"},
      {&placed, "spec", R"("{\"service_type\":\"vm\"}")"},
      {&placed, "intent", "[1]"},
      {&placed, "display_name", "{}"},  // optional fields are type-checked too
      {&attempted, "retry_count", R"("2")"},
      {&attempted, "max_retries", "1.5"},
      {&attempted, "http_status", "-1"},
      {&attempted, "retry_count", "4294967296"},
      {&enqueued, "requested_at", "1767225600000"},
      {&enqueued, "requested_at", R"("yesterday")"},
      {&deleted, "deferred", R"("true")"},
      {&deleted, "force", "1"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.event->type) + " " + c.field + "=" + c.value);
    auto decoded =
        DecodeInstanceEvent(WithData(*c.event, Replaced(c.event->data, c.field, c.value)));
    ASSERT_FALSE(decoded.has_value());
    EXPECT_EQ(decoded.error().code, ErrorCode::kCorruption);
    EXPECT_NE(decoded.error().message.find(c.field), std::string::npos) << decoded.error().message;
  }
}

TEST(InstanceEventsTest, UnknownOperationOrCleanupOutcomeIsCorruption) {
  const CloudEvent requested = EncodeInstanceEvent(Sample(event_type::kOperationRequested));
  auto bad_op =
      DecodeInstanceEvent(WithData(requested, Replaced(requested.data, "operation", R"("nuke")")));
  ASSERT_FALSE(bad_op.has_value());
  EXPECT_EQ(bad_op.error().code, ErrorCode::kCorruption);

  const CloudEvent attempted = EncodeInstanceEvent(Sample(event_type::kCleanupAttempted));
  for (const char* outcome : {"deleted", "gone", "failed"}) {
    auto ok = DecodeInstanceEvent(WithData(
        attempted, Replaced(attempted.data, "outcome", std::string("\"") + outcome + "\"")));
    EXPECT_TRUE(ok.has_value()) << outcome;
  }
  auto bad_outcome = DecodeInstanceEvent(
      WithData(attempted, Replaced(attempted.data, "outcome", R"("vanished")")));
  ASSERT_FALSE(bad_outcome.has_value());
  EXPECT_EQ(bad_outcome.error().code, ErrorCode::kCorruption);
}

TEST(InstanceEventsTest, UnknownDataFieldsAreIgnored) {
  const CloudEvent e = EncodeInstanceEvent(Sample(event_type::kCatalogItemInstanceDeleted));
  auto decoded = DecodeInstanceEvent(WithData(e, Replaced(e.data, "colour", R"({"a":[1]})")));
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
  EXPECT_EQ(EncodeInstanceEvent(*decoded), e);
}

TEST(InstanceEventsTest, NewerSchemaVersionIsCorruption) {
  CloudEvent e = EncodeInstanceEvent(Sample(event_type::kOperationStarted));
  e.schema_version = kInstanceEventSchemaVersion + 1;
  auto decoded = DecodeInstanceEvent(e);
  ASSERT_FALSE(decoded.has_value());
  EXPECT_EQ(decoded.error().code, ErrorCode::kCorruption);
  EXPECT_NE(decoded.error().message.find("newer"), std::string::npos);
}

TEST(InstanceEventsTest, UnknownTypeStatusEventAndNonObjectDataAreCorruption) {
  CloudEvent e = EncodeInstanceEvent(Sample(event_type::kOperationStarted));
  for (const char* type :
       {"dcm.instance.operation_exploded", "dcm.status.vm", "dcm.provider.registered", ""}) {
    CloudEvent other = e;
    other.type = type;
    auto decoded = DecodeInstanceEvent(other);
    ASSERT_FALSE(decoded.has_value()) << type;
    EXPECT_EQ(decoded.error().code, ErrorCode::kCorruption);
  }
  auto array_data = DecodeInstanceEvent(WithData(e, "[]"));
  ASSERT_FALSE(array_data.has_value());
  EXPECT_EQ(array_data.error().code, ErrorCode::kCorruption);
  CloudEvent bad_time = e;
  bad_time.time = "soon";
  EXPECT_FALSE(DecodeInstanceEvent(bad_time).has_value());
}

TEST(InstanceEventsTest, IsInstanceEventTypeKnowsEveryTypeAndNothingElse) {
  for (const char* type : kInstanceEventTypes) EXPECT_TRUE(IsInstanceEventType(type)) << type;
  EXPECT_FALSE(IsInstanceEventType("dcm.status.vm"));
  EXPECT_FALSE(IsInstanceEventType("dcm.cleanup."));
  EXPECT_FALSE(IsInstanceEventType("dcm.provider.registered"));
}

CloudEvent StatusEvent(std::string type, std::string data) {
  CloudEvent e;
  e.id = "0f1e2d3c-4b5a-4968-8776-655443322110";
  e.source = "sp/sim-vm-0";
  e.type = std::move(type);
  e.subject = kResource;
  e.time = "2026-01-01T00:10:02.450Z";
  e.data = std::move(data);
  return e;
}

TEST(InstanceEventsTest, SpStatusEventDecodesWithItsStatusUpperCased) {
  auto decoded = DecodeSpStatusEvent(StatusEvent(
      "dcm.status.vm",
      std::string(R"({"id":")") + kResource + R"(","status":"Running","message":"booted"})"));
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
  EXPECT_EQ(*decoded, (SpStatusEvent{"vm", kResource, "RUNNING", "booted", kT0 + 602450}));

  auto no_message = DecodeSpStatusEvent(
      StatusEvent("dcm.status.container", R"({"id":"c-1","status":"failed","extra":1})"));
  ASSERT_TRUE(no_message.has_value()) << no_message.error().message;
  EXPECT_EQ(no_message->service_type, "container");
  EXPECT_EQ(no_message->status, "FAILED");
  EXPECT_EQ(no_message->message, "");

  auto null_message = DecodeSpStatusEvent(
      StatusEvent("dcm.status.vm", R"({"id":"a","status":"ok","message":null})"));
  ASSERT_TRUE(null_message.has_value()) << null_message.error().message;
  EXPECT_EQ(null_message->status, "OK");
}

TEST(InstanceEventsTest, MalformedSpStatusEventIsCorruption) {
  const struct {
    const char* type;
    const char* data;
  } cases[] = {
      {"dcm.status.", R"({"id":"a","status":"RUNNING"})"},      // no service type
      {"dcm.statusvm", R"({"id":"a","status":"RUNNING"})"},     // not the prefix
      {"dcm.resource.placed", R"({"id":"a","status":"x"})"},    // not a status event
      {"dcm.status.vm", R"({"status":"RUNNING"})"},             // no id
      {"dcm.status.vm", R"({"id":"","status":"RUNNING"})"},     // empty id
      {"dcm.status.vm", R"({"id":7,"status":"RUNNING"})"},      // id not a string
      {"dcm.status.vm", R"({"id":"a"})"},                       // no status
      {"dcm.status.vm", R"({"id":"a","status":""})"},           // empty status
      {"dcm.status.vm", R"({"id":"a","status":["RUNNING"]})"},  // status not a string
      {"dcm.status.vm", R"({"id":"a","status":"x","message":3})"},
      {"dcm.status.vm", "[]"},
      {"dcm.status.vm", "not json"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.type) + " " + c.data);
    auto decoded = DecodeSpStatusEvent(StatusEvent(c.type, c.data));
    ASSERT_FALSE(decoded.has_value());
    EXPECT_EQ(decoded.error().code, ErrorCode::kCorruption);
  }
  CloudEvent newer = StatusEvent("dcm.status.vm", R"({"id":"a","status":"x"})");
  newer.schema_version = kSpStatusEventSchemaVersion + 1;
  EXPECT_FALSE(DecodeSpStatusEvent(newer).has_value());
  CloudEvent bad_time = StatusEvent("dcm.status.vm", R"({"id":"a","status":"x"})");
  bad_time.time = "later";
  EXPECT_FALSE(DecodeSpStatusEvent(bad_time).has_value());
}

}  // namespace
}  // namespace dcm
