#include "events/provider.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "events/json_read.h"

namespace dcm {
namespace {

const std::vector<std::string> kServiceTypes = {"vm",      "container", "database",
                                                "cluster", "storage",   "network"};

using Overrides = std::vector<std::pair<std::string, std::optional<std::string>>>;

// A valid registration body with `overrides` applied: a value is raw JSON; nullopt removes the
// field.
std::string Body(const Overrides& overrides = {}) {
  std::vector<std::pair<std::string, std::string>> fields = {
      {"name", R"("sp-1")"},
      {"endpoint", R"("http://sp1.example.com:8080/api")"},
      {"service_type", R"("vm")"}};
  for (const auto& [key, value] : overrides) {
    auto it = std::find_if(fields.begin(), fields.end(), [&](auto& f) { return f.first == key; });
    if (it != fields.end()) fields.erase(it);
    if (value) fields.emplace_back(key, *value);
  }
  std::string out = "{";
  for (const auto& [key, value] : fields) {
    if (out.size() > 1) out += ",";
    out += "\"" + key + "\":" + value;
  }
  return out + "}";
}

Result<ProviderSpec> Parse(const std::string& json) {
  auto element = ParseJson(json);
  EXPECT_TRUE(element.has_value()) << json.substr(0, 200);
  if (!element) return tl::unexpected(element.error());
  return ParseProviderSpec(*element, kServiceTypes);
}

std::string Quoted(const std::string& s) { return "\"" + s + "\""; }

struct InvalidCase {
  std::string description;
  Overrides overrides;
  std::string field;
  std::string message_part;
};

class ParseProviderSpecInvalidTest : public testing::TestWithParam<InvalidCase> {};

TEST_P(ParseProviderSpecInvalidTest, ReportsTheFieldError) {
  const InvalidCase& c = GetParam();
  auto spec = Parse(Body(c.overrides));
  ASSERT_FALSE(spec.has_value()) << Body(c.overrides).substr(0, 200);
  EXPECT_EQ(spec.error().code, ErrorCode::kInvalidArgument);
  ASSERT_EQ(spec.error().fields.size(), 1u) << spec.error().message;
  EXPECT_EQ(spec.error().fields[0].field, c.field);
  EXPECT_NE(spec.error().fields[0].message.find(c.message_part), std::string::npos)
      << spec.error().fields[0].message;
  EXPECT_NE(spec.error().message.find(c.field), std::string::npos) << spec.error().message;
}

const std::string kLongEndpoint = "http://h/" + std::string(2048, 'a');

INSTANTIATE_TEST_SUITE_P(
    Cases, ParseProviderSpecInvalidTest,
    testing::Values(
        // Required fields.
        InvalidCase{"MissingName", {{"name", std::nullopt}}, "name", "is required"},
        InvalidCase{"NullName", {{"name", "null"}}, "name", "is required"},
        InvalidCase{"MissingEndpoint", {{"endpoint", std::nullopt}}, "endpoint", "is required"},
        InvalidCase{
            "MissingServiceType", {{"service_type", std::nullopt}}, "service_type", "is required"},
        // Wrong JSON types.
        InvalidCase{"NameNumber", {{"name", "5"}}, "name", "must be a string, got number"},
        InvalidCase{"NameBool", {{"name", "true"}}, "name", "must be a string, got boolean"},
        InvalidCase{"NameArray", {{"name", R"(["a"])"}}, "name", "must be a string, got array"},
        InvalidCase{"NameObject", {{"name", "{}"}}, "name", "must be a string, got object"},
        InvalidCase{
            "EndpointNumber", {{"endpoint", "8080"}}, "endpoint", "must be a string, got number"},
        InvalidCase{"ServiceTypeArray",
                    {{"service_type", R"(["vm"])"}},
                    "service_type",
                    "must be a string, got array"},
        InvalidCase{"ServiceTypeCamelCaseWrongType",
                    {{"service_type", std::nullopt}, {"serviceType", "1"}},
                    "service_type",
                    "must be a string"},
        InvalidCase{"DisplayNameNumber",
                    {{"display_name", "1"}},
                    "display_name",
                    "must be a string, got number"},
        InvalidCase{"DisplayNameCamelCaseWrongType",
                    {{"displayName", "false"}},
                    "display_name",
                    "must be a string, got boolean"},
        InvalidCase{
            "SchemaVersionNumber", {{"schema_version", "1"}}, "schema_version", "must be a string"},
        InvalidCase{"OperationsString",
                    {{"operations", R"("create")"}},
                    "operations",
                    "must be an array, got string"},
        InvalidCase{"OperationsObject",
                    {{"operations", "{}"}},
                    "operations",
                    "must be an array, got object"},
        InvalidCase{"OperationItemNumber",
                    {{"operations", R"(["read",1])"}},
                    "operations[1]",
                    "must be a string"},
        InvalidCase{"MetadataString",
                    {{"metadata", R"("x")"}},
                    "metadata",
                    "must be an object, got string"},
        InvalidCase{
            "MetadataArray", {{"metadata", "[]"}}, "metadata", "must be an object, got array"},
        InvalidCase{"MetadataRegionCodeNumber",
                    {{"metadata", R"({"region_code":1})"}},
                    "metadata.region_code",
                    "must be a string"},
        InvalidCase{"MetadataZoneArray",
                    {{"metadata", R"({"zone":[]})"}},
                    "metadata.zone",
                    "must be a string"},
        InvalidCase{"MetadataResourcesString",
                    {{"metadata", R"({"resources":"lots"})"}},
                    "metadata.resources",
                    "must be an object"},
        // Liveness (SPEC §8).
        InvalidCase{"LivenessUnknown",
                    {{"liveness", R"("push")"}},
                    "liveness",
                    "must be one of probe, heartbeat, both"},
        InvalidCase{
            "LivenessNumber", {{"liveness", "1"}}, "liveness", "must be a string, got number"},
        InvalidCase{"MetadataTooLarge",
                    {{"metadata", R"({"blob":")" + std::string(kMaxMetadataBytes, 'x') + "\"}"}},
                    "metadata",
                    "64 KiB"},
        // Endpoints.
        InvalidCase{"EndpointEmpty", {{"endpoint", R"("")"}}, "endpoint", "absolute"},
        InvalidCase{"EndpointRelative", {{"endpoint", R"("/api/v1")"}}, "endpoint", "absolute"},
        InvalidCase{"EndpointFtp",
                    {{"endpoint", R"("ftp://sp.example.com/x")"}},
                    "endpoint",
                    "http or https"},
        InvalidCase{"EndpointNoHost", {{"endpoint", R"("http:///api")"}}, "endpoint", "host"},
        InvalidCase{
            "EndpointUserinfo", {{"endpoint", R"("http://u:p@h/")"}}, "endpoint", "credentials"},
        InvalidCase{"EndpointTooLong", {{"endpoint", Quoted(kLongEndpoint)}}, "endpoint", "2048"},
        // Values.
        InvalidCase{"UnknownServiceType",
                    {{"service_type", R"("gpu")"}},
                    "service_type",
                    "unknown service type 'gpu' (known: vm, container, database, cluster, "
                    "storage, network)"},
        InvalidCase{"ServiceTypeIsCaseSensitive",
                    {{"service_type", R"("VM")"}},
                    "service_type",
                    "unknown service type"},
        InvalidCase{"BadOperation",
                    {{"operations", R"(["create","launch"])"}},
                    "operations[1]",
                    "must be one of create, read, update, delete"},
        InvalidCase{"SchemaVersionPattern",
                    {{"schema_version", R"("1.0")"}},
                    "schema_version",
                    "must match"},
        InvalidCase{
            "SchemaVersionEmpty", {{"schema_version", R"("")"}}, "schema_version", "must match"},
        InvalidCase{"SchemaVersionBadQualifier",
                    {{"schemaVersion", R"("v1gamma1")"}},
                    "schema_version",
                    "must match"},
        InvalidCase{"DisplayNameTooLong",
                    {{"display_name", Quoted(std::string(257, 'd'))}},
                    "display_name",
                    "at most 256"},
        // Name rules.
        InvalidCase{"NameEmpty", {{"name", R"("")"}}, "name", "1-63"},
        InvalidCase{"NameTooLong", {{"name", Quoted(std::string(64, 'a'))}}, "name", "1-63"},
        InvalidCase{"NameStartsWithDash", {{"name", R"("-sp")"}}, "name", "start and end"},
        InvalidCase{"NameEndsWithDot", {{"name", R"("sp.")"}}, "name", "start and end"},
        InvalidCase{"NameStartsWithUnderscore", {{"name", R"("_sp")"}}, "name", "start and end"},
        InvalidCase{"NameWithSpace", {{"name", R"("sp 1")"}}, "name", "may contain only"},
        InvalidCase{"NameWithSlash", {{"name", R"("sp/1")"}}, "name", "may contain only"},
        InvalidCase{"NameNonAscii", {{"name", "\"sp\xC3\xA9\""}}, "name", "may contain only"}),
    [](const testing::TestParamInfo<InvalidCase>& info) { return info.param.description; });

TEST(ParseProviderSpecTest, AcceptsAMinimalBodyWithDefaults) {
  auto spec = Parse(Body());
  ASSERT_TRUE(spec.has_value()) << spec.error().message;
  EXPECT_EQ(spec->name, "sp-1");
  EXPECT_EQ(spec->endpoint, "http://sp1.example.com:8080/api");
  EXPECT_EQ(spec->service_type, "vm");
  EXPECT_EQ(spec->display_name, "");
  EXPECT_EQ(spec->schema_version, "v1alpha1");
  EXPECT_TRUE(spec->operations.empty());
  EXPECT_EQ(spec->metadata, "{}");
}

TEST(ParseProviderSpecTest, TreatsNullOptionalFieldsAsAbsent) {
  auto spec = Parse(Body({{"display_name", "null"},
                          {"schema_version", "null"},
                          {"operations", "null"},
                          {"metadata", "null"}}));
  ASSERT_TRUE(spec.has_value()) << spec.error().message;
  EXPECT_EQ(spec->schema_version, "v1alpha1");
  EXPECT_EQ(spec->metadata, "{}");
}

TEST(ParseProviderSpecTest, AcceptsCamelCaseSpellings) {
  auto spec = Parse(Body({{"service_type", std::nullopt},
                          {"serviceType", R"("database")"},
                          {"displayName", R"("Postgres SP")"},
                          {"schemaVersion", R"("v2beta3")"}}));
  ASSERT_TRUE(spec.has_value()) << spec.error().message;
  EXPECT_EQ(spec->service_type, "database");
  EXPECT_EQ(spec->display_name, "Postgres SP");
  EXPECT_EQ(spec->schema_version, "v2beta3");
}

TEST(ParseProviderSpecTest, PrefersSnakeCaseWhenBothSpellingsArePresent) {
  auto spec = Parse(Body({{"serviceType", R"("container")"}}));
  ASSERT_TRUE(spec.has_value()) << spec.error().message;
  EXPECT_EQ(spec->service_type, "vm");
}

TEST(ParseProviderSpecTest, AcceptsSchemaVersionsMatchingThePattern) {
  for (const char* v : {"v1", "v1alpha1", "v1alpha", "v2beta3", "v10", "v1beta"}) {
    auto spec = Parse(Body({{"schema_version", Quoted(v)}}));
    ASSERT_TRUE(spec.has_value()) << v << ": " << spec.error().message;
    EXPECT_EQ(spec->schema_version, v);
  }
}

TEST(ParseProviderSpecTest, LowercasesAndDeduplicatesOperationsInRequestOrder) {
  auto spec =
      Parse(Body({{"operations", R"(["READ","Create","read","DELETE","update","cReAtE"])"}}));
  ASSERT_TRUE(spec.has_value()) << spec.error().message;
  EXPECT_EQ(spec->operations, (std::vector<std::string>{"read", "create", "delete", "update"}));
}

TEST(ParseProviderSpecTest, KeepsMetadataMinified) {
  auto spec = Parse(
      Body({{"metadata",
             R"({ "region_code" : "eu-1", "zone": null, "resources": {"cpu": 4}, "x": [1] })"}}));
  ASSERT_TRUE(spec.has_value()) << spec.error().message;
  EXPECT_EQ(spec->metadata, R"({"region_code":"eu-1","zone":null,"resources":{"cpu":4},"x":[1]})");
}

TEST(ParseProviderSpecTest, AcceptsMetadataOfExactly64KiB) {
  const std::string overhead = R"({"blob":""})";
  const std::string blob(kMaxMetadataBytes - overhead.size(), 'x');
  auto spec = Parse(Body({{"metadata", R"({"blob":")" + blob + "\"}"}}));
  ASSERT_TRUE(spec.has_value()) << spec.error().message;
  EXPECT_EQ(spec->metadata.size(), kMaxMetadataBytes);
}

TEST(ParseProviderSpecTest, AcceptsEndpointOfExactly2048Characters) {
  const std::string endpoint = "http://h/" + std::string(2048 - 9, 'a');
  auto spec = Parse(Body({{"endpoint", Quoted(endpoint)}}));
  ASSERT_TRUE(spec.has_value()) << spec.error().message;
  EXPECT_EQ(spec->endpoint, endpoint);
}

TEST(ParseProviderSpecTest, IgnoresAndDoesNotStoreUnknownFields) {
  auto plain = Parse(Body());
  ASSERT_TRUE(plain.has_value());
  auto extra = Parse(Body({{"color", R"("blue")"},
                           {"id", R"("caller-chosen")"},
                           {"health_status", R"("Ready")"},
                           {"status", R"("registered")"},
                           {"nested", R"({"deep":{"x":[1,2,3]}})"}}));
  ASSERT_TRUE(extra.has_value()) << extra.error().message;
  EXPECT_EQ(*extra, *plain);
  const std::string stored = EncodeProvider(Provider{"p1", *extra, "t", "t", 1, ""});
  for (const char* word : {"color", "blue", "caller-chosen", "health_status", "nested"}) {
    EXPECT_EQ(stored.find(word), std::string::npos) << word << " in " << stored;
  }
}

TEST(ParseProviderSpecTest, ReportsEveryBadFieldAtOnce) {
  auto spec = Parse("{}");
  ASSERT_FALSE(spec.has_value());
  EXPECT_EQ(spec.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(spec.error().fields, (std::vector<FieldError>{{"name", "is required"},
                                                          {"endpoint", "is required"},
                                                          {"service_type", "is required"}}));
  EXPECT_EQ(spec.error().message, "invalid provider: name is required (and 2 more)");
}

TEST(ParseProviderSpecTest, RejectsNonObjectBodies) {
  for (const char* json : {"[]", "\"sp\"", "1", "null"}) {
    auto spec = Parse(json);
    ASSERT_FALSE(spec.has_value()) << json;
    EXPECT_EQ(spec.error().code, ErrorCode::kInvalidArgument);
    ASSERT_EQ(spec.error().fields.size(), 1u);
    EXPECT_EQ(spec.error().fields[0].field, "body");
  }
}

TEST(ParseProviderSpecTest, AcceptsNamesWithinTheRules) {
  for (const std::string& name : {std::string("a"), std::string("9"), std::string("SP_1.eu-west"),
                                  std::string(63, 'z'), std::string("a-b_c.d")}) {
    auto spec = Parse(Body({{"name", Quoted(name)}}));
    EXPECT_TRUE(spec.has_value()) << name;
  }
}

TEST(ValidateProviderNameTest, AppliesTheNameRules) {
  EXPECT_EQ(ValidateProviderName("sp-1"), "");
  EXPECT_EQ(ValidateProviderName(std::string(63, 'a')), "");
  EXPECT_NE(ValidateProviderName(std::string(64, 'a')), "");
  EXPECT_NE(ValidateProviderName(""), "");
  EXPECT_NE(ValidateProviderName("a-"), "");
  EXPECT_NE(ValidateProviderName("a:b"), "");
}

TEST(ValidateProviderIdTest, AcceptsDnsLabelsAndUuids) {
  for (const std::string& id :
       {std::string("a"), std::string("sp-1"), std::string("0abc"), std::string(63, 'a'),
        std::string("123e4567-e89b-42d3-a456-426614174000"),
        std::string("123E4567-E89B-42D3-A456-426614174000")}) {
    EXPECT_EQ(ValidateProviderId(id), "") << id;
  }
}

TEST(ValidateProviderIdTest, RejectsEverythingElse) {
  for (const std::string& id :
       {std::string(""), std::string(64, 'a'), std::string("SP-1"), std::string("-a"),
        std::string("a-"), std::string("a_b"), std::string("a.b"), std::string("a b"),
        std::string("a/b"), std::string("\xC3\xA9")}) {
    EXPECT_NE(ValidateProviderId(id), "") << id;
  }
}

Provider SampleProvider() {
  Provider p;
  p.id = "3f6c1b2a-8d4e-4f70-9a1b-2c3d4e5f6a70";
  p.spec.name = "vm-east-1";
  p.spec.display_name = "VM \"east\"";
  p.spec.endpoint = "https://vm.example.com/api";
  p.spec.service_type = "vm";
  p.spec.schema_version = "v1alpha1";
  p.spec.operations = {"create", "delete"};
  p.spec.metadata = R"({"region_code":"us-east-1","resources":{"cpu":4}})";
  p.create_time = "2026-01-01T00:00:00.000Z";
  p.update_time = "2026-01-01T00:05:00.000Z";
  p.seq = 42;
  return p;
}

TEST(ProviderCodecTest, EncodeDecodeRoundTrip) {
  const Provider p = SampleProvider();
  auto decoded = DecodeProvider(EncodeProvider(p));
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
  EXPECT_EQ(*decoded, p);
}

TEST(ProviderCodecTest, EncodesTheStoredFieldOrder) {
  EXPECT_EQ(EncodeProvider(SampleProvider()),
            R"({"id":"3f6c1b2a-8d4e-4f70-9a1b-2c3d4e5f6a70","name":"vm-east-1",)"
            R"("display_name":"VM \"east\"","endpoint":"https://vm.example.com/api",)"
            R"("service_type":"vm","schema_version":"v1alpha1","operations":["create","delete"],)"
            R"("metadata":{"region_code":"us-east-1","resources":{"cpu":4}},)"
            R"("create_time":"2026-01-01T00:00:00.000Z","update_time":"2026-01-01T00:05:00.000Z",)"
            R"("seq":42})");
}

TEST(ParseProviderSpecTest, LivenessDefaultsToProbeAndAcceptsHeartbeatAndBothInAnyCase) {
  auto absent = Parse(Body());
  ASSERT_TRUE(absent.has_value());
  EXPECT_EQ(absent->liveness, Liveness::kProbe);
  for (const char* value : {R"("heartbeat")", R"("HeartBeat")"}) {
    auto spec = Parse(Body({{"liveness", value}}));
    ASSERT_TRUE(spec.has_value()) << spec.error().message;
    EXPECT_EQ(spec->liveness, Liveness::kHeartbeat);
  }
  for (const char* value : {R"("both")", R"("BOTH")"}) {
    auto spec = Parse(Body({{"liveness", value}}));
    ASSERT_TRUE(spec.has_value()) << spec.error().message;
    EXPECT_EQ(spec->liveness, Liveness::kBoth);
  }
  auto probe = Parse(Body({{"liveness", R"("probe")"}}));
  ASSERT_TRUE(probe.has_value());
  EXPECT_EQ(probe->liveness, Liveness::kProbe);
  auto null = Parse(Body({{"liveness", "null"}}));
  ASSERT_TRUE(null.has_value());
  EXPECT_EQ(null->liveness, Liveness::kProbe);
}

TEST(ProviderCodecTest, AHeartbeatProviderRoundTripsAndAProbedOneKeepsItsOldBytes) {
  Provider p = SampleProvider();
  const std::string probed = EncodeProvider(p);
  EXPECT_EQ(probed.find("liveness"), std::string::npos);
  p.spec.liveness = Liveness::kHeartbeat;
  const std::string encoded = EncodeProvider(p);
  EXPECT_NE(encoded.find(R"("metadata":{"region_code":"us-east-1","resources":{"cpu":4}},)"
                         R"("liveness":"heartbeat",)"),
            std::string::npos)
      << encoded;
  auto decoded = DecodeProvider(encoded);
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
  EXPECT_EQ(*decoded, p);
}

TEST(ProviderCodecTest, ABothProviderRoundTrips) {
  Provider p = SampleProvider();
  p.spec.liveness = Liveness::kBoth;
  const std::string encoded = EncodeProvider(p);
  EXPECT_NE(encoded.find(R"("liveness":"both",)"), std::string::npos) << encoded;
  auto decoded = DecodeProvider(encoded);
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
  EXPECT_EQ(*decoded, p);
}

TEST(ProviderCodecTest, AProviderStoredBeforeLivenessExistedReadsAsProbed) {
  auto decoded = DecodeProvider(R"({"id":"p1","name":"sp-1","endpoint":"http://h/","seq":3})");
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
  EXPECT_EQ(decoded->spec.liveness, Liveness::kProbe);
}

TEST(ProviderCodecTest, DecodeRejectsRecordsWithoutIdOrName) {
  for (const char* json : {R"({"name":"a"})", R"({"id":"a"})", R"({"id":"","name":"a"})",
                           R"({"id":1,"name":"a"})", "[]"}) {
    auto decoded = DecodeProvider(json);
    ASSERT_FALSE(decoded.has_value()) << json;
    EXPECT_EQ(decoded.error().code, ErrorCode::kCorruption) << json;
  }
  EXPECT_FALSE(DecodeProvider("{not json").has_value());
}

}  // namespace
}  // namespace dcm
