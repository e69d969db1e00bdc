// WriteWatch: the writes of one command bus still waiting, and which of them must answer 503 now
// (SPEC §7: "writes answer 503 with Retry-After within --write-timeout").
//
//   Submitted(id) ─▶ Acked(id) (Kafka has the request) ─▶ Done(id) (answered: outcome, error)
//   Due(now): the writes submitted `write_timeout` ago and not answered whose request Kafka did
//   not acknowledge, or while Kafka is stalled (KafkaMonitor), or — when the whole write is
//   bounded (`bound_outcome`: provider writes) — whose outcome did not come (a decider failing
//   over, e.g. after the broker came back and the group rebalanced). Without it (instance writes,
//   whose sagas call SPs) an acknowledged write waits for its outcome while Kafka answers.
//
// A write answered 503 may still take effect later (its request may be on the topic): it is then
// decided once, and a retry by the client is idempotent (a re-registration of the same name
// keeps its id). Pure (times are given); thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "src/common/result.h"

namespace dcm {

class WriteWatch {
 public:
  WriteWatch(std::chrono::milliseconds write_timeout, bool bound_outcome)
      : write_timeout_(write_timeout), bound_outcome_(bound_outcome) {}

  void Submitted(const std::string& id, int64_t now_ms);
  void Acked(const std::string& id);
  void Done(const std::string& id);
  // The writes to fail now (kUnavailable, saying why), forgotten here.
  std::vector<std::pair<std::string, Error>> Due(int64_t now_ms, bool kafka_ok);
  size_t Pending() const;

 private:
  struct Entry {
    int64_t submitted_ms;
    bool acked;
  };
  const std::chrono::milliseconds write_timeout_;
  const bool bound_outcome_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> pending_;
};

}  // namespace dcm
