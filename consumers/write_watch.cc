#include "consumers/write_watch.h"

#include <fmt/format.h>

namespace dcm {

void WriteWatch::Submitted(const std::string& id, int64_t now_ms) {
  std::lock_guard lock(mu_);
  pending_[id] = Entry{now_ms, false};
}

void WriteWatch::Acked(const std::string& id) {
  std::lock_guard lock(mu_);
  if (auto it = pending_.find(id); it != pending_.end()) it->second.acked = true;
}

void WriteWatch::Done(const std::string& id) {
  std::lock_guard lock(mu_);
  pending_.erase(id);
}

std::vector<std::pair<std::string, Error>> WriteWatch::Due(int64_t now_ms, bool kafka_ok) {
  std::vector<std::pair<std::string, Error>> due;
  std::lock_guard lock(mu_);
  for (auto it = pending_.begin(); it != pending_.end();) {
    const bool late = now_ms - it->second.submitted_ms >= write_timeout_.count();
    if (!late || (it->second.acked && kafka_ok)) {
      ++it;
      continue;
    }
    const std::string limit =
        fmt::format("{:g}s", static_cast<double>(write_timeout_.count()) / 1000);
    std::string why =
        it->second.acked
            ? "Kafka is unreachable or stalled; the outcome did not arrive within " + limit
            : "Kafka did not acknowledge the request within " + limit;
    due.emplace_back(it->first,
                     Error{ErrorCode::kUnavailable,
                           why + " (it may still take effect once Kafka is back; retry)",
                           {}});
    it = pending_.erase(it);
  }
  return due;
}

size_t WriteWatch::Pending() const {
  std::lock_guard lock(mu_);
  return pending_.size();
}

}  // namespace dcm
