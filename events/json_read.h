// Thin helpers over simdjson's DOM for reading our JSON: typed field access that reports the
// offending field by name. The only place in events/ that spells simdjson error handling.
#pragma once

#include <simdjson.h>

#include <optional>
#include <string>
#include <string_view>

#include "events/cloud_event.h"
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

// The `data` of `event`, for a typed decoder that reads schema versions 1..`newest_version`.
// kCorruption (dead-letter it) when the event's schemaversion is newer, or `data` is not a JSON
// object. Valid until the next ParseJson call on this thread.
Result<simdjson::dom::element> ParseEventData(const CloudEvent& event, int newest_version);

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
