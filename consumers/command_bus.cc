#include "consumers/command_bus.h"

#include "events/event_limits.h"
#include "src/common/log.h"

namespace dcm {

KafkaCommandBus::KafkaCommandBus(Producer* producer, OutcomeWaiters* waiters,
                                 std::string requests_topic, std::string outcomes_topic,
                                 WriteLimits limits, const Clock* clock, Metrics* metrics,
                                 int32_t partitions)
    : producer_(producer),
      waiters_(waiters),
      requests_topic_(std::move(requests_topic)),
      outcomes_topic_(std::move(outcomes_topic)),
      limits_(std::move(limits)),
      clock_(clock),
      metrics_(metrics),
      partitions_(partitions),
      watch_(limits_.write_timeout, limits_.bound_outcome) {
  reaper_ = std::thread([this] {
    while (running_.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      Reap();
    }
  });
}

KafkaCommandBus::~KafkaCommandBus() {
  running_ = false;
  if (reaper_.joinable()) reaper_.join();
  waiters_->Expire(INT64_MAX);
}

void KafkaCommandBus::Reap() {
  const int64_t now = clock_->NowMillis();
  if (watch_.Pending() > 0) {
    const bool kafka_ok = !limits_.kafka_ok || limits_.kafka_ok();  // on demand: cheap
    for (auto& [id, error] : watch_.Due(now, kafka_ok)) waiters_->Fail(id, std::move(error));
  }
  waiters_->Expire(now);
}

void KafkaCommandBus::Submit(const CloudEvent& request, Done done) {
  std::string value = EncodeCloudEvent(request);
  if (value.size() + request.subject.size() > kMaxRequestEventBytes) {
    done(MakeError(ErrorCode::kPayloadTooLarge,
                   "the request's event would be " + std::to_string(value.size()) +
                       " bytes; the limit is " + std::to_string(kMaxRequestEventBytes)));
    return;
  }
  const auto started = clock_->Now();
  auto& latency = metrics_->GetHistogram("dcm_command_duration_seconds",
                                         "Request produced to outcome applied locally");
  watch_.Submitted(request.id, clock_->NowMillis());
  waiters_->Expect(request.id, clock_->NowMillis() + limits_.decision_timeout.count(),
                   [done = std::move(done), started, &latency, clock = clock_, watch = &watch_,
                    id = request.id](Result<CloudEvent> outcome) {
                     watch->Done(id);
                     latency.Observe(std::chrono::duration<double>(clock->Now() - started).count());
                     done(std::move(outcome));
                   });
  producer_->Produce(
      requests_topic_, request.subject, value, {},
      [waiters = waiters_, watch = &watch_, id = request.id](Result<KafkaPosition> result) {
        if (result) {
          watch->Acked(id);
        } else if (result.error().code == ErrorCode::kPayloadTooLarge) {
          waiters->Fail(id, result.error());
        } else {
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
