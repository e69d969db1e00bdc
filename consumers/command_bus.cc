#include "consumers/command_bus.h"

#include "src/common/log.h"

namespace dcm {

KafkaCommandBus::KafkaCommandBus(Producer* producer, OutcomeWaiters* waiters,
                                 std::string requests_topic, std::string outcomes_topic,
                                 std::chrono::milliseconds timeout, const Clock* clock,
                                 Metrics* metrics, int32_t partitions)
    : producer_(producer),
      waiters_(waiters),
      requests_topic_(std::move(requests_topic)),
      outcomes_topic_(std::move(outcomes_topic)),
      timeout_(timeout),
      clock_(clock),
      metrics_(metrics),
      partitions_(partitions) {
  reaper_ = std::thread([this] {
    while (running_.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      waiters_->Expire(clock_->NowMillis());
    }
  });
}

KafkaCommandBus::~KafkaCommandBus() {
  running_ = false;
  if (reaper_.joinable()) reaper_.join();
  waiters_->Expire(INT64_MAX);
}

void KafkaCommandBus::Submit(const CloudEvent& request, Done done) {
  const auto started = clock_->Now();
  auto& latency = metrics_->GetHistogram("dcm_command_duration_seconds",
                                         "Request produced to outcome applied locally");
  waiters_->Expect(
      request.id, clock_->NowMillis() + timeout_.count(),
      [done = std::move(done), started, &latency, clock = clock_](Result<CloudEvent> outcome) {
        latency.Observe(std::chrono::duration<double>(clock->Now() - started).count());
        done(std::move(outcome));
      });
  producer_->Produce(
      requests_topic_, request.subject, EncodeCloudEvent(request), {},
      [waiters = waiters_, id = request.id](Result<KafkaPosition> result) {
        if (!result) {
          waiters->Fail(id,
                        Error{ErrorCode::kUnavailable,
                              "Kafka did not acknowledge the request: " + result.error().message,
                              {}});
        }
      },
      partitions_ > 0 ? KeyPartition(request.subject, partitions_) : Producer::kAnyPartition);
}

void KafkaCommandBus::Record(const CloudEvent& outcome) {
  producer_->Produce(
      outcomes_topic_, outcome.subject, EncodeCloudEvent(outcome), {},
      [metrics = metrics_](Result<KafkaPosition> result) {
        if (!result) {
          Logger("command-bus")
              ->warn("msg=\"could not record outcome\" error=\"{}\"", result.error().message);
          metrics
              ->GetCounter("dcm_record_failures_total", "Edge outcomes that could not be recorded")
              .Inc();
        }
      });
}

}  // namespace dcm
