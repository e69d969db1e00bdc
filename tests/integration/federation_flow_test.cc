// The provider enclave's federation flow on Kafka (the embedded mock, or KAFKA_BROKERS): requests
// produced to dcm.federation-requests are decided in total order by the FederationWorker, folded
// by the federation projection runner, and reach the waiter of their request id. Covers the
// capacity race, remembered ids across a restart, the sweeper's expiries, and a rebuild of the
// projection from the log.
#include <gtest/gtest.h>

#include <filesystem>
#include <future>
#include <thread>

#include "consumers/federation_worker.h"
#include "consumers/projection_runner.h"
#include "projections/federation_projection.h"
#include "tests/integration/kafka_env.h"

namespace dcm {
namespace {

using namespace std::chrono_literals;
using testing::OrDie;

// One provider-enclave instance's federation parts, on its own data dir.
struct Instance {
  Instance(testing::KafkaEnv& env, const std::string& dir, int64_t slots) : env(env) {
    std::filesystem::create_directories(dir);
    store = OrDie(Store::Open(dir));
    producer = OrDie(Producer::Create(env.kafka));
    projection = std::make_unique<FederationProjection>(store.get(), &waiters, &metrics);
    view = std::make_unique<FederationView>(store.get());
    runner = std::make_unique<ProjectionRunner>(
        RunnerOptions{.topic = env.config.topics.Federation(),
                      .dead_letter_topic = env.config.topics.DeadLetter(),
                      .kafka = env.kafka},
        store.get(), projection.get(), producer.get(), &metrics);
    FederationWorkerOptions o;
    o.requests_topic = env.config.topics.FederationRequests();
    o.outcomes_topic = env.config.topics.Federation();
    o.dead_letter_topic = env.config.topics.DeadLetter();
    o.group_id = env.config.topics.prefix + "federation";
    o.kafka = env.kafka;
    o.policy = FederationPolicy{.enclave_id = "b", .contract_ttl_ms = 60000};
    o.capacity = [slots](const std::string& flavor) -> std::optional<int64_t> {
      if (flavor != "container") return std::nullopt;
      return slots;
    };
    o.sweep_interval = 100ms;
    worker = std::make_unique<FederationWorker>(o, store.get(), producer.get(), &metrics,
                                                &SystemClock::Instance());
  }
  ~Instance() {
    worker->Stop();
    runner->Stop();
  }
  void Start() {
    ASSERT_TRUE(runner->Start());
    ASSERT_TRUE(worker->Start());
  }

  // Produces `request` as the peer API would, and waits for its outcome.
  Result<FederationOutcome> Send(const FederationRequest& request) {
    const CloudEvent event = EncodeFederationRequest(request);
    auto promise = std::make_shared<std::promise<Result<CloudEvent>>>();
    waiters.Expect(event.id, SystemClock::Instance().NowMillis() + 30000,
                   [promise](Result<CloudEvent> r) { promise->set_value(std::move(r)); });
    auto produced = producer->ProduceSync(env.config.topics.FederationRequests(), event.subject,
                                          EncodeCloudEvent(event));
    if (!produced) return tl::unexpected(produced.error());
    auto future = promise->get_future();
    if (future.wait_for(30s) != std::future_status::ready) {
      return MakeError(ErrorCode::kTimeout, "no outcome for " + event.id);  // nobody reaps
    }
    auto outcome = future.get();
    if (!outcome) return tl::unexpected(outcome.error());
    return DecodeFederationOutcome(*outcome);
  }

  testing::KafkaEnv& env;
  Metrics metrics;
  OutcomeWaiters waiters;
  std::unique_ptr<Store> store;
  std::unique_ptr<Producer> producer;
  std::unique_ptr<FederationProjection> projection;
  std::unique_ptr<FederationView> view;
  std::unique_ptr<ProjectionRunner> runner;
  std::unique_ptr<FederationWorker> worker;
};

ReservationReceived Reserve(const std::string& reservation, const std::string& consumer,
                            int64_t ttl_ms = 30000, const std::string& id = "") {
  ReservationReceived r;
  r.event_id = id;
  r.source = "test";
  r.time_ms = SystemClock::Instance().NowMillis();
  r.actor = "dcm-enclave://" + consumer;
  r.reservation_id = reservation;
  r.flavor_id = "container";
  r.consumer = consumer;
  r.spec = R"({"image":"nginx"})";
  r.ttl_ms = ttl_ms;
  return r;
}

ReservationConfirmRequested Confirm(const std::string& reservation, const std::string& consumer) {
  ReservationConfirmRequested r;
  r.source = "test";
  r.time_ms = SystemClock::Instance().NowMillis();
  r.reservation_id = reservation;
  r.consumer = consumer;
  return r;
}

template <typename Pred>
bool Eventually(Pred pred, std::chrono::milliseconds within = 20s) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return pred();
}

class FederationFlowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_ = testing::KafkaEnv::Create();
    ASSERT_NE(env_, nullptr);
    root_ = std::filesystem::temp_directory_path() / ("dcm-fed-it-" + NewUuidV4().substr(0, 8));
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  std::unique_ptr<testing::KafkaEnv> env_;
  std::filesystem::path root_;
};

