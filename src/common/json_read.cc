#include "src/common/json_read.h"

#include <algorithm>

namespace dcm {

Result<simdjson::dom::element> ParseJson(std::string_view json) {
  // A parser per thread: simdjson parsers are not thread-safe, and reusing one keeps its buffers.
  thread_local simdjson::dom::parser parser(/*max_capacity=*/16 * 1024 * 1024);
  // simdjson enforces the depth limit while parsing (DEPTH_ERROR), so no walk is needed after.
  thread_local const bool allocated =
      !parser.allocate(64 * 1024, kMaxJsonDepth + 1);  // +1: the document root
  if (!allocated) return MakeError(ErrorCode::kInternal, "JSON parser allocation failed");
  simdjson::dom::element element;
  const auto error = parser.parse(json.data(), json.size()).get(element);
  if (error == simdjson::UTF8_ERROR) {
    return MakeError(ErrorCode::kInvalidArgument, "JSON is not valid UTF-8");
  }
  if (error == simdjson::DEPTH_ERROR) {
    return MakeError(ErrorCode::kInvalidArgument, "JSON nesting is too deep");
  }
  if (error == simdjson::CAPACITY) {
    return MakeError(ErrorCode::kPayloadTooLarge, "JSON document is too large");
  }
  if (error) {
    return MakeError(ErrorCode::kInvalidArgument,
                     std::string("malformed JSON: ") + simdjson::error_message(error));
  }
  return element;
}

std::optional<simdjson::dom::element> Member(simdjson::dom::object object, std::string_view key,
                                             std::string_view alt_key) {
  simdjson::dom::element value;
  if (!object.at_key(key).get(value)) return value;
  if (!alt_key.empty() && !object.at_key(alt_key).get(value)) return value;
  return std::nullopt;
}

std::string StringMember(simdjson::dom::object object, std::string_view key,
                         std::string_view alt_key) {
  auto value = Member(object, key, alt_key);
  std::string_view text;
  if (value && !value->get(text)) return std::string(text);
  return "";
}

const char* JsonTypeName(simdjson::dom::element element) {
  switch (element.type()) {
    case simdjson::dom::element_type::ARRAY:
      return "array";
    case simdjson::dom::element_type::OBJECT:
      return "object";
    case simdjson::dom::element_type::INT64:
    case simdjson::dom::element_type::UINT64:
    case simdjson::dom::element_type::DOUBLE:
      return "number";
    case simdjson::dom::element_type::STRING:
      return "string";
    case simdjson::dom::element_type::BOOL:
      return "boolean";
    case simdjson::dom::element_type::NULL_VALUE:
      return "null";
  }
  return "unknown";
}

std::string Minify(simdjson::dom::element element) { return simdjson::minify(element); }

size_t JsonDepth(simdjson::dom::element element) {
  // simdjson already caps depth at parse time (DEFAULT_MAX_DEPTH = 1024), so recursion here is
  // bounded.
  size_t deepest = 0;
  if (element.is_object()) {
    for (auto field : simdjson::dom::object(element)) {
      deepest = std::max(deepest, 1 + JsonDepth(field.value));
    }
    return std::max<size_t>(deepest, 1);
  }
  if (element.is_array()) {
    for (auto child : simdjson::dom::array(element)) {
      deepest = std::max(deepest, 1 + JsonDepth(child));
    }
    return std::max<size_t>(deepest, 1);
  }
  return 0;
}

}  // namespace dcm
