// A consumer that pauses while idle or fed (KafkaOptions::idle_pause_ms, what `dcm serve` does
// against the mock) still reads everything: at once what a producer of this process delivers
// (taken from the acknowledgements, exactly as the log holds it), and, after at most one pause,
// what anyone else produced.
#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>

#include <chrono>
#include <future>
#include <map>

#include "consumers/kafka.h"
#include "tests/integration/kafka_env.h"

namespace dcm {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::OrDie;

class IdlePauseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_ = testing::KafkaEnv::Create(2);
    ASSERT_NE(env_, nullptr);
    topic_ = env_->config.topics.Status();
    producer_ = OrDie(Producer::Create(env_->kafka));
  }

  // Assigned at `start` (a runner assigns offsets it stored: never a logical one).
  std::unique_ptr<Consumer> IdleConsumer(int idle_pause_ms, int idle_after_ms,
                                         int64_t start = Consumer::kBeginning,
                                         bool take_deliveries = true) {
    KafkaOptions options = env_->kafka;
    options.idle_pause_ms = idle_pause_ms;
    options.idle_after_ms = idle_after_ms;
    options.take_deliveries = take_deliveries;
    auto consumer = OrDie(Consumer::Create(options, ""));
    EXPECT_TRUE(consumer->Assign(topic_, {{0, start}, {1, start}}));
    return consumer;
  }

  // Polls until the consumer paused itself (false after `limit`).
  static bool PollUntilPaused(Consumer& consumer, std::chrono::milliseconds limit) {
    const auto end = Clock::now() + limit;
    while (!consumer.IdlePaused() && Clock::now() < end) {
      auto batch = consumer.ConsumeBatch(10, 50);
      if (!batch) return false;
    }
    return consumer.IdlePaused();
  }

  // The values read within `limit`, until `want` arrived.
  static std::vector<std::string> Read(Consumer& consumer, size_t want,
                                       std::chrono::milliseconds limit) {
    std::vector<std::string> values;
    const auto end = Clock::now() + limit;
    while (values.size() < want && Clock::now() < end) {
      auto batch = consumer.ConsumeBatch(10, 50);
      if (!batch) break;
      for (auto& m : *batch) values.push_back(m.value);
    }
    return values;
  }

  // Produces `value` to partition 0 and waits for its acknowledgement.
  bool ProduceToFirstPartition(const std::string& value) {
    std::promise<bool> acked;
    producer_->Produce(
        topic_, "k", value, {}, [&](Result<KafkaPosition> r) { acked.set_value(r.has_value()); },
        0);
    return acked.get_future().get();
  }

  // Produces `values` to partition 0 as another process would: a bare librdkafka producer, which
  // does not report to LocalDeliveries.
  void ProduceFromAnotherProcess(const std::vector<std::string>& values) {
    char errstr[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    ASSERT_EQ(rd_kafka_conf_set(conf, "bootstrap.servers", env_->kafka.brokers.c_str(), errstr,
                                sizeof(errstr)),
              RD_KAFKA_CONF_OK);
    rd_kafka_t* other = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    ASSERT_NE(other, nullptr) << errstr;
    for (const auto& value : values) {
      ASSERT_EQ(rd_kafka_producev(other, RD_KAFKA_V_TOPIC(topic_.c_str()), RD_KAFKA_V_PARTITION(0),
                                  RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()),
                                  RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END),
                RD_KAFKA_RESP_ERR_NO_ERROR);
    }
    ASSERT_EQ(rd_kafka_flush(other, 10000), RD_KAFKA_RESP_ERR_NO_ERROR);
    rd_kafka_destroy(other);
  }

  std::unique_ptr<testing::KafkaEnv> env_;
  std::string topic_;
  std::unique_ptr<Producer> producer_;
};

TEST_F(IdlePauseTest, ALocalDeliveryIsReadAtOnceDuringTheIdlePause) {
  ASSERT_TRUE(producer_->ProduceSync(topic_, "k", "before"));
  // Idle after 100 ms, then paused for ten minutes: only the delivery brings the next message
  // within the test's time.
  auto consumer = IdleConsumer(600000, 100);
  EXPECT_EQ(Read(*consumer, 1, 20s), std::vector<std::string>{"before"});
  ASSERT_TRUE(PollUntilPaused(*consumer, 20s));
  ASSERT_TRUE(producer_->ProduceSync(topic_, "k", "after"));
  EXPECT_EQ(Read(*consumer, 1, 60s), std::vector<std::string>{"after"});
}

// A consumer that does not take deliveries (the registry runner) is woken by one, and fetches it.
TEST_F(IdlePauseTest, WithoutTakingDeliveriesALocalDeliveryEndsThePauseAndIsFetched) {
  auto consumer = IdleConsumer(600000, 100, 0, /*take_deliveries=*/false);
  ASSERT_TRUE(PollUntilPaused(*consumer, 20s));
  ASSERT_TRUE(ProduceToFirstPartition("fetched"));
  EXPECT_EQ(Read(*consumer, 1, 20s), std::vector<std::string>{"fetched"});
  EXPECT_FALSE(consumer->IdlePaused());  // assigned again to fetch it
}

