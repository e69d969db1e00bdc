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
    if (!late || (it->second.acked && kafka_ok && !bound_outcome_)) {
      ++it;
      continue;
    }
    const std::string limit =
        fmt::format("{:g}s", static_cast<double>(write_timeout_.count()) / 1000);
    std::string why = !it->second.acked ? "Kafka did not acknowledge the request within " + limit
                      : !kafka_ok
                          ? "Kafka is unreachable or stalled; no outcome within " + limit
                          : "no outcome within " + limit + " (the decider may be failing over)";
    due.emplace_back(it->first,
                     Error{ErrorCode::kUnavailable,
                           why + "; the request may still take effect, and a retry is safe",
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
