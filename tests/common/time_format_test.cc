#include "src/common/time_format.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dcm {
namespace {

constexpr int64_t k2026 = 1767225600000;  // 2026-01-01T00:00:00.000Z

TEST(TimeFormatTest, FormatsUtcWithMilliseconds) {
  EXPECT_EQ(FormatRfc3339Millis(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatRfc3339Millis(k2026), "2026-01-01T00:00:00.000Z");
  EXPECT_EQ(FormatRfc3339Millis(k2026 + 3723004), "2026-01-01T01:02:03.004Z");
  EXPECT_EQ(FormatRfc3339Millis(951782400000), "2000-02-29T00:00:00.000Z");  // leap day
}

TEST(TimeFormatTest, FormatsTimesBeforeTheEpoch) {
  EXPECT_EQ(FormatRfc3339Millis(-1), "1969-12-31T23:59:59.999Z");
}

TEST(TimeFormatTest, RoundTripsFormattedTimes) {
  for (int64_t t : {int64_t{0}, k2026, k2026 + 1, k2026 + 86399999, int64_t{4102444800123},
                    int64_t{951782400000}}) {
    const auto parsed = ParseRfc3339(FormatRfc3339Millis(t));
    ASSERT_TRUE(parsed.has_value()) << t;
    EXPECT_EQ(*parsed, t);
  }
}

TEST(TimeFormatTest, ParsesOffsetsToUtc) {
  EXPECT_EQ(ParseRfc3339("2026-01-01T02:00:00+02:00"), k2026);
  EXPECT_EQ(ParseRfc3339("2025-12-31T19:30:00-04:30"), k2026);
  EXPECT_EQ(ParseRfc3339("2026-01-01T00:00:00+00:00"), k2026);
  EXPECT_EQ(ParseRfc3339("2026-01-01T00:00:00-00:00"), k2026);
}

TEST(TimeFormatTest, ParsesFractionalDigitsFromZeroToNine) {
  EXPECT_EQ(ParseRfc3339("2026-01-01T00:00:00Z"), k2026);
  EXPECT_EQ(ParseRfc3339("2026-01-01T00:00:00.5Z"), k2026 + 500);
  EXPECT_EQ(ParseRfc3339("2026-01-01T00:00:00.12Z"), k2026 + 120);
  EXPECT_EQ(ParseRfc3339("2026-01-01T00:00:00.123Z"), k2026 + 123);
  EXPECT_EQ(ParseRfc3339("2026-01-01T00:00:00.123456Z"), k2026 + 123);  // truncated to ms
  EXPECT_EQ(ParseRfc3339("2026-01-01T00:00:00.999999999Z"), k2026 + 999);
  EXPECT_EQ(ParseRfc3339("2026-01-01T00:00:00.250+01:00"), k2026 - 3600000 + 250);
}

TEST(TimeFormatTest, AcceptsLowercaseSeparators) {
  EXPECT_EQ(ParseRfc3339("2026-01-01t00:00:00.000z"), k2026);
}

TEST(TimeFormatTest, RejectsGarbage) {
  const std::vector<std::string> bad = {
      "",
      "garbage",
      "2026-01-01",
      "2026-01-01T00:00:00",              // no offset
      "2026-01-01 00:00:00Z",             // space separator
      "2026-01-01T00:00:00.Z",            // no fraction digits
      "2026-01-01T00:00:00.1234567890Z",  // 10 fraction digits
      "2026-13-01T00:00:00Z",             // month 13
      "2026-02-30T00:00:00Z",             // no such day
      "2025-02-29T00:00:00Z",             // not a leap year
      "2026-01-01T24:00:00Z",             // hour 24
      "2026-01-01T00:60:00Z",             // minute 60
      "2026-01-01T00:00:00+24:00",        // offset hour
      "2026-01-01T00:00:00+01:60",        // offset minute
      "2026-01-01T00:00:00+0100",         // offset without colon
      "2026-01-01T00:00:00Zjunk",         // trailing bytes
      "2026-01-01T00:00:00+01:00x",       // trailing after offset
      "20a6-01-01T00:00:00Z",             // letter in year
      "2026-01-01T-1:00:00Z",             // negative hour
      "2026-01-01T00:-1:00Z",             // negative minute
      "2026-01-01T00:00:-1Z",             // negative second
      "2026-01-01T00:00:00+-1:00",        // negative offset hour
      "2026-01-01T+1:00:00Z",             // signed hour
  };
  for (const auto& text : bad) {
    EXPECT_FALSE(ParseRfc3339(text).has_value()) << "accepted '" << text << "'";
  }
}

}  // namespace
}  // namespace dcm
