// The health flow end to end on Kafka (the embedded mock, or KAFKA_BROKERS): providers registered
// through the registrar are probed by the prober of the instance whose group share holds their
// dcm.health partition, through a scripted fake HealthChecker; the health_probed and
// health_changed events land on dcm.health and fold into every instance's HealthView. Covers
// the first probe, the failure threshold and recovery, re-registration, the split of providers
// between two instances, and failover when one of them leaves the group.
#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "consumers/prober.h"
#include "consumers/projection_runner.h"
#include "consumers/registrar.h"
#include "events/health_events.h"
#include "events/provider_events.h"
#include "projections/health_projection.h"
#include "tests/integration/kafka_env.h"

namespace dcm {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;
using SteadyTime = std::chrono::steady_clock::time_point;

const std::vector<std::string> kTypes = {"vm"};

using testing::OrDie;

// Polls `condition` every 10 ms until it holds (true) or `timeout` passes (false).
template <class Condition>
bool WaitUntil(Condition condition, milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

std::string Unique(const std::string& base) { return base + "-" + NewUuidV4().substr(0, 6); }

size_t CountOf(const std::map<std::string, size_t>& counts, const std::string& id) {
  auto it = counts.find(id);
  return it == counts.end() ? 0 : it->second;
}

// What a provider's /health endpoint (or the network in front of it) does.
ProbeResponse Healthy() {
  return {.failure = ProbeFailure::kNone,
          .http_status = 200,
          .body = R"({"status":"healthy"})",
          .latency_us = 800,
          .error = ""};
}
ProbeResponse HttpStatus(int status) {
  return {.failure = ProbeFailure::kNone,
          .http_status = status,
          .body = "",
          .latency_us = 900,
          .error = ""};
}
ProbeResponse Transport(ProbeFailure failure, const std::string& error) {
  return {.failure = failure, .http_status = 0, .body = "", .latency_us = 1000, .error = error};
}

// Short settings so that thresholds and backoff play out in about a second.
HealthCheckConfig FastHealth() {
  HealthCheckConfig h;
  h.interval = 400ms;
  h.timeout = 200ms;
  h.base_backoff = 300ms;
  h.max_backoff = 2s;
  h.max_consecutive_failures = 3;
  h.success_threshold = 1;
  return h;
}

// A long interval: the only probes within a few seconds of a registration are the immediate
// ones, so a probe seen that early proves the prober did not wait for its schedule.
HealthCheckConfig SlowHealth() {
  HealthCheckConfig h = FastHealth();
  h.interval = 30s;
  return h;
}

// A HealthChecker that answers from a per-URL script on its own thread, as the real client
// answers from its I/O thread. A URL's script is a queue of steps and then one step repeated
// forever (healthy unless scripted); a held step keeps the probe in flight until the test
// changes the URL's answer, like a provider that has not answered yet. Counts Check calls per
// provider id (the request key) with their times.
class FakeChecker final : public HealthChecker {
 public:
  struct Step {
    ProbeResponse response;
    bool hold = false;
  };
  static Step Answer(ProbeResponse response) { return {std::move(response), false}; }
  static Step Hold() { return {{}, true}; }

  FakeChecker() : worker_([this] { Run(); }) {}
  ~FakeChecker() override { Stop(); }

  void Script(const std::string& url, std::vector<Step> first, Step then) {
    std::lock_guard lock(mu_);
    scripts_[url] = {std::deque<Step>(first.begin(), first.end()), std::move(then)};
  }

  // From now on `url` answers `response`, and so do its held probes.
  void AnswerFromNowOn(const std::string& url, ProbeResponse response) {
    std::lock_guard lock(mu_);
    scripts_[url] = {{}, Answer(response)};
    for (auto& done : held_[url]) answers_.push_back({std::move(done), response});
    held_.erase(url);
    wake_.notify_one();
  }

  void Check(ProbeRequest request, Done done) override {
    std::unique_lock lock(mu_);
    if (stopped_) {
      lock.unlock();
      done(Transport(ProbeFailure::kConnect, "checker stopped"));
      return;
    }
    checks_[request.key].push_back(std::chrono::steady_clock::now());
    UrlScript& script = scripts_[request.url];
    Step step = script.then;
    if (!script.first.empty()) {
      step = std::move(script.first.front());
      script.first.pop_front();
    }
    if (step.hold) {
      held_[request.url].push_back(std::move(done));
    } else {
      answers_.push_back({std::move(done), std::move(step.response)});
      wake_.notify_one();
    }
  }

  void Forget(const std::string&) override {}

  // Answers what is held (with a transport error) and queued, then joins the worker. Call after
  // Prober::Stop and before the prober is destroyed: the answers call into it.
  void Stop() {
    {
      std::lock_guard lock(mu_);
      if (stopped_) return;
      stopped_ = true;
      for (auto& [url, dones] : held_) {
        for (auto& done : dones) {
          answers_.push_back({std::move(done), Transport(ProbeFailure::kConnect, "stopped")});
        }
      }
      held_.clear();
    }
    wake_.notify_one();
    worker_.join();
  }

  size_t Checks(const std::string& id) const {
    std::lock_guard lock(mu_);
    auto it = checks_.find(id);
    return it == checks_.end() ? 0 : it->second.size();
  }
  std::map<std::string, size_t> Counts() const {
    std::lock_guard lock(mu_);
    std::map<std::string, size_t> counts;
    for (const auto& [id, times] : checks_) counts[id] = times.size();
    return counts;
  }
  std::vector<SteadyTime> CheckTimes(const std::string& id) const {
    std::lock_guard lock(mu_);
    auto it = checks_.find(id);
    return it == checks_.end() ? std::vector<SteadyTime>() : it->second;
  }
  size_t Held(const std::string& url) const {
    std::lock_guard lock(mu_);
    auto it = held_.find(url);
    return it == held_.end() ? 0 : it->second.size();
  }

 private:
  struct UrlScript {
    std::deque<Step> first;
    Step then = Answer(Healthy());
  };
  struct Pending {
    Done done;
    ProbeResponse response;
  };

  void Run() {
    std::unique_lock lock(mu_);
    while (true) {
      wake_.wait(lock, [&] { return stopped_ || !answers_.empty(); });
      if (answers_.empty()) return;  // stopped and drained
      Pending next = std::move(answers_.front());
      answers_.pop_front();
      lock.unlock();
      next.done(std::move(next.response));
      lock.lock();
    }
  }

  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopped_ = false;
  std::map<std::string, UrlScript> scripts_;               // by URL
  std::map<std::string, std::vector<Done>> held_;          // by URL
  std::map<std::string, std::vector<SteadyTime>> checks_;  // by provider id
  std::deque<Pending> answers_;
  std::thread worker_;  // last: starts once the rest is constructed
};

// dcm.health read from the beginning of every partition without a group, as an auditor would.
class HealthLog {
 public:
  explicit HealthLog(const testing::KafkaEnv& env)
      : topic_(env.config.topics.Health()), partitions_(env.config.partitions) {
    consumer_ = OrDie(Consumer::Create(env.kafka, ""));
    std::map<int32_t, int64_t> from;
    for (int32_t p = 0; p < partitions_; ++p) from[p] = Consumer::kBeginning;
    if (!consumer_->Assign(topic_, from)) abort();
  }

  // Reads until every partition is consumed up to its current high watermark.
  bool CatchUp() {
    std::map<int32_t, int64_t> ends;
    for (int32_t p = 0; p < partitions_; ++p) {
      auto marks = consumer_->QueryWatermarks(topic_, p, 5000);
      if (!marks) return false;
      ends[p] = marks->second;
    }
    return WaitUntil(
        [&] {
          Poll();
          for (auto [p, end] : ends) {
            if (next_[p] < end) return false;
          }
          return true;
        },
        10s);
  }

  // The provider's probes and changes so far, in probe seq order.
  std::vector<HealthProbe> Probes(const std::string& id) const {
    auto it = probes_.find(id);
    return it == probes_.end() ? std::vector<HealthProbe>() : it->second;
  }
  std::vector<HealthChange> Changes(const std::string& id) const {
    auto it = changes_.find(id);
    return it == changes_.end() ? std::vector<HealthChange>() : it->second;
  }
  const std::map<std::string, std::vector<HealthProbe>>& AllProbes() const { return probes_; }

 private:
  void Poll() {
    auto batch = consumer_->ConsumeBatch(1000, 50);
    if (!batch) return;
    for (const auto& message : *batch) {
      next_[message.partition] = std::max(next_[message.partition], message.offset + 1);
      auto event = DecodeCloudEvent(message.value);
      if (!event || !seen_.insert(event->id).second) continue;  // the mock may duplicate
      if (event->type == event_type::kHealthProbed) {
        if (auto probe = DecodeHealthProbe(*event)) {
          auto& list = probes_[probe->provider_id];
          list.push_back(std::move(*probe));
          std::sort(list.begin(), list.end(), [](auto& a, auto& b) { return a.seq < b.seq; });
        }
      } else if (event->type == event_type::kHealthChanged) {
        if (auto change = DecodeHealthChange(*event)) {
          auto& list = changes_[change->provider_id];
          list.push_back(std::move(*change));
          std::sort(list.begin(), list.end(), [](auto& a, auto& b) { return a.seq < b.seq; });
        }
      }
    }
  }

  std::string topic_;
  int32_t partitions_;
  std::unique_ptr<Consumer> consumer_;
  std::map<int32_t, int64_t> next_;
  std::set<std::string> seen_;
  std::map<std::string, std::vector<HealthProbe>> probes_;
  std::map<std::string, std::vector<HealthChange>> changes_;
};

// One control-plane instance wired as `dcm serve` wires it (src/cli/serve.cc), with the fake
// checker in place of the HTTP probe client, on its own data dir.
struct Instance {
  Instance(testing::KafkaEnv& env, const std::string& dir, const std::string& name,
           const HealthCheckConfig& health_config)
      : env(env) {
    std::filesystem::create_directories(dir);
    store = OrDie(Store::Open(dir));
    producer = OrDie(Producer::Create(env.kafka));
    registry = std::make_unique<RegistryProjection>(store.get(), &waiters, &metrics);
    registry_view = std::make_unique<RegistryView>(store.get());
    registry_runner = std::make_unique<ProjectionRunner>(
        RunnerOptions{.topic = env.config.topics.Providers(),
                      .dead_letter_topic = env.config.topics.DeadLetter(),
                      .kafka = env.kafka,
                      .applied = &applied},
        store.get(), registry.get(), producer.get(), &metrics);
    health = std::make_unique<HealthProjection>(store.get(), &metrics);
    health_view = std::make_unique<HealthView>(store.get());
    health_runner = std::make_unique<ProjectionRunner>(
        RunnerOptions{.topic = env.config.topics.Health(),
                      .dead_letter_topic = env.config.topics.DeadLetter(),
                      .kafka = env.kafka,
                      .applied = &applied},
        store.get(), health.get(), producer.get(), &metrics);
    ProberOptions po;
    po.health_topic = env.config.topics.Health();
    po.group_id = env.config.topics.prefix + "prober";
    po.source = "dcm/prober/" + name;
    po.health = health_config;
    po.heartbeat = {health_config.heartbeat_timeout, health_config.heartbeat_record_every};
    po.kafka = env.kafka;
    po.applied = &applied;
    prober = std::make_unique<Prober>(po, store.get(), registry_view.get(), health_view.get(),
                                      &checker, producer.get(), &metrics, &SystemClock::Instance());
    registry->AddChangeListener([p = prober.get()](const std::vector<ProviderChange>& changes) {
      p->OnProvidersChanged(changes);
    });
    RegistrarOptions ro;
    ro.requests_topic = env.config.topics.ProviderRequests();
    ro.outcomes_topic = env.config.topics.Providers();
    ro.dead_letter_topic = env.config.topics.DeadLetter();
    ro.group_id = env.config.topics.prefix + "registrar";
    ro.source = "dcm/registrar/" + name;
    ro.rules = ProviderRules(kTypes);
    ro.applied = &applied;
    ro.kafka = env.kafka;
    registrar = std::make_unique<Registrar>(ro, store.get(), registry_view.get(), producer.get(),
                                            &metrics, &SystemClock::Instance());
  }
  ~Instance() {  // the order of serve.cc's shutdown
    prober->Stop();
    checker.Stop();  // no probe completes into a stopped prober
    registrar->Stop();
    registry_runner->Stop();
    health_runner->Stop();
  }

  Status Start() {
    RETURN_IF_ERROR(registry_runner->Start());
    RETURN_IF_ERROR(health_runner->Start());
    RETURN_IF_ERROR(registrar->Start());
    return prober->Start();
  }

  // Produces a registration request as POST /providers does, and waits for its outcome in this
  // instance's registry.
  Result<ProviderOutcome> Register(const std::string& name, const std::string& endpoint,
                                   Liveness liveness = Liveness::kProbe) {
    ProviderRequest r;
    r.kind = RequestKind::kRegister;
    r.spec.name = name;
    r.spec.endpoint = endpoint;
    r.spec.service_type = "vm";
    r.spec.liveness = liveness;
    const CloudEvent event = EncodeProviderRequest(r, "test", SystemClock::Instance().NowMillis());
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

  std::optional<HealthRecord> Health(const std::string& id) const {
    auto record = health_view->Get(id);
    return record ? *record : std::nullopt;
  }

  testing::KafkaEnv& env;
  Metrics metrics;
  OutcomeWaiters waiters;
  AppliedOffsets applied;  // the runners publish, the prober and registrar wait on it
  FakeChecker checker;
  std::unique_ptr<Store> store;
  std::unique_ptr<Producer> producer;
  std::unique_ptr<RegistryProjection> registry;
  std::unique_ptr<RegistryView> registry_view;
  std::unique_ptr<ProjectionRunner> registry_runner;
  std::unique_ptr<HealthProjection> health;
  std::unique_ptr<HealthView> health_view;
  std::unique_ptr<ProjectionRunner> health_runner;
  std::unique_ptr<Prober> prober;
  std::unique_ptr<Registrar> registrar;
};

std::string EndpointOf(const std::string& name) {
  return "http://" + name + ".example:9000/api/vm";
}
std::string HealthUrlOf(const std::string& name) { return EndpointOf(name) + "/health"; }

class HealthFlowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_ = testing::KafkaEnv::Create();
    ASSERT_NE(env_, nullptr);
    root_ = std::filesystem::temp_directory_path() / ("dcm-health-it-" + NewUuidV4().substr(0, 8));
  }
  void TearDown() override {
    instances_.clear();
    env_.reset();
    std::filesystem::remove_all(root_);
  }

  Instance& AddInstance(const std::string& name, const HealthCheckConfig& health) {
    instances_.push_back(std::make_unique<Instance>(*env_, (root_ / name).string(), name, health));
    return *instances_.back();
  }

  milliseconds SessionTimeout() const { return milliseconds(env_->kafka.session_timeout_ms); }
  // The first group join plus one rebalance, with room to spare.
  milliseconds GroupSettleTimeout() const { return 3 * SessionTimeout() + 5s; }

  // True once the probers of `instances` each own some partitions of dcm.health, together all
  // of them, none twice, and have loaded `providers` providers between them.
  ::testing::AssertionResult WaitForSplit(const std::vector<Instance*>& instances,
                                          size_t providers) {
    const bool split = WaitUntil(
        [&] {
          std::set<int32_t> all;
          size_t owned = 0, loaded = 0;
          for (Instance* in : instances) {
            auto partitions = in->prober->OwnedPartitions();
            if (partitions.empty()) return false;
            owned += partitions.size();
            all.insert(partitions.begin(), partitions.end());
            loaded += in->prober->OwnedProviders();
          }
          return owned == all.size() && static_cast<int>(all.size()) == env_->config.partitions &&
                 loaded == providers;
        },
        GroupSettleTimeout());
    if (split) return ::testing::AssertionSuccess();
    auto failure = ::testing::AssertionFailure()
                   << "want " << env_->config.partitions << " partitions and " << providers
                   << " providers between the probers; have";
    for (Instance* in : instances) {
      failure << " [partitions";
      for (int32_t p : in->prober->OwnedPartitions()) failure << " " << p;
      failure << ", providers " << in->prober->OwnedProviders() << "]";
    }
    return failure;
  }

  // Registers `count` providers through `in`, and returns their ids.
  std::vector<std::string> RegisterFleet(Instance& in, int count) {
    std::vector<std::string> ids;
    for (int i = 0; i < count; ++i) {
      const std::string name = Unique("fleet");
      auto outcome = in.Register(name, EndpointOf(name));
      EXPECT_TRUE(outcome && outcome->kind == OutcomeKind::kRegistered);
      if (outcome) ids.push_back(outcome->provider.id);
    }
    return ids;
  }

  std::unique_ptr<testing::KafkaEnv> env_;
  std::filesystem::path root_;
  std::vector<std::unique_ptr<Instance>> instances_;
};

TEST_F(HealthFlowTest, RegisteredProviderIsProbedAtOnceAndBecomesReady) {
  Instance& in = AddInstance("a", SlowHealth());
  ASSERT_TRUE(in.Start());
  ASSERT_TRUE(WaitForSplit({&in}, 0));

  for (int i = 0; i < 3; ++i) {
    const std::string name = Unique("first");
    const SteadyTime registered_at = std::chrono::steady_clock::now();
    auto outcome = in.Register(name, EndpointOf(name));
    ASSERT_TRUE(outcome) << outcome.error().message;
    ASSERT_EQ(outcome->kind, OutcomeKind::kRegistered);
    const std::string id = outcome->provider.id;

    ASSERT_TRUE(WaitUntil(
        [&] {
          auto r = in.Health(id);
          return r && r->status == HealthStatus::kReady;
        },
        5s));
    // One probe, seconds before the 30 s interval would have brought it.
    auto times = in.checker.CheckTimes(id);
    ASSERT_EQ(times.size(), 1u);
    EXPECT_LT(times[0] - registered_at, 2s);

    HealthLog log(*env_);
    ASSERT_TRUE(log.CatchUp());
    auto probes = log.Probes(id);
    ASSERT_EQ(probes.size(), 1u);
    EXPECT_EQ(probes[0].seq, probes[0].time_ms) << "a first probe's seq is its time";
    EXPECT_EQ(probes[0].registration_seq, outcome->provider.seq);
    EXPECT_EQ(probes[0].url, HealthUrlOf(name));
    EXPECT_EQ(probes[0].failure, ProbeFailure::kNone);
    EXPECT_EQ(probes[0].http_status, 200);
    auto changes = log.Changes(id);
    ASSERT_EQ(changes.size(), 1u);
    EXPECT_EQ(changes[0].from, HealthStatus::kPending);
    EXPECT_EQ(changes[0].to, HealthStatus::kReady);
    EXPECT_EQ(changes[0].reason, "healthy probe");
    EXPECT_EQ(changes[0].probe_ids, std::vector<std::string>{probes[0].probe_id});

    auto record = in.Health(id);
    ASSERT_TRUE(record);
    EXPECT_EQ(record->last_probe_id, probes[0].probe_id);
    EXPECT_EQ(record->registration_seq, outcome->provider.seq);
    EXPECT_EQ(record->consecutive_successes, 1);
    EXPECT_EQ(record->consecutive_failures, 0);
  }
}

TEST_F(HealthFlowTest, ThresholdFailedProbesMakeAProviderUnavailableAndAHealthyOneReadyAgain) {
  Instance& in = AddInstance("a", FastHealth());
  ASSERT_TRUE(in.Start());
  ASSERT_TRUE(WaitForSplit({&in}, 0));
  const std::string name = Unique("flaky");
  const std::string url = HealthUrlOf(name);
  // Healthy, then three failures of different classes; the probe after them stays in flight, so
  // the state they produced stays put until the test lets the provider recover.
  in.checker.Script(url,
                    {FakeChecker::Answer(Healthy()), FakeChecker::Answer(HttpStatus(503)),
                     FakeChecker::Answer(Transport(ProbeFailure::kConnect, "connection refused")),
                     FakeChecker::Answer(Transport(ProbeFailure::kTimeout, "no response"))},
                    FakeChecker::Hold());
  auto outcome = in.Register(name, EndpointOf(name));
  ASSERT_TRUE(outcome) << outcome.error().message;
  const std::string id = outcome->provider.id;

  ASSERT_TRUE(WaitUntil(
      [&] {
        auto r = in.Health(id);
        return r && r->status == HealthStatus::kUnavailable;
      },
      10s));
  auto record = *in.Health(id);
  EXPECT_EQ(record.consecutive_failures, 3);
  EXPECT_EQ(record.consecutive_successes, 0);
  EXPECT_EQ(record.last_result, "timeout");
  EXPECT_EQ(record.last_transition_reason, "3 consecutive failures (timeout)");

  HealthLog log(*env_);
  ASSERT_TRUE(log.CatchUp());
  auto probes = log.Probes(id);
  ASSERT_EQ(probes.size(), 4u);
  EXPECT_EQ(probes[0].failure, ProbeFailure::kNone);
  EXPECT_EQ(probes[1].failure, ProbeFailure::kHttpStatus);
  EXPECT_EQ(probes[1].http_status, 503);
  EXPECT_EQ(probes[2].failure, ProbeFailure::kConnect);
  EXPECT_EQ(probes[3].failure, ProbeFailure::kTimeout);
  const std::vector<std::string> failing = {probes[1].probe_id, probes[2].probe_id,
                                            probes[3].probe_id};
  EXPECT_EQ(record.streak_probe_ids, failing);
  EXPECT_EQ(record.seq, probes[3].seq);
  auto changes = log.Changes(id);
  ASSERT_EQ(changes.size(), 2u);  // nothing after the first or second failure
  EXPECT_EQ(changes[0].to, HealthStatus::kReady);
  EXPECT_EQ(changes[1].from, HealthStatus::kReady);
  EXPECT_EQ(changes[1].to, HealthStatus::kUnavailable);
  EXPECT_EQ(changes[1].seq, probes[3].seq);
  EXPECT_EQ(changes[1].probe_ids, failing);

  // The provider recovers: the probe in flight answers healthy.
  ASSERT_TRUE(WaitUntil([&] { return in.checker.Held(url) == 1; }, 5s));
  in.checker.AnswerFromNowOn(url, Healthy());
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto r = in.Health(id);
        return r && r->status == HealthStatus::kReady;
      },
      5s));
  record = *in.Health(id);
  EXPECT_EQ(record.consecutive_failures, 0);
  EXPECT_GE(record.consecutive_successes, 1);
  ASSERT_TRUE(log.CatchUp());
  probes = log.Probes(id);
  changes = log.Changes(id);
  ASSERT_GE(probes.size(), 5u);
  ASSERT_EQ(changes.size(), 3u);
  EXPECT_EQ(changes[2].from, HealthStatus::kUnavailable);
  EXPECT_EQ(changes[2].to, HealthStatus::kReady);
  EXPECT_EQ(changes[2].seq, probes[4].seq);
  EXPECT_EQ(changes[2].probe_ids, std::vector<std::string>{probes[4].probe_id});
}

