#include "consumers/rebuild_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace dcm::rebuild_detail {
namespace {

// The low and high watermarks of partitions [0, partitions) of `topic`: two ListOffsets requests
// for the whole topic (offsets-for-times with Kafka's special times "earliest" and "latest")
// instead of a round trip per partition (1,152 partitions took 0.2 s of a 6 s rebuild). A
// partition either answer leaves out is asked on its own.
Result<std::vector<std::pair<int64_t, int64_t>>> Watermarks(const Consumer& consumer,
                                                            const std::string& topic,
                                                            int partitions, int timeout_ms) {
  std::map<int32_t, int64_t> earliest, latest;
  for (int32_t p = 0; p < partitions; ++p) {
    earliest[p] = RD_KAFKA_OFFSET_BEGINNING;
    latest[p] = RD_KAFKA_OFFSET_END;
  }
  auto low = consumer.OffsetsForTimes(topic, earliest, timeout_ms);
  auto high = consumer.OffsetsForTimes(topic, latest, timeout_ms);
  std::vector<std::pair<int64_t, int64_t>> marks;
  for (int32_t p = 0; p < partitions; ++p) {
    if (low && high && (*low)[p] >= 0 && (*high)[p] >= (*low)[p]) {
      marks.emplace_back((*low)[p], (*high)[p]);
      continue;
    }
    ASSIGN_OR_RETURN(auto one, consumer.QueryWatermarks(topic, p, timeout_ms));
    marks.push_back(one);
  }
  return marks;
}

// Every topic of the sources once, in first-seen order, with its partitions' watermarks.
Status AddTopics(const std::vector<RebuildSource>& sources, Consumer& consumer, int timeout_ms,
                 Plan& plan, std::vector<std::string>& warnings) {
  for (const auto& source : sources) {
    for (const auto& topic : source.topics) {
      if (std::find(plan.topics.begin(), plan.topics.end(), topic) == plan.topics.end()) {
        plan.topics.push_back(topic);
      }
    }
  }
  plan.ranges.resize(plan.topics.size());
  plan.readers_of_topic.resize(plan.topics.size());
  for (size_t t = 0; t < plan.topics.size(); ++t) {
    const auto& topic = plan.topics[t];
    ASSIGN_OR_RETURN(int partitions, TopicPartitionCount(consumer.handle(), topic, timeout_ms));
    if (partitions == 0) warnings.push_back("topic " + topic + " does not exist: nothing to fold");
    ASSIGN_OR_RETURN(auto marks, Watermarks(consumer, topic, partitions, timeout_ms));
    for (const auto& [low, high] : marks) {
      plan.ranges[t].push_back(PartitionRange{low, high, 0, low});
    }
  }
  return OkStatus();
}

// The source's target on `topic`/`p`: the high watermark unless the source names its targets
// (then a partition it does not name is not read: target 0).
int64_t TargetOf(const RebuildSource& source, const std::string& topic, int32_t p, int64_t high) {
  if (!source.targets) return high;
  const auto by_topic = source.targets->find(topic);
  if (by_topic == source.targets->end()) return 0;
  const auto it = by_topic->second.find(p);
  return it == by_topic->second.end() ? 0 : it->second;
}

void AddReader(const RebuildSource& source, size_t j, int t, Plan& plan,
               std::vector<std::string>& warnings) {
  const auto& topic = plan.topics[t];
  auto& ranges = plan.ranges[t];
  ReaderState reader{j, t, {}, {}, std::vector<char>(ranges.size(), 0)};
  for (int32_t p = 0; p < static_cast<int32_t>(ranges.size()); ++p) {
    int64_t target = TargetOf(source, topic, p, ranges[p].high);
    if (target > ranges[p].high) {
      warnings.push_back(fmt::format(
          "{}/{}: the target offset {} is beyond the end of the log ({}): the rebuild stops "
          "short of it",
          topic, p, target, ranges[p].high));
      target = ranges[p].high;
    }
    reader.target.push_back(target);
    reader.next.push_back(ranges[p].low);
    ranges[p].end = std::max(ranges[p].end, target);
  }
  plan.readers_of_topic[t].push_back(plan.readers.size());
  plan.readers.push_back(std::move(reader));
}

void CountTotals(Plan& plan, std::vector<std::string>& warnings,
                 const std::vector<std::string>& windowed_topics) {
  for (size_t t = 0; t < plan.topics.size(); ++t) {
    const bool windowed = std::find(windowed_topics.begin(), windowed_topics.end(),
                                    plan.topics[t]) != windowed_topics.end();
    for (size_t p = 0; p < plan.ranges[t].size(); ++p) {
      auto& range = plan.ranges[t][p];
      if (range.low > 0 && range.end > 0 && !windowed) {
        warnings.push_back(fmt::format(
            "{}/{}: retention dropped offsets [0, {}): a rebuild cannot reproduce the live state",
            plan.topics[t], p, range.low));
      }
      if (range.end > range.low) {
        plan.total += range.end - range.low;
        ++plan.open_partitions;
      }
    }
  }
}

}  // namespace

