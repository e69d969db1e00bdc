#include "src/common/log.h"

#include <spdlog/sinks/stdout_sinks.h>

namespace dcm {
namespace {
constexpr const char* kPattern = "ts=%Y-%m-%dT%H:%M:%S.%eZ level=%l component=%n %v";
}

void InitLogging(const std::string& level) {
  spdlog::set_level(spdlog::level::from_str(level));
  spdlog::set_pattern(kPattern, spdlog::pattern_time_type::utc);
}

std::shared_ptr<spdlog::logger> Logger(const std::string& component) {
  if (auto existing = spdlog::get(component)) return existing;
  std::shared_ptr<spdlog::logger> logger;
  try {
    logger = spdlog::stderr_logger_mt(component);
  } catch (const spdlog::spdlog_ex&) {  // another thread registered it first
    return spdlog::get(component);
  }
  logger->set_pattern(kPattern, spdlog::pattern_time_type::utc);
  logger->set_level(spdlog::get_level());
  return logger;
}

}  // namespace dcm
