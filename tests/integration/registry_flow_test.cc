// The registration flow end to end on Kafka (the embedded mock, or KAFKA_BROKERS): requests
// produced to dcm.provider-requests are decided by the registrar, folded by the registry runner,
// and their outcomes reach the waiter of the request id. Covers the conflict matrix over Kafka,
// poison records, duplicate requests, restarts and rebuilds.
#include <gtest/gtest.h>

#include <filesystem>
#include <future>
#include <thread>

#include "consumers/command_bus.h"
#include "consumers/projection_runner.h"
#include "consumers/registrar.h"
#include "events/provider_events.h"
#include "projections/instance_projection.h"
#include "src/common/time_format.h"
#include "tests/integration/kafka_env.h"

namespace dcm {
namespace {

using namespace std::chrono_literals;

const std::vector<std::string> kTypes = {"vm", "container", "database"};

using testing::OrDie;

// One control-plane instance's Kafka-facing parts, on its own data dir.
struct Instance {
  // `live`: what the registrar reads as a provider's live instances (the instance projection);
  // with it, the registrar also waits for that projection (its offsets of dcm.instances).
  Instance(testing::KafkaEnv& env, const std::string& dir,
           std::function<Result<int64_t>(const std::string&)> live = nullptr,
           StoreOptions store_options = {})
      : env(env) {
    std::filesystem::create_directories(dir);
    store = OrDie(Store::Open(dir, std::move(store_options)));
    producer = OrDie(Producer::Create(env.kafka));
    registry = std::make_unique<RegistryProjection>(store.get(), &waiters, &metrics);
    view = std::make_unique<RegistryView>(store.get());
    runner = std::make_unique<ProjectionRunner>(
        RunnerOptions{.topic = env.config.topics.Providers(),
                      .dead_letter_topic = env.config.topics.DeadLetter(),
                      .kafka = env.kafka,
                      .applied = &applied},
        store.get(), registry.get(), producer.get(), &metrics);
    RegistrarOptions ro;
    ro.requests_topic = env.config.topics.ProviderRequests();
    ro.outcomes_topic = env.config.topics.Providers();
    ro.dead_letter_topic = env.config.topics.DeadLetter();
    ro.group_id = env.config.topics.prefix + "registrar";
    ro.rules = ProviderRules(kTypes);
    ro.kafka = env.kafka;
    ro.applied = &applied;
    ro.registry = registry.get();              // as `dcm serve` wires it
    ro.take_deliveries = env.mock != nullptr;  // likewise
    if (live) {
      ro.live_instances = std::move(live);
      ro.instances_topic = env.config.topics.Instances();
    }
    registrar = std::make_unique<Registrar>(ro, store.get(), view.get(), producer.get(), &metrics,
                                            &SystemClock::Instance());
  }
  ~Instance() {
    registrar->Stop();
    runner->Stop();
  }
  void Start() {
    ASSERT_TRUE(runner->Start());
    ASSERT_TRUE(registrar->Start());
  }

  // Produces `event` to the request topic as an SP would, and waits for its outcome.
  Result<ProviderOutcome> Send(const CloudEvent& event) {
    auto promise = std::make_shared<std::promise<Result<CloudEvent>>>();
    waiters.Expect(event.id, SystemClock::Instance().NowMillis() + 30000,
                   [promise](Result<CloudEvent> r) { promise->set_value(std::move(r)); });
    auto produced = producer->ProduceSync(env.config.topics.ProviderRequests(), event.subject,
                                          EncodeCloudEvent(event));
    if (!produced) return tl::unexpected(produced.error());
    auto outcome_event = promise->get_future().get();
    if (!outcome_event) return tl::unexpected(outcome_event.error());
    return DecodeProviderOutcome(*outcome_event);
  }

  // A request of `kind` for a vm provider named `name` (with id `id`, if any), as an SP sends it.
  static CloudEvent Request(RequestKind kind, const std::string& name, const std::string& id = "") {
    ProviderRequest r;
    r.kind = kind;
    r.id = id;
    r.spec.name = name;
    r.spec.endpoint = "http://sp.example:9000/api/vm";
    r.spec.service_type = "vm";
    return EncodeProviderRequest(r, "test", SystemClock::Instance().NowMillis());
  }

  Result<ProviderOutcome> Register(const std::string& name, const std::string& id = "") {
    return Send(Request(RequestKind::kRegister, name, id));
  }

  testing::KafkaEnv& env;
  Metrics metrics;
  OutcomeWaiters waiters;
  AppliedOffsets applied;  // the runners publish, the registrar waits on it
  std::unique_ptr<Store> store;
  std::unique_ptr<Producer> producer;
  std::unique_ptr<RegistryProjection> registry;
  std::unique_ptr<RegistryView> view;
  std::unique_ptr<ProjectionRunner> runner;
  std::unique_ptr<Registrar> registrar;
};

class RegistryFlowTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    env_ = testing::KafkaEnv::Create().release();
    ASSERT_NE(env_, nullptr);
    root_ = std::filesystem::temp_directory_path() / ("dcm-it-" + NewUuidV4().substr(0, 8));
    instance_ = new Instance(*env_, (root_ / "a").string());
    instance_->Start();
  }
  static void TearDownTestSuite() {
    delete instance_;
    delete env_;
    std::filesystem::remove_all(root_);
  }
  static std::string Unique(const std::string& base) {
    return base + "-" + NewUuidV4().substr(0, 6);
  }

