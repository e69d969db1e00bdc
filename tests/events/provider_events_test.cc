#include "events/provider_events.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "events/event_limits.h"
#include "src/common/time_format.h"
#include "src/common/uuid.h"

namespace dcm {
namespace {

const std::vector<std::string> kServiceTypes = {"vm",      "container", "database",
                                                "cluster", "storage",   "network"};
constexpr int64_t kNow = 1767225600000;  // 2026-01-01T00:00:00.000Z

ProviderSpec SampleSpec() {
  ProviderSpec spec;
  spec.name = "vm-east-1";
  spec.display_name = "VM provider";
  spec.endpoint = "https://vm.example.com:8443/api";
  spec.service_type = "vm";
  spec.schema_version = "v1alpha1";
  spec.operations = {"create", "read"};
  spec.metadata = R"({"region_code":"us-east-1"})";
  return spec;
}

Provider SampleProvider(std::string id, int64_t seq) {
  return Provider{
      std::move(id), SampleSpec(), "2026-01-01T00:00:00.000Z", "2026-01-01T00:01:00.000Z", seq, ""};
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

// Encodes to the wire (CloudEvent JSON) and back, as the registrar sees it.
Result<ProviderRequest> ThroughTheWire(const ProviderRequest& request, CloudEvent* event_out) {
  const CloudEvent event = EncodeProviderRequest(request, request.requested_by, kNow);
  if (event_out) *event_out = event;
  auto decoded = DecodeCloudEvent(EncodeCloudEvent(event));
  if (!decoded) return tl::unexpected(decoded.error());
  EXPECT_EQ(*decoded, event);
  return DecodeProviderRequest(*decoded, kServiceTypes);
}

struct RequestCase {
  std::string description;
  ProviderRequest request;
  std::string type;
  std::string subject;
};

class ProviderRequestRoundTripTest : public testing::TestWithParam<RequestCase> {};

TEST_P(ProviderRequestRoundTripTest, DecodesWhatItEncodes) {
  const RequestCase& c = GetParam();
  CloudEvent event;
  auto decoded = ThroughTheWire(c.request, &event);
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
  ExpectSameRequest(*decoded, c.request);
  EXPECT_EQ(event.type, c.type);
  EXPECT_EQ(event.subject, c.subject);
  EXPECT_EQ(event.id, c.request.request_id);
  EXPECT_EQ(event.source, c.request.requested_by);
  EXPECT_EQ(event.time, "2026-01-01T00:00:00.000Z");
  EXPECT_EQ(event.schema_version, kProviderEventSchemaVersion);
}

ProviderRequest MakeRequest(RequestKind kind, std::string id, bool with_spec,
                            std::string new_id = "", bool force = false) {
  ProviderRequest r;
  r.kind = kind;
  r.request_id = "5f0c7a52-3d4e-4a8b-9c1d-2e3f4a5b6c70";
  r.id = std::move(id);
  if (with_spec) r.spec = SampleSpec();
  r.new_id = std::move(new_id);
  r.force = force;
  r.requested_by = "sp/vm-east-1";
  return r;
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, ProviderRequestRoundTripTest,
    testing::Values(RequestCase{"RegisterWithoutId", MakeRequest(RequestKind::kRegister, "", true),
                                event_type::kRegistrationRequested, "vm-east-1"},
                    RequestCase{"RegisterWithId", MakeRequest(RequestKind::kRegister, "sp-1", true),
                                event_type::kRegistrationRequested, "sp-1"},
                    RequestCase{"Update", MakeRequest(RequestKind::kUpdate, "sp-1", true),
                                event_type::kUpdateRequested, "sp-1"},
                    RequestCase{"ChangeId",
                                MakeRequest(RequestKind::kChangeId, "sp-1", false,
                                            "123e4567-e89b-42d3-a456-426614174000"),
                                event_type::kIdChangeRequested, "sp-1"},
                    RequestCase{"Delete", MakeRequest(RequestKind::kDelete, "sp-1", false),
                                event_type::kDeletionRequested, "sp-1"},
                    RequestCase{"ForceDelete",
                                MakeRequest(RequestKind::kDelete, "sp-1", false, "", true),
                                event_type::kDeletionRequested, "sp-1"}),
    [](const testing::TestParamInfo<RequestCase>& info) { return info.param.description; });

TEST(ProviderRequestTest, EncodeGeneratesAnEventIdWhenNoneIsGiven) {
  ProviderRequest r = MakeRequest(RequestKind::kDelete, "sp-1", false);
  r.request_id.clear();
  const CloudEvent a = EncodeProviderRequest(r, "s", kNow);
  const CloudEvent b = EncodeProviderRequest(r, "s", kNow);
  EXPECT_TRUE(IsUuid(a.id)) << a.id;
  EXPECT_NE(a.id, b.id);
}

CloudEvent RequestEvent(const char* type, std::string data, int schema_version = 1) {
  CloudEvent e;
  e.id = "req-1";
  e.source = "sp/test";
  e.type = type;
  e.time = "2026-01-01T00:00:00.000Z";
  e.schema_version = schema_version;
  e.data = std::move(data);
  return e;
}

constexpr char kSpecData[] =
    R"("name":"sp-1","endpoint":"http://sp.example.com","service_type":"vm")";

TEST(ProviderRequestTest, DecodeAcceptsTheSpsMinimalRegistration) {
  auto r = DecodeProviderRequest(
      RequestEvent(event_type::kRegistrationRequested,
                   R"({"name":"sp-1","endpoint":"http://sp.example.com","serviceType":"vm",)"
                   R"("operations":["CREATE"],"unknown":1})"),
      kServiceTypes);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->kind, RequestKind::kRegister);
  EXPECT_EQ(r->request_id, "req-1");
  EXPECT_EQ(r->requested_by, "sp/test");
  EXPECT_EQ(r->id, "");
  EXPECT_EQ(r->spec.service_type, "vm");
  EXPECT_EQ(r->spec.operations, std::vector<std::string>{"create"});
}

TEST(ProviderRequestTest, DecodeRejectsNewerSchemaVersions) {
  auto r = DecodeProviderRequest(
      RequestEvent(event_type::kRegistrationRequested, std::string("{") + kSpecData + "}",
                   kProviderEventSchemaVersion + 1),
      kServiceTypes);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kCorruption);
  EXPECT_NE(r.error().message.find("newer"), std::string::npos);
}

TEST(ProviderRequestTest, DecodeRejectsTypesThatAreNotRequests) {
  for (const char* type : {event_type::kRegistered, "dcm.status.vm", ""}) {
    auto r = DecodeProviderRequest(RequestEvent(type, "{}"), kServiceTypes);
    ASSERT_FALSE(r.has_value()) << type;
    EXPECT_EQ(r.error().code, ErrorCode::kCorruption);
  }
}

TEST(ProviderRequestTest, DecodeRejectsDataThatIsNotAnObject) {
  for (const char* data : {"[]", "not json", "\"x\"", ""}) {
    auto r =
        DecodeProviderRequest(RequestEvent(event_type::kDeletionRequested, data), kServiceTypes);
    ASSERT_FALSE(r.has_value()) << data;
    EXPECT_EQ(r.error().code, ErrorCode::kCorruption) << data;
  }
}

TEST(ProviderRequestTest, DecodeReportsInvalidSpecAsInvalidArgumentWithFields) {
  auto r = DecodeProviderRequest(
      RequestEvent(event_type::kRegistrationRequested,
                   R"({"name":"sp-1","endpoint":"ftp://x","service_type":"vm"})"),
      kServiceTypes);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  ASSERT_EQ(r.error().fields.size(), 1u);
  EXPECT_EQ(r.error().fields[0].field, "endpoint");
}

TEST(ProviderRequestTest, DecodeValidatesIdFields) {
  struct Case {
    const char* type;
    std::string data;
    std::string field;
    std::string message_part;
  };
  const std::vector<Case> cases = {
      {event_type::kRegistrationRequested, std::string(R"({"id":"Bad_Id",)") + kSpecData + "}",
       "id", "DNS label"},
      {event_type::kRegistrationRequested, std::string(R"({"id":7,)") + kSpecData + "}", "id",
       "must be a string"},
      {event_type::kUpdateRequested, std::string("{") + kSpecData + "}", "id", "is required"},
      {event_type::kIdChangeRequested, R"({"id":"sp-1"})", "new_id", "is required"},
      {event_type::kIdChangeRequested, R"({"id":"sp-1","new_id":"-x"})", "new_id", "start and end"},
      {event_type::kIdChangeRequested, R"({"new_id":"sp-2"})", "id", "is required"},
      {event_type::kDeletionRequested, R"({"force":true})", "id", "is required"},
      {event_type::kDeletionRequested, R"({"id":null})", "id", "is required"},
      {event_type::kExpiryRequested, R"({"id":"sp-1"})", "registration_seq", "is required"},
      {event_type::kExpiryRequested, R"({"id":"sp-1","registration_seq":"3"})", "registration_seq",
       "must be an integer"},
      {event_type::kExpiryRequested, R"({"registration_seq":3})", "id", "is required"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.data);
    auto r = DecodeProviderRequest(RequestEvent(c.type, c.data), kServiceTypes);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    ASSERT_EQ(r.error().fields.size(), 1u);
    EXPECT_EQ(r.error().fields[0].field, c.field);
    EXPECT_NE(r.error().fields[0].message.find(c.message_part), std::string::npos)
        << r.error().fields[0].message;
  }
}

TEST(ProviderRequestTest, DecodeTreatsMissingForceAsFalse) {
  auto r = DecodeProviderRequest(RequestEvent(event_type::kDeletionRequested, R"({"id":"sp-1"})"),
                                 kServiceTypes);
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_FALSE(r->force);
}

TEST(ProviderRequestTest, RequestKindNames) {
  EXPECT_STREQ(RequestKindName(RequestKind::kRegister), "register");
  EXPECT_STREQ(RequestKindName(RequestKind::kUpdate), "update");
  EXPECT_STREQ(RequestKindName(RequestKind::kChangeId), "change_id");
  EXPECT_STREQ(RequestKindName(RequestKind::kDelete), "delete");
}

// ---- Outcomes ----

Result<ProviderOutcome> OutcomeThroughTheWire(const ProviderOutcome& o, CloudEvent* event_out) {
  const CloudEvent event = EncodeProviderOutcome(o, "dcm/registrar", kNow + 12);
  if (event_out) *event_out = event;
  auto decoded = DecodeCloudEvent(EncodeCloudEvent(event));
  if (!decoded) return tl::unexpected(decoded.error());
  EXPECT_EQ(*decoded, event);
  return DecodeProviderOutcome(*decoded);
}

struct OutcomeCase {
  std::string description;
  ProviderOutcome outcome;
  std::string type;
  std::string subject;
};

class ProviderOutcomeRoundTripTest : public testing::TestWithParam<OutcomeCase> {};

TEST_P(ProviderOutcomeRoundTripTest, DecodesWhatItEncodes) {
  const OutcomeCase& c = GetParam();
  CloudEvent event;
  auto decoded = OutcomeThroughTheWire(c.outcome, &event);
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
  EXPECT_EQ(*decoded, c.outcome);
  EXPECT_EQ(event.type, c.type);
  EXPECT_EQ(event.subject, c.subject);
  EXPECT_EQ(event.id, OutcomeEventId(c.outcome.request_id));
  EXPECT_EQ(event.time, "2026-01-01T00:00:00.012Z");
  EXPECT_TRUE(IsProviderOutcomeType(event.type));
}

ProviderOutcome Outcome(OutcomeKind kind, int64_t seq) {
  ProviderOutcome o;
  o.kind = kind;
  o.request_id = "req-" + std::to_string(seq);
  o.seq = seq;
  return o;
}

ProviderOutcome WithProvider(ProviderOutcome o, std::string id, std::string old_id = "") {
  o.provider = SampleProvider(std::move(id), o.seq);
  o.old_id = std::move(old_id);
  return o;
}

ProviderOutcome Rejection(int status, RequestKind kind, std::string name, std::string id,
                          std::optional<ConflictRef> conflict, std::vector<FieldError> errors) {
  ProviderOutcome o = Outcome(OutcomeKind::kRejected, 7);
  o.status = status;
  o.request_kind = kind;
  o.detail = "why it was rejected";
  o.attempted_name = std::move(name);
  o.attempted_id = std::move(id);
  o.conflict = std::move(conflict);
  o.errors = std::move(errors);
  return o;
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, ProviderOutcomeRoundTripTest,
    testing::Values(
        OutcomeCase{"Registered", WithProvider(Outcome(OutcomeKind::kRegistered, 1), "sp-1"),
                    event_type::kRegistered, "sp-1"},
        OutcomeCase{"Updated", WithProvider(Outcome(OutcomeKind::kUpdated, 2), "sp-1"),
                    event_type::kUpdated, "sp-1"},
        OutcomeCase{"IdChanged", WithProvider(Outcome(OutcomeKind::kIdChanged, 3), "sp-2", "sp-1"),
                    event_type::kIdChanged, "sp-1"},
        OutcomeCase{"Deleted", WithProvider(Outcome(OutcomeKind::kDeleted, 4), "sp-1"),
                    event_type::kDeleted, "sp-1"},
        OutcomeCase{"RejectedConflict",
                    Rejection(409, RequestKind::kRegister, "vm-east-1", "sp-9",
                              ConflictRef{"sp-1", "vm-east-1"}, {}),
                    event_type::kRejected, "sp-9"},
        OutcomeCase{"RejectedConflictWithoutId",
                    Rejection(409, RequestKind::kUpdate, "taken-name", "",
                              ConflictRef{"sp-1", "taken-name"}, {}),
                    event_type::kRejected, "taken-name"},
        OutcomeCase{"RejectedNotFound",
                    Rejection(404, RequestKind::kDelete, "", "sp-404", std::nullopt, {}),
                    event_type::kRejected, "sp-404"},
        OutcomeCase{
            "RejectedChangeId",
            Rejection(409, RequestKind::kChangeId, "vm", "sp-2", ConflictRef{"sp-2", "x"}, {}),
            event_type::kRejected, "sp-2"},
        OutcomeCase{"RejectedInvalid",
                    Rejection(400, RequestKind::kRegister, "", "", std::nullopt,
                              {{"endpoint", "must have a host"}, {"name", "is required"}}),
                    // Nothing names an entity: the event is keyed by the request id.
                    event_type::kRejected, "req-7"}),
    [](const testing::TestParamInfo<OutcomeCase>& info) { return info.param.description; });

CloudEvent OutcomeEvent(const char* type, std::string data, int schema_version = 1) {
  CloudEvent e = RequestEvent(type, std::move(data), schema_version);
  e.id = OutcomeEventId("req-1");
  return e;
}

const std::string kProviderJson =
    R"({"id":"sp-1","name":"n","endpoint":"http://h","service_type":"vm","seq":1})";

TEST(ProviderOutcomeTest, DecodeRejectsNewerSchemaVersions) {
  auto o = DecodeProviderOutcome(OutcomeEvent(
      event_type::kRegistered, R"({"request_id":"r","seq":1,"provider":)" + kProviderJson + "}",
      kProviderEventSchemaVersion + 1));
  ASSERT_FALSE(o.has_value());
  EXPECT_EQ(o.error().code, ErrorCode::kCorruption);
  EXPECT_NE(o.error().message.find("newer"), std::string::npos);
}

TEST(ProviderOutcomeTest, DecodeAcceptsTheCurrentSchemaVersion) {
  auto o = DecodeProviderOutcome(OutcomeEvent(
      event_type::kRegistered, R"({"request_id":"r","seq":1,"provider":)" + kProviderJson + "}",
      kProviderEventSchemaVersion));
  ASSERT_TRUE(o.has_value()) << o.error().message;
  EXPECT_EQ(o->provider.id, "sp-1");
  EXPECT_EQ(o->provider.spec.schema_version, "v1alpha1");  // default when the field is absent
}

TEST(ProviderOutcomeTest, DecodeRejectsMalformedOutcomes) {
  struct Case {
    const char* type;
    std::string data;
  };
  const std::vector<Case> cases = {
      {event_type::kRegistrationRequested, "{}"},  // a request, not an outcome
      {"dcm.provider.exploded", "{}"},
      {event_type::kRegistered, "[]"},
      {event_type::kRegistered, "{oops"},
      {event_type::kRegistered, R"({"request_id":"r","seq":1})"},               // no provider
      {event_type::kUpdated, R"({"request_id":"r","provider":{"name":"n"}})"},  // no id
      {event_type::kDeleted, R"({"request_id":"r","provider":"sp-1"})"},
      {event_type::kIdChanged, R"({"request_id":"r","provider":)" + kProviderJson + "}"},
      {event_type::kRejected, R"({"request_id":"r","request_type":"register"})"},  // no status
      {event_type::kRejected, R"({"request_id":"r","request_type":"register","status":200})"},
      {event_type::kRejected, R"({"request_id":"r","request_type":"register","status":503})"},
      {event_type::kRejected, R"({"request_id":"r","request_type":"launch","status":409})"},
      {event_type::kRejected, R"({"request_id":"r","status":409})"},
  };
  for (const auto& c : cases) {
    auto o = DecodeProviderOutcome(OutcomeEvent(c.type, c.data));
    ASSERT_FALSE(o.has_value()) << c.type << " " << c.data;
    EXPECT_EQ(o.error().code, ErrorCode::kCorruption) << c.type << " " << c.data;
  }
}

TEST(ProviderOutcomeTest, OutcomeEventIdIsDeterministicPerRequest) {
  EXPECT_EQ(OutcomeEventId("req-1"), OutcomeEventId("req-1"));
  EXPECT_NE(OutcomeEventId("req-1"), OutcomeEventId("req-2"));
  EXPECT_TRUE(IsUuid(OutcomeEventId("req-1")));
  EXPECT_NE(OutcomeEventId("req-1"), "req-1");
  // Persisted on Kafka: the derivation is part of the contract (see events/golden/).
  EXPECT_EQ(OutcomeEventId("0b9f6a1e-2c3d-4e5f-8a9b-0c1d2e3f4a51"),
            "731099e1-7cb3-4a46-8dcd-79a773326c13");
}

TEST(ProviderOutcomeTest, ReEncodingTheSameOutcomeYieldsTheSameEventId) {
  const ProviderOutcome o = WithProvider(Outcome(OutcomeKind::kRegistered, 1), "sp-1");
  EXPECT_EQ(EncodeProviderOutcome(o, "a", kNow).id, EncodeProviderOutcome(o, "b", kNow + 5).id);
}

TEST(ProviderOutcomeTest, IsProviderOutcomeTypeKnowsExactlyTheOutcomes) {
  for (const char* type : {event_type::kRegistered, event_type::kUpdated, event_type::kIdChanged,
                           event_type::kDeleted, event_type::kRejected}) {
    EXPECT_TRUE(IsProviderOutcomeType(type)) << type;
  }
  for (const char* type :
       {event_type::kRegistrationRequested, event_type::kUpdateRequested,
        event_type::kIdChangeRequested, event_type::kDeletionRequested, "", "dcm.provider"}) {
    EXPECT_FALSE(IsProviderOutcomeType(type)) << type;
  }
}

}  // namespace
}  // namespace dcm

