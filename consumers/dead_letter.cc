#include "consumers/dead_letter.h"

#include "src/common/log.h"

namespace dcm {

std::future<Status> DeadLetter(Producer& producer, const std::string& dead_letter_topic,
                               const KafkaMessage& message, const std::string& consumer,
                               const std::string& reason, Metrics* metrics) {
  static auto logger = Logger("dead-letter");
  logger->warn(
      "msg=\"poison record dead-lettered\" consumer={} topic={} partition={} offset={} "
      "reason=\"{}\"",
      consumer, message.topic, message.partition, message.offset, reason);
  if (metrics) {
    metrics
        ->GetCounter("dcm_dead_letters_total", "Records sent to the dead-letter topic",
                     "consumer=\"" + consumer + "\"")
        .Inc();
  }
  return producer.ProduceAcked(dead_letter_topic, message.key, message.value,
                               {{"dcm-dlq-topic", message.topic},
                                {"dcm-dlq-partition", std::to_string(message.partition)},
                                {"dcm-dlq-offset", std::to_string(message.offset)},
                                {"dcm-dlq-consumer", consumer},
                                {"dcm-dlq-reason", reason}});
}

}  // namespace dcm