  static testing::KafkaEnv* env_;
  static Instance* instance_;
  static std::filesystem::path root_;
};

testing::KafkaEnv* RegistryFlowTest::env_ = nullptr;
Instance* RegistryFlowTest::instance_ = nullptr;
std::filesystem::path RegistryFlowTest::root_;

// SPEC §7: a write is answered only once the read barrier holds its request's and its outcome's
// positions as acknowledged (reads on this instance then wait for every projection to reach
// them). Nothing else produces to the two provider topics meanwhile, so their ends are exactly
// the write's records.
TEST_F(RegistryFlowTest, AWriteIsAnsweredOnlyOnceItsRequestAndOutcomePositionsAreAcknowledged) {
  Instance& in = *instance_;
  const Topics& topics = env_->config.topics;
  ReadBarrier barrier(topics.EventTopics(), {}, &SystemClock::Instance(), 5s);
  KafkaCommandBus bus(in.producer.get(), &in.waiters, topics.ProviderRequests(), topics.Providers(),
                      WriteLimits{.decision_timeout = 30s, .write_timeout = 30s},
                      &SystemClock::Instance(), &in.metrics);
  bus.TrackAcknowledged(&barrier);
  auto consumer = OrDie(Consumer::Create(env_->kafka, ""));
  std::vector<std::pair<int64_t, int64_t>> acked;  // (request next, outcome next) per write
  for (int i = 0; i < 3; ++i) {
    ProviderRequest r;
    r.kind = RequestKind::kRegister;
    r.spec.name = Unique("acked");
    r.spec.endpoint = "http://sp.example:9000/api/vm";
    r.spec.service_type = "vm";
    std::promise<ReadPosition> answered;
    bus.Submit(EncodeProviderRequest(r, "test", SystemClock::Instance().NowMillis()),
               [&](Result<CloudEvent> outcome) {
                 EXPECT_TRUE(outcome) << outcome.error().message;
                 answered.set_value(barrier.Acknowledged());  // as the HTTP answer reads it
               });
    const ReadPosition at = answered.get_future().get();
    ASSERT_EQ(at.entries().size(), 2u);
    EXPECT_EQ(at.entries()[0].topic, 0);  // dcm.provider-requests
    EXPECT_EQ(at.entries()[1].topic, 1);  // dcm.providers
    const auto requests_end = OrDie(consumer->QueryWatermarks(topics.ProviderRequests(), 0, 5000));
    const auto outcomes_end = OrDie(consumer->QueryWatermarks(topics.Providers(), 0, 5000));
    EXPECT_EQ(at.entries()[0].next, requests_end.second);
    EXPECT_EQ(at.entries()[1].next, outcomes_end.second);
    acked.emplace_back(at.entries()[0].next, at.entries()[1].next);
  }
  EXPECT_LT(acked[0], acked[1]);
  EXPECT_LT(acked[1], acked[2]);
}

// On the mock, a request this process produced is handed to its registrar at its acknowledged
// position (LocalDeliveries), decided from there without waiting for the fetch, and the copy
// fetched later is skipped by offset. Which path decides a request is a race, so this
// sends until one was handed off, and checks every request as a fetched one would be: decided
// once, in log order, its outcome's seq its offset and its create_time its timestamp on the log.
TEST_F(RegistryFlowTest, HandedOffRequestsAreDecidedOnceAndAsIfFetched) {
  if (!env_->mock) GTEST_SKIP() << "the registrar takes deliveries on the mock only";
  Instance& in = *instance_;
  const Topics& topics = env_->config.topics;
  KafkaCommandBus bus(in.producer.get(), &in.waiters, topics.ProviderRequests(), topics.Providers(),
                      WriteLimits{.decision_timeout = 30s, .write_timeout = 30s},
                      &SystemClock::Instance(), &in.metrics);
  const Counter& handed = in.metrics.GetCounter("dcm_registrar_handed_off_total", "");
  const Counter& decided = in.metrics.GetCounter("dcm_registrar_decisions_total", "");
  const uint64_t handed_before = handed.Value();
  const uint64_t decided_before = decided.Value();
  auto reader = OrDie(Consumer::Create(env_->kafka, ""));
  const int64_t outcomes_before =
      OrDie(reader->QueryWatermarks(topics.Providers(), 0, 5000)).second;
  std::vector<ProviderOutcome> outcomes;
  while (outcomes.size() < 200 && (outcomes.size() < 20 || handed.Value() == handed_before)) {
    ProviderRequest r;
    r.kind = RequestKind::kRegister;
    r.spec.name = Unique("handed");
    r.spec.endpoint = "http://sp.example:9000/api/vm";
    r.spec.service_type = "vm";
    std::promise<Result<CloudEvent>> answered;
    bus.Submit(EncodeProviderRequest(r, "test", SystemClock::Instance().NowMillis()),
               [&](Result<CloudEvent> outcome) { answered.set_value(std::move(outcome)); });
    auto outcome = answered.get_future().get();
    ASSERT_TRUE(outcome) << outcome.error().message;
    outcomes.push_back(OrDie(DecodeProviderOutcome(*outcome)));
    ASSERT_EQ(outcomes.back().kind, OutcomeKind::kRegistered);
  }
  EXPECT_GT(handed.Value(), handed_before);
  EXPECT_EQ(decided.Value() - decided_before, outcomes.size());
  EXPECT_EQ(OrDie(reader->QueryWatermarks(topics.Providers(), 0, 5000)).second - outcomes_before,
            static_cast<int64_t>(outcomes.size()));  // no outcome twice
  // Each outcome as the fetched request would give it: seq = its offset, create_time = its time.
  ASSERT_TRUE(reader->Assign(topics.ProviderRequests(), {{0, outcomes.front().seq}}));
  std::map<int64_t, int64_t> request_times;
  while (request_times.size() < outcomes.size()) {
    auto batch = OrDie(reader->ConsumeBatch(1000, 5000));
    ASSERT_FALSE(batch.empty());
    for (const auto& m : batch) request_times[m.offset] = m.timestamp_ms;
  }
  for (size_t i = 0; i < outcomes.size(); ++i) {
    if (i > 0) {
      EXPECT_LT(outcomes[i - 1].seq, outcomes[i].seq);
    }
    ASSERT_TRUE(request_times.count(outcomes[i].seq));
    EXPECT_EQ(outcomes[i].provider.create_time,
              FormatRfc3339Millis(request_times[outcomes[i].seq]));
  }
}

