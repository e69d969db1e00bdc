// Rebuild and verify on Kafka (the embedded mock, or KAFKA_BROKERS): a mixed log (provider
// outcomes and requests, health probes and changes, instance sagas and requests, SP status
// events) is folded live by ProjectionRunners into a live store, as `dcm serve` does, then
// rebuilt from the head of the log by the Rebuilder into a side store in bulk mode
// (consumers/rebuild.h). Proves SPEC §5.4 (a rebuild is byte-identical) for every projection,
// that the comparison names exactly the key a corrupted copy changed, lost or gained, and that
// targets taken from the live offsets stop a rebuild at the live position while the log grows.
#include "consumers/rebuild.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "consumers/projection_runner.h"
#include "projections/federation_decider.h"
#include "tests/bench/rebuild_bench.h"
#include "tests/integration/kafka_env.h"

namespace dcm {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

using testing::OrDie;

class RebuildTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_ = testing::KafkaEnv::Create(4);
    ASSERT_TRUE(env_);
    dir_ = fs::temp_directory_path() / ("dcm-rebuild-test-" + NewUuidV4().substr(0, 8));
    fs::create_directories(dir_);
    auto producer = Producer::Create(env_->kafka);
    ASSERT_TRUE(producer);
    producer_ = std::move(*producer);
  }
  void TearDown() override {
    producer_.reset();
    fs::remove_all(dir_);
  }

  // Produces `count` events of the mixed workload (continuing where the last call stopped).
  void Produce(int count) {
    for (int i = 0; i < count; ++i) {
      bench::WorkloadEvent e = workload_.Next();
      producer_->Produce(e.topic, e.key, e.value, {}, [](Result<KafkaPosition>) {});
    }
    ASSERT_TRUE(producer_->Flush(30000));
  }

  // Produces the outcomes of a small federation history (SPEC §10: holds, a refusal, a contract,
  // a release), as a FederationWorker decides them; returns how many.
  int ProduceFederation() {
    auto scratch = OrDie(Store::Open("/federation", StoreOptions{.in_memory = true}));
    FederationDecider decider(scratch.get(), FederationPolicy{.enclave_id = "b"});
    const FlavorCapacity capacity = [](const std::string&) { return std::optional<int64_t>(2); };
    int produced = 0;
    for (int i = 0; i < 6; ++i) {
      const std::string reservation = "res-" + std::to_string(i % 3);
      FederationRequest request;
      if (i < 3) {
        ReservationReceived r;
        r.reservation_id = reservation;
        r.flavor_id = "container";
        r.consumer = "a";
        r.spec = "{}";
        r.ttl_ms = 30000;
        request = r;
      } else if (i == 3) {
        request = ReservationConfirmRequested{{{}, reservation, "a"}};
      } else {
        request = ReservationReleaseRequested{{{}, reservation, "a"}};
      }
      auto& envelope = EnvelopeOf(request);
      envelope.event_id = "fed-request-" + std::to_string(i);
      envelope.time_ms = 1767225600000 + i;
      StoreBatch batch;
      auto outcome = OrDie(decider.Decide(request, i, capacity, batch));
      EXPECT_TRUE(scratch->Write(batch));
      if (!outcome) continue;
      BaseOf(*outcome).source = "dcm/federation";
      const CloudEvent event = EncodeFederationOutcome(*outcome);
      producer_->Produce(env_->config.topics.Federation(), BaseOf(*outcome).reservation_id,
                         EncodeCloudEvent(event), {}, [](Result<KafkaPosition>) {});
      ++produced;
    }
    EXPECT_TRUE(producer_->Flush(30000));
    return produced;
  }

  // Folds every topic into a store at `path` with live ProjectionRunners until each caught up,
  // then closes it. One runner per projection, the audit's reading all six topics (as serve).
  void FoldLive(const std::string& path) {
    auto store = OrDie(Store::Open(path));
    Metrics metrics;
    ProjectionSet set = BuildProjectionSet(store.get(), env_->config.topics, &metrics);
    std::vector<std::unique_ptr<ProjectionRunner>> runners;
    for (size_t i = 0; i < set.entries.size(); ++i) {
      const auto& topics = set.entries[i].topics;
      RunnerOptions options{topics[0], env_->config.topics.DeadLetter(), env_->kafka};
      options.more_topics.assign(topics.begin() + 1, topics.end());
      runners.push_back(std::make_unique<ProjectionRunner>(
          options, store.get(), set.projections[i].get(), producer_.get(), &metrics));
      ASSERT_TRUE(runners.back()->Start());
    }
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    for (auto& runner : runners) {
      while (!runner->CaughtUp() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(10ms);
      }
      ASSERT_TRUE(runner->CaughtUp());
      ASSERT_TRUE(runner->Healthy());
    }
    for (auto& runner : runners) runner->Stop();
  }

  // Rebuilds every projection into a fresh bulk store at `path`; targets from `live` if given.
  RebuildResult Rebuild(const std::string& path, const Store* live) {
    auto store = OrDie(Store::Open(path, StoreOptions{.bulk_load = true, .in_memory = false}));
    Metrics metrics;
    ProjectionSet set = BuildProjectionSet(store.get(), env_->config.topics, &metrics);
    std::vector<RebuildSource> sources;
    for (size_t i = 0; i < set.entries.size(); ++i) {
      RebuildSource source = SourceOf(set, i);
      if (live) source.targets = OrDie(LiveTargets(*live, set.entries[i]));
      sources.push_back(std::move(source));
    }
    RebuildOptions options;
    options.kafka = env_->kafka;
    options.batch_size = 500;  // several batches, so per-batch state is exercised
    options.stall_timeout_ms = 20000;
    int64_t reported = 0;
    options.on_progress = [&](const RebuildProgress& p) { reported = p.done; };
    auto result = Rebuilder(options, store.get()).Run(sources);
    EXPECT_TRUE(result) << (result ? "" : result.error().message);
    EXPECT_TRUE(store->FinishBulkLoad());
    EXPECT_EQ(reported, result ? result->messages : -1);  // the last report says "done"
    return result ? std::move(*result) : RebuildResult{};
  }

  std::vector<ProjectionEntry> Specs() const { return ProjectionCatalog(env_->config.topics); }

  std::unique_ptr<testing::KafkaEnv> env_;
  fs::path dir_;
  std::unique_ptr<Producer> producer_;
  bench::MixedWorkload workload_{Topics{}, 20, "it"};
};

