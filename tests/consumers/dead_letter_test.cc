// MakeDeadLetter: poison of any size becomes a dead letter that fits in an event (SPEC §7).
#include "consumers/dead_letter.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include "events/event_limits.h"

namespace dcm {
namespace {

KafkaMessage Poison(std::string value, std::string key = "k") {
  KafkaMessage m;
  m.topic = "dcm.status";
  m.partition = 3;
  m.offset = 42;
  m.key = std::move(key);
  m.value = std::move(value);
  return m;
}

std::string Header(const DeadLetterRecord& r, const std::string& name) {
  for (const auto& [n, v] : r.headers) {
    if (n == name) return v;
  }
  return "<none>";
}

TEST(DeadLetterTest, ASmallPoisonRecordIsCopiedByteForByteWithWhereItCameFrom) {
  const auto r = MakeDeadLetter(Poison("{not json"), "sp-status", "bad JSON");
  EXPECT_FALSE(r.truncated);
  EXPECT_EQ(r.value, "{not json");
  EXPECT_EQ(r.key, "k");
  EXPECT_EQ(Header(r, "dcm-dlq-topic"), "dcm.status");
  EXPECT_EQ(Header(r, "dcm-dlq-partition"), "3");
  EXPECT_EQ(Header(r, "dcm-dlq-offset"), "42");
  EXPECT_EQ(Header(r, "dcm-dlq-consumer"), "sp-status");
  EXPECT_EQ(Header(r, "dcm-dlq-reason"), "bad JSON");
  EXPECT_EQ(Header(r, "dcm-dlq-size"), "9");
  EXPECT_EQ(Header(r, "dcm-dlq-truncated"), "<none>");
}

TEST(DeadLetterTest, ARecordLargerThanAnEventBecomesATruncatedEnvelopeWithItsOrigin) {
  std::string garbage(1200 * 1000, '\xff');  // 1.2 MB, not even UTF-8
  const auto r = MakeDeadLetter(Poison(garbage, std::string(100000, 'k')), "registrar", "bad");
  EXPECT_TRUE(r.truncated);
  EXPECT_LE(r.key.size(), kDeadLetterKeyMaxBytes);
  EXPECT_LT(r.value.size() + r.key.size(), kMaxEventBytes);
  EXPECT_EQ(Header(r, "dcm-dlq-size"), "1200000");
  EXPECT_EQ(Header(r, "dcm-dlq-truncated"), "true");
  simdjson::dom::parser parser;
  auto doc = parser.parse(r.value);
  ASSERT_FALSE(doc.error());
  EXPECT_EQ(std::string_view(doc["dead_letter"].get_string().value()), "truncated");
  EXPECT_EQ(std::string_view(doc["topic"].get_string().value()), "dcm.status");
  EXPECT_EQ(int64_t(doc["partition"]), 3);
  EXPECT_EQ(int64_t(doc["offset"]), 42);
  EXPECT_EQ(int64_t(doc["size"]), 1200000);
  EXPECT_EQ(int64_t(doc["key_size"]), 100000);
  EXPECT_EQ(std::string_view(doc["consumer"].get_string().value()), "registrar");
  EXPECT_FALSE(std::string_view(doc["head"].get_string().value()).empty());
}

TEST(DeadLetterTest, ARecordJustUnderTheEventLimitIsStillCopied) {
  const auto r = MakeDeadLetter(Poison(std::string(kMaxEventBytes - 1, 'x')), "audit", "bad");
  EXPECT_FALSE(r.truncated);
  EXPECT_EQ(r.value.size(), kMaxEventBytes - 1);
}

TEST(DeadLetterTest, ALongReasonIsCut) {
  const auto r = MakeDeadLetter(Poison("x"), "audit", std::string(10000, 'r'));
  EXPECT_LE(Header(r, "dcm-dlq-reason").size(), kDeadLetterReasonMaxBytes);
}

TEST(DeadLetterTest, ARequestRecordOverTheRequestLimitIsNotDecodedAndSaysWhy) {
  const auto event = DecodeRequestRecord(Poison(std::string(600000, 'x')));
  ASSERT_FALSE(event);
  EXPECT_EQ(event.error().code, ErrorCode::kPayloadTooLarge);
  EXPECT_NE(event.error().message.find("600000"), std::string::npos);
  EXPECT_NE(event.error().message.find(std::to_string(kMaxRequestEventBytes)), std::string::npos);
  EXPECT_FALSE(DecodeRequestRecord(Poison("{not json")));  // small: decoded (and refused) as ever
}

}  // namespace
}  // namespace dcm