TEST_F(RegistryFlowTest, ConflictMatrixOverKafka) {
  Instance& in = *instance_;
  const std::string a = Unique("alpha"), b = Unique("beta");
  const std::string id_a = Unique("id-a");

  auto created = in.Register(a, id_a);  // a new name
  ASSERT_TRUE(created) << created.error().message;
  EXPECT_EQ(created->kind, OutcomeKind::kRegistered);
  EXPECT_EQ(created->provider.id, id_a);

  auto same_no_id = in.Register(a);  // the same name with no id
  ASSERT_TRUE(same_no_id);
  EXPECT_EQ(same_no_id->kind, OutcomeKind::kUpdated);
  EXPECT_EQ(same_no_id->provider.id, id_a);

  auto same_id = in.Register(a, id_a);  // the same name with the same id
  ASSERT_TRUE(same_id);
  EXPECT_EQ(same_id->kind, OutcomeKind::kUpdated);

  auto other_id = in.Register(a, Unique("id-x"));  // the same name with a different id
  ASSERT_TRUE(other_id);
  EXPECT_EQ(other_id->kind, OutcomeKind::kRejected);
  EXPECT_EQ(other_id->status, 409);
  ASSERT_TRUE(other_id->conflict);
  EXPECT_EQ(other_id->conflict->id, id_a);
  EXPECT_EQ(other_id->conflict->name, a);

  auto taken_id = in.Register(b, id_a);  // a new name with a taken id
  ASSERT_TRUE(taken_id);
  EXPECT_EQ(taken_id->status, 409);
  EXPECT_EQ(taken_id->conflict->name, a);

  auto generated = in.Register(b);  // a new name, server-generated id
  ASSERT_TRUE(generated);
  EXPECT_EQ(generated->kind, OutcomeKind::kRegistered);
  EXPECT_TRUE(IsUuid(generated->provider.id));

  // The registry (read side) agrees with every outcome.
  auto stored = in.view->Get(id_a);
  ASSERT_TRUE(stored && *stored);
  EXPECT_EQ((*stored)->spec.name, a);
}

TEST_F(RegistryFlowTest, RenameChangeIdDeleteAndReregisterOverKafka) {
  Instance& in = *instance_;
  const std::string a = Unique("gamma"), b = Unique("delta"), c = Unique("eps");
  auto pa = in.Register(a);
  auto pb = in.Register(b);
  ASSERT_TRUE(pa && pb);
  const std::string id_a = pa->provider.id, id_b = pb->provider.id;

  auto request = [&](RequestKind kind, const std::string& id, const std::string& name,
                     const std::string& new_id = "") {
    ProviderRequest r;
    r.kind = kind;
    r.id = id;
    r.new_id = new_id;
    r.spec.name = name;
    r.spec.endpoint = "http://sp.example:9000/api/vm";
    r.spec.service_type = "vm";
    return in.Send(EncodeProviderRequest(r, "test", SystemClock::Instance().NowMillis()));
  };
  auto to_taken = request(RequestKind::kUpdate, id_a, b);  // PUT rename to a taken name
  ASSERT_TRUE(to_taken);
  EXPECT_EQ(to_taken->status, 409);
  auto to_free = request(RequestKind::kUpdate, id_a, c);  // PUT rename to a free name
  ASSERT_TRUE(to_free);
  EXPECT_EQ(to_free->kind, OutcomeKind::kUpdated);
  EXPECT_EQ(to_free->provider.spec.name, c);

  auto id_taken = request(RequestKind::kChangeId, id_a, "", id_b);  // :changeId to a taken id
  ASSERT_TRUE(id_taken);
  EXPECT_EQ(id_taken->status, 409);
  const std::string new_id = Unique("moved");
  auto id_free = request(RequestKind::kChangeId, id_a, "", new_id);  // :changeId to a free id
  ASSERT_TRUE(id_free);
  EXPECT_EQ(id_free->kind, OutcomeKind::kIdChanged);
  EXPECT_FALSE(*in.view->Get(id_a));
  ASSERT_TRUE(*in.view->Get(new_id));

  auto deleted = request(RequestKind::kDelete, new_id, "");  // delete, then re-register
  ASSERT_TRUE(deleted);
  EXPECT_EQ(deleted->kind, OutcomeKind::kDeleted);
  EXPECT_FALSE(*in.view->Get(new_id));
  auto again = in.Register(c, new_id);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->kind, OutcomeKind::kRegistered);
  EXPECT_TRUE(*in.view->Get(new_id));
}

