// SummarizeReply / SanitizeText (SPEC §6: SP replies shown to users are bounded, never raw).
#include "src/common/reply_summary.h"

#include <gtest/gtest.h>

#include <string>

namespace dcm {
namespace {

bool ValidUtf8WithoutControls(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7F) return false;
    size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (c >= 0x80 && c < 0xC2) return false;
    if (i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    if (c == 0xC2 && static_cast<unsigned char>(s[i + 1]) < 0xA0) return false;  // C1 controls
    i += len;
  }
  return true;
}

TEST(SummarizeReplyTest, ProblemDetailThenTitle) {
  EXPECT_EQ(SummarizeReply(500, "application/problem+json",
                           R"({"type":"about:blank","title":"Internal","detail":"disk full"})"),
            "HTTP 500: disk full");
  EXPECT_EQ(SummarizeReply(404, "application/problem+json", R"({"title":"Not Found"})"),
            "HTTP 404: Not Found");
  EXPECT_EQ(SummarizeReply(409, "application/json", R"({"detail":"","title":"Conflict"})"),
            "HTTP 409: Conflict");
}

TEST(SummarizeReplyTest, JsonMessageOrErrorFields) {
  EXPECT_EQ(SummarizeReply(400, "application/json", R"({"message":"bad cpu count"})"),
            "HTTP 400: bad cpu count");
  EXPECT_EQ(SummarizeReply(503, "application/json", R"({"error":"overloaded"})"),
            "HTTP 503: overloaded");
  EXPECT_EQ(SummarizeReply(403, "application/json", R"({"error":{"code":7,"message":"quota"}})"),
            "HTTP 403: quota");
  // Whatever the declared type: a JSON object body is read as one.
  EXPECT_EQ(SummarizeReply(500, "text/plain", R"( {"detail":"x"})"), "HTTP 500: x");
}

TEST(SummarizeReplyTest, OtherBodiesAreDescribedNotEchoed) {
  const std::string html = "<html><body>" + std::string(1222, 'x') + "</body></html>";
  ASSERT_EQ(html.size(), 1248u);
  EXPECT_EQ(SummarizeReply(502, "text/html; charset=utf-8", html),
            "HTTP 502 (1,248 bytes of text/html)");
  EXPECT_EQ(SummarizeReply(500, "application/json", R"({"status":"broken"})"),
            "HTTP 500 (19 bytes of application/json)");
  EXPECT_EQ(SummarizeReply(500, "", "x"), "HTTP 500 (1 byte)");
  EXPECT_EQ(SummarizeReply(503, "application/json", ""), "HTTP 503 (empty body)");
  EXPECT_EQ(SummarizeReply(302, "Application/OCTET-stream", std::string(1234567, '\0')),
            "HTTP 302 (1,234,567 bytes of application/octet-stream)");
}

TEST(SummarizeReplyTest, PlainTextIsShownSanitizedAndBounded) {
  EXPECT_EQ(SummarizeReply(500, "text/plain; charset=utf-8", "out of\r\n  capacity\n"),
            "HTTP 500: out of capacity");
  const std::string summary = SummarizeReply(500, "text/plain", std::string(100000, 'y'));
  EXPECT_LE(summary.size(), kMaxReplySummaryBytes);
  EXPECT_TRUE(summary.ends_with("yyy...")) << summary;
}

TEST(SummarizeReplyTest, AlwaysBoundedValidUtf8WithoutControls) {
  const std::string nasty_detail = "\x1b[31mred\x1b[0m \xff\xfe \xe2\x80\xae evil \xc2\x85 " +
                                   std::string(5000, '\x01') + "\xe2\x82";
  for (const std::string& body :
       {R"({"detail":")" + std::string("\\u001b[2J\\u202egnp.exe\\u0000") + R"("})",
        std::string(R"({"detail":")") + std::string(10000, 'a') + R"("})", nasty_detail}) {
    for (const char* type : {"application/problem+json", "text/plain", "text/\x01html"}) {
      const std::string s = SummarizeReply(500, type, body);
      EXPECT_LE(s.size(), kMaxReplySummaryBytes) << s;
      EXPECT_TRUE(ValidUtf8WithoutControls(s)) << s;
      EXPECT_EQ(s.find("\xe2\x80\xae"), std::string::npos) << s;  // no bidi override
    }
  }
  EXPECT_EQ(SummarizeReply(500, "application/json", R"({"detail":"\u001b[2Jhi\u202e"})"),
            "HTTP 500: \xEF\xBF\xBD[2Jhi\xEF\xBF\xBD");
}

TEST(SanitizeTextTest, ReplacesControlsAndInvalidUtf8AndCollapsesBlanks) {
  EXPECT_EQ(SanitizeText("  a\tb\r\n\nc  ", 100), "a b c");
  EXPECT_EQ(SanitizeText("a\x01z", 100), "a\xEF\xBF\xBDz");
  EXPECT_EQ(SanitizeText("a\x7f", 100), "a\xEF\xBF\xBD");
  EXPECT_EQ(SanitizeText("\xc3\xa9t\xc3\xa9", 100), "\xc3\xa9t\xc3\xa9");  // été kept
  EXPECT_EQ(SanitizeText("\xc0\xaf", 100), "\xEF\xBF\xBD\xEF\xBF\xBD");    // overlong '/'
  EXPECT_EQ(SanitizeText("\xed\xa0\x80", 100), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(SanitizeText("\xe2\x81\xa6x", 100), "\xEF\xBF\xBDx");  // U+2066 isolate
}

TEST(SanitizeTextTest, CutsAtACharacterBoundaryWithAnEllipsis) {
  EXPECT_EQ(SanitizeText("abcdefghij", 10), "abcdefghij");
  EXPECT_EQ(SanitizeText("abcdefghijk", 10), "abcdefg...");
  const std::string cut = SanitizeText("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 8);
  EXPECT_EQ(cut, "\xc3\xa9\xc3\xa9...");
  EXPECT_EQ(SanitizeText("ab      cdefghijk", 6), "ab...");
  EXPECT_EQ(SanitizeText("", 10), "");
}

}  // namespace
}  // namespace dcm
