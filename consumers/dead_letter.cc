#include "consumers/dead_letter.h"

#include "src/common/log.h"

namespace dcm {

std::shared_ptr<std::promise<Status>> DeadLetter(Producer& producer,
                                                 const std::string& dead_letter_topic,
                                                 const KafkaMessage& message,
                                                 const std::string& consumer,
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
  auto promise = std::make_shared<std::promise<Status>>();
  producer.Produce(dead_letter_topic, message.key, message.value,
                   {{"dcm-dlq-topic", message.topic},
                    {"dcm-dlq-partition", std::to_string(message.partition)},
                    {"dcm-dlq-offset", std::to_string(message.offset)},
                    {"dcm-dlq-consumer", consumer},
                    {"dcm-dlq-reason", reason}},
                   [promise](Result<KafkaPosition> result) {
                     if (result) {
                       promise->set_value(OkStatus());
                     } else {
                       promise->set_value(tl::unexpected(result.error()));
                     }
                   });
  return promise;
}

}  // namespace dcm