TEST_F(RegistryFlowTest, InvalidRequestDataIsRejectedWith400AndFieldErrors) {
  Instance& in = *instance_;
  CloudEvent event;
  event.id = NewUuidV4();
  event.source = "sp/test";
  event.type = event_type::kRegistrationRequested;
  event.subject = "x";
  event.time = FormatRfc3339Millis(SystemClock::Instance().NowMillis());
  event.data = R"({"name":"ok-name","endpoint":"ftp://nope","service_type":"teapot"})";
  auto outcome = in.Send(event);
  ASSERT_TRUE(outcome);
  EXPECT_EQ(outcome->kind, OutcomeKind::kRejected);
  EXPECT_EQ(outcome->status, 400);
  ASSERT_EQ(outcome->errors.size(), 2u);
  EXPECT_EQ(outcome->errors[0].field, "endpoint");
  EXPECT_EQ(outcome->errors[1].field, "service_type");
}

TEST_F(RegistryFlowTest, PoisonRecordsGoToTheDeadLetterTopicAndTheRegistrarKeepsGoing) {
  Instance& in = *instance_;
  const auto& requests = env_->config.topics.ProviderRequests();
  ASSERT_TRUE(in.producer->ProduceSync(requests, "k", "this is not json"));
  ASSERT_TRUE(in.producer->ProduceSync(
      requests, "k",
      R"({"specversion":"1.0","id":"p1","source":"s","type":"dcm.provider.unknown_thing","time":"2026-01-01T00:00:00Z","data":{}})"));
  auto after = in.Register(Unique("after-poison"));  // the registrar is still deciding
  ASSERT_TRUE(after) << after.error().message;
  EXPECT_EQ(after->kind, OutcomeKind::kRegistered);

  auto consumer = Consumer::Create(env_->kafka, "");
  ASSERT_TRUE(consumer);
  ASSERT_TRUE((*consumer)->Assign(env_->config.topics.DeadLetter(), {{0, Consumer::kBeginning}}));
  std::vector<KafkaMessage> letters;
  for (int i = 0; i < 100 && letters.size() < 2; ++i) {
    auto batch = (*consumer)->ConsumeBatch(10, 100);
    ASSERT_TRUE(batch);
    letters.insert(letters.end(), batch->begin(), batch->end());
  }
  ASSERT_GE(letters.size(), 2u);
  EXPECT_EQ(letters[0].value, "this is not json");
  bool has_reason = false;
  for (const auto& [k, v] : letters[0].headers) has_reason |= k == "dcm-dlq-reason" && !v.empty();
  EXPECT_TRUE(has_reason);
  EXPECT_GE(in.metrics.GetCounter("dcm_dead_letters_total", "", "consumer=\"registrar\"").Value(),
            2u);
}

TEST_F(RegistryFlowTest, DuplicatedRequestEventIsDecidedOnce) {
  Instance& in = *instance_;
  ProviderRequest r;
  r.kind = RequestKind::kRegister;
  r.spec.name = Unique("dup");
  r.spec.endpoint = "http://sp.example/api";
  r.spec.service_type = "vm";
  const CloudEvent event = EncodeProviderRequest(r, "test", SystemClock::Instance().NowMillis());
  // The mock re-appends retried batches; an SP may retry too. Same event id twice:
  ASSERT_TRUE(in.producer->ProduceSync(env_->config.topics.ProviderRequests(), "k",
                                       EncodeCloudEvent(event)));
  auto outcome = in.Send(event);
  ASSERT_TRUE(outcome);
  EXPECT_EQ(outcome->kind, OutcomeKind::kRegistered);  // not "updated" by the second copy
  // A later registration of another name proves the duplicate was passed over.
  auto later = in.Register(Unique("later"));
  ASSERT_TRUE(later);
  EXPECT_EQ(later->kind, OutcomeKind::kRegistered);
}

// `dcm serve` shortens the consumers' long-poll when its brokers are librdkafka's mock (`dcm
// dev-kafka`), which holds an empty fetch for the whole fetch.wait.max.ms.
TEST_F(RegistryFlowTest, TheEmbeddedClusterIsRecognisedAsTheMock) {
  if (!env_->mock) GTEST_SKIP() << "a real cluster (KAFKA_BROKERS)";
  EXPECT_TRUE(IsMockCluster(instance_->producer->handle(), 5000));
}

