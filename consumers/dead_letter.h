// Dead letters: a record no decoder can read (a "poison event") is copied, bytes untouched, to
// the dead-letter topic with headers naming where it came from and why, and counted in
// dcm_dead_letters_total. The consumer then moves past it: one bad record never stops a fold
// (SPEC §5.5). Operators inspect the topic with `kcat -C -t dcm.dead-letter -J`.
#pragma once

#include <future>
#include <string>

#include "consumers/kafka.h"
#include "src/common/metrics.h"

namespace dcm {

// Produces the dead letter; the returned future resolves when it is acknowledged, so the caller
// commits its offset only after the record is safe.
std::future<Status> DeadLetter(Producer& producer, const std::string& dead_letter_topic,
                               const KafkaMessage& message, const std::string& consumer,
                               const std::string& reason, Metrics* metrics);

}  // namespace dcm
