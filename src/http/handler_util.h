// Request parsing shared by the API handlers (internal to src/http): JSON bodies, list paging,
// boolean query flags.
#pragma once

#include <simdjson.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "src/common/result.h"
#include "src/http/http_types.h"

namespace dcm::http {

inline constexpr size_t kDefaultPageSize = 100;
inline constexpr size_t kMaxPageSize = 100;

// True for application/json and application/*+json (parameters ignored), or no Content-Type.
bool IsJsonContentType(const HttpRequest& request);

// Parses the JSON body of a write (415 for a non-JSON content type, 400 naming `body` for bad
// JSON). On failure the response is ready in *error. The element is valid until the next
// ParseJson call on this thread: copy what you need before reading a view or submitting.
std::optional<simdjson::dom::element> ParseBody(const HttpRequest& request, HttpResponse* error);

// `max_page_size` (1..100, default 100). On failure the 400 is ready in *error.
std::optional<size_t> ParsePageSize(const HttpRequest& request, HttpResponse* error);
// The same as a value: kInvalidArgument naming `max_page_size` (ProblemFromError: the same 400).
Result<size_t> PageSizeParam(const HttpRequest& request);

// A boolean query flag spelled `true` or `false` (absent: `fallback`). On any other value the
// 400 naming the flag is ready in *error.
std::optional<bool> ParseBoolFlag(const HttpRequest& request, const std::string& name,
                                  bool fallback, HttpResponse* error);

// `?force=true` (or `1`) on a provider deletion. One parser for the router's admin-only check
// and the handler's request (SPEC §3.1, §6), so the two can never disagree.
bool ForceRequested(const HttpRequest& request);

// `problem` (a problem+json response) with the extra string member `key` appended.
HttpResponse WithMember(HttpResponse problem, std::string_view key, std::string_view value);

}  // namespace dcm::http
