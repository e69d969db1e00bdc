// KafkaMonitor: whether Kafka answers, for /readyz (the check `kafka`) and for writes waiting on
// it (SPEC §7 "Kafka unreachable or stalled").
//
//   every --kafka-probe-interval: ask a broker for metadata (bounded) ──▶ probe ok / failed
//   on demand: the oldest produce still unacknowledged, over the watched producers
//   verdict (JudgeKafka): not ok when the last probe failed, or a produce has waited longer than
//   `stall_after`; ok again as soon as both clear (nothing to reset by hand)
//
// A stopped broker (SIGSTOP, a hung disk) keeps its TCP connections open, so librdkafka reports
// no error for a long time: both signals are timeouts, not connection errors. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "consumers/kafka.h"
#include "src/common/metrics.h"

namespace dcm {

struct KafkaMonitorOptions {
  std::chrono::milliseconds stall_after{2500};     // a produce unacknowledged this long: stalled
  std::chrono::milliseconds probe_interval{2000};  // between metadata probes
  std::chrono::milliseconds probe_timeout{3000};   // a probe's bound
};

// What the monitor saw.
struct KafkaSignals {
  std::optional<int64_t> oldest_unacked_ms;  // when the oldest pending produce was queued
  bool probe_failed = false;                 // the last metadata probe
  std::string probe_error;
};

struct KafkaVerdict {
  bool ok = true;
  std::string reason;  // why not ok ("" when ok)
};

// Pure: Kafka is ok unless the last probe failed or a produce is older than `stall_after`.
KafkaVerdict JudgeKafka(const KafkaSignals& signals, int64_t now_ms,
                        std::chrono::milliseconds stall_after);

class KafkaMonitor {
 public:
  // `producers` are watched for stalled produces; the first one also sends the probes.
  KafkaMonitor(std::vector<const Producer*> producers, KafkaMonitorOptions options,
               Metrics* metrics);
  ~KafkaMonitor();

  void Start();
  void Stop();
  KafkaVerdict Verdict() const;
  bool Ok() const { return Verdict().ok; }

 private:
  void Run();
  KafkaSignals Signals() const;

  std::vector<const Producer*> producers_;
  KafkaMonitorOptions options_;
  Gauge* up_gauge_ = nullptr;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool probe_failed_ = false;  // guarded by mu_
  std::string probe_error_;    // guarded by mu_
  bool running_ = false;       // guarded by mu_
  std::thread thread_;
};

}  // namespace dcm