TEST_F(HealthFlowTest, ReRegistrationProbesAtOnceAndRestartsTheCounters) {
  Instance& in = AddInstance("a", SlowHealth());
  ASSERT_TRUE(in.Start());
  ASSERT_TRUE(WaitForSplit({&in}, 0));
  const std::string name = Unique("rereg");
  // Healthy once, then refusing connections.
  in.checker.Script(HealthUrlOf(name), {FakeChecker::Answer(Healthy())},
                    FakeChecker::Answer(Transport(ProbeFailure::kConnect, "connection refused")));
  auto first = in.Register(name, EndpointOf(name));
  ASSERT_TRUE(first) << first.error().message;
  const std::string id = first->provider.id;
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto r = in.Health(id);
        return r && r->status == HealthStatus::kReady;
      },
      5s));

  // The same name POSTed again, twice: each is an update with a newer seq, probed at once (the
  // interval is 30 s), and each probe starts the counters over, so two failures in a row still
  // count one.
  int64_t last_seq = first->provider.seq;
  for (int round = 1; round <= 2; ++round) {
    SCOPED_TRACE("re-registration " + std::to_string(round));
    const SteadyTime registered_at = std::chrono::steady_clock::now();
    auto again = in.Register(name, EndpointOf(name));
    ASSERT_TRUE(again) << again.error().message;
    ASSERT_EQ(again->kind, OutcomeKind::kUpdated);
    ASSERT_EQ(again->provider.id, id);
    ASSERT_GT(again->provider.seq, last_seq);
    last_seq = again->provider.seq;
    ASSERT_TRUE(WaitUntil(
        [&] {
          auto r = in.Health(id);
          return r && r->registration_seq == last_seq;
        },
        5s));
    auto times = in.checker.CheckTimes(id);
    ASSERT_EQ(times.size(), static_cast<size_t>(1 + round));
    EXPECT_LT(times.back() - registered_at, 2s);
    auto record = *in.Health(id);
    EXPECT_EQ(record.status, HealthStatus::kPending);
    EXPECT_EQ(record.consecutive_failures, 1);
    EXPECT_EQ(record.consecutive_successes, 0);
    EXPECT_EQ(record.streak_probe_ids.size(), 1u);
    EXPECT_EQ(record.last_transition_reason, "re-registered");
  }

  HealthLog log(*env_);
  ASSERT_TRUE(log.CatchUp());
  auto probes = log.Probes(id);
  ASSERT_EQ(probes.size(), 3u);
  EXPECT_EQ(probes[2].registration_seq, last_seq);
  auto changes = log.Changes(id);
  ASSERT_EQ(changes.size(), 2u);  // Pending→Ready, then Ready→Pending; Pending→Pending is none
  EXPECT_EQ(changes[1].from, HealthStatus::kReady);
  EXPECT_EQ(changes[1].to, HealthStatus::kPending);
  EXPECT_EQ(changes[1].reason, "re-registered");
  EXPECT_EQ(changes[1].probe_ids, std::vector<std::string>{probes[1].probe_id});
}

