// KafkaCommandBus: CommandBus over Kafka. Submit registers a waiter, produces the request
// (acks=all) and lets the registry runner complete the waiter when the outcome is applied here.
// A reaper thread (every 50 ms) fails waiters past their deadline, and writes Kafka holds up
// (WriteWatch: 503 within the write timeout). A request event over kMaxRequestEventBytes is
// refused at once (kPayloadTooLarge, 413) and nothing is produced. With a read barrier, an
// outcome is answered only once the barrier holds the request's and the outcome's positions as
// acknowledged, so every later read on this instance reflects both (SPEC §7,
// projections/read_barrier.h). Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "consumers/kafka.h"
#include "consumers/write_watch.h"
#include "events/command_bus.h"
#include "projections/outcome_waiters.h"
#include "projections/read_barrier.h"
#include "src/common/clock.h"
#include "src/common/metrics.h"

namespace dcm {

// How long writes wait, and on what.
// How long a write waits (WriteWatch): 503 + Retry-After once `write_timeout` passed without
// Kafka's acknowledgement, or while Kafka is stalled, or (`bound_outcome`) at all; else the
// outcome may take up to `decision_timeout`.
struct WriteLimits {
  std::chrono::milliseconds decision_timeout{10000};  // the wait for the outcome (kTimeout)
  std::chrono::milliseconds write_timeout{5000};
  std::function<bool()> kafka_ok = {};  // KafkaMonitor::Ok; null: always
  bool bound_outcome = true;            // provider writes: the whole write within write_timeout
};

class KafkaCommandBus final : public CommandBus {
 public:
  KafkaCommandBus(Producer* producer, OutcomeWaiters* waiters, std::string requests_topic,
                  std::string outcomes_topic, WriteLimits limits, const Clock* clock,
                  Metrics* metrics, int32_t partitions = 0);
  ~KafkaCommandBus() override;

  void Submit(const CloudEvent& request, Done done) override;
  void Record(const CloudEvent& outcome) override;

  // Acknowledges the positions of successful writes to `barrier` (null: none). Call before the
  // first Submit.
  void TrackAcknowledged(ReadBarrier* barrier) { barrier_ = barrier; }

 private:
  void Reap();
  // Submit with a read barrier: answers once the request's and the outcome's positions are
  // acknowledged (see above).
  void SubmitTracked(const CloudEvent& request, std::string value, int32_t partition,
                     int64_t deadline, Done answer);

  Producer* producer_;
  OutcomeWaiters* waiters_;
  std::string requests_topic_;
  std::string outcomes_topic_;
  WriteLimits limits_;
  const Clock* clock_;
  Metrics* metrics_;
  // > 0: requests go to KeyPartition(subject, partitions) (the worker that owns the subject's
  // partition decides it); 0: the producer's partitioner picks.
  int32_t partitions_;
  ReadBarrier* barrier_ = nullptr;
  WriteWatch watch_;
  std::atomic<bool> running_{true};
  std::thread reaper_;
};

}  // namespace dcm