Status BuildPlan(const std::vector<RebuildSource>& sources, Consumer& consumer, int timeout_ms,
                 Plan& plan, std::vector<std::string>& warnings,
                 const std::vector<std::string>& windowed_topics) {
  RETURN_IF_ERROR(AddTopics(sources, consumer, timeout_ms, plan, warnings));
  for (size_t j = 0; j < sources.size(); ++j) {
    for (const auto& topic : sources[j].topics) {
      const auto t = std::find(plan.topics.begin(), plan.topics.end(), topic) - plan.topics.begin();
      AddReader(sources[j], j, static_cast<int>(t), plan, warnings);
    }
  }
  CountTotals(plan, warnings, windowed_topics);
  return OkStatus();
}

Status AssignAll(rd_kafka_t* rk, const Plan& plan) {
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(1);
  for (size_t t = 0; t < plan.topics.size(); ++t) {
    for (size_t p = 0; p < plan.ranges[t].size(); ++p) {
      const auto& range = plan.ranges[t][p];
      if (range.end <= range.low) continue;
      rd_kafka_topic_partition_list_add(list, plan.topics[t].c_str(), static_cast<int32_t>(p))
          ->offset = range.low;
    }
  }
  const auto err = rd_kafka_assign(rk, list);
  rd_kafka_topic_partition_list_destroy(list);
  if (err) return tl::unexpected(FromKafka(err, "assign"));
  return OkStatus();
}

Plan Subplan(const Plan& full, const std::vector<size_t>& members) {
  Plan sub;
  sub.topics = full.topics;
  sub.ranges = full.ranges;
  for (auto& by_partition : sub.ranges) {
    for (auto& range : by_partition) range.end = 0;
  }
  sub.readers_of_topic.resize(full.topics.size());
  for (const auto& reader : full.readers) {
    if (std::find(members.begin(), members.end(), reader.projection) == members.end()) continue;
    for (size_t p = 0; p < reader.target.size(); ++p) {
      auto& range = sub.ranges[reader.topic][p];
      range.end = std::max(range.end, reader.target[p]);
    }
    sub.readers_of_topic[reader.topic].push_back(sub.readers.size());
    sub.readers.push_back(reader);
  }
  for (auto& by_partition : sub.ranges) {
    for (auto& range : by_partition) {
      if (range.end > range.low) {
        sub.total += range.end - range.low;
        ++sub.open_partitions;
      }
    }
  }
  return sub;
}

std::vector<std::vector<size_t>> SplitIntoGroups(const Plan& plan,
                                                 const std::vector<RebuildSource>& sources,
                                                 size_t groups) {
  const size_t projections = sources.size();
  std::vector<double> work(projections, 0);
  for (const auto& reader : plan.readers) {
    for (size_t p = 0; p < reader.target.size(); ++p) {
      work[reader.projection] += static_cast<double>(std::max<int64_t>(
                                     0, reader.target[p] - plan.ranges[reader.topic][p].low)) *
                                 sources[reader.projection].fold_cost;
    }
  }
  std::vector<size_t> order(projections);
  for (size_t j = 0; j < projections; ++j) order[j] = j;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return work[a] > work[b]; });
  groups = std::max<size_t>(1, std::min(groups, projections));
  std::vector<std::vector<size_t>> out(groups);
  std::vector<double> load(groups, 0);
  for (size_t j : order) {
    const size_t g = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    out[g].push_back(j);
    load[g] += work[j] + 1;
  }
  return out;
}

}  // namespace dcm::rebuild_detail