// Checks over `log` that each provider's probes carry strictly increasing seqs (no two probers
// wrote one provider at once) and, for those completed at or after `since_ms`, lie at least 0.9
// interval apart, less `slack` for the scheduler thread's wake-up. Returns the smallest gap.
milliseconds ExpectOneProbeStreamPerProvider(const HealthLog& log,
                                             const std::vector<std::string>& ids, int64_t since_ms,
                                             milliseconds interval, milliseconds slack) {
  milliseconds smallest = milliseconds::max();
  const int64_t min_gap = interval.count() * 9 / 10 - slack.count();
  for (const auto& id : ids) {
    auto probes = log.Probes(id);
    for (size_t i = 1; i < probes.size(); ++i) {
      EXPECT_GT(probes[i].seq, probes[i - 1].seq) << id;
      if (probes[i - 1].time_ms < since_ms) continue;
      const int64_t gap = probes[i].time_ms - probes[i - 1].time_ms;
      smallest = std::min(smallest, milliseconds(gap));
      EXPECT_GE(gap, min_gap) << id << " seq " << probes[i].seq;
    }
  }
  return smallest;
}

TEST_F(HealthFlowTest, TwoInstancesSplitTheProvidersAndEachIsProbedByOneOfThemAtTheInterval) {
  const HealthCheckConfig health = FastHealth();
  Instance& a = AddInstance("a", health);
  Instance& b = AddInstance("b", health);
  ASSERT_TRUE(a.Start());
  ASSERT_TRUE(b.Start());
  const auto ids = RegisterFleet(a, 40);
  ASSERT_EQ(ids.size(), 40u);
  ASSERT_TRUE(WaitForSplit({&a, &b}, ids.size()));
  const auto a_partitions = a.prober->OwnedPartitions();
  const auto b_partitions = b.prober->OwnedPartitions();

  // A window in which every provider is probed several times.
  const int64_t window_start_ms = SystemClock::Instance().NowMillis();
  const auto a_before = a.checker.Counts(), b_before = b.checker.Counts();
  auto probed_in_window = [&](const std::string& id) {
    return std::pair<size_t, size_t>{CountOf(a.checker.Counts(), id) - CountOf(a_before, id),
                                     CountOf(b.checker.Counts(), id) - CountOf(b_before, id)};
  };
  ASSERT_TRUE(WaitUntil(
      [&] {
        return std::all_of(ids.begin(), ids.end(), [&](const std::string& id) {
          auto [on_a, on_b] = probed_in_window(id);
          return on_a + on_b >= 5;
        });
      },
      15s));
  ASSERT_EQ(a.prober->OwnedPartitions(), a_partitions);  // no rebalance in the window
  ASSERT_EQ(b.prober->OwnedPartitions(), b_partitions);

  // Each provider by exactly the instance owning its partition.
  const std::set<int32_t> on_a(a_partitions.begin(), a_partitions.end());
  for (const auto& id : ids) {
    auto [count_a, count_b] = probed_in_window(id);
    if (on_a.count(KeyPartition(id, env_->config.partitions))) {
      EXPECT_GT(count_a, 0u) << id;
      EXPECT_EQ(count_b, 0u) << id;
    } else {
      EXPECT_EQ(count_a, 0u) << id;
      EXPECT_GT(count_b, 0u) << id;
    }
  }

  HealthLog log(*env_);
  ASSERT_TRUE(log.CatchUp());
  const auto smallest =
      ExpectOneProbeStreamPerProvider(log, ids, window_start_ms, health.interval, 50ms);
  printf("smallest gap between probes of one provider: %lld ms\n",
         static_cast<long long>(smallest.count()));
}

