// Go-style durations as DCM's configuration spells them: "500ms", "10s", "5m", "1h30m".
#pragma once

#include <chrono>
#include <string_view>

#include "src/common/result.h"

namespace dcm {

// Units: ns, us (or µs), ms, s, m, h. A bare "0" is zero. Negative durations are rejected.
Result<std::chrono::milliseconds> ParseGoDuration(std::string_view text);

}  // namespace dcm