// The workload writes to topics named with the default prefix; give it this test's topics.
class RebuildFlowTest : public RebuildTest {
 protected:
  void SetUp() override {
    RebuildTest::SetUp();
    workload_ = bench::MixedWorkload(env_->config.topics, 20, "it-" + NewUuidV4().substr(0, 4));
  }
};

TEST_F(RebuildFlowTest, RebuildOfAMixedLogEqualsTheLiveStoreForEveryProjection) {
  Produce(3000);
  const int federation = ProduceFederation();
  const std::string live_path = (dir_ / "live").string();
  FoldLive(live_path);
  auto live = OrDie(Store::OpenReadOnly(live_path));
  const auto result = Rebuild((dir_ / "side").string(), live.get());
  EXPECT_TRUE(result.warnings.empty());
  EXPECT_EQ(result.messages, 3000 + federation);
  auto side = OrDie(Store::OpenReadOnly((dir_ / "side").string()));
  for (size_t i = 0; i < Specs().size(); ++i) {
    const auto comparison = OrDie(CompareProjection(*live, *side, Specs()[i]));
    EXPECT_TRUE(comparison.match())
        << comparison.name << " first differs at " << comparison.first_difference->key;
    if (comparison.name != "peer-health") {  // the workload has no peers
      EXPECT_FALSE(comparison.live_digest.ends_with("-0")) << comparison.name << " is empty";
      EXPECT_GT(result.projections[i].events, 0) << comparison.name;
    }
    EXPECT_EQ(result.projections[i].poison, 0) << comparison.name;
    // The rebuilt store resumes exactly where the live one stands.
    EXPECT_EQ(OrDie(LiveTargets(*side, Specs()[i])), OrDie(LiveTargets(*live, Specs()[i])))
        << comparison.name;
  }
}

TEST_F(RebuildFlowTest, RebuildWithoutTargetsGoesToTheEndOfTheLog) {
  Produce(1000);
  const auto result = Rebuild((dir_ / "side").string(), nullptr);
  EXPECT_EQ(result.messages, 1000);
  int64_t audited = 0;
  for (const auto& p : result.projections) {
    if (p.name == "audit") audited = p.events;
  }
  EXPECT_EQ(audited, 1000);  // the audit index reads every event topic
}

