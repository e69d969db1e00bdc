// What kafka.cc (the producer) and kafka_consumer.cc share: librdkafka configuration, logging,
// partition lists and record copies. Includes rdkafka.h: only for those two files.
#pragma once

#include <librdkafka/rdkafka.h>

#include <map>
#include <string>

#include "consumers/kafka.h"

namespace dcm::kafka_internal {

using PartitionOffsets = std::map<std::string, std::map<int32_t, int64_t>>;

// A librdkafka configuration of `options` plus `settings` (options.extra last).
Result<rd_kafka_conf_t*> NewConf(const KafkaOptions& options,
                                 const std::map<std::string, std::string>& settings);
void LogCallback(const rd_kafka_t*, int level, const char* fac, const char* buf);
// A librdkafka partition list of topic -> partition -> offset (the caller destroys it).
rd_kafka_topic_partition_list_t* NewPartitionList(const PartitionOffsets& offsets);
// Our copy of a record librdkafka fetched or acknowledged, with `timestamp_ms` as its time.
KafkaMessage ToKafkaMessage(const rd_kafka_message_t* m, int64_t timestamp_ms);

}  // namespace dcm::kafka_internal