TEST_F(RegistryFlowTest, RebuildFromOffsetZeroYieldsAnIdenticalRegistry) {
  Instance& in = *instance_;
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(in.Register(Unique("rb")));
  auto live = in.store->Digest(RegistryProjection::kPrefix);
  ASSERT_TRUE(live);

  // A second instance with an empty data dir folds the same topic from offset 0.
  Instance fresh(*env_, (root_ / "rebuild").string());
  ASSERT_TRUE(fresh.runner->Start());
  for (int i = 0; i < 300 && !fresh.runner->CaughtUp(); ++i) std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(fresh.runner->CaughtUp());
  EXPECT_EQ(*fresh.store->Digest(RegistryProjection::kPrefix), *live);
}

TEST_F(RegistryFlowTest, RestartResumesFromStoredOffsetsWithoutReapplying) {
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(instance_->Register(Unique("restart")));
  const auto dir = (root_ / "restart").string();
  std::string digest_before;
  uint64_t applied_first = 0;
  {
    Instance first(*env_, dir);
    ASSERT_TRUE(first.runner->Start());
    for (int i = 0; i < 300 && !first.runner->CaughtUp(); ++i) std::this_thread::sleep_for(20ms);
    ASSERT_TRUE(first.runner->CaughtUp());
    applied_first = first.runner->Applied();
    digest_before = *first.store->Digest(RegistryProjection::kPrefix);
  }
  EXPECT_GT(applied_first, 0u);
  Instance second(*env_, dir);
  ASSERT_TRUE(second.runner->Start());
  for (int i = 0; i < 300 && !second.runner->CaughtUp(); ++i) std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(second.runner->CaughtUp());
  // Nothing new was produced, so a resumed runner applies nothing.
  EXPECT_EQ(second.runner->Applied(), 0u);
  EXPECT_EQ(*second.store->Digest(RegistryProjection::kPrefix), digest_before);
}

// The registry runner reaching outcomes the registrar already applied writes its offsets past
// them without LockBatch, so the registrar (which holds that lock from its first ApplyOwn to
// Committed) never waits for the runner's RocksDB write; the runner takes the lock only for
// AfterCommit, once that write is done. The outcomes still count as applied.
TEST(RegistryRunnerFlowTest, TheRunnerPassesTheRegistrarsOwnOutcomesWithoutTheBatchLock) {
  auto env = testing::KafkaEnv::Create();
  ASSERT_NE(env, nullptr);
  const auto root = std::filesystem::temp_directory_path() / ("dcm-it-" + NewUuidV4().substr(0, 8));
  Instance in(*env, (root / "own").string());
  ASSERT_TRUE(in.registrar->Start());
  // Answered by the registrar alone (the runner is not started): five outcomes, all its own.
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(in.Register("own-" + NewUuidV4().substr(0, 6)));
  auto next_offsets = [&](const char* reader) {
    int64_t sum = 0;
    for (const auto& [partition, next] :
         OrDie(in.store->LoadOffsets(reader, env->config.topics.Providers()))) {
      sum += next;
    }
    return sum;
  };
  ASSERT_EQ(next_offsets(ProviderDecider::kName), 5);
  {
    const auto held = in.registry->LockBatch();  // as a registrar batch in progress would
    ASSERT_TRUE(in.runner->Start());
    for (int i = 0; i < 500 && next_offsets(RegistryProjection::kName) == 0; ++i) {
      std::this_thread::sleep_for(20ms);
    }
    EXPECT_GT(next_offsets(RegistryProjection::kName), 0);  // written while the lock is held
  }
  for (int i = 0; i < 300 && !in.runner->CaughtUp(); ++i) std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(in.runner->CaughtUp());
  EXPECT_EQ(in.runner->Applied(), 5u);
  EXPECT_EQ(OrDie(in.view->List({}, "", 100)).providers.size(), 5u);
  std::filesystem::remove_all(root);
}

// SPEC §6: a deletion produced straight to Kafka cannot remove a provider that hosts live
// instances; the registrar decides it only once its instance projection holds what was there.
TEST_F(RegistryFlowTest, AKafkaDeletionWaitsForTheInstanceProjectionAndIsRefusedWhileItHostsSome) {
  auto env = testing::KafkaEnv::Create();  // its own registrar group: the only decider
  ASSERT_NE(env, nullptr);
  Instance in(*env, (root_ / "live").string(),
              [](const std::string&) -> Result<int64_t> { return int64_t{2}; });
  in.Start();
  auto registered = OrDie(in.Register(Unique("hosting")));
  // An instance fact this instance's (absent) instance projection has not applied.
  const std::string instances = env->config.topics.Instances();
  const KafkaPosition fact = OrDie(in.producer->ProduceSync(instances, "root-1", "{}"));

  ProviderRequest del;
  del.kind = RequestKind::kDelete;
  del.id = registered.provider.id;
  const CloudEvent request =
      EncodeProviderRequest(del, "kcat", SystemClock::Instance().NowMillis());
  auto outcome = std::async(std::launch::async, [&] { return in.Send(request); });
  EXPECT_EQ(outcome.wait_for(1500ms), std::future_status::timeout)
      << "decided before the instance projection caught up";
  StoreBatch batch;  // the instance projection catches up
  in.store->PutOffset(batch, InstanceProjection::kName, instances, fact.partition, fact.offset + 1);
  ASSERT_TRUE(in.store->Write(batch));
  in.applied.Publish(InstanceProjection::kName, instances, fact.partition, fact.offset + 1);
  auto refused = OrDie(outcome.get());
  EXPECT_EQ(refused.kind, OutcomeKind::kRejected);
  EXPECT_EQ(refused.status, 409);
  EXPECT_EQ(refused.detail, "provider '" + del.id + "' hosts 2 live instances; use ?force=true");

  del.force = true;
  auto forced = OrDie(in.Send(EncodeProviderRequest(del, "kcat", 0)));
  EXPECT_EQ(forced.kind, OutcomeKind::kDeleted);
}

}  // namespace
}  // namespace dcm

