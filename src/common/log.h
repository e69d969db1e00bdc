// Structured logs: one logfmt line per event on stderr,
//   ts=2026-01-01T00:00:00.000Z level=info component=registrar msg="..." key=value ...
// Components get their own named logger (`Logger("registrar")`). Thread-safe (spdlog's mt sinks).
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string>

namespace dcm {

// Sets the global level ("debug", "info", "warn", "error") and the logfmt pattern. Call once
// from main before starting threads.
void InitLogging(const std::string& level);

std::shared_ptr<spdlog::logger> Logger(const std::string& component);

}  // namespace dcm
