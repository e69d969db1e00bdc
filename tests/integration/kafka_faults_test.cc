// The provider write path under Kafka faults, injected into the embedded mock cluster (SPEC §7):
// a broker down, produce errors, a slow broker. Each answers 503 within the write timeout and the
// path recovers by itself afterwards; every acknowledged registration is in the registry once.
// Mock only (fault injection): skipped when KAFKA_BROKERS names a real cluster.
#include <gtest/gtest.h>

#include <filesystem>
#include <future>
#include <thread>

#include "consumers/command_bus.h"
#include "consumers/kafka_monitor.h"
#include "consumers/projection_runner.h"
#include "consumers/registrar.h"
#include "events/provider_events.h"
#include "tests/integration/kafka_env.h"

namespace dcm {
namespace {

using namespace std::chrono_literals;
using testing::OrDie;

constexpr auto kWriteTimeout = 1000ms;
constexpr int kProduceApi = 0;
constexpr int kNotEnoughReplicas = 19;  // retriable: the producer retries until it gets through

// One control plane's provider write path: bus ─▶ registrar ─▶ registry, over the mock.
class KafkaFaultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::getenv("KAFKA_BROKERS")) GTEST_SKIP() << "fault injection needs the mock cluster";
    env_ = testing::KafkaEnv::Create(1);
    ASSERT_NE(env_, nullptr);
    env_->kafka.extra["reconnect.backoff.max.ms"] = "500";  // KAFKA-NOTES: else ~10 s recovery
    dir_ = std::filesystem::temp_directory_path() / ("dcm-it-faults-" + NewUuidV4().substr(0, 8));
    store_ = OrDie(Store::Open(dir_.string()));
    producer_ = OrDie(Producer::Create(ProviderCommandOptions(env_->kafka)));
    registry_ = std::make_unique<RegistryProjection>(store_.get(), &waiters_, &metrics_);
    view_ = std::make_unique<RegistryView>(store_.get());
    const Topics& topics = env_->config.topics;
    runner_ = std::make_unique<ProjectionRunner>(
        RunnerOptions{.topic = topics.Providers(),
                      .dead_letter_topic = topics.DeadLetter(),
                      .kafka = env_->kafka,
                      .applied = &applied_},
        store_.get(), registry_.get(), producer_.get(), &metrics_);
    RegistrarOptions ro;
    ro.requests_topic = topics.ProviderRequests();
    ro.outcomes_topic = topics.Providers();
    ro.dead_letter_topic = topics.DeadLetter();
    ro.group_id = topics.prefix + "registrar";
    ro.rules = ProviderRules({"vm"});
    ro.kafka = env_->kafka;
    ro.applied = &applied_;
    ro.registry = registry_.get();
    registrar_ = std::make_unique<Registrar>(ro, store_.get(), view_.get(), producer_.get(),
                                             &metrics_, &SystemClock::Instance());
    monitor_ = std::make_unique<KafkaMonitor>(
        std::vector<const Producer*>{producer_.get()},
        KafkaMonitorOptions{.stall_after = 500ms, .probe_interval = 300ms, .probe_timeout = 500ms},
        &metrics_);
    bus_ = std::make_unique<KafkaCommandBus>(
        producer_.get(), &waiters_, topics.ProviderRequests(), topics.Providers(),
        WriteLimits{20s, kWriteTimeout, [m = monitor_.get()] { return m->Ok(); }},
        &SystemClock::Instance(), &metrics_);
    ASSERT_TRUE(runner_->Start());
    ASSERT_TRUE(registrar_->Start());
    monitor_->Start();
    // Registrations wait for the registrar's first assignment (~3 s on the mock).
    auto first = RegisterUntilAccepted("warm-up", 30s);
    ASSERT_TRUE(first.result) << first.result.error().message;
  }

  void TearDown() override {
    if (!env_) return;
    bus_.reset();
    monitor_.reset();
    registrar_->Stop();
    runner_->Stop();
    std::filesystem::remove_all(dir_);
  }

  struct Answer {
    Result<ProviderOutcome> result;
    std::chrono::milliseconds took;
  };

  Answer Register(const std::string& name) {
    ProviderRequest r;
    r.kind = RequestKind::kRegister;
    r.spec.name = name;
    r.spec.endpoint = "http://sp.example:9000/api/" + name;
    r.spec.service_type = "vm";
    const auto started = std::chrono::steady_clock::now();
    std::promise<Result<CloudEvent>> done;
    bus_->Submit(EncodeProviderRequest(r, "test", SystemClock::Instance().NowMillis()),
                 [&done](Result<CloudEvent> outcome) { done.set_value(std::move(outcome)); });
    auto outcome = done.get_future().get();
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - started);
    if (!outcome) return {tl::unexpected(outcome.error()), took};
    return {DecodeProviderOutcome(*outcome), took};
  }

  // Registers `name` until it succeeds (a client retrying after 503), for at most `limit`.
  Answer RegisterUntilAccepted(const std::string& name, std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    Answer answer = Register(name);
    while (!answer.result && std::chrono::steady_clock::now() < deadline) {
      EXPECT_LE(answer.took, kWriteTimeout + 500ms) << answer.result.error().message;
      std::this_thread::sleep_for(200ms);
      answer = Register(name);
    }
    return answer;
  }

  // A write during the fault: 503 (kUnavailable) within the write timeout.
  void ExpectUnavailableInTime(const std::string& name) {
    const Answer answer = Register(name);
    ASSERT_FALSE(answer.result) << "registered during the fault";
    EXPECT_EQ(answer.result.error().code, ErrorCode::kUnavailable) << answer.result.error().message;
    EXPECT_LE(answer.took, kWriteTimeout + 500ms);
    EXPECT_GE(answer.took, kWriteTimeout - 100ms) << answer.result.error().message;
  }

  bool WaitMonitor(bool ok, std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (monitor_->Ok() != ok && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(50ms);
    }
    return monitor_->Ok() == ok;
  }

  // Recovery: the name retried after its 503 is accepted, once, with one id.
  void ExpectRecovers(const std::string& retried) {
    const Answer answer = RegisterUntilAccepted(retried, 30s);
    ASSERT_TRUE(answer.result) << answer.result.error().message;
    const std::string id = answer.result->provider.id;
    // Idempotent: the same id, whether the 503'd request landed. A slow broker can also have cost
    // the registrar its group session, so this one retries through the rebalance as a client would.
    auto again = RegisterUntilAccepted(retried, 30s);
    ASSERT_TRUE(again.result) << again.result.error().message;
    EXPECT_EQ(again.result->provider.id, id);
    auto stored = view_->Get(id);
    ASSERT_TRUE(stored && *stored);
    EXPECT_EQ((*stored)->spec.name, retried);
    EXPECT_TRUE(WaitMonitor(true, 10s)) << monitor_->Verdict().reason;
  }

  std::unique_ptr<testing::KafkaEnv> env_;
  std::filesystem::path dir_;
  Metrics metrics_;
  OutcomeWaiters waiters_;
  AppliedOffsets applied_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Producer> producer_;
  std::unique_ptr<RegistryProjection> registry_;
  std::unique_ptr<RegistryView> view_;
  std::unique_ptr<ProjectionRunner> runner_;
  std::unique_ptr<Registrar> registrar_;
  std::unique_ptr<KafkaMonitor> monitor_;
  std::unique_ptr<KafkaCommandBus> bus_;
};

