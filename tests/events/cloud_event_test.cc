#include "events/cloud_event.h"

#include <gtest/gtest.h>

#include <string>

#include "events/json_read.h"

namespace dcm {
namespace {

CloudEvent SampleEvent() {
  CloudEvent e;
  e.id = "0b9f6a1e-2c3d-4e5f-8a9b-0c1d2e3f4a51";
  e.source = "dcm/registrar";
  e.type = "dcm.provider.registered";
  e.subject = "sp-1";
  e.time = "2026-01-01T00:00:00.000Z";
  e.schema_version = 1;
  e.data = R"({"request_id":"r1","seq":3,"nested":{"a":[1,2,"x"]}})";
  return e;
}

// An event JSON with `attributes` spliced in place of the standard ones (for negative cases).
std::string EventJson(const std::string& attributes, const std::string& data = "{}") {
  return "{" + attributes + R"(,"data":)" + data + "}";
}

constexpr char kGoodAttributes[] =
    R"("specversion":"1.0","id":"e1","source":"s","type":"t","time":"2026-01-01T00:00:00.000Z")";

void ExpectCorruption(const std::string& json, const std::string& message_part) {
  auto decoded = DecodeCloudEvent(json);
  ASSERT_FALSE(decoded.has_value()) << json.substr(0, 200);
  EXPECT_EQ(decoded.error().code, ErrorCode::kCorruption);
  EXPECT_NE(decoded.error().message.find(message_part), std::string::npos)
      << decoded.error().message;
}

TEST(CloudEventTest, EncodeDecodeRoundTrip) {
  const CloudEvent e = SampleEvent();
  auto decoded = DecodeCloudEvent(EncodeCloudEvent(e));
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
  EXPECT_EQ(*decoded, e);
}

TEST(CloudEventTest, EncodesTheStructuredModeAttributes) {
  EXPECT_EQ(EncodeCloudEvent(SampleEvent()),
            R"({"specversion":"1.0","id":"0b9f6a1e-2c3d-4e5f-8a9b-0c1d2e3f4a51",)"
            R"("source":"dcm/registrar","type":"dcm.provider.registered","subject":"sp-1",)"
            R"("time":"2026-01-01T00:00:00.000Z","datacontenttype":"application/json",)"
            R"("schemaversion":1,"data":{"request_id":"r1","seq":3,"nested":{"a":[1,2,"x"]}}})");
}

TEST(CloudEventTest, OmitsEmptySubjectAndRoundTrips) {
  CloudEvent e = SampleEvent();
  e.subject.clear();
  const std::string json = EncodeCloudEvent(e);
  EXPECT_EQ(json.find("subject"), std::string::npos);
  auto decoded = DecodeCloudEvent(json);
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(*decoded, e);
}

TEST(CloudEventTest, EscapesAttributeStrings) {
  CloudEvent e = SampleEvent();
  e.source = "sp/\"quoted\"\n\xC3\xA9";
  auto decoded = DecodeCloudEvent(EncodeCloudEvent(e));
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
  EXPECT_EQ(decoded->source, e.source);
}

TEST(CloudEventTest, DecodeMinifiesData) {
  auto decoded = DecodeCloudEvent(EventJson(kGoodAttributes, R"({ "a" : [ 1 , 2 ] ,"b":{ } })"));
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
  EXPECT_EQ(decoded->data, R"({"a":[1,2],"b":{}})");
}

TEST(CloudEventTest, DecodeDefaultsSchemaVersionToOne) {
  auto decoded = DecodeCloudEvent(EventJson(kGoodAttributes));
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
  EXPECT_EQ(decoded->schema_version, 1);
  EXPECT_EQ(decoded->subject, "");
}

TEST(CloudEventTest, DecodeIgnoresUnknownAttributes) {
  auto decoded = DecodeCloudEvent(
      EventJson(std::string(kGoodAttributes) + R"(,"traceparent":"00-abc","x":{"y":[1]})"));
  ASSERT_TRUE(decoded.has_value()) << decoded.error().message;
  EXPECT_EQ(decoded->id, "e1");
}

TEST(CloudEventTest, DecodeAcceptsSchemaVersionAsNumberOrNumericString) {
  auto as_number =
      DecodeCloudEvent(EventJson(std::string(kGoodAttributes) + R"(,"schemaversion":2)"));
  ASSERT_TRUE(as_number.has_value()) << as_number.error().message;
  EXPECT_EQ(as_number->schema_version, 2);
  auto as_string =
      DecodeCloudEvent(EventJson(std::string(kGoodAttributes) + R"(,"schemaversion":"3")"));
  ASSERT_TRUE(as_string.has_value()) << as_string.error().message;
  EXPECT_EQ(as_string->schema_version, 3);
}

TEST(CloudEventTest, DecodeRejectsBadSchemaVersions) {
  for (const char* value : {"0", "-1", "1.5", "\"\"", "\"v1\"", "\"1a\"", "\"999999\"", "true",
                            "null", "{}", "4294967297", "18446744073709551615"}) {
    ExpectCorruption(EventJson(std::string(kGoodAttributes) + R"(,"schemaversion":)" + value),
                     "schemaversion");
  }
}

TEST(CloudEventTest, DecodeRejectsMissingRequiredAttributes) {
  const std::string all[][2] = {
      {"id", R"("specversion":"1.0","source":"s","type":"t","time":"2026-01-01T00:00:00Z")"},
      {"source", R"("specversion":"1.0","id":"e","type":"t","time":"2026-01-01T00:00:00Z")"},
      {"type", R"("specversion":"1.0","id":"e","source":"s","time":"2026-01-01T00:00:00Z")"},
      {"time", R"("specversion":"1.0","id":"e","source":"s","type":"t")"},
      {"specversion", R"("id":"e","source":"s","type":"t","time":"2026-01-01T00:00:00Z")"}};
  for (const auto& [attribute, attributes] : all) {
    SCOPED_TRACE(attribute);
    ExpectCorruption(EventJson(attributes), "'" + attribute + "'");
  }
}

TEST(CloudEventTest, DecodeRejectsEmptyOrNonStringRequiredAttributes) {
  ExpectCorruption(
      EventJson(
          R"("specversion":"1.0","id":"","source":"s","type":"t","time":"2026-01-01T00:00:00Z")"),
      "'id'");
  ExpectCorruption(
      EventJson(
          R"("specversion":"1.0","id":7,"source":"s","type":"t","time":"2026-01-01T00:00:00Z")"),
      "'id'");
  ExpectCorruption(
      EventJson(
          R"("specversion":"1.0","id":"e","source":null,"type":"t","time":"2026-01-01T00:00:00Z")"),
      "'source'");
  ExpectCorruption(EventJson(std::string(kGoodAttributes) + R"(,"subject":5)"), "'subject'");
}

TEST(CloudEventTest, DecodeRejectsWrongSpecVersion) {
  ExpectCorruption(
      EventJson(
          R"("specversion":"0.3","id":"e","source":"s","type":"t","time":"2026-01-01T00:00:00Z")"),
      "specversion");
  ExpectCorruption(
      EventJson(
          R"("specversion":1.0,"id":"e","source":"s","type":"t","time":"2026-01-01T00:00:00Z")"),
      "specversion");
}

TEST(CloudEventTest, DecodeRejectsBadTime) {
  for (const char* time : {"yesterday", "2026-01-01", "2026-01-01T00:00:00", "1767225600000"}) {
    ExpectCorruption(EventJson(std::string(R"("specversion":"1.0","id":"e","source":"s",)") +
                               R"("type":"t","time":")" + time + "\""),
                     "time");
  }
}

TEST(CloudEventTest, DecodeRejectsMissingOrNonObjectData) {
  ExpectCorruption("{" + std::string(kGoodAttributes) + "}", "data");
  for (const char* data : {"null", "[]", "\"{}\"", "1", "true"}) {
    ExpectCorruption(EventJson(kGoodAttributes, data), "data");
  }
}

TEST(CloudEventTest, DecodeRejectsNonObjectEvents) {
  for (const char* json : {"[]", "\"event\"", "42", "null"}) {
    ExpectCorruption(json, "not a JSON object");
  }
}

TEST(CloudEventTest, DecodeRejectsInvalidJson) {
  for (const char* json : {"", "{", "{\"id\":}", "{'id':'x'}", "{\"a\":1,}", "nul",
                           R"({"specversion":"1.0"} trailing)"}) {
    auto decoded = DecodeCloudEvent(json);
    ASSERT_FALSE(decoded.has_value()) << json;
    EXPECT_EQ(decoded.error().code, ErrorCode::kCorruption) << json;
  }
}

TEST(CloudEventTest, DecodeRejectsInvalidUtf8) {
  ExpectCorruption(EventJson(kGoodAttributes, "{\"name\":\"bad \xC0\xAF\"}"), "UTF-8");
  ExpectCorruption(EventJson(kGoodAttributes, "{\"name\":\"bad \xED\xA0\x80\"}"), "UTF-8");
  ExpectCorruption(EventJson(kGoodAttributes, "{\"name\":\"bad \xFF\"}"), "UTF-8");
}

TEST(CloudEventTest, DecodeSurvivesHugeUnbalancedNesting) {
  const std::string deep(100000, '[');
  auto decoded = DecodeCloudEvent(deep);
  ASSERT_FALSE(decoded.has_value());
  EXPECT_EQ(decoded.error().code, ErrorCode::kCorruption);
  auto in_data = DecodeCloudEvent(EventJson(kGoodAttributes, deep));
  ASSERT_FALSE(in_data.has_value());
  EXPECT_EQ(in_data.error().code, ErrorCode::kCorruption);
}

TEST(CloudEventTest, DecodeRejectsHugeBalancedNesting) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  auto decoded = DecodeCloudEvent(EventJson(kGoodAttributes, "{\"a\":" + deep + "}"));
  ASSERT_FALSE(decoded.has_value());
  EXPECT_EQ(decoded.error().code, ErrorCode::kCorruption);
  EXPECT_NE(decoded.error().message.find("deep"), std::string::npos) << decoded.error().message;
}