TEST_F(RebuildFlowTest, TargetsFromTheLiveOffsetsStopAtTheLivePositionWhileTheLogGrows) {
  Produce(1500);
  const std::string live_path = (dir_ / "live").string();
  FoldLive(live_path);
  Produce(1500);  // the live store stopped; the log went on
  auto live = OrDie(Store::OpenReadOnly(live_path));
  const auto at_live = Rebuild((dir_ / "at-live").string(), live.get());
  EXPECT_EQ(at_live.messages, 1500);
  auto side = OrDie(Store::OpenReadOnly((dir_ / "at-live").string()));
  for (const auto& spec : Specs()) {
    EXPECT_TRUE(OrDie(CompareProjection(*live, *side, spec)).match()) << spec.name;
  }
  // To the end of the log instead, the state is newer: the comparison sees it.
  const auto at_end = Rebuild((dir_ / "at-end").string(), nullptr);
  EXPECT_EQ(at_end.messages, 3000);
  auto newer = OrDie(Store::OpenReadOnly((dir_ / "at-end").string()));
  EXPECT_FALSE(OrDie(CompareProjection(*live, *newer, Specs()[1])).match());  // health
}

// A copy of a live store with one key changed, one removed and one added: the comparison names
// exactly those keys, with both values.
class VerifyCorruptionTest : public RebuildFlowTest {
 protected:
  void SetUp() override {
    RebuildFlowTest::SetUp();
    Produce(1200);
    live_path_ = (dir_ / "live").string();
    FoldLive(live_path_);
    Rebuild((dir_ / "side").string(), OrDie(Store::OpenReadOnly(live_path_)).get());
    side_ = OrDie(Store::OpenReadOnly((dir_ / "side").string()));
    copy_path_ = (dir_ / "copy").string();
    fs::copy(live_path_, copy_path_, fs::copy_options::recursive);  // the live store is closed
  }

  // The `n`th key under `prefix` in the copy, and its value.
  std::pair<std::string, std::string> NthKey(std::string_view prefix, int n) {
    auto copy = OrDie(Store::OpenReadOnly(copy_path_));
    std::pair<std::string, std::string> found;
    EXPECT_TRUE(copy->Scan(prefix, "", [&](std::string_view k, std::string_view v) {
      found = {std::string(k), std::string(v)};
      return n-- > 0;
    }));
    return found;
  }

  // Writes `value` at `key` in the copy; nullopt deletes the key.
  void ChangeCopy(const std::string& key, const std::optional<std::string>& value) {
    auto copy = OrDie(Store::Open(copy_path_));
    StoreBatch batch;
    if (value) {
      batch.Put(key, *value);
    } else {
      batch.Delete(key);
    }
    ASSERT_TRUE(copy->Write(batch));
  }

  ProjectionComparison CompareCopy(const ProjectionEntry& spec) {
    auto copy = OrDie(Store::OpenReadOnly(copy_path_));
    return OrDie(CompareProjection(*copy, *side_, spec));
  }

  std::string live_path_, copy_path_;
  std::unique_ptr<Store> side_;
};

TEST_F(VerifyCorruptionTest, ReportsTheOneChangedKeyWithBothValues) {
  const ProjectionEntry health = Specs()[1];
  const auto [key, value] = NthKey(health.prefix, 3);
  ChangeCopy(key, value + "corrupt");
  const auto comparison = CompareCopy(health);
  EXPECT_FALSE(comparison.match());
  ASSERT_TRUE(comparison.first_difference);
  EXPECT_EQ(comparison.first_difference->key, key);
  EXPECT_EQ(comparison.first_difference->left, value + "corrupt");  // the copy
  EXPECT_EQ(comparison.first_difference->right, value);             // the rebuild
  for (const auto& spec : Specs()) {
    if (spec.name != health.name) {
      EXPECT_TRUE(CompareCopy(spec).match()) << spec.name;
    }
  }
}

TEST_F(VerifyCorruptionTest, ReportsAMissingKey) {
  const ProjectionEntry registry = Specs()[0];
  const auto [key, value] = NthKey(registry.prefix, 0);
  ChangeCopy(key, std::nullopt);
  const auto comparison = CompareCopy(registry);
  ASSERT_TRUE(comparison.first_difference);
  EXPECT_EQ(comparison.first_difference->key, key);
  EXPECT_EQ(comparison.first_difference->left, std::nullopt);
  EXPECT_EQ(comparison.first_difference->right, value);
}

TEST_F(VerifyCorruptionTest, ReportsAnExtraKey) {
  const ProjectionEntry audit = Specs()[4];
  const std::string extra = std::string(audit.prefix) + "e/0000000000000/extra";
  ChangeCopy(extra, "x");
  const auto comparison = CompareCopy(audit);
  ASSERT_TRUE(comparison.first_difference);
  EXPECT_EQ(comparison.first_difference->key, extra);
  EXPECT_EQ(comparison.first_difference->left, "x");
  EXPECT_EQ(comparison.first_difference->right, std::nullopt);
}

}  // namespace
}  // namespace dcm
