// EventReader (consumers/event_reader.h) on Kafka (the embedded mock, or KAFKA_BROKERS): reads
// several topics and partitions from the beginning, since a time (on the mock through the
// fallback scan, since its offsets-for-times answers -1), until a time, by subject and type,
// follows new records, and counts poison records instead of failing.
#include "consumers/event_reader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "src/common/clock.h"
#include "src/common/time_format.h"
#include "tests/integration/kafka_env.h"

namespace dcm {
namespace {

using namespace std::chrono_literals;

class EventReaderTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    env_ = testing::KafkaEnv::Create().release();
    ASSERT_NE(env_, nullptr);
    auto producer = Producer::Create(env_->kafka);
    ASSERT_TRUE(producer);
    producer_ = producer->release();
  }
  static void TearDownTestSuite() {
    delete producer_;
    delete env_;
  }

  // A fresh topic per test, so tests never see each other's records.
  std::string MakeTopic(const std::string& base, int partitions) {
    const std::string name = env_->config.topics.prefix + base + "-" + NewUuidV4().substr(0, 6);
    if (env_->mock) {
      EXPECT_TRUE(env_->mock->CreateTopic(name, partitions));
    } else {
      // EnsureTopics also checks the (existing, one-partition) request topic it is given.
      EXPECT_TRUE(EnsureTopics(env_->kafka, {{name, partitions}},
                               env_->config.topics.ProviderRequests(), 1));
    }
    return name;
  }

  static CloudEvent Event(const std::string& type, const std::string& subject, int64_t time_ms) {
    CloudEvent e;
    e.id = NewUuidV4();
    e.source = "test";
    e.type = type;
    e.subject = subject;
    e.time = FormatRfc3339Millis(time_ms);
    return e;
  }

  static void ProduceTo(const std::string& topic, int32_t partition, const std::string& value) {
    std::promise<Result<KafkaPosition>> done;
    producer_->Produce(
        topic, "k", value, {}, [&](Result<KafkaPosition> r) { done.set_value(std::move(r)); },
        partition);
    ASSERT_TRUE(done.get_future().get());
  }

  static std::vector<ReadEvent> ReadAll(EventReaderOptions options, ReadStats* stats = nullptr) {
    auto reader = EventReader::Create(env_->kafka, std::move(options));
    EXPECT_TRUE(reader) << reader.error().message;
    if (!reader) return {};
    std::vector<ReadEvent> out;
    auto status = (*reader)->Run([&](ReadEvent e) { out.push_back(std::move(e)); });
    EXPECT_TRUE(status) << status.error().message;
    if (stats) *stats = (*reader)->stats();
    return out;
  }

  static std::vector<std::string> Ids(const std::vector<ReadEvent>& events) {
    std::vector<std::string> ids;
    for (const auto& e : events) ids.push_back(e.event.id);
    std::sort(ids.begin(), ids.end());
    return ids;
  }

  static int64_t Now() { return SystemClock::Instance().NowMillis(); }

  static testing::KafkaEnv* env_;
  static Producer* producer_;
};

testing::KafkaEnv* EventReaderTest::env_ = nullptr;
Producer* EventReaderTest::producer_ = nullptr;

TEST_F(EventReaderTest, ReadsEveryPartitionOfEveryTopicFromTheBeginning) {
  const std::string a = MakeTopic("a", 4), b = MakeTopic("b", 2);
  std::vector<std::string> expected;
  const int64_t t0 = Now() - 60'000;
  for (int i = 0; i < 20; ++i) {
    const auto event = Event("dcm.provider.registered", "sp-" + std::to_string(i), t0 + i);
    ProduceTo(i % 2 ? a : b, (i / 2) % (i % 2 ? 4 : 2), EncodeCloudEvent(event));
    expected.push_back(event.id);
  }
  std::sort(expected.begin(), expected.end());
  ReadStats stats;
  auto events = ReadAll({.topics = {a, b}}, &stats);
  EXPECT_EQ(Ids(events), expected);
  EXPECT_EQ(stats.partitions, 6u);
  EXPECT_EQ(stats.events, 20u);
  EXPECT_EQ(stats.poison, 0u);
  EXPECT_TRUE(stats.warnings.empty());
  for (const auto& e : events) EXPECT_EQ(e.raw, EncodeCloudEvent(e.event));
}

