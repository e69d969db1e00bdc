#include "src/common/url.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dcm {
namespace {

TEST(UrlTest, ParsesHttpWithDefaultPortAndPath) {
  auto url = ParseHttpUrl("http://sp.example.com/api/v1?x=1");
  ASSERT_TRUE(url.has_value()) << url.error().message;
  EXPECT_EQ(url->scheme, "http");
  EXPECT_EQ(url->host, "sp.example.com");
  EXPECT_EQ(url->port, 80);
  EXPECT_EQ(url->target, "/api/v1?x=1");
}

TEST(UrlTest, ParsesHttpsDefaultPortAndLowercasesScheme) {
  auto url = ParseHttpUrl("HTTPS://Sp.Example.com");
  ASSERT_TRUE(url.has_value()) << url.error().message;
  EXPECT_EQ(url->scheme, "https");
  EXPECT_EQ(url->port, 443);
  EXPECT_EQ(url->target, "/");
}

TEST(UrlTest, ParsesExplicitPort) {
  auto url = ParseHttpUrl("http://10.0.0.1:8080/x");
  ASSERT_TRUE(url.has_value());
  EXPECT_EQ(url->host, "10.0.0.1");
  EXPECT_EQ(url->port, 8080);
  EXPECT_EQ(url->target, "/x");
}

TEST(UrlTest, AcceptsPortBounds) {
  auto low = ParseHttpUrl("http://h:1");
  ASSERT_TRUE(low.has_value());
  EXPECT_EQ(low->port, 1);
  auto high = ParseHttpUrl("http://h:65535");
  ASSERT_TRUE(high.has_value());
  EXPECT_EQ(high->port, 65535);
}

TEST(UrlTest, RejectsPortsOutOfRangeOrMalformed) {
  for (const char* text : {"http://h:0", "http://h:65536", "http://h:99999999999", "http://h:-1",
                           "http://h:80a", "http://h:+80"}) {
    auto url = ParseHttpUrl(text);
    EXPECT_FALSE(url.has_value()) << "accepted " << text;
    if (!url) {
      EXPECT_EQ(url.error().code, ErrorCode::kInvalidArgument);
    }
  }
}

TEST(UrlTest, ParsesIpv6Literals) {
  auto url = ParseHttpUrl("http://[::1]:9000/health");
  ASSERT_TRUE(url.has_value()) << url.error().message;
  EXPECT_EQ(url->host, "::1");
  EXPECT_EQ(url->port, 9000);
  EXPECT_EQ(url->target, "/health");
  auto no_port = ParseHttpUrl("https://[2001:db8::7]");
  ASSERT_TRUE(no_port.has_value());
  EXPECT_EQ(no_port->host, "2001:db8::7");
  EXPECT_EQ(no_port->port, 443);
}

TEST(UrlTest, RejectsMalformedIpv6Literals) {
  EXPECT_FALSE(ParseHttpUrl("http://[::1/x").has_value());
  EXPECT_FALSE(ParseHttpUrl("http://[::1]x/").has_value());
  EXPECT_FALSE(ParseHttpUrl("http://[]:80/").has_value());
}

TEST(UrlTest, RejectsUnbracketedIpv6AndDoubledPorts) {
  for (const char* text : {"http://::1/", "http://2001:db8::1/x", "http://h:80:90/"}) {
    auto url = ParseHttpUrl(text);
    ASSERT_FALSE(url.has_value()) << "accepted " << text << " as host '" << url->host << "'";
    EXPECT_NE(url.error().message.find("host"), std::string::npos);
  }
}

TEST(UrlTest, EmptyPortMeansTheDefault) {
  auto url = ParseHttpUrl("http://h:/x");
  ASSERT_TRUE(url.has_value());
  EXPECT_EQ(url->host, "h");
  EXPECT_EQ(url->port, 80);
}

TEST(UrlTest, DropsFragmentAndKeepsQuery) {
  auto url = ParseHttpUrl("http://h/p?q=1#frag");
  ASSERT_TRUE(url.has_value());
  EXPECT_EQ(url->target, "/p?q=1");
  auto query_only = ParseHttpUrl("http://h?q=1");
  ASSERT_TRUE(query_only.has_value());
  EXPECT_EQ(query_only->host, "h");
  EXPECT_EQ(query_only->target, "/?q=1");
}

TEST(UrlTest, RejectsRelativeUrls) {
  for (const char* text : {"", "/providers", "sp.example.com/api", "//sp.example.com/api"}) {
    auto url = ParseHttpUrl(text);
    ASSERT_FALSE(url.has_value()) << "accepted " << text;
    EXPECT_NE(url.error().message.find("absolute"), std::string::npos) << text;
  }
}

TEST(UrlTest, RejectsOtherSchemes) {
  for (const char* text : {"ftp://h/x", "file:///etc/passwd", "ws://h", "gopher://h"}) {
    auto url = ParseHttpUrl(text);
    ASSERT_FALSE(url.has_value()) << "accepted " << text;
    EXPECT_EQ(url.error().code, ErrorCode::kInvalidArgument);
  }
  EXPECT_NE(ParseHttpUrl("ftp://h/x").error().message.find("ftp"), std::string::npos);
}

TEST(UrlTest, RejectsMissingHost) {
  for (const char* text : {"http://", "http:///path", "http://:8080/x", "https://?q"}) {
    auto url = ParseHttpUrl(text);
    ASSERT_FALSE(url.has_value()) << "accepted " << text;
  }
  EXPECT_NE(ParseHttpUrl("http:///path").error().message.find("host"), std::string::npos);
}

TEST(UrlTest, RejectsUserinfo) {
  auto url = ParseHttpUrl("http://user:secret@h/x");
  ASSERT_FALSE(url.has_value());
  EXPECT_NE(url.error().message.find("credentials"), std::string::npos);
  EXPECT_FALSE(ParseHttpUrl("http://@h/").has_value());
  // An '@' after the authority (in the path) is allowed.
  EXPECT_TRUE(ParseHttpUrl("http://h/users/@me").has_value());
}

TEST(UrlTest, RejectsWhitespaceAndControlCharacters) {
  for (const char* text : {"http://h/a b", " http://h/", "http://h/\t", "http://h/\x7f"}) {
    EXPECT_FALSE(ParseHttpUrl(text).has_value()) << "accepted " << text;
  }
  EXPECT_FALSE(ParseHttpUrl(std::string("http://h/\0x", 10)).has_value());
}

TEST(UrlTest, EnforcesMaximumLength) {
  const std::string prefix = "http://h/";
  const std::string at_limit = prefix + std::string(kMaxEndpointLength - prefix.size(), 'a');
  ASSERT_EQ(at_limit.size(), 2048u);
  EXPECT_TRUE(ParseHttpUrl(at_limit).has_value());
  auto too_long = ParseHttpUrl(at_limit + "a");
  ASSERT_FALSE(too_long.has_value());
  EXPECT_NE(too_long.error().message.find("2048"), std::string::npos);
}

TEST(JoinUrlPathTest, JoinsWithoutDoubleSlash) {
  EXPECT_EQ(JoinUrlPath("http://h/api/", "/health"), "http://h/api/health");
  EXPECT_EQ(JoinUrlPath("http://h/api", "/health"), "http://h/api/health");
  EXPECT_EQ(JoinUrlPath("http://h///", "/health"), "http://h/health");
  EXPECT_EQ(JoinUrlPath("http://h:8080", "/health"), "http://h:8080/health");
}

TEST(JoinUrlPathTest, DropsQueryAndFragmentOfTheBase) {
  EXPECT_EQ(JoinUrlPath("http://h/api/?token=1", "/health"), "http://h/api/health");
  EXPECT_EQ(JoinUrlPath("http://h/api#x", "/health"), "http://h/api/health");
}

}  // namespace
}  // namespace dcm