TEST(CloudEventTest, DecodeEnforcesTheDepthLimitExactly) {
  // The event object adds one level to data, so data may nest kMaxJsonDepth - 1 levels.
  auto nested = [](size_t levels) {
    std::string s;
    for (size_t i = 0; i < levels; ++i) s += "{\"a\":";
    s += "1";
    for (size_t i = 0; i < levels; ++i) s += "}";
    return s;
  };
  auto ok = DecodeCloudEvent(EventJson(kGoodAttributes, nested(kMaxJsonDepth - 1)));
  EXPECT_TRUE(ok.has_value()) << ok.error().message;
  auto too_deep = DecodeCloudEvent(EventJson(kGoodAttributes, nested(kMaxJsonDepth)));
  ASSERT_FALSE(too_deep.has_value());
  EXPECT_NE(too_deep.error().message.find("deep"), std::string::npos);
}

TEST(JsonReadTest, ParseJsonReportsErrorKinds) {
  auto bad_utf8 = ParseJson("\"\xFF\"");
  ASSERT_FALSE(bad_utf8.has_value());
  EXPECT_EQ(bad_utf8.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(bad_utf8.error().message.find("UTF-8"), std::string::npos);
  auto malformed = ParseJson("{\"a\":");
  ASSERT_FALSE(malformed.has_value());
  EXPECT_EQ(malformed.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(malformed.error().message.find("malformed JSON"), std::string::npos);
}

TEST(JsonReadTest, JsonDepthCountsContainers) {
  auto depth = [](const char* json) {
    auto parsed = ParseJson(json);
    EXPECT_TRUE(parsed.has_value()) << json;
    return parsed ? JsonDepth(*parsed) : size_t{999};
  };
  EXPECT_EQ(depth("1"), 0u);
  EXPECT_EQ(depth("{}"), 1u);
  EXPECT_EQ(depth("[]"), 1u);
  EXPECT_EQ(depth(R"({"a":[1,{"b":[]}]})"), 4u);
}

TEST(JsonReadTest, MemberFallsBackToTheCamelCaseSpelling) {
  auto parsed = ParseJson(R"({"serviceType":"vm","display_name":"d","displayName":"D"})");
  ASSERT_TRUE(parsed.has_value());
  simdjson::dom::object object = *parsed;
  auto st = Member(object, "service_type", "serviceType");
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(std::string_view(*st), "vm");
  auto dn = Member(object, "display_name", "displayName");
  ASSERT_TRUE(dn.has_value());
  EXPECT_EQ(std::string_view(*dn), "d");  // snake_case wins
  EXPECT_FALSE(Member(object, "missing").has_value());
}

TEST(TypeMatchesTest, ExactOrTrailingStarPrefix) {
  EXPECT_TRUE(TypeMatches("", "anything"));
  EXPECT_TRUE(TypeMatches("dcm.status.vm", "dcm.status.vm"));
  EXPECT_FALSE(TypeMatches("dcm.status", "dcm.status.vm"));
  EXPECT_TRUE(TypeMatches("dcm.provider.*", "dcm.provider.registered"));
  EXPECT_FALSE(TypeMatches("dcm.provider.*", "dcm.instance.operation_started"));
  EXPECT_TRUE(TypeMatches("*", "x"));
}

}  // namespace
}  // namespace dcm
