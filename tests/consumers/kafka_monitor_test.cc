// JudgeKafka and InFlight: when Kafka counts as unreachable or stalled (SPEC §7, /readyz kafka).
#include "consumers/kafka_monitor.h"

#include <gtest/gtest.h>

#include "consumers/kafka.h"

namespace dcm {
namespace {

using std::chrono::milliseconds;

TEST(JudgeKafkaTest, KafkaIsOkWithNothingPendingAndTheLastProbeAnswered) {
  EXPECT_TRUE(JudgeKafka({}, 1000, milliseconds(2500)).ok);
}

TEST(JudgeKafkaTest, AProduceUnacknowledgedLongerThanTheStallLimitMeansStalled) {
  KafkaSignals s;
  s.oldest_unacked_ms = 1000;
  EXPECT_TRUE(JudgeKafka(s, 3500, milliseconds(2500)).ok);
  const auto verdict = JudgeKafka(s, 3501, milliseconds(2500));
  EXPECT_FALSE(verdict.ok);
  EXPECT_NE(verdict.reason.find("2.5s"), std::string::npos) << verdict.reason;
}

TEST(JudgeKafkaTest, AFailedProbeMeansUnreachableAndSaysWhy) {
  KafkaSignals s;
  s.probe_failed = true;
  s.probe_error = "kafka metadata: Local: Timed out";
  const auto verdict = JudgeKafka(s, 0, milliseconds(2500));
  EXPECT_FALSE(verdict.ok);
  EXPECT_NE(verdict.reason.find("Timed out"), std::string::npos);
}

TEST(InFlightTest, TheOldestIsTheEarliestQueuedStillUnacknowledged) {
  InFlight in_flight;
  EXPECT_FALSE(in_flight.OldestMs());
  const auto a = in_flight.Add(100);
  const auto b = in_flight.Add(200);
  EXPECT_EQ(in_flight.OldestMs(), 100);
  in_flight.Remove(a);
  EXPECT_EQ(in_flight.OldestMs(), 200);
  EXPECT_EQ(in_flight.Size(), 1u);
  in_flight.Remove(b);
  EXPECT_FALSE(in_flight.OldestMs());
}

}  // namespace
}  // namespace dcm
