#include "consumers/event_reader.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "src/common/time_format.h"

namespace dcm {

struct EventReader::PartitionPlan {
  std::string topic;
  int32_t partition = 0;
  int64_t low = 0;
  int64_t high = 0;  // the end without follow (exclusive), taken at plan time
  int64_t start = 0;
  bool done = false;
};

void SortByEventTime(std::vector<ReadEvent>& events) {
  std::stable_sort(events.begin(), events.end(), [](const ReadEvent& a, const ReadEvent& b) {
    return std::tie(a.time_ms, a.topic, a.partition, a.offset) <
           std::tie(b.time_ms, b.topic, b.partition, b.offset);
  });
}

Result<std::unique_ptr<EventReader>> EventReader::Create(const KafkaOptions& kafka,
                                                         EventReaderOptions options) {
  if (options.topics.empty()) return MakeError(ErrorCode::kInvalidArgument, "no topics to read");
  if (options.since_ms && options.until_ms && *options.until_ms < *options.since_ms) {
    return MakeError(ErrorCode::kInvalidArgument, "until is before since");
  }
  ASSIGN_OR_RETURN(auto consumer, Consumer::Create(kafka, /*group_id=*/""));
  return std::unique_ptr<EventReader>(new EventReader(std::move(options), std::move(consumer)));
}

EventReader::EventReader(EventReaderOptions options, std::unique_ptr<Consumer> consumer)
    : options_(std::move(options)), consumer_(std::move(consumer)) {}

EventReader::~EventReader() = default;

Status EventReader::PlanTopic(const std::string& topic, std::vector<PartitionPlan>* plans) {
  ASSIGN_OR_RETURN(const int count,
                   TopicPartitionCount(consumer_->handle(), topic, options_.query_timeout_ms));
  if (count == 0) {
    stats_.missing_topics.push_back(topic);
    return OkStatus();
  }
  std::vector<PartitionPlan> topic_plans;
  for (int32_t p = 0; p < count; ++p) {
    ASSIGN_OR_RETURN(const auto marks,
                     consumer_->QueryWatermarks(topic, p, options_.query_timeout_ms));
    topic_plans.push_back({topic, p, marks.first, marks.second, marks.first, false});
  }
  if (options_.since_ms) RETURN_IF_ERROR(PlanSince(topic, &topic_plans));
  for (auto& plan : topic_plans) {
    if (options_.follow || plan.start < plan.high) plans->push_back(std::move(plan));
  }
  return OkStatus();
}

// Skips ahead with offsets-for-times where the broker can answer. It answers -1 both for "every
// record is older" (a real broker) and for "I cannot tell" (the mock); a second query at time 0
// tells them apart: a broker that can answer names the first offset, the mock -1 again.
Status EventReader::PlanSince(const std::string& topic, std::vector<PartitionPlan>* plans) {
  std::map<int32_t, int64_t> at_since, at_zero;
  for (const auto& plan : *plans) {
    if (plan.low >= plan.high) continue;
    at_since[plan.partition] = *options_.since_ms - options_.clock_margin.count();
    at_zero[plan.partition] = 0;
  }
  if (at_since.empty()) return OkStatus();
  auto found = consumer_->OffsetsForTimes(topic, at_since, options_.query_timeout_ms);
  std::map<int32_t, int64_t> first;
  if (found) {
    bool any_unanswered = false;
    for (const auto& [p, offset] : *found) any_unanswered |= offset < 0;
    if (any_unanswered) {
      auto probed = consumer_->OffsetsForTimes(topic, at_zero, options_.query_timeout_ms);
      if (probed) first = *probed;
    }
  } else {
    stats_.warnings.push_back("offsets-for-times failed on " + topic + " (" +
                              found.error().message + "); scanning instead");
  }
  for (auto& plan : *plans) {
    if (plan.low >= plan.high) continue;
    const std::string name = topic + "/" + std::to_string(plan.partition);
    int64_t offset = -1;
    if (found) {
      if (auto it = found->find(plan.partition); it != found->end()) offset = it->second;
    }
    if (offset >= 0) {
      plan.start = std::clamp(offset, plan.low, plan.high);
    } else if (auto it = first.find(plan.partition); it != first.end() && it->second >= 0) {
      plan.start = plan.high;  // the broker answers, and every record is older
    } else {
      plan.start = plan.low;  // the broker cannot answer: scan, filtering on event time
      stats_.scanned_partitions.push_back(name);
    }
  }
  return OkStatus();
}

Result<std::vector<EventReader::PartitionPlan>> EventReader::Plan() {
  std::vector<PartitionPlan> plans;
  for (const auto& topic : options_.topics) RETURN_IF_ERROR(PlanTopic(topic, &plans));
  return plans;
}

void EventReader::Handle(KafkaMessage message, PartitionPlan* plan, const OnEvent& on_event) {
  ++stats_.records;
  auto decoded = DecodeCloudEvent(message.value);
  if (!decoded) {
    ++stats_.poison;
    if (stats_.poison_samples.size() < kMaxPoisonSamples) {
      stats_.poison_samples.push_back(plan->topic + "/" + std::to_string(plan->partition) + "@" +
                                      std::to_string(message.offset) + ": " +
                                      decoded.error().message);
    }
    return;
  }
  const int64_t time_ms = ParseRfc3339(decoded->time).value_or(message.timestamp_ms);
  if (options_.since_ms && time_ms < *options_.since_ms) {
    ++stats_.skipped_before_since;
    return;
  }
  if (options_.until_ms && time_ms > *options_.until_ms) {
    ++stats_.skipped_after_until;
    return;
  }
  if ((!options_.subject.empty() && decoded->subject != options_.subject) ||
      !TypeMatches(options_.type, decoded->type)) {
    ++stats_.filtered;
    return;
  }
  ++stats_.events;
  on_event(ReadEvent{std::move(*decoded), std::move(message.value), plan->topic, plan->partition,
                     message.offset, time_ms, message.timestamp_ms});
}

Status EventReader::Run(const OnEvent& on_event) {
  ASSIGN_OR_RETURN(auto plans, Plan());
  stats_.partitions = plans.size();
  if (plans.empty()) return OkStatus();
  std::map<std::string, std::map<int32_t, int64_t>> starts;
  std::map<std::pair<std::string, int32_t>, PartitionPlan*> by_partition;
  for (auto& plan : plans) {
    starts[plan.topic][plan.partition] = plan.start;
    by_partition[{plan.topic, plan.partition}] = &plan;
  }
  RETURN_IF_ERROR(consumer_->AssignTopics(starts));
  size_t remaining = plans.size();
  auto last_record = std::chrono::steady_clock::now();
  const auto stall = std::chrono::milliseconds(options_.stall_timeout_ms);
  while (!stopping_ && (options_.follow || remaining > 0)) {
    ASSIGN_OR_RETURN(auto batch, consumer_->ConsumeBatch(1000, 200));
    const auto now = std::chrono::steady_clock::now();
    if (batch.empty()) {
      if (!options_.follow && now - last_record > stall) break;
      continue;
    }
    last_record = now;
    for (auto& message : batch) {
      auto it = by_partition.find({message.topic, message.partition});
      if (it == by_partition.end()) continue;
      PartitionPlan* plan = it->second;
      if (plan->done) continue;
      const int64_t offset = message.offset;
      Handle(std::move(message), plan, on_event);
      if (!options_.follow && offset + 1 >= plan->high) {
        plan->done = true;
        --remaining;
      }
    }
  }
  if (!options_.follow && !stopping_) {
    for (const auto& plan : plans) {
      if (plan.done) continue;
      stats_.warnings.push_back(plan.topic + "/" + std::to_string(plan.partition) +
                                ": no record for " + std::to_string(options_.stall_timeout_ms) +
                                " ms before the high watermark " + std::to_string(plan.high) +
                                "; stopped early");
    }
  }
  return OkStatus();
}

}  // namespace dcm