namespace dcm {
namespace {

// SPEC §7: rejected requests are recorded with their errors, capped in size (event_limits.h).
TEST(RejectionRecordTest, CopiesOfTheRequestAndItsErrorsAreCutToTheDocumentedCaps) {
  ProviderOutcome o;
  o.kind = OutcomeKind::kRejected;
  o.request_id = "r-1";
  o.status = 400;
  o.detail = "invalid provider: service_type unknown service type '" + std::string(900000, 'x');
  o.attempted_name = std::string(5000, 'n');
  o.attempted_id = std::string(5000, 'i');
  for (int i = 0; i < 1000; ++i) {
    o.errors.push_back({"operations[" + std::to_string(i) + "]", std::string(2000, 'm')});
  }
  const CloudEvent event = EncodeProviderOutcome(o, "dcm/test", kNow);
  EXPECT_LT(EncodeCloudEvent(event).size(), 16u * 1024);
  auto decoded = DecodeProviderOutcome(event);
  ASSERT_TRUE(decoded) << decoded.error().message;
  EXPECT_LE(decoded->detail.size(), kRejectionDetailMaxBytes);
  EXPECT_TRUE(decoded->detail.starts_with("invalid provider: service_type unknown"));
  EXPECT_TRUE(decoded->detail.ends_with("..."));
  EXPECT_LE(decoded->attempted_name.size(), kRejectionAttemptedMaxBytes);
  EXPECT_LE(decoded->attempted_id.size(), kRejectionAttemptedMaxBytes);
  ASSERT_EQ(decoded->errors.size(), kRejectionMaxFieldErrors);
  EXPECT_EQ(decoded->errors[0].field, "operations[0]");
  EXPECT_LE(decoded->errors[0].message.size(), kRejectionFieldErrorMaxBytes);
}

TEST(RejectionRecordTest, ARejectionWithinTheCapsIsRecordedUnchanged) {
  ProviderOutcome o;
  o.kind = OutcomeKind::kRejected;
  o.request_id = "r-2";
  o.status = 400;
  o.detail = "invalid provider: name is required";
  o.errors = {{"name", "is required"}};
  o.attempted_id = "sp-1";
  EXPECT_EQ(CappedRejection(o), o);
  auto decoded = DecodeProviderOutcome(EncodeProviderOutcome(o, "dcm/test", kNow));
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->detail, o.detail);
  EXPECT_EQ(decoded->errors, o.errors);
}

}  // namespace
}  // namespace dcm
