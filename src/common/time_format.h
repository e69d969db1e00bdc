// RFC 3339 timestamps as CloudEvents and the HTTP API use them: UTC with milliseconds,
// "2026-01-01T00:00:00.000Z".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dcm {

std::string FormatRfc3339Millis(int64_t unix_millis);

// Accepts "Z" or "+hh:mm"/"-hh:mm" offsets and 0–9 fractional digits. Returns unix millis.
std::optional<int64_t> ParseRfc3339(std::string_view text);

}  // namespace dcm
