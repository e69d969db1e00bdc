// What a remote reply said, fit to show users (SPEC §6: "SP replies shown to users are never raw
// bodies of arbitrary size"). Every place where an SP's or the Policy Manager's answer reaches an
// event, a stored record or an HTTP answer goes through here:
//
//   SummarizeReply(500, "application/problem+json", R"({"title":"x","detail":"disk full"})")
//       == "HTTP 500: disk full"
//   SummarizeReply(502, "text/html; charset=utf-8", <1,234 bytes of HTML>)
//       == "HTTP 502 (1,234 bytes of text/html)"
//   SummarizeReply(503, "", "") == "HTTP 503 (empty body)"
//
// The explanation is, in this order, a JSON object body's string `detail` (problem+json),
// `title`, `message`, `error`, or `error.message`; else, for a text/plain body, the text itself;
// else nothing (the body is only described by its size and media type: HTML error pages, binary
// data and JSON without such a field are never echoed). Whatever is shown is sanitized
// (SanitizeText) and the whole summary is at most kMaxReplySummaryBytes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace dcm {

inline constexpr size_t kMaxReplySummaryBytes = 256;

// `text` made safe to show and bounded: invalid UTF-8, control characters (C0 other than blanks,
// DEL, C1) and bidirectional overrides/isolates (U+202A..U+202E, U+2066..U+2069) each become
// U+FFFD; tabs, CR and LF become spaces; runs of blanks collapse to one and the ends are trimmed.
// Cut at a character boundary to at most `max_bytes` (>= 3) bytes, ending in "..." when cut.
std::string SanitizeText(std::string_view text, size_t max_bytes);

// The explanation a reply carries (see above), sanitized and at most `max_bytes`; "" if none.
std::string ReplyExplanation(std::string_view content_type, std::string_view body,
                             size_t max_bytes = kMaxReplySummaryBytes);

// "HTTP <status>: <explanation>", else "HTTP <status> (<n> bytes of <media type>)", else
// "HTTP <status> (empty body)". At most kMaxReplySummaryBytes, valid UTF-8, no control
// characters.
std::string SummarizeReply(int status, std::string_view content_type, std::string_view body);

}  // namespace dcm
