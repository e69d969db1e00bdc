// Dead letters: a record no decoder can read (a "poison event") goes to the dead-letter topic
// with headers naming where it came from and why, and is counted in dcm_dead_letters_total. The
// consumer then moves past it: one bad record never stops a fold (SPEC §5.5, §7).
//
//   poison record ─▶ key + value ≤ kMaxEventBytes? ─yes─▶ copied byte for byte
//                                                  └no──▶ a JSON envelope: its topic, partition,
//                                                         offset, sizes and first 4 KiB
//
// So poison of any size (even larger than the producer's message.max.bytes) ends in the topic
// (events/event_limits.h). Headers on every dead letter: dcm-dlq-topic, -partition, -offset,
// -consumer, -reason, -size (the original value's bytes), and dcm-dlq-truncated: true on an
// envelope. Operators inspect the topic with `dcm events --topic dcm.dead-letter` or
// `kcat -C -t dcm.dead-letter -J`.
#pragma once

#include <future>
#include <string>
#include <utility>
#include <vector>

#include "consumers/kafka.h"
#include "events/cloud_event.h"
#include "src/common/metrics.h"

namespace dcm {

// What is produced for one poison record.
struct DeadLetterRecord {
  std::string key;
  std::string value;
  std::vector<std::pair<std::string, std::string>> headers;
  bool truncated = false;  // value is the envelope, not the record
};

// The dead letter of `message` (pure: no Kafka).
DeadLetterRecord MakeDeadLetter(const KafkaMessage& message, const std::string& consumer,
                                const std::string& reason);

// A request topic record's CloudEvent, as the deciders (registrar, instance worker) read it: one
// over kMaxRequestEventBytes is kPayloadTooLarge without being parsed, so it is dead-lettered
// instead of decided and no outcome outgrows kMaxEventBytes.
Result<CloudEvent> DecodeRequestRecord(const KafkaMessage& message);

// Produces the dead letter; the returned future resolves when it is acknowledged, so the caller
// commits its offset only after the record is safe.
std::future<Status> DeadLetter(Producer& producer, const std::string& dead_letter_topic,
                               const KafkaMessage& message, const std::string& consumer,
                               const std::string& reason, Metrics* metrics);

}  // namespace dcm
