// LocalDeliveries: wakes the consumers of this process that paused while idle when a producer of
// this process has a message acknowledged on one of their topics.
//
// Why: librdkafka's mock cluster answers an empty fetch only after the whole fetch.wait.max.ms
// and never early when data arrives, so `dcm serve` polls it every few milliseconds, and each
// idle consumer costs the mock and its client ~200 empty fetches a second, ~76 µs of CPU each
// (BENCHMARKS.md, issue #16, session 24). Against the mock, an assigned consumer that found
// nothing for a while unassigns its partitions, keeping its positions (Consumer,
// KafkaOptions::idle_pause_ms), and sleeps here until a local producer delivers to one of its
// topics or the pause ends.
//
//   Producer delivery report ── Delivered(topic) ──▶ sleepers on `topic` woken
//   Consumer idle ── Register(topics) ── unassign ── Wait(id, deadline) ── Unregister ── assign
//
// Thread-safe. Delivered() costs one atomic load while nobody sleeps.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace dcm {

class LocalDeliveries {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  // The one of this process (every Producer reports to it).
  static LocalDeliveries& Instance();

  // A message was acknowledged on `topic`.
  void Delivered(std::string_view topic);
  // A sleeper on `topics`: a delivery to one of them from now on ends its next Wait at once.
  uint64_t Register(std::vector<std::string> topics);
  // Blocks until a delivery to one of the sleeper's topics (true; the flag is then cleared) or
  // `deadline` (false).
  bool Wait(uint64_t id, TimePoint deadline);
  void Unregister(uint64_t id);

 private:
  struct Sleeper {
    std::vector<std::string> topics;
    bool woken = false;
  };
  std::atomic<size_t> sleeping_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, Sleeper> sleepers_;
};

}  // namespace dcm
