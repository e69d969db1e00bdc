#include "consumers/kafka_monitor.h"

#include <fmt/format.h>

#include "src/common/log.h"
#include "src/common/thread_name.h"

namespace dcm {

KafkaVerdict JudgeKafka(const KafkaSignals& signals, int64_t now_ms,
                        std::chrono::milliseconds stall_after) {
  if (signals.probe_failed) {
    return {false, "no broker answered a metadata request: " + signals.probe_error};
  }
  if (signals.oldest_unacked_ms && now_ms - *signals.oldest_unacked_ms > stall_after.count()) {
    return {false, fmt::format("a produce has waited {:.1f}s for the broker's acknowledgement",
                               static_cast<double>(now_ms - *signals.oldest_unacked_ms) / 1000)};
  }
  return {};
}

KafkaMonitor::KafkaMonitor(std::vector<const Producer*> producers, KafkaMonitorOptions options,
                           Metrics* metrics)
    : producers_(std::move(producers)), options_(options) {
  if (metrics) {
    up_gauge_ = &metrics->GetGauge("dcm_kafka_up",
                                   "1 while Kafka answers (the /readyz check kafka), else 0");
    up_gauge_->Set(1);
  }
}

KafkaMonitor::~KafkaMonitor() { Stop(); }

void KafkaMonitor::Start() {
  std::lock_guard lock(mu_);
  if (running_ || producers_.empty()) return;
  running_ = true;
  thread_ = NamedThread("kafka-monitor", [this] { Run(); });
}

void KafkaMonitor::Stop() {
  {
    std::lock_guard lock(mu_);
    running_ = false;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

KafkaSignals KafkaMonitor::Signals() const {
  KafkaSignals signals;
  for (const Producer* p : producers_) {
    const auto oldest = p->OldestUnackedMs();
    if (oldest && (!signals.oldest_unacked_ms || *oldest < *signals.oldest_unacked_ms)) {
      signals.oldest_unacked_ms = oldest;
    }
  }
  std::lock_guard lock(mu_);
  signals.probe_failed = probe_failed_;
  signals.probe_error = probe_error_;
  return signals;
}

KafkaVerdict KafkaMonitor::Verdict() const {
  return JudgeKafka(Signals(), SteadyNowMs(), options_.stall_after);
}

void KafkaMonitor::Run() {
  auto logger = Logger("kafka");
  bool was_ok = true;
  std::unique_lock lock(mu_);
  while (running_) {
    lock.unlock();
    const auto probe =
        producers_.front()->ProbeBrokers(static_cast<int>(options_.probe_timeout.count()));
    lock.lock();
    probe_failed_ = !probe;
    probe_error_ = probe ? "" : probe.error().message;
    lock.unlock();
    const KafkaVerdict verdict = Verdict();
    if (verdict.ok != was_ok) {
      if (verdict.ok) {
        logger->info("msg=\"Kafka answers again\"");
      } else {
        logger->warn("msg=\"Kafka unreachable or stalled: writes answer 503\" reason=\"{}\"",
                     verdict.reason);
      }
      was_ok = verdict.ok;
    }
    if (up_gauge_) up_gauge_->Set(verdict.ok ? 1 : 0);
    lock.lock();
    wake_.wait_for(lock, options_.probe_interval, [this] { return !running_; });
  }
}

}  // namespace dcm
