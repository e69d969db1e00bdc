#include "consumers/dead_letter.h"

#include "events/event_limits.h"
#include "src/common/json_writer.h"
#include "src/common/log.h"
#include "src/common/reply_summary.h"

namespace dcm {
namespace {

std::string Cut(const std::string& text, size_t max_bytes) {
  return text.size() <= max_bytes ? text : SanitizeText(text, max_bytes);
}

// A record too large to copy: where it was and what it started with.
std::string Envelope(const KafkaMessage& m, const std::string& consumer,
                     const std::string& reason) {
  JsonWriter w;
  w.BeginObject();
  w.Field("dead_letter", "truncated");
  w.Field("topic", m.topic);
  w.Field("partition", static_cast<int64_t>(m.partition));
  w.Field("offset", m.offset);
  w.Field("size", static_cast<int64_t>(m.value.size()));
  w.Field("key_size", static_cast<int64_t>(m.key.size()));
  w.Field("consumer", consumer);
  w.Field("reason", reason);
  w.Field("head", std::string_view(m.value).substr(0, kDeadLetterHeadBytes));
  w.EndObject();
  return w.Take();
}

}  // namespace

DeadLetterRecord MakeDeadLetter(const KafkaMessage& message, const std::string& consumer,
                                const std::string& reason) {
  DeadLetterRecord out;
  const std::string why = Cut(reason, kDeadLetterReasonMaxBytes);
  out.truncated = message.key.size() + message.value.size() > kMaxEventBytes;
  out.key = out.truncated ? Cut(message.key, kDeadLetterKeyMaxBytes) : message.key;
  out.value = out.truncated ? Envelope(message, consumer, why) : message.value;
  out.headers = {{"dcm-dlq-topic", message.topic},
                 {"dcm-dlq-partition", std::to_string(message.partition)},
                 {"dcm-dlq-offset", std::to_string(message.offset)},
                 {"dcm-dlq-consumer", consumer},
                 {"dcm-dlq-reason", why},
                 {"dcm-dlq-size", std::to_string(message.value.size())}};
  if (out.truncated) out.headers.emplace_back("dcm-dlq-truncated", "true");
  return out;
}

Result<CloudEvent> DecodeRequestRecord(const KafkaMessage& message) {
  if (message.value.size() > kMaxRequestEventBytes) {
    return MakeError(ErrorCode::kPayloadTooLarge,
                     "request record of " + std::to_string(message.value.size()) +
                         " bytes exceeds the request limit of " +
                         std::to_string(kMaxRequestEventBytes) + " bytes");
  }
  return DecodeCloudEvent(message.value);
}

std::future<Status> DeadLetter(Producer& producer, const std::string& dead_letter_topic,
                               const KafkaMessage& message, const std::string& consumer,
                               const std::string& reason, Metrics* metrics) {
  static auto logger = Logger("dead-letter");
  DeadLetterRecord record = MakeDeadLetter(message, consumer, reason);
  logger->warn(
      "msg=\"poison record dead-lettered\" consumer={} topic={} partition={} offset={} size={} "
      "truncated={} reason=\"{}\"",
      consumer, message.topic, message.partition, message.offset, message.value.size(),
      record.truncated, record.headers[4].second);
  if (metrics) {
    metrics
        ->GetCounter("dcm_dead_letters_total", "Records sent to the dead-letter topic",
                     "consumer=\"" + consumer + "\"")
        .Inc();
  }
  return producer.ProduceAcked(dead_letter_topic, record.key, record.value, record.headers);
}

}  // namespace dcm
