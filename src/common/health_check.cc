#include "src/common/health_check.h"

#include <array>
#include <utility>

namespace dcm {
namespace {

constexpr std::array<std::pair<ProbeFailure, std::string_view>, 9> kNames = {{
    {ProbeFailure::kNone, ""},
    {ProbeFailure::kTimeout, "timeout"},
    {ProbeFailure::kConnect, "connect"},
    {ProbeFailure::kDns, "dns"},
    {ProbeFailure::kTls, "tls"},
    {ProbeFailure::kBlocked, "blocked"},
    {ProbeFailure::kHttpStatus, "http_status"},
    {ProbeFailure::kBadBody, "bad_body"},
    {ProbeFailure::kReportedUnhealthy, "reported_unhealthy"},
}};

}  // namespace

std::string_view ProbeFailureName(ProbeFailure failure) {
  for (const auto& [f, name] : kNames) {
    if (f == failure) return name;
  }
  return "";
}

std::optional<ProbeFailure> ParseProbeFailure(std::string_view name) {
  for (const auto& [f, n] : kNames) {
    if (n == name) return f;
  }
  return std::nullopt;
}

}  // namespace dcm