// /readyz waits for Joined(): a prober that the group gives no partition of dcm.health (more
// instances than partitions) gets no on_assign, and must still become ready.
TEST_F(HealthFlowTest, AProberTheGroupGivesNoPartitionIsStillJoined) {
  env_ = testing::KafkaEnv::Create(/*partitions=*/1);
  ASSERT_NE(env_, nullptr);
  Instance& a = AddInstance("a", FastHealth());
  Instance& b = AddInstance("b", FastHealth());
  ASSERT_TRUE(a.Start());
  ASSERT_TRUE(b.Start());
  ASSERT_TRUE(WaitUntil(
      [&] {
        return a.prober->Joined() && b.prober->Joined() &&
               a.prober->OwnedPartitions().size() + b.prober->OwnedPartitions().size() == 1;
      },
      GroupSettleTimeout()))
      << "a joined=" << a.prober->Joined() << " b joined=" << b.prober->Joined();
}

TEST_F(HealthFlowTest, WhenAnInstanceLeavesTheSurvivorProbesAllProvidersWithinTheSessionTimeout) {
  const HealthCheckConfig health = FastHealth();
  Instance& a = AddInstance("a", health);
  Instance& b = AddInstance("b", health);
  ASSERT_TRUE(a.Start());
  ASSERT_TRUE(b.Start());
  const auto ids = RegisterFleet(a, 40);
  ASSERT_EQ(ids.size(), 40u);
  ASSERT_TRUE(WaitForSplit({&a, &b}, ids.size()));

  const auto stopping_at = std::chrono::steady_clock::now();
  const auto a_before = a.checker.Counts();
  b.prober->Stop();  // leaves the group
  const auto b_after = b.checker.Counts();
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto a_now = a.checker.Counts();
        return std::all_of(ids.begin(), ids.end(), [&](const std::string& id) {
          return CountOf(a_now, id) > CountOf(a_before, id);
        });
      },
      SessionTimeout() + 4s));
  const auto took = std::chrono::steady_clock::now() - stopping_at;
  printf("the survivor probed all %zu providers %lld ms after the other left\n", ids.size(),
         static_cast<long long>(std::chrono::duration_cast<milliseconds>(took).count()));
  EXPECT_EQ(a.prober->OwnedPartitions().size(), static_cast<size_t>(env_->config.partitions));
  EXPECT_EQ(a.prober->OwnedProviders(), ids.size());
  EXPECT_EQ(b.checker.Counts(), b_after);  // a stopped prober probes nothing

  // The survivor continued each provider's probe sequence after what the other produced.
  HealthLog log(*env_);
  ASSERT_TRUE(log.CatchUp());
  ExpectOneProbeStreamPerProvider(log, ids, INT64_MAX, health.interval, 0ms);
}

