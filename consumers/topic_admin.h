// Topic set-up on start (SPEC §4): the project's topics with their intended partition counts.
// Real brokers: missing topics are created through the Admin API (cleanup.policy=delete, infinite
// retention: event topics are never compacted). The embedded mock has no Admin API; MockCluster
// creates them instead, and `dcm serve` against a `dcm dev-kafka` finds them already there.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "consumers/kafka.h"
#include "src/common/config.h"
#include "src/common/result.h"

namespace dcm {

struct TopicSpec {
  std::string name;
  int partitions = 1;
  // `retention.ms` when created through the Admin API: -1 = forever (every event topic but the
  // probes topic, whose retention is HEALTH_EVENTS_RETENTION). An existing topic keeps its own
  // setting (change it with kafka-configs --alter). The mock ignores it (it keeps ~5 MiB per
  // partition).
  int64_t retention_ms = -1;
  bool operator==(const TopicSpec&) const = default;
};

// The topics this build uses, from the config's prefix and partition count (`--partitions` is
// the count of the topics whose partitions split work or that SPs write: dcm.status, dcm.health,
// dcm.instance-requests, dcm.instances; the provider topics have one).
std::vector<TopicSpec> ProjectTopics(const Config& config);

// Creates the missing topics, then checks the one-partition rule of dcm.provider-requests:
// a decider needs total order, so a topic with more partitions (say, auto-created by a broker)
// is a fatal startup error with a clear message.
Status EnsureTopics(const KafkaOptions& options, const std::vector<TopicSpec>& topics,
                    const std::string& requests_topic, int replication_factor);

}  // namespace dcm
