#include "src/auth/json_util.h"

#include <cmath>
#include <limits>
#include <string>

namespace dcm::auth {

std::optional<simdjson::dom::element> FindPath(simdjson::dom::object object,
                                               std::string_view dotted_path) {
  while (true) {
    const size_t dot = dotted_path.find('.');
    auto value = Member(object, dotted_path.substr(0, dot));
    if (!value || dot == std::string_view::npos) return value;
    if (value->get(object)) return std::nullopt;  // an intermediate step is not an object
    dotted_path.remove_prefix(dot + 1);
  }
}

std::optional<int64_t> NumericDateMillis(simdjson::dom::element value) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  int64_t i = 0;
  uint64_t u = 0;
  double d = 0;
  if (!value.get(i)) {
    if (i > kMax / 1000) return kMax;
    if (i < kMin / 1000) return kMin;
    return i * 1000;
  }
  if (!value.get(u)) return kMax;  // only values above INT64_MAX land here
  if (!value.get(d)) {
    const double ms = std::floor(d * 1000.0);
    if (ms >= 9.2e18) return kMax;
    if (ms <= -9.2e18) return kMin;
    return static_cast<int64_t>(ms);
  }
  return std::nullopt;
}

std::string Printable(std::string_view text, size_t max_bytes) {
  std::string out;
  const bool cut = text.size() > max_bytes;
  if (cut) text = text.substr(0, max_bytes);
  out.reserve(text.size() + 3);
  for (unsigned char c : text) {
    const bool plain = c >= 0x20 && c < 0x7F && c != '"' && c != '\\';
    out.push_back(plain ? static_cast<char>(c) : '?');
  }
  if (cut) out += "...";
  return out;
}

}  // namespace dcm::auth
