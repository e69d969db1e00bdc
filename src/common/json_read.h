// Thin helpers over simdjson's DOM for reading JSON: one thread-local parser with our limits,
// typed member access. Shared by events/ (events/json_read.h adds the event-data reader), the
// HTTP handlers and src/auth.
#pragma once

#include <simdjson.h>

#include <optional>
#include <string>
#include <string_view>

#include "src/common/result.h"

namespace dcm {

// Limits applied to every JSON document we parse (SPEC §5: deep nesting is bad input).
inline constexpr size_t kMaxJsonDepth = 64;

// Parses `json` with a thread-local parser. The returned element is valid until the next
// ParseJson call on this thread. Errors: kInvalidArgument naming what is wrong (malformed JSON,
// invalid UTF-8, nesting deeper than kMaxJsonDepth).
Result<simdjson::dom::element> ParseJson(std::string_view json);

// Returns the member `key` of `object`, or the member `alt_key` (camelCase spelling), if present.
std::optional<simdjson::dom::element> Member(simdjson::dom::object object, std::string_view key,
                                             std::string_view alt_key = {});

// The string member `key` (or `alt_key`) of `object`; "" when absent or not a string.
std::string StringMember(simdjson::dom::object object, std::string_view key,
                         std::string_view alt_key = {});

// JSON type name for error messages: "string", "number", "object", ...
const char* JsonTypeName(simdjson::dom::element element);

// The minified JSON text of `element`.
std::string Minify(simdjson::dom::element element);

// Nesting depth of `element` (a scalar is 0).
size_t JsonDepth(simdjson::dom::element element);

}  // namespace dcm
