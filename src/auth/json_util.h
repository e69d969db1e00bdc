// JSON helpers of src/auth beyond src/common/json_read.h (which parses: one parser per thread, a
// parsed element valid until the next ParseJson call on that thread, so callers copy what they
// need before parsing again).
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "src/common/json_read.h"
#include "src/common/result.h"

namespace dcm::auth {

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