TEST_F(HealthFlowTest, AHeartbeatProviderIsNeverProbedReadyOnABeatExpiredAfterTheTimeout) {
  HealthCheckConfig health = FastHealth();
  health.heartbeat_timeout = 2s;
  Instance& in = AddInstance("a", health);
  ASSERT_TRUE(in.Start());
  ASSERT_TRUE(WaitForSplit({&in}, 0));
  const std::string probed_name = Unique("probed");
  auto probed = in.Register(probed_name, EndpointOf(probed_name));
  const std::string edge_name = Unique("edge");
  auto edge = in.Register(edge_name, EndpointOf(edge_name), Liveness::kHeartbeat);
  ASSERT_TRUE(probed && edge);
  const std::string id = edge->provider.id;
  EXPECT_EQ(edge->provider.spec.liveness, Liveness::kHeartbeat);
  // The prober runs: its probed twin is probed and Ready.
  ASSERT_TRUE(WaitUntil([&] { return in.checker.Checks(probed->provider.id) >= 2; }, 5s));

  auto beat = [&] {
    auto reply = in.prober->Beat(edge->provider, BeatResult::kHealthy);
    EXPECT_TRUE(reply) << reply.error().message;
    return reply ? *reply : HealthRecord{};
  };
  EXPECT_EQ(beat().status, HealthStatus::kReady);
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto r = in.Health(id);
        return r && r->status == HealthStatus::kReady;
      },
      5s));
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto r = in.Health(id);
        return r && r->status == HealthStatus::kUnavailable;
      },
      5s));
  const HealthRecord expired = *in.Health(id);
  EXPECT_EQ(expired.last_transition_reason, "heartbeat_expired");
  const int64_t after_ms = expired.last_transition_time_ms - expired.last_beat_time_ms;
  EXPECT_GE(after_ms, 2000);
  EXPECT_LE(after_ms, 2000 + 1000);
  EXPECT_EQ(beat().status, HealthStatus::kReady);
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto r = in.Health(id);
        return r && r->status == HealthStatus::kReady;
      },
      5s));

  EXPECT_EQ(in.checker.Checks(id), 0u) << "a heartbeat provider is never probed";
  HealthLog log(*env_);
  ASSERT_TRUE(log.CatchUp());
  EXPECT_TRUE(log.Probes(id).empty());
  auto changes = log.Changes(id);
  ASSERT_EQ(changes.size(), 3u);
  EXPECT_EQ(changes[0].to, HealthStatus::kReady);
  EXPECT_EQ(changes[1].to, HealthStatus::kUnavailable);
  EXPECT_EQ(changes[1].reason, "heartbeat_expired");
  EXPECT_EQ(changes[2].to, HealthStatus::kReady);
}