namespace dcm {
namespace {

// SPEC §7 local faults: a disk below the reserve pauses the registrar and the registry runner
// (nothing committed, nothing dead-lettered, /readyz not ready), and both resume by themselves,
// each request decided once, when space is back.
TEST(StoreFaultFlowTest, ADiskBelowTheReservePausesDecisionsAndFoldsAndBothResumeWhenSpaceReturns) {
  auto env = testing::KafkaEnv::Create();
  ASSERT_NE(env, nullptr);
  const auto dir = std::filesystem::temp_directory_path() / ("dcm-it-" + NewUuidV4().substr(0, 8));
  std::atomic<bool> full{false};
  Instance in(*env, dir.string(), nullptr,
              StoreOptions{.min_free_bytes = 1 << 20,
                           .free_space_check_interval = std::chrono::milliseconds(0),
                           .free_bytes = [&full](const std::string&) -> Result<uint64_t> {
                             return full ? 0 : uint64_t{1} << 30;
                           }});
  in.Start();
  auto before = in.Register("before-" + NewUuidV4().substr(0, 6));
  ASSERT_TRUE(before) << before.error().message;

  full = true;
  const std::string name = "during-" + NewUuidV4().substr(0, 6);
  auto during = std::async(std::launch::async, [&] { return in.Register(name); });
  // An outcome produced straight to dcm.providers (as another instance's registrar would).
  ProviderOutcome other;
  other.kind = OutcomeKind::kRegistered;
  other.request_id = NewUuidV4();
  other.seq = 1000000;
  other.provider.id = NewUuidV4();
  other.provider.spec.name = "elsewhere-" + NewUuidV4().substr(0, 6);
  other.provider.spec.endpoint = "http://sp.example:9000/api/vm";
  other.provider.spec.service_type = "vm";
  other.provider.seq = other.seq;
  ASSERT_TRUE(in.producer->ProduceSync(
      env->config.topics.Providers(), other.provider.id,
      EncodeCloudEvent(EncodeProviderOutcome(other, "test", SystemClock::Instance().NowMillis()))));
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while ((in.registrar->Healthy() || in.runner->Healthy()) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_FALSE(in.registrar->Healthy());
  EXPECT_FALSE(in.runner->Healthy());
  ASSERT_TRUE(in.store->Problem());
  EXPECT_NE(in.store->Problem()->find("disk full"), std::string::npos);
  EXPECT_EQ(during.wait_for(0s), std::future_status::timeout);  // not decided meanwhile
  EXPECT_EQ(*in.view->Get(other.provider.id), std::nullopt);    // not folded meanwhile

  full = false;
  auto decided = during.get();
  ASSERT_TRUE(decided) << decided.error().message;
  EXPECT_EQ(decided->kind, OutcomeKind::kRegistered);
  const auto resumed = std::chrono::steady_clock::now() + 10s;
  while (!(in.runner->Healthy() && in.registrar->Healthy() && *in.view->Get(other.provider.id)) &&
         std::chrono::steady_clock::now() < resumed) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(in.runner->Healthy());
  EXPECT_TRUE(in.registrar->Healthy());
  EXPECT_TRUE(*in.view->Get(other.provider.id));
  EXPECT_EQ(in.store->Problem(), std::nullopt);
  for (const char* consumer : {"registry", "registrar"}) {
    EXPECT_EQ(
        in.metrics
            .GetCounter("dcm_dead_letters_total", "", std::string("consumer=\"") + consumer + "\"")
            .Value(),
        0u)
        << consumer;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dcm

namespace dcm {
namespace {

// SPEC §7 retention gaps, on the mock (which keeps 5 MiB per partition): fills `topic` with
// records nobody decides on (poison, dead-lettered) until its first `lost` offsets are gone.
void DropTheHead(testing::KafkaEnv& env, Producer& producer, const std::string& topic,
                 int64_t lost) {
  auto consumer = OrDie(Consumer::Create(env.kafka, ""));
  const std::string filler(100 * 1024, 'x');
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(producer.ProduceSync(topic, "filler", filler));
    if (i % 10 == 9 && OrDie(consumer->QueryWatermarks(topic, 0, 5000)).first >= lost) return;
  }
  FAIL() << "the head of " << topic << " was never dropped";
}

std::filesystem::path TempDir() {
  return std::filesystem::temp_directory_path() / ("dcm-it-" + NewUuidV4().substr(0, 8));
}

// Waits until `done` or 20 s.
template <class F>
bool Eventually(F done) {
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (!done() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(20ms);
  return done();
}

// /readyz waits for Joined(): the owner of the request partition once it has caught up with the
// outcome log, and an instance the group gave nothing once the group answered. Before this, a
// first write sent just after /readyz could wait out the group's first join and time out (503).
TEST(RegistrarReadinessFlowTest,
     TheOwnerAndAMemberThatOwnsNothingAreBothJoinedOnceTheGroupAnswers) {
  auto env = testing::KafkaEnv::Create();
  ASSERT_NE(env, nullptr);
  const auto root = TempDir();
  Instance owner(*env, (root / "owner").string());
  owner.Start();
  ASSERT_TRUE(Eventually([&] { return owner.registrar->Joined(); }));
  EXPECT_TRUE(owner.registrar->IsOwner());
  ASSERT_TRUE(owner.Register("first-" + NewUuidV4().substr(0, 6)));

  Instance other(*env, (root / "other").string());
  other.Start();
  ASSERT_TRUE(Eventually([&] { return other.registrar->Joined(); }));
  EXPECT_TRUE(other.registrar->Healthy());
  EXPECT_TRUE(Eventually([&] {  // one partition, one owner
    return owner.registrar->IsOwner() != other.registrar->IsOwner();
  }));
  std::filesystem::remove_all(root);
}

// The request log lost its head (the registration of `early` with it): a registrar with a fresh
// store rebuilds its state from the outcome log, and still refuses the name to another id.
TEST(RetentionGapFlowTest, AFreshRegistrarAfterTheRequestLogLostItsHeadStillRefusesADuplicateName) {
  auto env = testing::KafkaEnv::Create();
  ASSERT_NE(env, nullptr);
  if (!env->mock) GTEST_SKIP() << "a real cluster keeps its logs (KAFKA_BROKERS)";
  const auto root = TempDir();
  const std::string early = "early-" + NewUuidV4().substr(0, 6);
  std::string early_id;
  {
    Instance first(*env, (root / "first").string());
    first.Start();
    early_id = OrDie(first.Register(early)).provider.id;
    ASSERT_TRUE(first.Register("second-" + NewUuidV4().substr(0, 6)));
    DropTheHead(*env, *first.producer, env->config.topics.ProviderRequests(), 2);
  }  // stopped: the fresh instance's registrar is the only decider

  Instance fresh(*env, (root / "fresh").string());
  fresh.Start();
  auto duplicate = fresh.Register(early, NewUuidV4());
  ASSERT_TRUE(duplicate) << duplicate.error().message;
  EXPECT_EQ(duplicate->kind, OutcomeKind::kRejected);
  EXPECT_EQ(duplicate->status, 409);
  ASSERT_TRUE(duplicate->conflict);
  EXPECT_EQ(duplicate->conflict->id, early_id);
  auto again = OrDie(fresh.Register(early));  // the same name without an id: the same provider
  EXPECT_EQ(again.kind, OutcomeKind::kUpdated);
  EXPECT_EQ(again.provider.id, early_id);
  EXPECT_TRUE(fresh.registrar->Healthy());
  EXPECT_TRUE(fresh.runner->Gaps().Empty());  // the outcome log is whole
  std::filesystem::remove_all(root);
}

// A deployment whose dcm.providers has several partitions (made before it had one): outcomes of
// different providers are spread by id, so a takeover folds them in decision order (`seq`), not
// partition by partition. Each rename frees a name that another provider, in another partition
// or not, then takes: folded out of order, the later registration's name would be removed.
TEST(RetentionGapFlowTest, OutcomesOverSeveralPartitionsAreFoldedInDecisionOrder) {
  auto env = testing::KafkaEnv::Create(4, /*providers_partitions=*/4);
  ASSERT_NE(env, nullptr);
  const auto root = TempDir();
  std::vector<std::pair<std::string, std::string>> taken;  // name -> id after the renames
  {
    Instance first(*env, (root / "first").string());
    first.Start();
    for (int i = 0; i < 10; ++i) {
      const std::string freed = "freed-" + NewUuidV4().substr(0, 6);
      const std::string moved = "moved-" + NewUuidV4().substr(0, 6);
      const std::string a = OrDie(first.Register(freed)).provider.id;
      ASSERT_EQ(OrDie(first.Send(Instance::Request(RequestKind::kUpdate, moved, a))).kind,
                OutcomeKind::kUpdated);
      taken.emplace_back(moved, a);
      taken.emplace_back(freed, OrDie(first.Register(freed)).provider.id);
    }
  }

  Instance fresh(*env, (root / "fresh").string());
  fresh.Start();
  for (const auto& [name, id] : taken) {
    auto duplicate = OrDie(fresh.Register(name, NewUuidV4()));
    EXPECT_EQ(duplicate.status, 409) << name << ": " << duplicate.detail;
    ASSERT_TRUE(duplicate.conflict) << name;
    EXPECT_EQ(duplicate.conflict->id, id) << name;
  }
  std::filesystem::remove_all(root);
}

// A running projection that falls behind the retention (here: paused by a full disk while the
// log drops the records it has neither applied nor fetched) reports the gap when it reads on:
// librdkafka resets it to the log's start, and the records it skipped are counted, not silently
// lost.
TEST(RetentionGapFlowTest, ARunnerThatFellBehindTheRetentionReportsTheGapWhenItReadsOn) {
  auto env = testing::KafkaEnv::Create();
  ASSERT_NE(env, nullptr);
  if (!env->mock) GTEST_SKIP() << "a real cluster keeps its logs (KAFKA_BROKERS)";
  // A consumer that prefetches one record, not 64 MiB: the dropped records are not already
  // fetched into its memory, as they would be on a log this small.
  env->kafka.extra.emplace("queued.max.messages.kbytes", "1");
  const auto root = TempDir();
  std::atomic<bool> full{false};
  Instance in(*env, (root / "paused").string(), nullptr,
              StoreOptions{.min_free_bytes = 1 << 20,
                           .free_space_check_interval = std::chrono::milliseconds(0),
                           .free_bytes = [&full](const std::string&) -> Result<uint64_t> {
                             return full ? 0 : uint64_t{1} << 30;
                           }});
  in.Start();
  ASSERT_TRUE(in.Register("before-" + NewUuidV4().substr(0, 6)));
  ASSERT_TRUE(in.runner->Gaps().Empty());
  full = true;
  const std::string providers = env->config.topics.Providers();
  DropTheHead(*env, *in.producer, providers, 20);  // nor fetched more than one or two
  ASSERT_TRUE(Eventually([&] { return !in.runner->Healthy(); }));
  full = false;
  ASSERT_TRUE(Eventually([&] { return !in.runner->Gaps().Empty(); }))
      << "the runner skipped records without reporting them";
  EXPECT_EQ(in.runner->Gaps().Describe().rfind(providers + "[0]: offsets ", 0), 0u)
      << in.runner->Gaps().Describe();
  EXPECT_TRUE(Eventually([&] { return in.runner->Healthy(); }));
  std::filesystem::remove_all(root);
}

// The outcome log itself lost its head: a fresh registrar cannot know the state, so it reports
// the gap and stands by (decides nothing); the registry runner reports its gap too, unless the
// topic's records expire by design.
TEST(RetentionGapFlowTest, AFreshRegistrarWhoseOutcomeLogLostItsHeadReportsTheGapAndStandsBy) {
  auto env = testing::KafkaEnv::Create();
  ASSERT_NE(env, nullptr);
  if (!env->mock) GTEST_SKIP() << "a real cluster keeps its logs (KAFKA_BROKERS)";
  const auto root = TempDir();
  const std::string providers = env->config.topics.Providers();
  {
    Instance first(*env, (root / "first").string());
    first.Start();
    ASSERT_TRUE(first.Register("lost-" + NewUuidV4().substr(0, 6)));
    DropTheHead(*env, *first.producer, providers, 1);
  }

  Instance fresh(*env, (root / "fresh").string());
  fresh.Start();
  ASSERT_TRUE(Eventually([&] { return !fresh.registrar->Gaps().Empty(); }));
  EXPECT_FALSE(fresh.registrar->Healthy());
  EXPECT_FALSE(fresh.registrar->IsOwner());
  EXPECT_FALSE(fresh.registrar->Joined());  // never ready to decide
  EXPECT_NE(fresh.registrar->Gaps().Describe().find(providers + "[0]: offsets 0.."),
            std::string::npos)
      << fresh.registrar->Gaps().Describe();
  EXPECT_NE(fresh.runner->Gaps().Describe().find(providers + "[0]: offsets 0.."), std::string::npos)
      << fresh.runner->Gaps().Describe();
  EXPECT_GE(fresh.metrics
                .GetCounter("dcm_retention_gap_records_total", "",
                            "consumer=\"registrar\",topic=\"" + providers + "\"")
                .Value(),
            1u);
  // Nothing was decided: a request produced now gets no outcome.
  const CloudEvent request =
      Instance::Request(RequestKind::kRegister, "after-" + NewUuidV4().substr(0, 6));
  auto outcome = std::async(std::launch::async, [&] { return fresh.Send(request); });
  EXPECT_EQ(outcome.wait_for(2s), std::future_status::timeout);
  fresh.waiters.Expire(SystemClock::Instance().NowMillis() + 60000);  // let Send give up
  EXPECT_FALSE(outcome.get());

  // The same topic read into another fresh store as one whose records expire by design: no gap.
  auto store = OrDie(Store::Open((root / "expiring").string()));
  RegistryProjection registry(store.get(), &fresh.waiters, &fresh.metrics);
  ProjectionRunner expiring(RunnerOptions{.topic = providers,
                                          .dead_letter_topic = env->config.topics.DeadLetter(),
                                          .kafka = env->kafka,
                                          .expiring_topics = {providers}},
                            store.get(), &registry, fresh.producer.get(), &fresh.metrics);
  ASSERT_TRUE(expiring.Start());
  EXPECT_TRUE(expiring.Gaps().Empty()) << expiring.Gaps().Describe();
  expiring.Stop();
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace dcm