TEST_F(FederationFlowTest, ThreeConcurrentHoldsAgainstTwoSlotsHoldTwoAndRefuseOne) {
  Instance b(*env_, (root_ / "b").string(), 2);
  b.Start();
  std::vector<std::future<Result<FederationOutcome>>> sent;
  for (const char* consumer : {"a", "c", "d"}) {
    sent.push_back(std::async(std::launch::async, [&b, consumer] {
      return b.Send(Reserve(std::string("res-") + consumer, consumer));
    }));
  }
  int held = 0, refused = 0;
  for (auto& f : sent) {
    auto outcome = f.get();
    ASSERT_TRUE(outcome.has_value()) << outcome.error().message;
    if (std::holds_alternative<ReservationHeld>(*outcome)) ++held;
    if (auto* r = std::get_if<ReservationRefused>(&*outcome)) {
      ++refused;
      EXPECT_EQ(r->reason, refusal::kNoCapacity);
    }
  }
  EXPECT_EQ(held, 2);
  EXPECT_EQ(refused, 1);
  EXPECT_EQ(*b.view->Usage("container"), (FlavorUsage{2, 0}));
}

TEST_F(FederationFlowTest, RememberedIdsAndContractsSurviveARestart) {
  const std::string dir = (root_ / "b").string();
  const std::string request_id = NewUuidV4();
  std::string contract_id;
  {
    Instance b(*env_, dir, 2);
    b.Start();
    auto held = b.Send(Reserve("res-1", "a", 30000, request_id));
    ASSERT_TRUE(held.has_value()) << held.error().message;
    ASSERT_TRUE(std::holds_alternative<ReservationHeld>(*held));
    auto signed_ = b.Send(Confirm("res-1", "a"));
    ASSERT_TRUE(signed_.has_value()) << signed_.error().message;
    ASSERT_TRUE(std::holds_alternative<ContractSigned>(*signed_));
    contract_id = std::get<ContractSigned>(*signed_).contract_id;
    EXPECT_EQ(contract_id, ContractIdFor("b", "res-1"));
  }
  Instance b(*env_, dir, 2);
  b.Start();
  // The same request again (a retried produce): decided once, so no second outcome; a new
  // request for the same reservation gets the same contract.
  const CloudEvent again = EncodeFederationRequest(Reserve("res-1", "a", 30000, request_id));
  ASSERT_TRUE(b.producer->ProduceSync(env_->config.topics.FederationRequests(), again.subject,
                                      EncodeCloudEvent(again)));
  auto confirm = b.Send(Confirm("res-1", "a"));
  ASSERT_TRUE(confirm.has_value()) << confirm.error().message;
  ASSERT_TRUE(std::holds_alternative<ContractSigned>(*confirm));
  EXPECT_TRUE(std::get<ContractSigned>(*confirm).repeat);
  EXPECT_EQ(std::get<ContractSigned>(*confirm).contract_id, contract_id);
  auto contracts = b.view->ContractsOf("a");
  ASSERT_TRUE(contracts.has_value());
  ASSERT_EQ(contracts->size(), 1u);
  EXPECT_EQ(*b.view->Usage("container"), (FlavorUsage{0, 1}));
}

TEST_F(FederationFlowTest, TheSweeperExpiresAnUnconfirmedHoldAndFreesTheSlot) {
  Instance b(*env_, (root_ / "b").string(), 1);
  b.Start();
  auto held = b.Send(Reserve("res-short", "a", 300));
  ASSERT_TRUE(held.has_value()) << held.error().message;
  ASSERT_TRUE(std::holds_alternative<ReservationHeld>(*held));
  EXPECT_TRUE(Eventually([&] {
    auto record = b.view->Reservation("res-short");
    return record && *record && (*record)->state == reservation_state::kHoldExpired;
  }));
  EXPECT_EQ(*b.view->Usage("container"), (FlavorUsage{0, 0}));
  auto late = b.Send(Confirm("res-short", "a"));
  ASSERT_TRUE(late.has_value()) << late.error().message;
  EXPECT_EQ(FederationAnswerStatus(*late), 410);
  auto next = b.Send(Reserve("res-next", "c"));
  ASSERT_TRUE(next.has_value());
  EXPECT_TRUE(std::holds_alternative<ReservationHeld>(*next));
}

TEST_F(FederationFlowTest, ARebuildFromTheLogGivesTheSameProjectionAndATakeoverTheSameState) {
  {
    Instance b(*env_, (root_ / "b").string(), 2);
    b.Start();
    ASSERT_TRUE(b.Send(Reserve("res-1", "a")).has_value());
    ASSERT_TRUE(b.Send(Reserve("res-2", "c")).has_value());
    ASSERT_TRUE(b.Send(Confirm("res-1", "a")).has_value());
    ASSERT_TRUE(b.Send(Reserve("res-3", "d")).has_value());  // refused: full
  }
  // A second instance with an empty store takes the partition over: it folds the outcome log,
  // so its decider knows res-1's contract and the flavour is still full.
  Instance other(*env_, (root_ / "other").string(), 2);
  other.Start();
  EXPECT_TRUE(Eventually([&] { return other.runner->CaughtUp(); }));
  auto full = other.Send(Reserve("res-4", "e"));
  ASSERT_TRUE(full.has_value()) << full.error().message;
  ASSERT_TRUE(std::holds_alternative<ReservationRefused>(*full));
  EXPECT_EQ(std::get<ReservationRefused>(*full).reason, refusal::kNoCapacity);
  auto again = other.Send(Confirm("res-1", "a"));
  ASSERT_TRUE(again.has_value());
  EXPECT_TRUE(BaseOf(*again).repeat);
  // The projection, rebuilt from offset 0 of the whole log into a fresh store, is byte-identical.
  Instance rebuilt(*env_, (root_ / "rebuilt").string(), 2);
  ASSERT_TRUE(rebuilt.runner->Start());
  EXPECT_TRUE(Eventually([&] {
    return rebuilt.runner->CaughtUp() && *rebuilt.store->Digest(FederationProjection::kPrefix) ==
                                             *other.store->Digest(FederationProjection::kPrefix);
  }));
}

}  // namespace
}  // namespace dcm