// Liveness both (SPEC §8): probed at the interval and tracked by its beats; either signal failing
// makes it Unavailable, and it is Ready only when neither fails.
TEST_F(HealthFlowTest, ABothProviderIsUnavailableWhenEitherSignalFailsAndReadyWhenNeitherDoes) {
  HealthCheckConfig health = FastHealth();
  health.heartbeat_timeout = 2s;
  Instance& in = AddInstance("a", health);
  ASSERT_TRUE(in.Start());
  ASSERT_TRUE(WaitForSplit({&in}, 0));
  const std::string name = Unique("both");
  auto both = in.Register(name, EndpointOf(name), Liveness::kBoth);
  ASSERT_TRUE(both) << both.error().message;
  const std::string id = both->provider.id;
  EXPECT_EQ(both->provider.spec.liveness, Liveness::kBoth);
  auto status_is = [&](HealthStatus wanted) {
    auto r = in.Health(id);
    return r && r->status == wanted;
  };
  auto beat = [&] {
    auto reply = in.prober->Beat(both->provider, BeatResult::kHealthy);
    EXPECT_TRUE(reply) << reply.error().message;
    return reply ? reply->status : HealthStatus::kPending;
  };
  // Never beaten: Ready on its probes alone, and it never expires.
  ASSERT_TRUE(WaitUntil([&] { return status_is(HealthStatus::kReady); }, 5s));
  EXPECT_EQ(in.prober->HeartbeatProviders(), std::vector<std::string>{id});
  EXPECT_EQ(beat(), HealthStatus::kReady);
  ASSERT_TRUE(WaitUntil([&] { return in.Health(id) && in.Health(id)->both; }, 5s));

  // The beats stop: Unavailable (heartbeat_expired) while the probes keep answering healthy.
  ASSERT_TRUE(WaitUntil([&] { return status_is(HealthStatus::kUnavailable); }, 5s));
  EXPECT_EQ(in.Health(id)->last_transition_reason, "heartbeat_expired");
  const size_t checks = in.checker.Checks(id);
  ASSERT_TRUE(WaitUntil([&] { return in.checker.Checks(id) >= checks + 2; }, 5s));
  EXPECT_EQ(in.Health(id)->status, HealthStatus::kUnavailable) << "healthy probes do not recover";
  EXPECT_EQ(beat(), HealthStatus::kReady);
  ASSERT_TRUE(WaitUntil([&] { return status_is(HealthStatus::kReady); }, 5s));

  // The probes fail while it keeps beating: Unavailable; healthy probes make it Ready again.
  in.checker.AnswerFromNowOn(HealthUrlOf(name), Transport(ProbeFailure::kConnect, "refused"));
  ASSERT_TRUE(WaitUntil([&] { return beat() == HealthStatus::kUnavailable; }, 5s));
  EXPECT_EQ(in.Health(id)->last_transition_reason, "3 consecutive failures (connect)");
  EXPECT_EQ(in.Health(id)->beat_status, HealthStatus::kReady);
  in.checker.AnswerFromNowOn(HealthUrlOf(name), Healthy());
  ASSERT_TRUE(WaitUntil([&] { return beat() == HealthStatus::kReady; }, 10s));
  ASSERT_TRUE(WaitUntil([&] { return status_is(HealthStatus::kReady); }, 5s));

  HealthLog log(*env_);
  ASSERT_TRUE(log.CatchUp());
  std::vector<std::pair<HealthStatus, std::string>> changes;
  for (const auto& c : log.Changes(id)) changes.emplace_back(c.to, c.reason);
  const std::vector<std::pair<HealthStatus, std::string>> expected = {
      {HealthStatus::kReady, "healthy probe"},
      {HealthStatus::kUnavailable, "heartbeat_expired"},
      {HealthStatus::kReady, "heartbeat"},
      {HealthStatus::kUnavailable, "3 consecutive failures (connect)"},
      {HealthStatus::kReady, "healthy probe"}};
  EXPECT_EQ(changes, expected);
}

