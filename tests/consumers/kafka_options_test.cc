// The per-client Kafka options (consumers/kafka.h): what the provider command path and the
// registrar's consumer change, and what they leave alone.
#include <gtest/gtest.h>

#include "consumers/kafka.h"

namespace dcm {
namespace {

KafkaOptions Configured() {
  KafkaOptions options;
  options.brokers = "127.0.0.1:9092";
  options.fetch_wait_max_ms = 100;
  options.extra["client.rack"] = "r1";
  return options;
}

TEST(KafkaOptionsTest, TheProviderCommandProducerKeepsOneRequestInFlight) {
  const KafkaOptions options = ProviderCommandOptions(Configured());
  EXPECT_EQ(options.extra.at("max.in.flight.requests.per.connection"), "1");
  EXPECT_EQ(options.extra.at("client.rack"), "r1");
}

TEST(KafkaOptionsTest, AnOperatorsInFlightSettingWinsOverTheCommandPathDefault) {
  KafkaOptions configured = Configured();
  configured.extra["max.in.flight.requests.per.connection"] = "5";
  EXPECT_EQ(ProviderCommandOptions(configured).extra.at("max.in.flight.requests.per.connection"),
            "5");
}

TEST(KafkaOptionsTest, OnTheMockTheRegistrarPollsShorterThanTheOtherConsumers) {
  const KafkaOptions options = MockFetchWaitOptions(Configured(), /*on_mock=*/true, 1);
  EXPECT_EQ(options.fetch_wait_max_ms, 1);
  EXPECT_EQ(options.brokers, "127.0.0.1:9092");
  EXPECT_EQ(options.extra.at("client.rack"), "r1");
}

TEST(KafkaOptionsTest, OnARealBrokerTheRegistrarKeepsTheConfiguredLongPoll) {
  EXPECT_EQ(MockFetchWaitOptions(Configured(), /*on_mock=*/false, 1).fetch_wait_max_ms, 100);
}

TEST(KafkaOptionsTest, AGivenFetchWaitLeavesNoRegistrarWaitOfItsOwn) {
  // --fetch-wait-max-ms given: serve passes 0, and the registrar polls like every consumer.
  EXPECT_EQ(MockFetchWaitOptions(Configured(), /*on_mock=*/true, 0).fetch_wait_max_ms, 100);
}

TEST(KafkaOptionsTest, OnTheMockTheBackgroundFoldsPollLongerThanTheWritePath) {
  EXPECT_GT(kMockBackgroundFetchWaitMs, kMockFetchWaitMs);
  EXPECT_GT(kMockFetchWaitMs, kMockRegistrarFetchWaitMs);
  EXPECT_EQ(MockFetchWaitOptions(Configured(), /*on_mock=*/true, kMockBackgroundFetchWaitMs)
                .fetch_wait_max_ms,
            kMockBackgroundFetchWaitMs);
}

}  // namespace
}  // namespace dcm
