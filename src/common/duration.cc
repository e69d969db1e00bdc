#include "src/common/duration.h"

#include <cctype>
#include <string>

namespace dcm {

Result<std::chrono::milliseconds> ParseGoDuration(std::string_view text) {
  auto bad = [&] {
    return MakeError(ErrorCode::kInvalidArgument,
                     "invalid duration '" + std::string(text) + "' (expected e.g. 500ms, 10s, 5m)");
  };
  if (text == "0") return std::chrono::milliseconds(0);
  if (text.empty()) return bad();
  double total_ns = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t start = pos;
    while (pos < text.size() &&
           (std::isdigit(static_cast<unsigned char>(text[pos])) || text[pos] == '.'))
      ++pos;
    if (start == pos) return bad();
    double value = 0;
    try {
      size_t used = 0;
      value = std::stod(std::string(text.substr(start, pos - start)), &used);
      if (used != pos - start) return bad();  // "1.5.5s": stod stops at the second '.'
    } catch (...) {
      return bad();
    }
    size_t unit_start = pos;
    while (pos < text.size() && !std::isdigit(static_cast<unsigned char>(text[pos])) &&
           text[pos] != '.')
      ++pos;
    std::string_view unit = text.substr(unit_start, pos - unit_start);
    double scale;
    if (unit == "ns")
      scale = 1;
    else if (unit == "us" || unit == "\xC2\xB5s")
      scale = 1e3;
    else if (unit == "ms")
      scale = 1e6;
    else if (unit == "s")
      scale = 1e9;
    else if (unit == "m")
      scale = 60e9;
    else if (unit == "h")
      scale = 3600e9;
    else
      return bad();
    total_ns += value * scale;
  }
  if (total_ns > 1e18) return bad();
  return std::chrono::milliseconds(static_cast<int64_t>(total_ns / 1e6));
}

}  // namespace dcm
