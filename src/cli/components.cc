#include "src/cli/components.h"

#include "src/common/log.h"

namespace dcm::cli {

Status Components::StartAll() {
  static auto logger = Logger("serve");
  for (; started_ < components_.size(); ++started_) {
    const Component& c = components_[started_];
    if (!c.start) continue;
    if (auto status = c.start(); !status) {
      logger->error("msg=\"component failed to start\" component={} error=\"{}\"", c.name,
                    status.error().message);
      StopAll();
      return status;
    }
    logger->debug("msg=\"component started\" component={}", c.name);
  }
  return OkStatus();
}

void Components::StopAll() {
  for (; started_ > 0; --started_) {
    const Component& c = components_[started_ - 1];
    if (c.stop) c.stop();
  }
}

std::vector<http::ReadinessCheck> Components::Checks() const {
  std::vector<http::ReadinessCheck> checks;
  for (const auto& c : components_) {
    if (c.ready) checks.push_back({c.check.empty() ? c.name : c.check, c.ready, c.detail});
  }
  return checks;
}

}  // namespace dcm::cli
