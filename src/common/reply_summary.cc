#include "src/common/reply_summary.h"

#include <simdjson.h>

#include <cctype>
#include <cstdint>

#include "src/common/json_writer.h"

namespace dcm {
namespace {

// Bodies larger than this are not parsed for an explanation (a JSON error is small; parsing a
// huge body only to find no `detail` would cost a reply's worth of CPU per failure).
constexpr size_t kMaxParsedBody = 64 * 1024;
constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

bool Unsafe(uint32_t cp) {
  return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || (cp >= 0x202A && cp <= 0x202E) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

// "1,234"
std::string Grouped(size_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// "text/html" from "Text/HTML; charset=utf-8"; sanitized and bounded.
std::string MediaType(std::string_view content_type) {
  std::string_view media = content_type.substr(0, content_type.find(';'));
  std::string lower(media.substr(0, 64));
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return SanitizeText(lower, 64);
}

std::string_view StringField(simdjson::dom::object object, std::string_view key) {
  std::string_view value;
  if (object[key].get(value) != simdjson::SUCCESS) return {};
  return value;
}

// The JSON object body's explanation field, or "".
std::string JsonExplanation(std::string_view body) {
  size_t start = 0;
  while (start < body.size() && std::isspace(static_cast<unsigned char>(body[start]))) ++start;
  if (start == body.size() || body[start] != '{' || body.size() > kMaxParsedBody) return "";
  thread_local simdjson::dom::parser parser(kMaxParsedBody);
  simdjson::dom::element root;
  if (parser.parse(body.data(), body.size()).get(root) != simdjson::SUCCESS) return "";
  simdjson::dom::object object;
  if (root.get(object) != simdjson::SUCCESS) return "";
  for (std::string_view key : {"detail", "title", "message", "error"}) {
    std::string_view value = StringField(object, key);
    if (!SanitizeText(value, 8).empty()) return std::string(value);
  }
  simdjson::dom::object error;
  if (object["error"].get(error) == simdjson::SUCCESS) {
    std::string_view value = StringField(error, "message");
    if (!SanitizeText(value, 8).empty()) return std::string(value);
  }
  return "";
}

}  // namespace

std::string SanitizeText(std::string_view text, size_t max_bytes) {
  if (max_bytes < 3) max_bytes = 3;
  std::string out;
  out.reserve(std::min(text.size(), max_bytes) + 4);
  bool pending_blank = false;
  bool cut = false;
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    const size_t len = DecodeUtf8(text, i, &cp);
    std::string_view piece;
    if (len == 0) {
      piece = kReplacement;
      i += 1;
    } else {
      i += len;
      if (cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r') {
        pending_blank = !out.empty();
        continue;
      }
      piece = Unsafe(cp) ? std::string_view(kReplacement) : text.substr(i - len, len);
    }
    const size_t need = (pending_blank ? 1 : 0) + piece.size();
    if (out.size() + need > max_bytes) {
      cut = true;
      break;
    }
    if (pending_blank) out += ' ';
    pending_blank = false;
    out += piece;
  }
  if (cut) {
    // Room for "...": drop whole characters from the end (never split a sequence).
    while (out.size() + 3 > max_bytes) {
      size_t last = out.size() - 1;
      while (last > 0 && (static_cast<unsigned char>(out[last]) & 0xC0) == 0x80) --last;
      out.resize(last);
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    out += "...";
  }
  return out;
}

std::string ReplyExplanation(std::string_view content_type, std::string_view body,
                             size_t max_bytes) {
  std::string explanation = JsonExplanation(body);
  if (explanation.empty() && MediaType(content_type) == "text/plain") {
    // Only the head is looked at: the rest would be cut anyway.
    explanation = std::string(body.substr(0, 4 * max_bytes + 64));
    if (body.size() > explanation.size()) explanation += "...";
  }
  return SanitizeText(explanation, max_bytes);
}

std::string SummarizeReply(int status, std::string_view content_type, std::string_view body) {
  std::string out = "HTTP " + std::to_string(status);
  const std::string explanation =
      ReplyExplanation(content_type, body, kMaxReplySummaryBytes - out.size() - 2);
  if (!explanation.empty()) return out + ": " + explanation;
  if (body.empty()) return out + " (empty body)";
  const std::string media = MediaType(content_type);
  out += " (" + Grouped(body.size()) + (body.size() == 1 ? " byte" : " bytes");
  if (!media.empty()) out += " of " + media;
  return out + ")";
}

}  // namespace dcm
