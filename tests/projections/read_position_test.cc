#include "projections/read_position.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <string>

namespace dcm {
namespace {

constexpr size_t kTopics = 6;

// base64url (unpadded) of raw token bytes, to build malformed tokens byte by byte.
std::string Token(const std::string& bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  uint32_t buffer = 0;
  int bits = 0;
  for (unsigned char c : bytes) {
    buffer = (buffer << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(kAlphabet[(buffer >> bits) & 0x3F]);
    }
  }
  if (bits > 0) out.push_back(kAlphabet[(buffer << (6 - bits)) & 0x3F]);
  return out;
}

TEST(ReadPositionTest, RaiseKeepsOneEntryPerPartitionInOrderWithTheLargerOffset) {
  ReadPosition p;
  p.Raise(4, 3, 10);
  p.Raise(1, 0, 7);
  p.Raise(4, 1, 2);
  p.Raise(4, 3, 9);   // smaller: ignored
  p.Raise(1, 0, 12);  // larger: kept
  ASSERT_EQ(p.entries().size(), 3u);
  EXPECT_EQ(p.entries()[0], (PositionEntry{1, 0, 12}));
  EXPECT_EQ(p.entries()[1], (PositionEntry{4, 1, 2}));
  EXPECT_EQ(p.entries()[2], (PositionEntry{4, 3, 10}));
}

TEST(ReadPositionTest, MergeCoversBothPositions) {
  ReadPosition a;
  a.Raise(1, 0, 5);
  a.Raise(2, 7, 1);
  ReadPosition b;
  b.Raise(1, 0, 3);
  b.Raise(0, 0, 9);
  a.Merge(b);
  ASSERT_EQ(a.entries().size(), 3u);
  EXPECT_EQ(a.entries()[0], (PositionEntry{0, 0, 9}));
  EXPECT_EQ(a.entries()[1], (PositionEntry{1, 0, 5}));
  EXPECT_EQ(a.entries()[2], (PositionEntry{2, 7, 1}));
}

TEST(ReadPositionTest, TokensRoundTripExactlyIncludingTheLargestValues) {
  ReadPosition p;
  p.Raise(0, 0, 1);
  p.Raise(1, 0, 127);
  p.Raise(1, 1, 128);
  p.Raise(4, 11, 1'000'000'007);
  p.Raise(5, std::numeric_limits<int32_t>::max(), std::numeric_limits<int64_t>::max());
  const std::string token = EncodePosition(p);
  EXPECT_EQ(
      token.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"),
      std::string::npos)
      << token;  // safe in a URL query and a header as is
  auto decoded = DecodePosition(token, kTopics);
  ASSERT_TRUE(decoded) << decoded.error().message;
  EXPECT_EQ(*decoded, p);
}

TEST(ReadPositionTest, TheEmptyPositionIsAShortValidToken) {
  const std::string token = EncodePosition(ReadPosition{});
  EXPECT_EQ(token, "AQ");
  auto decoded = DecodePosition(token, kTopics);
  ASSERT_TRUE(decoded);
  EXPECT_TRUE(decoded->empty());
}

TEST(ReadPositionTest, ATypicalWriteTokenIsShort) {
  ReadPosition p;
  p.Raise(0, 0, 123'456);  // the request
  p.Raise(1, 0, 123'456);  // the outcome
  EXPECT_LE(EncodePosition(p).size(), 16u);
}

void ExpectMalformed(const std::string& token, const std::string& why) {
  auto decoded = DecodePosition(token, kTopics);
  ASSERT_FALSE(decoded) << why;
  EXPECT_EQ(decoded.error().code, ErrorCode::kInvalidArgument) << why;
  ASSERT_EQ(decoded.error().fields.size(), 1u) << why;
  EXPECT_EQ(decoded.error().fields[0].field, "min_position") << why;
}

TEST(ReadPositionTest, MalformedTokensAreInvalidArguments) {
  ExpectMalformed("", "empty");
  ExpectMalformed("AQ==", "padded");
  ExpectMalformed("A", "a length no encoding has");
  ExpectMalformed("AQ!", "outside the alphabet");
  ExpectMalformed("AQ+/", "standard base64, not base64url");
  ExpectMalformed("AR", "non-zero unused bits");
  ExpectMalformed(Token("\x02"), "another version");
  ExpectMalformed(Token(std::string("\x01\x06\x00\x01", 4)), "topic out of range");
  ExpectMalformed(Token(std::string("\x01\x01", 2)), "entry without a partition");
  ExpectMalformed(Token(std::string("\x01\x01\x00", 3)), "entry without an offset");
  ExpectMalformed(Token(std::string("\x01\x01\x00\x80", 4)), "truncated varint");
  ExpectMalformed(Token(std::string("\x01\x01\x80\x00\x01", 5)), "overlong varint");
  ExpectMalformed(Token(std::string("\x01\x01\x80\x80\x80\x80\x08\x01", 8)),
                  "partition above INT32_MAX");
  ExpectMalformed(Token(std::string("\x01\x01\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 13)),
                  "offset above INT64_MAX");
  ExpectMalformed(Token(std::string("\x01\x01\x00\x05\x01\x00\x06", 7)), "a repeated entry");
  ExpectMalformed(Token(std::string("\x01\x02\x00\x05\x01\x00\x06", 7)), "entries out of order");
  ExpectMalformed(std::string(kMaxPositionTokenBytes + 1, 'A'), "too long");
}

TEST(ReadPositionTest, RandomBytesNeverCrashTheDecoder) {
  std::mt19937 rng(13);
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string bytes(1 + rng() % 24, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    if (i % 2 == 0) bytes[0] = '\x01';
    auto decoded = DecodePosition(Token(bytes), kTopics);
    if (decoded) {
      ++accepted;
      // Whatever is accepted is canonical: it encodes back to the same token.
      EXPECT_EQ(EncodePosition(*decoded), Token(bytes));
    }
  }
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace dcm
