// simdjson helpers for src/auth (events/json_read.h is not a dependency of this module).
// Thread-safety: one parser per thread. A parsed element is valid until the next
// ParseAuthJson call on the same thread, so callers copy what they need before parsing again.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "src/common/result.h"

namespace dcm::auth {

// Nesting deeper than this is bad input (tokens and JWKS documents are shallow).
inline constexpr size_t kMaxAuthJsonDepth = 32;

// Parses `json` with this thread's parser. kInvalidArgument ("malformed JSON: ...", "not
// valid UTF-8", "nesting too deep") on failure.
Result<simdjson::dom::element> ParseAuthJson(std::string_view json);

// The member `key` of `object`, if present.
std::optional<simdjson::dom::element> Find(simdjson::dom::object object, std::string_view key);

// The element at a dotted path ("realm_access.roles") below `object`, if every step is an
// object member.
std::optional<simdjson::dom::element> FindPath(simdjson::dom::object object,
                                               std::string_view dotted_path);

// Number of milliseconds a NumericDate (RFC 7519 §2: seconds, integer or not) stands for,
// saturated to the int64 range; nullopt when `value` is not a number.
std::optional<int64_t> NumericDateMillis(simdjson::dom::element value);

// `text` made safe to quote in a reason (and in a WWW-Authenticate error_description, RFC 6750
// §3: printable ASCII without '"' and '\\'): any other byte becomes '?', and anything past
// `max_bytes` becomes "...".
std::string Printable(std::string_view text, size_t max_bytes = 64);

}  // namespace dcm::auth
