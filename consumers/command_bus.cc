#include "consumers/command_bus.h"

#include <memory>
#include <mutex>
#include <optional>

#include "events/event_limits.h"
#include "src/common/log.h"

namespace dcm {
namespace {

// A produce that failed: too large stays 413, anything else is Kafka's (503).
Error Unacknowledged(const Error& error) {
  if (error.code == ErrorCode::kPayloadTooLarge) return error;
  return Error{
      ErrorCode::kUnavailable, "Kafka did not acknowledge the request: " + error.message, {}};
}

// One write in flight with a read barrier: its request's delivery report and its outcome, in
// whichever order they come. The outcome is answered once the report came too, so the request's
// position is acknowledged before the answer (the report nearly always comes first: the outcome
// is decided from the request the broker appended).
struct PendingWrite {
  std::mutex mu;
  bool delivered = false;
  std::optional<CloudEvent> outcome;  // applied before the report came
  CommandBus::Done done;
};

}  // namespace

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
  Done answer = [done = std::move(done), started, &latency, clock = clock_, watch = &watch_,
                 id = request.id](Result<CloudEvent> outcome) {
    watch->Done(id);
    latency.Observe(std::chrono::duration<double>(clock->Now() - started).count());
    done(std::move(outcome));
  };
  const int32_t partition =
      partitions_ > 0 ? KeyPartition(request.subject, partitions_) : Producer::kAnyPartition;
  const int64_t deadline = clock_->NowMillis() + limits_.decision_timeout.count();
  if (barrier_) {
    return SubmitTracked(request, std::move(value), partition, deadline, std::move(answer));
  }
  waiters_->Expect(request.id, deadline, std::move(answer));
  producer_->Produce(
      requests_topic_, request.subject, std::move(value), {},
      [waiters = waiters_, watch = &watch_, id = request.id](Result<KafkaPosition> result) {
        if (result) {
          watch->Acked(id);
        } else {
          waiters->Fail(id, Unacknowledged(result.error()));
        }
      },
      partition);
}

void KafkaCommandBus::SubmitTracked(const CloudEvent& request, std::string value, int32_t partition,
                                    int64_t deadline, Done answer) {
  auto flight = std::make_shared<PendingWrite>();
  flight->done = std::move(answer);
  waiters_->ExpectPositioned(request.id, deadline,
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
      requests_topic_, request.subject, std::move(value), {},
      [flight, barrier = barrier_, topic = &requests_topic_, waiters = waiters_, watch = &watch_,
       id = request.id](Result<KafkaPosition> result) {
        if (result) {
          watch->Acked(id);
          barrier->Acknowledge(*topic, result->partition, result->offset + 1);
        }
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