// What a producer of another process delivers (here: a bare librdkafka producer, which does not
// report to LocalDeliveries) is read when the pause ends, from where the consumer was: each
// message once, in order, over several pauses.
TEST_F(IdlePauseTest, OtherProducersAreReadAfterThePauseEachMessageOnce) {
  ASSERT_TRUE(producer_->ProduceSync(topic_, "k", "before"));
  auto consumer = IdleConsumer(300, 100);
  EXPECT_EQ(Read(*consumer, 1, 20s), std::vector<std::string>{"before"});
  ASSERT_TRUE(PollUntilPaused(*consumer, 20s));

  const std::vector<std::string> sent = {"remote-1", "remote-2", "remote-3"};
  ASSERT_NO_FATAL_FAILURE(ProduceFromAnotherProcess(sent));

  EXPECT_EQ(Read(*consumer, sent.size(), 20s), sent);
  // Several more pause-and-look rounds bring nothing again.
  EXPECT_TRUE(Read(*consumer, 1, 1500ms).empty());
  EXPECT_TRUE(PollUntilPaused(*consumer, 20s));
}

// Every field of a record taken from the acknowledgements is what a fetch of it returns.
TEST_F(IdlePauseTest, ARecordTakenFromItsAcknowledgementIsTheOneTheLogHolds) {
  auto consumer = IdleConsumer(600000, 100, 0);
  ASSERT_TRUE(PollUntilPaused(*consumer, 20s));
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(producer_->ProduceSync(topic_, "key-" + std::to_string(i % 3),
                                       "value-" + std::to_string(i), {{"x-trace", "t"}}));
  }
  std::vector<KafkaMessage> taken;
  const auto end = Clock::now() + 20s;
  while (taken.size() < 20 && Clock::now() < end) {
    auto batch = OrDie(consumer->ConsumeBatch(10, 50));
    EXPECT_TRUE(consumer->IdlePaused());  // no fetch: the pause lasts ten minutes
    for (auto& m : batch) taken.push_back(std::move(m));
  }
  ASSERT_EQ(taken.size(), 20u);

  auto reader = OrDie(Consumer::Create(env_->kafka, ""));
  ASSERT_TRUE(reader->Assign(topic_, {{0, Consumer::kBeginning}, {1, Consumer::kBeginning}}));
  std::map<std::pair<int32_t, int64_t>, KafkaMessage> fetched;
  const auto fetch_end = Clock::now() + 20s;
  while (fetched.size() < 20 && Clock::now() < fetch_end) {
    for (auto& m : OrDie(reader->ConsumeBatch(10, 50))) {
      fetched.emplace(std::pair{m.partition, m.offset}, std::move(m));
    }
  }
  ASSERT_EQ(fetched.size(), 20u);
  for (const auto& m : taken) {
    const auto it = fetched.find({m.partition, m.offset});
    ASSERT_NE(it, fetched.end()) << m.partition << "/" << m.offset;
    EXPECT_EQ(m.topic, it->second.topic);
    EXPECT_EQ(m.timestamp_ms, it->second.timestamp_ms);
    EXPECT_EQ(m.key, it->second.key);
    EXPECT_EQ(m.value, it->second.value);
    EXPECT_EQ(m.headers, it->second.headers);
  }
}

// A record another process wrote between two of this process's is missing from the
// acknowledgements: the consumer fetches it, and reads the partition in order, each record once.
TEST_F(IdlePauseTest, ARecordAnotherProcessWroteInBetweenIsFetchedInItsPlace) {
  auto consumer = IdleConsumer(600000, 100, 0);
  ASSERT_TRUE(PollUntilPaused(*consumer, 20s));
  ASSERT_TRUE(ProduceToFirstPartition("local-1"));

  ASSERT_NO_FATAL_FAILURE(ProduceFromAnotherProcess({"remote"}));
  ASSERT_TRUE(ProduceToFirstPartition("local-2"));
  EXPECT_EQ(Read(*consumer, 3, 20s), (std::vector<std::string>{"local-1", "remote", "local-2"}));
  EXPECT_TRUE(Read(*consumer, 1, 500ms).empty());
}

// A group member (the registrar, the instance worker) does not pause: its assignment is the
// group's, not its own to drop and take back.
TEST_F(IdlePauseTest, AGroupMemberNeverPauses) {
  KafkaOptions options = env_->kafka;
  options.idle_pause_ms = 100;
  auto consumer = OrDie(Consumer::Create(options, env_->config.topics.prefix + "idle-group"));
  ASSERT_TRUE(consumer->Subscribe(topic_, {}));
  const auto end = Clock::now() + 3s;
  while (Clock::now() < end) {
    ASSERT_TRUE(consumer->ConsumeBatch(10, 50));
    EXPECT_FALSE(consumer->IdlePaused());
  }
}

}  // namespace
}  // namespace dcm
