#include "src/common/duration.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dcm {
namespace {

using std::chrono::milliseconds;

milliseconds Parse(std::string_view text) {
  auto d = ParseGoDuration(text);
  EXPECT_TRUE(d.has_value()) << text << ": " << (d ? "" : d.error().message);
  return d ? *d : milliseconds(-1);
}

TEST(DurationTest, ParsesTheConfigDefaults) {
  EXPECT_EQ(Parse("500ms"), milliseconds(500));
  EXPECT_EQ(Parse("10s"), milliseconds(10000));
  EXPECT_EQ(Parse("5s"), milliseconds(5000));
  EXPECT_EQ(Parse("5m"), milliseconds(300000));
  EXPECT_EQ(Parse("1m"), milliseconds(60000));
  EXPECT_EQ(Parse("1h"), milliseconds(3600000));
}

TEST(DurationTest, ParsesCompoundAndFractionalDurations) {
  EXPECT_EQ(Parse("1h30m"), milliseconds(5400000));
  EXPECT_EQ(Parse("1m30s"), milliseconds(90000));
  EXPECT_EQ(Parse("2h45m30s500ms"), milliseconds(9930500));
  EXPECT_EQ(Parse("1.5s"), milliseconds(1500));
  EXPECT_EQ(Parse("0.5h"), milliseconds(1800000));
}

TEST(DurationTest, ParsesSmallUnitsTruncatedToMilliseconds) {
  EXPECT_EQ(Parse("1500us"), milliseconds(1));
  EXPECT_EQ(Parse("2000\xC2\xB5s"), milliseconds(2));  // µs
  EXPECT_EQ(Parse("3000000ns"), milliseconds(3));
  EXPECT_EQ(Parse("999us"), milliseconds(0));
}

TEST(DurationTest, ParsesZero) {
  EXPECT_EQ(Parse("0"), milliseconds(0));
  EXPECT_EQ(Parse("0s"), milliseconds(0));
}

TEST(DurationTest, RejectsBadDurations) {
  const std::vector<std::string> bad = {"",
                                        "s",
                                        "10",
                                        "10x",
                                        "-5s",
                                        "+5s",
                                        "5 s",
                                        " 5s",
                                        "ms",
                                        ".s",
                                        "1..5s",
                                        "1.5.5s",
                                        "5sm",
                                        "h1",
                                        "1e3s",
                                        "10S",
                                        "abc",
                                        "1d",
                                        "99999999999999999h"};
  for (const auto& text : bad) {
    auto d = ParseGoDuration(text);
    EXPECT_FALSE(d.has_value()) << "accepted '" << text << "'";
    if (!d) {
      EXPECT_EQ(d.error().code, ErrorCode::kInvalidArgument);
    }
  }
}

TEST(DurationTest, ErrorMessageQuotesTheInput) {
  auto d = ParseGoDuration("ten seconds");
  ASSERT_FALSE(d.has_value());
  EXPECT_NE(d.error().message.find("'ten seconds'"), std::string::npos);
}

}  // namespace
}  // namespace dcm
