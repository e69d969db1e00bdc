#include "consumers/command_bus.h"

#include <memory>
#include <mutex>
#include <optional>

#include "src/common/log.h"

namespace dcm {
namespace {

Error Unacknowledged(const Error& error) {
  return Error{
      ErrorCode::kUnavailable, "Kafka did not acknowledge the request: " + error.message, {}};
}

// One write in flight with a read barrier: its request's delivery report and its outcome, in
// whichever order they come. The outcome is answered once the report came too, so the request's
// position is acknowledged before the answer (the report nearly always comes first: the outcome
// is decided from the request the broker appended).
struct InFlight {
  std::mutex mu;
  bool delivered = false;
  std::optional<CloudEvent> outcome;  // applied before the report came
  CommandBus::Done done;
};

}  // namespace

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
  Done answer = [done = std::move(done), started, &latency,
                 clock = clock_](Result<CloudEvent> outcome) {
    latency.Observe(std::chrono::duration<double>(clock->Now() - started).count());
    done(std::move(outcome));
  };
  const int32_t partition =
      partitions_ > 0 ? KeyPartition(request.subject, partitions_) : Producer::kAnyPartition;
  if (!barrier_) {
    waiters_->Expect(request.id, clock_->NowMillis() + timeout_.count(), std::move(answer));
    producer_->Produce(
        requests_topic_, request.subject, EncodeCloudEvent(request), {},
        [waiters = waiters_, id = request.id](Result<KafkaPosition> result) {
          if (!result) waiters->Fail(id, Unacknowledged(result.error()));
        },
        partition);
    return;
  }
  auto flight = std::make_shared<InFlight>();
  flight->done = std::move(answer);
  waiters_->ExpectPositioned(request.id, clock_->NowMillis() + timeout_.count(),
                             [flight, barrier = barrier_, topic = &outcomes_topic_](
                                 Result<CloudEvent> outcome, OutcomePosition at) {
                               if (outcome && at.partition >= 0)
                                 barrier->Acknowledge(*topic, at.partition, at.offset + 1);
                               {
                                 std::lock_guard lock(flight->mu);
                                 if (outcome && !flight->delivered) {
                                   flight->outcome = std::move(*outcome);
                                   return;
                                 }
                               }
                               flight->done(std::move(outcome));
                             });
  producer_->Produce(
      requests_topic_, request.subject, EncodeCloudEvent(request), {},
      [flight, barrier = barrier_, topic = &requests_topic_, waiters = waiters_,
       id = request.id](Result<KafkaPosition> result) {
        if (result) barrier->Acknowledge(*topic, result->partition, result->offset + 1);
        std::optional<CloudEvent> outcome;
        {
          std::lock_guard lock(flight->mu);
          flight->delivered = true;
          outcome.swap(flight->outcome);
        }
        if (outcome) return flight->done(std::move(*outcome));
        if (!result) waiters->Fail(id, Unacknowledged(result.error()));
      },
      partition);
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