TEST_F(HealthFlowTest, ASurvivorExpiresTheHeartbeatProvidersItTakesOverFromTheLoggedLastBeat) {
  HealthCheckConfig health = FastHealth();
  health.heartbeat_timeout = 4s;
  health.heartbeat_record_every = 3s;
  Instance& a = AddInstance("a", health);
  Instance& b = AddInstance("b", health);
  ASSERT_TRUE(a.Start());
  ASSERT_TRUE(b.Start());
  ASSERT_TRUE(WaitForSplit({&a, &b}, 0));
  const auto b_partitions = b.prober->OwnedPartitions();
  const std::set<int32_t> on_b(b_partitions.begin(), b_partitions.end());
  std::vector<Provider> providers;
  for (int i = 0; i < 12; ++i) {
    const std::string name = Unique("edge");
    auto outcome = a.Register(name, EndpointOf(name), Liveness::kHeartbeat);
    ASSERT_TRUE(outcome && outcome->kind == OutcomeKind::kRegistered);
    providers.push_back(outcome->provider);
  }
  auto owned_by_b = [&](const std::string& id) {
    return on_b.count(KeyPartition(id, env_->config.partitions)) > 0;
  };
  ASSERT_TRUE(std::any_of(providers.begin(), providers.end(),
                          [&](const Provider& p) { return owned_by_b(p.id); }));
  // Each provider beats at its owner only, four times 700 ms apart: the owner records the first
  // beat and coalesces the other three.
  std::map<std::string, int64_t> last_beat_ms;
  for (int round = 0; round < 4; ++round) {
    if (round > 0) std::this_thread::sleep_for(700ms);
    for (const Provider& p : providers) {
      Instance& owner = owned_by_b(p.id) ? b : a;
      auto reply = owner.prober->Beat(p, BeatResult::kHealthy);
      ASSERT_TRUE(reply) << reply.error().message;
      last_beat_ms[p.id] = reply->last_beat_time_ms;
    }
  }
  // b leaves at once: its coalesced beats must reach the log, or a would time b's providers
  // from their first beat (2.1 s early). a must not time them from when it joined either. The
  // rebalance hands every partition out again (a's too), and a provider known only from the log
  // expires at its logged last beat + HEARTBEAT_RECORD_EVERY + HEARTBEAT_TIMEOUT (its previous
  // owner may have taken beats it did not record): 2.1 s + 3 s + 4 s after the first beat.
  b.prober->Stop();
  ASSERT_TRUE(WaitUntil(
      [&] {
        return std::all_of(providers.begin(), providers.end(), [&](const Provider& p) {
          auto r = a.Health(p.id);
          return r && r->status == HealthStatus::kUnavailable;
        });
      },
      health.heartbeat_timeout + health.heartbeat_record_every + SessionTimeout() + 4s));
  EXPECT_EQ(a.prober->OwnedPartitions().size(), static_cast<size_t>(env_->config.partitions));
  HealthLog log(*env_);
  ASSERT_TRUE(log.CatchUp());
  for (const Provider& p : providers) {
    SCOPED_TRACE(p.id + (owned_by_b(p.id) ? " (taken over from b)" : " (a's own)"));
    const HealthRecord r = *a.Health(p.id);
    EXPECT_EQ(r.last_transition_reason, "heartbeat_expired");
    EXPECT_EQ(r.last_beat_time_ms, last_beat_ms[p.id]);
    EXPECT_NEAR(r.last_transition_time_ms - last_beat_ms[p.id], 7000, 1000);
    const auto changes = log.Changes(p.id);
    EXPECT_EQ(
        std::count_if(changes.begin(), changes.end(),
                      [](const HealthChange& c) { return c.to == HealthStatus::kUnavailable; }),
        1)
        << "expired once";
  }
}

}  // namespace
}  // namespace dcm
