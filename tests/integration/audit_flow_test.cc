// The audit index over Kafka (mock, or KAFKA_BROKERS): one ProjectionRunner reads several topics
// into AuditProjection, resumes from per-topic stored offsets, and a second store folded from
// offset 0 holds byte-identical state (SPEC §3.4, §5.3, §5.4).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "consumers/projection_runner.h"
#include "projections/audit_projection.h"
#include "src/common/time_format.h"
#include "tests/integration/kafka_env.h"

namespace dcm {
namespace {

using namespace std::chrono_literals;

struct Folder {
  Folder(testing::KafkaEnv& env, const std::string& dir) {
    std::filesystem::create_directories(dir);
    store = std::move(*Store::Open(dir));
    producer = std::move(*Producer::Create(env.kafka));
    audit = std::make_unique<AuditProjection>(store.get(), env.config.topics.Providers(), nullptr);
    RunnerOptions options{env.config.topics.Providers(), env.config.topics.DeadLetter(), env.kafka};
    options.more_topics = {env.config.topics.Health(), env.config.topics.Status()};
    runner = std::make_unique<ProjectionRunner>(options, store.get(), audit.get(), producer.get(),
                                                nullptr);
  }
  bool CatchUp() {
    if (!runner->Start()) return false;
    for (int i = 0; i < 500 && !runner->CaughtUp(); ++i) std::this_thread::sleep_for(20ms);
    return runner->CaughtUp();
  }
  std::string Digest() { return *store->Digest(AuditProjection::kPrefix); }

  std::unique_ptr<Store> store;
  std::unique_ptr<Producer> producer;
  std::unique_ptr<AuditProjection> audit;
  std::unique_ptr<ProjectionRunner> runner;
};

CloudEvent Event(int i, const std::string& subject) {
  CloudEvent e;
  e.id = "ev-" + std::to_string(i);
  e.source = "test";
  e.type = "dcm.test.happened";
  e.subject = subject;
  e.time = FormatRfc3339Millis(1767225600000 + i);
  return e;
}

TEST(AuditFlowTest, OneRunnerIndexesEveryTopicResumesAndRebuildsByteIdentically) {
  auto env = testing::KafkaEnv::Create();
  ASSERT_NE(env, nullptr);
  const auto root =
      std::filesystem::temp_directory_path() / ("dcm-audit-it-" + NewUuidV4().substr(0, 8));
  auto producer = std::move(*Producer::Create(env->kafka));
  const std::vector<std::string> topics = {
      env->config.topics.Providers(), env->config.topics.Health(), env->config.topics.Status()};
  auto produce = [&](int from, int to) {
    for (int i = from; i < to; ++i) {
      const auto e = Event(i, "s" + std::to_string(i % 5));
      ASSERT_TRUE(producer->ProduceSync(topics[i % 3], e.subject, EncodeCloudEvent(e)));
    }
  };
  produce(0, 30);
  std::string digest;
  {
    Folder live(*env, (root / "live").string());
    ASSERT_TRUE(live.CatchUp());
    EXPECT_EQ(live.runner->Applied(), 30u);
    auto page = AuditView(live.store.get()).History("s1", AuditQuery{});
    ASSERT_TRUE(page);
    EXPECT_EQ(page->entries.size(), 6u);  // 1, 6, 11, ... over the three topics
    EXPECT_EQ(page->entries[0].topic, topics[1]);
    EXPECT_EQ(page->entries[1].topic, topics[0]);
  }
  produce(30, 36);
  {
    Folder resumed(*env, (root / "live").string());
    ASSERT_TRUE(resumed.CatchUp());
    EXPECT_EQ(resumed.runner->Applied(), 6u);  // only what is new, on every topic
    digest = resumed.Digest();
  }
  Folder rebuilt(*env, (root / "rebuilt").string());
  ASSERT_TRUE(rebuilt.CatchUp());
  EXPECT_EQ(rebuilt.Digest(), digest);
  rebuilt.runner->Stop();
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace dcm