TEST_F(EventReaderTest, SortByEventTimeOrdersAcrossPartitions) {
  const std::string topic = MakeTopic("sorted", 3);
  const int64_t t0 = Now() - 60'000;
  // Produced newest first, each into another partition.
  for (int i = 0; i < 6; ++i) {
    ProduceTo(topic, i % 3, EncodeCloudEvent(Event("dcm.status.vm", "i", t0 + (6 - i) * 1000)));
  }
  auto events = ReadAll({.topics = {topic}});
  ASSERT_EQ(events.size(), 6u);
  SortByEventTime(events);
  for (size_t i = 1; i < events.size(); ++i) {
    EXPECT_LT(events[i - 1].time_ms, events[i].time_ms);
  }
}

TEST_F(EventReaderTest, SinceSkipsOlderEventsAndScansWhereTheBrokerCannotSeek) {
  const std::string topic = MakeTopic("since", 4);
  const int64_t now = Now();
  std::set<std::string> recent;
  for (int i = 0; i < 12; ++i) {
    const bool is_recent = i % 3 == 0;
    const auto event = Event("dcm.provider.updated", "sp-" + std::to_string(i),
                             now - (is_recent ? 1000 : 7200'000));
    ProduceTo(topic, i % 4, EncodeCloudEvent(event));
    if (is_recent) recent.insert(event.id);
  }
  ReadStats stats;
  auto events = ReadAll({.topics = {topic}, .since_ms = now - 600'000}, &stats);
  const auto ids = Ids(events);
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()), recent);
  // The producer stamped every record "now", so a real broker seeks to the start as well: the
  // filter on the event time does the work either way.
  EXPECT_EQ(stats.skipped_before_since, 8u);
  if (env_->mock) {
    EXPECT_EQ(stats.scanned_partitions.size(), 4u) << "the mock answers offsets-for-times -1";
  }
}

TEST_F(EventReaderTest, SinceOnlyNewerThanEveryRecordReadsNothing) {
  const std::string topic = MakeTopic("since-empty", 2);
  for (int i = 0; i < 4; ++i) {
    ProduceTo(topic, i % 2, EncodeCloudEvent(Event("dcm.status.vm", "x", Now() - 3600'000)));
  }
  ReadStats stats;
  auto events = ReadAll({.topics = {topic}, .since_ms = Now() + 3600'000}, &stats);
  EXPECT_TRUE(events.empty());
  EXPECT_TRUE(stats.warnings.empty());
}

TEST_F(EventReaderTest, UntilDropsLaterEvents) {
  const std::string topic = MakeTopic("until", 2);
  const int64_t t0 = Now() - 3600'000;
  std::vector<std::string> early;
  for (int i = 0; i < 6; ++i) {
    const auto event = Event("dcm.status.vm", "x", t0 + i * 60'000);
    ProduceTo(topic, i % 2, EncodeCloudEvent(event));
    if (i <= 2) early.push_back(event.id);
  }
  std::sort(early.begin(), early.end());
  ReadStats stats;
  auto events = ReadAll({.topics = {topic}, .until_ms = t0 + 2 * 60'000}, &stats);
  EXPECT_EQ(Ids(events), early);
  EXPECT_EQ(stats.skipped_after_until, 3u);
}

TEST_F(EventReaderTest, FiltersBySubjectExactTypeAndTypePrefix) {
  const std::string topic = MakeTopic("filters", 3);
  const int64_t t0 = Now() - 60'000;
  const std::vector<std::pair<std::string, std::string>> records = {
      {"dcm.provider.registered", "sp-a"},
      {"dcm.provider.updated", "sp-a"},
      {"dcm.provider.health_probed", "sp-b"},
      {"dcm.status.vm", "sp-a"},
      {"dcm.provider.registered", "sp-ab"}};
  for (size_t i = 0; i < records.size(); ++i) {
    ProduceTo(topic, static_cast<int32_t>(i % 3),
              EncodeCloudEvent(Event(records[i].first, records[i].second, t0 + i)));
  }
  auto by_subject = ReadAll({.topics = {topic}, .subject = "sp-a"});
  EXPECT_EQ(by_subject.size(), 3u);
  for (const auto& e : by_subject) EXPECT_EQ(e.event.subject, "sp-a");

  ReadStats stats;
  auto by_type = ReadAll({.topics = {topic}, .type = "dcm.provider.registered"}, &stats);
  EXPECT_EQ(by_type.size(), 2u);
  EXPECT_EQ(stats.filtered, 3u);

  EXPECT_EQ(ReadAll({.topics = {topic}, .type = "dcm.provider.*"}).size(), 4u);
  EXPECT_EQ(ReadAll({.topics = {topic}, .subject = "sp-a", .type = "dcm.provider.*"}).size(), 2u);
}

TEST_F(EventReaderTest, PoisonRecordsAreCountedAndSampledNotFatal) {
  const std::string topic = MakeTopic("poison", 2);
  ProduceTo(topic, 0, "not json at all");
  ProduceTo(topic, 1, R"({"specversion":"1.0","id":"x"})");
  ProduceTo(topic, 1, "");
  const auto good = Event("dcm.status.vm", "x", Now() - 1000);
  ProduceTo(topic, 0, EncodeCloudEvent(good));
  ReadStats stats;
  auto events = ReadAll({.topics = {topic}}, &stats);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].event.id, good.id);
  EXPECT_EQ(stats.poison, 3u);
  ASSERT_EQ(stats.poison_samples.size(), 3u);
  EXPECT_NE(stats.poison_samples[0].find(topic + "/"), std::string::npos);
}

TEST_F(EventReaderTest, MissingTopicIsReportedAndNotCreated) {
  const std::string missing = env_->config.topics.prefix + "missing-" + NewUuidV4().substr(0, 6);
  ReadStats stats;
  auto events = ReadAll({.topics = {missing}}, &stats);
  EXPECT_TRUE(events.empty());
  ASSERT_EQ(stats.missing_topics.size(), 1u);
  EXPECT_EQ(stats.missing_topics[0], missing);
  auto again = ReadAll({.topics = {missing}}, &stats);
  EXPECT_EQ(stats.missing_topics.size(), 1u) << "the first read must not auto-create it";
}

TEST_F(EventReaderTest, FollowDeliversRecordsProducedAfterStartUntilStopped) {
  const std::string topic = MakeTopic("follow", 2);
  ProduceTo(topic, 0, EncodeCloudEvent(Event("dcm.status.vm", "old", Now() - 1000)));
  auto reader = EventReader::Create(env_->kafka, {.topics = {topic}, .follow = true});
  ASSERT_TRUE(reader);
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> subjects;
  std::thread runner([&] {
    auto status = (*reader)->Run([&](ReadEvent e) {
      std::lock_guard lock(mu);
      subjects.push_back(e.event.subject);
      cv.notify_all();
    });
    EXPECT_TRUE(status);
  });
  ProduceTo(topic, 1, EncodeCloudEvent(Event("dcm.status.vm", "new", Now())));
  {
    std::unique_lock lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, 20s, [&] { return subjects.size() >= 2; }));
  }
  (*reader)->Stop();
  runner.join();
  std::sort(subjects.begin(), subjects.end());
  EXPECT_EQ(subjects, (std::vector<std::string>{"new", "old"}));
}

TEST_F(EventReaderTest, UnreachableClusterFailsWithinTheQueryTimeout) {
  KafkaOptions nowhere = env_->kafka;
  nowhere.brokers = "127.0.0.1:1";
  auto reader = EventReader::Create(nowhere, {.topics = {"t"}, .query_timeout_ms = 1500});
  ASSERT_TRUE(reader);
  const auto start = std::chrono::steady_clock::now();
  auto status = (*reader)->Run([](ReadEvent) {});
  EXPECT_FALSE(status);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
}

}  // namespace
}  // namespace dcm