TEST_F(KafkaFaultsTest, BrokerDownAnswers503WithinTheWriteTimeoutAndRecoversWhenItIsBack) {
  env_->mock->SetBrokerDown(1);
  ExpectUnavailableInTime("during-down");
  EXPECT_TRUE(WaitMonitor(false, 10s)) << "the monitor never saw the broker down";
  env_->mock->SetBrokerUp(1);
  ExpectRecovers("during-down");
}

TEST_F(KafkaFaultsTest, InjectedProduceErrorsAnswer503WithinTheWriteTimeoutAndThenRecover) {
  // ~60 retriable failures: the producer retries (backoff 100 ms) for several seconds.
  env_->mock->PushRequestErrors(kProduceApi, 60, kNotEnoughReplicas);
  ExpectUnavailableInTime("during-errors");
  ExpectRecovers("during-errors");
}

TEST_F(KafkaFaultsTest, ASlowBrokerAnswers503WithinTheWriteTimeoutAndRecoversWhenFastAgain) {
  env_->mock->SetBrokerRtt(1, 3000);
  ExpectUnavailableInTime("during-rtt");
  EXPECT_TRUE(WaitMonitor(false, 10s)) << "the monitor never saw the slow broker";
  env_->mock->SetBrokerRtt(1, 0);
  ExpectRecovers("during-rtt");
}

}  // namespace
}  // namespace dcm
