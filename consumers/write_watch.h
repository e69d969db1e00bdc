// WriteWatch: the writes of one command bus that still wait on Kafka, and which of them must
// answer 503 now (SPEC §7: "writes answer 503 with Retry-After within --write-timeout").
//
//   Submitted(id) ─▶ request not acknowledged by Kafka `write_timeout` after ─▶ Due: 503
//        │
//        └─ Acked(id) ─▶ waits for its outcome (up to the bus's decision timeout), unless Kafka
//                        is stalled (KafkaMonitor) once `write_timeout` passed ─▶ Due: 503
//   Done(id): answered (outcome, error or timeout); forgotten.
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
  explicit WriteWatch(std::chrono::milliseconds write_timeout) : write_timeout_(write_timeout) {}

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
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> pending_;
};

}  // namespace dcm
