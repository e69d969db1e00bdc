// The instance flow end to end on Kafka (the embedded mock, or KAFKA_BROKERS): operation requests
// produced to dcm.instance-requests through the KafkaCommandBus (as the HTTP handlers produce
// them) are decided by the InstanceWorker that owns the root's partition; its sagas call a
// scripted fake SP (and, where a test says so, a fake Policy Manager) and record their facts on
// dcm.instances, which every node's InstanceProjection folds. Providers and their health are
// produced as the registrar and the prober would (dcm.providers, dcm.health).
//
// Covers: rehydration away from an Unavailable provider, one decision per root under concurrent
// requests, the Policy Manager's verdicts, failed and idempotent SP creates, the deferred-cleanup
// state machine, poison and duplicated requests, sagas across a worker stop and restart and
// across a partition handover, and two workers splitting the roots and failing over.
//
// InstanceFlowTest shares one cluster and one worker (built-in placement, cleanup driven by
// RunCleanupCycle) between its tests; every test uses its own service type, so providers of
// other tests never take part in its placements. The other suites start their own cluster.
#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "consumers/command_bus.h"
#include "consumers/instance_worker.h"
#include "consumers/projection_runner.h"
#include "events/health_events.h"
#include "events/instance_events.h"
#include "events/provider_events.h"
#include "projections/health_projection.h"
#include "projections/health_state.h"
#include "projections/instance_projection.h"
#include "projections/registry_projection.h"
#include "src/common/placement_ports.h"
#include "src/common/time_format.h"
#include "tests/integration/kafka_env.h"

namespace dcm {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

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

int64_t NowMs() { return SystemClock::Instance().NowMillis(); }

// ---- fakes ----------------------------------------------------------------------------------

// The SP instance API of every provider, keyed by endpoint. Each endpoint answers creates and
// deletes as scripted (default: 201 with a PROVISIONING body, 204); an answer may be a status, a
// transport error, or a hold that keeps the call in flight until the endpoint's answer changes,
// like an SP that has not answered yet. Records every call. Thread-safe (the worker's saga pool
// and cleanup call it concurrently).
class FakeSp final : public ServiceProviderApi {
 public:
  enum class Op { kCreate, kDelete };
  struct Answer {
    int status = 0;  // 0: the default (201 for a create, 204 for a delete)
    bool transport_error = false;
    milliseconds delay{0};
    bool hold = false;
  };
  static Answer Status(int status, milliseconds delay = 0ms) { return {status, false, delay}; }
  static Answer Transport() { return {0, true}; }
  static Answer Hold() { return {0, false, 0ms, true}; }

  struct Call {
    Op op;
    std::string endpoint;
    std::string id;
    std::string spec;
  };

  ~FakeSp() override { Stop(); }

  // From now on (held calls included) `endpoint` answers creates / deletes with `answer`.
  void OnCreate(const std::string& endpoint, Answer answer) { Set(Op::kCreate, endpoint, answer); }
  void OnDelete(const std::string& endpoint, Answer answer) { Set(Op::kDelete, endpoint, answer); }

  // Held calls and every later one fail with a transport error (teardown).
  void Stop() {
    std::lock_guard lock(mu_);
    stopped_ = true;
    cv_.notify_all();
  }

  Result<SpReply> CreateInstance(const std::string& endpoint, const std::string& instance_id,
                                 const std::string& spec_json) override {
    return Serve(Op::kCreate, endpoint, instance_id, spec_json);
  }
  Result<SpReply> DeleteInstance(const std::string& endpoint,
                                 const std::string& instance_id) override {
    return Serve(Op::kDelete, endpoint, instance_id, "");
  }

  std::vector<Call> Calls() const {
    std::lock_guard lock(mu_);
    return calls_;
  }
  // Calls of `op`; an empty endpoint or id matches any.
  size_t Count(Op op, const std::string& endpoint, const std::string& id = "") const {
    std::lock_guard lock(mu_);
    return static_cast<size_t>(std::count_if(calls_.begin(), calls_.end(), [&](const Call& c) {
      return c.op == op && (endpoint.empty() || c.endpoint == endpoint) &&
             (id.empty() || c.id == id);
    }));
  }
  size_t Held() const {
    std::lock_guard lock(mu_);
    return held_;
  }

 private:
  void Set(Op op, const std::string& endpoint, Answer answer) {
    std::lock_guard lock(mu_);
    answers_[{op, endpoint}] = answer;
    cv_.notify_all();
  }

  Answer Lookup(Op op, const std::string& endpoint) const {
    auto it = answers_.find({op, endpoint});
    return it == answers_.end() ? Answer{} : it->second;
  }

  Result<SpReply> Serve(Op op, const std::string& endpoint, const std::string& id,
                        const std::string& spec) {
    std::unique_lock lock(mu_);
    calls_.push_back({op, endpoint, id, spec});
    Answer answer = Lookup(op, endpoint);
    if (answer.hold) {
      ++held_;
      cv_.wait(lock, [&] { return stopped_ || !Lookup(op, endpoint).hold; });
      --held_;
      answer = stopped_ ? Transport() : Lookup(op, endpoint);
    }
    if (stopped_) answer = Transport();
    lock.unlock();
    if (answer.delay > 0ms) std::this_thread::sleep_for(answer.delay);
    if (answer.transport_error) {
      return MakeError(ErrorCode::kUnavailable, "connection refused (fake SP)");
    }
    SpReply reply;
    reply.http_status = answer.status != 0 ? answer.status : op == Op::kCreate ? 201 : 204;
    if (op == Op::kCreate && reply.http_status == 201) {
      reply.body = R"({"id":")" + id + R"(","status":"PROVISIONING"})";
    }
    return reply;
  }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;
  size_t held_ = 0;
  std::map<std::pair<Op, std::string>, Answer> answers_;
  std::vector<Call> calls_;
};

// The Policy Manager: answers every evaluation with the scripted decision (after an optional
// delay) and records the specs it was asked about. Thread-safe.
class FakePolicy final : public PolicyEngine {
 public:
  void Answer(Result<PolicyDecision> answer, milliseconds delay = 0ms) {
    std::lock_guard lock(mu_);
    answer_ = std::move(answer);
    delay_ = delay;
  }
  Result<PolicyDecision> Evaluate(const std::string& spec_json) override {
    Result<PolicyDecision> answer = PolicyDecision{};
    milliseconds delay;
    {
      std::lock_guard lock(mu_);
      evaluated_.push_back(spec_json);
      answer = answer_;
      delay = delay_;
    }
    if (delay > 0ms) std::this_thread::sleep_for(delay);
    return answer;
  }
  std::vector<std::string> Evaluated() const {
    std::lock_guard lock(mu_);
    return evaluated_;
  }

 private:
  mutable std::mutex mu_;
  Result<PolicyDecision> answer_ = PolicyDecision{};
  milliseconds delay_{0};
  std::vector<std::string> evaluated_;
};

PolicyDecision Verdict(PolicyDecision::Verdict verdict, const std::string& detail) {
  PolicyDecision d;
  d.verdict = verdict;
  d.detail = detail;
  return d;
}

PolicyDecision Approved(const std::string& spec, const std::string& selected_provider) {
  PolicyDecision d;
  d.spec = spec;
  d.selected_provider = selected_provider;
  d.status = "APPROVED";
  return d;
}

// ---- one control-plane instance -------------------------------------------------------------

struct WorkerSettings {
  std::string name = "w";
  // Long by default: the tests drive cleanup with RunCleanupCycle, one cycle at a time.
  milliseconds cleanup_interval = std::chrono::hours(1);
  int cleanup_max_retries = 3;
  int threads = 0;                      // the saga pool; 0: the product's default
  FederationApi* federation = nullptr;  // SPEC §10: peers to place on when no provider fits
  bool repatriate = false;              // FEDERATION_REPATRIATE
  milliseconds repatriate_interval{30000};
};

// A provider as the tests registered it.
struct ProviderRef {
  std::string id;
  std::string name;
  std::string endpoint;
  std::string service_type;
  int64_t seq = 1;
};

// One `dcm serve` instance's Kafka-facing parts for instances, wired as src/cli/serve.cc wires
// them, on its own data dir: the registry, health and instance projections with their runners,
// the instance command bus, and (once started) an InstanceWorker with the given fakes.
struct Node {
  Node(testing::KafkaEnv& env, const std::string& dir) : env(env) {
    std::filesystem::create_directories(dir);
    store = OrDie(Store::Open(dir));
    producer = OrDie(Producer::Create(env.kafka));
    registry = std::make_unique<RegistryProjection>(store.get(), &registry_waiters, &metrics);
    registry_view = std::make_unique<RegistryView>(store.get());
    registry_runner = std::make_unique<ProjectionRunner>(
        RunnerOptions{env.config.topics.Providers(), env.config.topics.DeadLetter(), env.kafka},
        store.get(), registry.get(), producer.get(), &metrics);
    health = std::make_unique<HealthProjection>(store.get(), &metrics);
    health_view = std::make_unique<HealthView>(store.get());
    health_runner = std::make_unique<ProjectionRunner>(
        RunnerOptions{env.config.topics.Health(), env.config.topics.DeadLetter(), env.kafka},
        store.get(), health.get(), producer.get(), &metrics);
    instances = std::make_unique<InstanceProjection>(store.get(), &waiters, &metrics);
    view = std::make_unique<InstanceView>(store.get());
    instance_runner = std::make_unique<ProjectionRunner>(
        RunnerOptions{.topic = env.config.topics.Instances(),
                      .dead_letter_topic = env.config.topics.DeadLetter(),
                      .kafka = env.kafka,
                      .applied = &applied},
        store.get(), instances.get(), producer.get(), &metrics);
  }

  ~Node() {  // the order of serve.cc's shutdown
    StopWorker();
    bus.reset();
    registry_runner->Stop();
    health_runner->Stop();
    instance_runner->Stop();
  }

  Status Start() {
    RETURN_IF_ERROR(registry_runner->Start());
    RETURN_IF_ERROR(health_runner->Start());
    RETURN_IF_ERROR(instance_runner->Start());
    ASSIGN_OR_RETURN(
        const int partitions,
        TopicPartitionCount(producer->handle(), env.config.topics.InstanceRequests(), 10000));
    bus = std::make_unique<KafkaCommandBus>(
        producer.get(), &waiters, env.config.topics.InstanceRequests(),
        env.config.topics.Instances(),
        WriteLimits{milliseconds(30000), milliseconds(5000), nullptr, false},
        &SystemClock::Instance(), &metrics, partitions);
    return OkStatus();
  }

  Status StartWorker(ServiceProviderApi* sp, PolicyEngine* policy, WorkerSettings settings = {}) {
    InstanceWorkerOptions o;
    o.requests_topic = env.config.topics.InstanceRequests();
    o.instances_topic = env.config.topics.Instances();
    o.dead_letter_topic = env.config.topics.DeadLetter();
    o.group_id = env.config.topics.prefix + "instances";
    o.source = "dcm/instance-worker/" + settings.name;
    o.kafka = env.kafka;
    o.cleanup_interval = settings.cleanup_interval;
    o.cleanup_max_retries = settings.cleanup_max_retries;
    if (settings.threads > 0) o.threads = settings.threads;
    o.federation = settings.federation;
    o.repatriate = settings.repatriate;
    o.repatriate_interval = settings.repatriate_interval;
    o.catch_up_timeout = milliseconds(15000);
    auto created = std::make_unique<InstanceWorker>(
        o, store.get(), &applied, view.get(), registry_view.get(), health_view.get(), sp, policy,
        producer.get(), &metrics, &SystemClock::Instance());
    {
      std::lock_guard lock(listener_mu);
      worker = std::move(created);
      source = o.source;
    }
    return worker->Start();
  }

  // Stops the worker (it leaves the group) and destroys it.
  void StopWorker() {
    std::unique_ptr<InstanceWorker> stopping;
    {
      std::lock_guard lock(listener_mu);
      stopping = std::move(worker);
    }
    if (stopping) stopping->Stop();
  }

  // Completes `request` as an operation_requested event, as the HTTP handlers do
  // (src/http/instance_handlers.cc SubmitOperation), submits it on the instance command bus and
  // returns the outcome this node's projection applied (operation_completed or _failed).
  std::future<Result<InstanceEvent>> Submit(InstanceEvent& request) {
    request.type = event_type::kOperationRequested;
    request.event_id = NewUuidV4();
    request.source = "dcm/http/test";
    request.subject = request.root;
    request.time_ms = NowMs();
    const CloudEvent event = EncodeInstanceEvent(request);
    request.request_id = request.event_id;
    auto promise = std::make_shared<std::promise<Result<InstanceEvent>>>();
    bus->Submit(event, [promise](Result<CloudEvent> outcome) {
      if (!outcome) {
        promise->set_value(tl::unexpected(outcome.error()));
      } else {
        promise->set_value(DecodeInstanceEvent(*outcome));
      }
    });
    return promise->get_future();
  }
  Result<InstanceEvent> Run(InstanceEvent& request) { return Submit(request).get(); }

  HealthStatus HealthOf(const ProviderRef& p) const {
    auto record = health_view->Get(p.id);
    return EffectiveHealthStatus(record && *record ? &**record : nullptr, p.seq);
  }

  template <class T>
  static std::optional<T> Or(Result<std::optional<T>> result) {
    return result ? *result : std::nullopt;
  }
  std::optional<CatalogItemInstance> Cii(const std::string& id) const {
    return Or(view->GetCatalogItemInstance(id));
  }
  std::optional<Resource> ResourceOf(const std::string& id) const {
    return Or(view->GetResource(id));
  }
  std::optional<ServiceTypeInstance> InstanceOf(const std::string& id) const {
    return Or(view->GetInstance(id));
  }
  std::optional<CleanupRecord> CleanupOf(const std::string& id) const {
    return Or(view->GetCleanup(id));
  }
  bool Decided(const std::string& request_id) const {
    auto outcome = view->RequestOutcome(request_id);
    return outcome && *outcome;
  }

  testing::KafkaEnv& env;
  Metrics metrics;
  OutcomeWaiters registry_waiters;
  OutcomeWaiters waiters;
  AppliedOffsets applied;  // the instance runner publishes, the worker waits on it
  std::unique_ptr<Store> store;
  std::unique_ptr<Producer> producer;
  std::unique_ptr<RegistryProjection> registry;
  std::unique_ptr<RegistryView> registry_view;
  std::unique_ptr<ProjectionRunner> registry_runner;
  std::unique_ptr<HealthProjection> health;
  std::unique_ptr<HealthView> health_view;
  std::unique_ptr<ProjectionRunner> health_runner;
  std::unique_ptr<InstanceProjection> instances;
  std::unique_ptr<InstanceView> view;
  std::unique_ptr<ProjectionRunner> instance_runner;
  std::unique_ptr<KafkaCommandBus> bus;
  std::mutex listener_mu;  // guards `worker` against the projection's listener
  std::unique_ptr<InstanceWorker> worker;
  std::string source;  // the worker's `source`
};

// ---- requests, as the HTTP handlers build them ----------------------------------------------

std::string SpecOf(const std::string& service_type) {
  return R"({"service_type":")" + service_type + R"("})";
}

InstanceEvent NewRequest(Operation op, const std::string& root) {
  InstanceEvent e;
  e.operation = OperationName(op);
  e.root = root;
  return e;
}

// POST /catalog-item-instances?id=
InstanceEvent CreateCii(const std::string& service_type, const std::string& id = Unique("cii")) {
  InstanceEvent r = NewRequest(Operation::kCreateCatalogItemInstance, id);
  r.catalog_item_instance_id = id;
  r.resource_id = NewUuidV4();
  r.spec = SpecOf(service_type);
  r.service_type = service_type;
  r.display_name = "test " + id;
  return r;
}

// POST /catalog-item-instances/{id}:rehydrate, as `node` would accept it: naming the resource
// (generation) it replaces.
InstanceEvent RehydrateCii(const Node& node, const std::string& id) {
  InstanceEvent r = NewRequest(Operation::kRehydrateCatalogItemInstance, id);
  r.catalog_item_instance_id = id;
  r.new_resource_id = NewUuidV4();
  auto current = node.Cii(id);
  EXPECT_TRUE(current) << "catalog item instance " << id;
  if (current) r.old_resource_id = current->resource_id;
  return r;
}

// POST /resources?id=
InstanceEvent CreateResource(const std::string& service_type,
                             const std::string& id = Unique("res")) {
  InstanceEvent r = NewRequest(Operation::kCreateResource, id);
  r.resource_id = id;
  r.spec = SpecOf(service_type);
  r.service_type = service_type;
  return r;
}

// POST /resources/{id}:rehydrate
InstanceEvent RehydrateResource(const Resource& resource) {
  InstanceEvent r = NewRequest(Operation::kRehydrateResource, resource.root);
  r.resource_id = resource.id;
  r.new_resource_id = NewUuidV4();
  return r;
}

// DELETE /resources/{id}
InstanceEvent DeleteResource(const Resource& resource) {
  InstanceEvent r = NewRequest(Operation::kDeleteResource, resource.root);
  r.resource_id = resource.id;
  return r;
}

// DELETE /service-type-instances/{id}?deferred=true
InstanceEvent DeleteInstanceDeferred(const ServiceTypeInstance& instance) {
  InstanceEvent r = NewRequest(Operation::kDeleteServiceTypeInstance, instance.root);
  r.instance_id = instance.id;
  r.deferred = true;
  return r;
}

// POST /cleanup-queue/{id}:retry
InstanceEvent RetryCleanup(const CleanupRecord& record) {
  InstanceEvent r = NewRequest(Operation::kRetryCleanup, record.root);
  r.instance_id = record.instance_id;
  return r;
}

// ---- dcm.instances as an auditor reads it ---------------------------------------------------

// Every partition of dcm.instances from the beginning, without a group. CatchUp() reads on
// from where the previous call stopped.
class InstanceLog {
 public:
  explicit InstanceLog(const testing::KafkaEnv& env)
      : topic_(env.config.topics.Instances()), partitions_(env.config.partitions) {
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
          auto batch = consumer_->ConsumeBatch(1000, 50);
          if (batch) {
            for (const auto& m : *batch) {
              next_[m.partition] = std::max(next_[m.partition], m.offset + 1);
              auto event = DecodeCloudEvent(m.value);
              if (!event) continue;
              auto decoded = DecodeInstanceEvent(*event);
              if (decoded) facts_.push_back(std::move(*decoded));
            }
          }
          for (auto [p, end] : ends) {
            if (next_[p] < end) return false;
          }
          return true;
        },
        10s);
  }

  // The facts of one request, in log order (a root's facts share a partition).
  std::vector<InstanceEvent> OfRequest(const std::string& request_id) const {
    return Where([&](const InstanceEvent& e) { return e.request_id == request_id; });
  }
  std::vector<InstanceEvent> Where(const std::function<bool(const InstanceEvent&)>& accept) const {
    std::vector<InstanceEvent> out;
    for (const auto& e : facts_) {
      if (accept(e)) out.push_back(e);
    }
    return out;
  }
  size_t Count(const std::string& request_id, const std::string& type) const {
    return Where(
               [&](const InstanceEvent& e) { return e.request_id == request_id && e.type == type; })
        .size();
  }

 private:
  std::string topic_;
  int32_t partitions_;
  std::unique_ptr<Consumer> consumer_;
  std::map<int32_t, int64_t> next_;
  std::vector<InstanceEvent> facts_;
};

std::vector<std::string> Types(const std::vector<InstanceEvent>& facts) {
  std::vector<std::string> out;
  for (const auto& f : facts) out.push_back(f.type);
  return out;
}

// Fails what the fakes hold and everything after, so that the workers can stop: declared after
// the Harness, it runs before the Harness stops them, even when a test returns early.
struct ReleaseOnExit {
  std::vector<FakeSp*> sps;
  ~ReleaseOnExit() {
    for (FakeSp* sp : sps) sp->Stop();
  }
};

// ---- one cluster with its nodes -------------------------------------------------------------

class Harness {
 public:
  static std::unique_ptr<Harness> Create(int partitions = 4) {
    auto h = std::unique_ptr<Harness>(new Harness());
    h->env = testing::KafkaEnv::Create(partitions);
    if (!h->env) return nullptr;
    h->root =
        std::filesystem::temp_directory_path() / ("dcm-instance-it-" + NewUuidV4().substr(0, 8));
    h->producer = OrDie(Producer::Create(h->env->kafka));
    h->watermarks = OrDie(Consumer::Create(h->env->kafka, ""));
    h->log_ = std::make_unique<InstanceLog>(*h->env);  // fetches from now on
    return h;
  }
  ~Harness() {
    // Stopped together: one worker leaving rebalances the others, and a worker stopping in the
    // middle of a rebalance waits for it (a second or more on the mock).
    std::vector<std::thread> stoppers;
    for (auto& node : nodes) stoppers.emplace_back([&node] { node->StopWorker(); });
    for (auto& t : stoppers) t.join();
    nodes.clear();
    log_.reset();
    watermarks.reset();
    producer.reset();
    env.reset();
    std::error_code ec;
    std::filesystem::remove_all(root, ec);
  }

  // dcm.instances as read so far; call CatchUp() for everything produced up to now.
  InstanceLog& Log() { return *log_; }

  int32_t Partitions() const { return env->config.partitions; }
  int32_t PartitionOf(const std::string& root_id) const {
    return KeyPartition(root_id, Partitions());
  }
  milliseconds SessionTimeout() const { return milliseconds(env->kafka.session_timeout_ms); }
  // The first group join plus one rebalance, with room to spare.
  milliseconds GroupSettleTimeout() const { return 3 * SessionTimeout() + 5s; }

  // A started node on data dir `name` (reopened if it existed).
  Node& AddNode(const std::string& name) {
    nodes.push_back(std::make_unique<Node>(*env, (root / name).string()));
    if (auto status = nodes.back()->Start(); !status) {
      fprintf(stderr, "node start failed: %s\n", status.error().message.c_str());
      abort();
    }
    return *nodes.back();
  }
  void RemoveNode(Node& node) {
    std::erase_if(nodes, [&](const auto& n) { return n.get() == &node; });
  }

  // Registers a provider of `service_type` as the registrar would decide it, and probes it
  // healthy; returns once every node sees it Ready.
  ProviderRef AddProvider(const std::string& base, const std::string& service_type) {
    ProviderRef p;
    p.name = Unique(base);
    p.id = p.name;
    p.endpoint = "http://" + p.name + ".example:9000/api/" + service_type;
    p.service_type = service_type;
    ProviderOutcome o;
    o.kind = OutcomeKind::kRegistered;
    o.request_id = NewUuidV4();
    o.seq = p.seq;
    o.provider.id = p.id;
    o.provider.spec.name = p.name;
    o.provider.spec.endpoint = p.endpoint;
    o.provider.spec.service_type = service_type;
    o.provider.create_time = FormatRfc3339Millis(NowMs());
    o.provider.update_time = o.provider.create_time;
    o.provider.seq = p.seq;
    const CloudEvent event = EncodeProviderOutcome(o, "dcm/registrar/test", NowMs());
    EXPECT_TRUE(
        producer->ProduceSync(env->config.topics.Providers(), p.id, EncodeCloudEvent(event)));
    SetHealth(p, HealthStatus::kReady);
    return p;
  }

  // Produces a probe that makes `p` Ready (healthy) or Unavailable (a refused connection, with a
  // failure threshold of 1), as the prober would; returns once every node sees it.
  void SetHealth(const ProviderRef& p, HealthStatus want) {
    HealthProbe probe;
    probe.probe_id = NewUuidV4();
    probe.time_ms = NowMs();
    probe.provider_id = p.id;
    {
      std::lock_guard lock(seq_mu_);
      last_probe_seq_ = std::max(last_probe_seq_ + 1, probe.time_ms);
      probe.seq = last_probe_seq_;
    }
    probe.registration_seq = p.seq;
    probe.url = p.endpoint + "/health";
    const bool healthy = want == HealthStatus::kReady;
    probe.failure = healthy ? ProbeFailure::kNone : ProbeFailure::kConnect;
    probe.http_status = healthy ? 200 : 0;
    probe.latency_us = 700;
    probe.error = healthy ? "" : "connection refused";
    probe.failure_threshold = 1;
    probe.success_threshold = 1;
    EXPECT_TRUE(
        producer->ProduceSync(env->config.topics.Health(), p.id,
                              EncodeCloudEvent(EncodeHealthProbe(probe, "dcm/prober/test"))));
    for (auto& node : nodes) {
      EXPECT_TRUE(WaitUntil([&] { return node->HealthOf(p) == want; }, 10s))
          << p.name << " is not " << HealthStatusName(want) << " on a node";
    }
  }

  // True once every node's instance projection applied dcm.instances up to the high watermarks
  // of now: the facts produced so far are in every view.
  bool Settle() {
    const std::string topic = env->config.topics.Instances();
    std::map<int32_t, int64_t> highs;
    for (int32_t p = 0; p < Partitions(); ++p) {
      auto marks = watermarks->QueryWatermarks(topic, p, 5000);
      if (!marks) return false;
      highs[p] = marks->second;
    }
    return WaitUntil(
        [&] {
          for (auto& node : nodes) {
            auto applied = node->store->LoadOffsets(InstanceProjection::kName, topic);
            if (!applied) return false;
            for (auto [p, high] : highs) {
              if ((*applied)[p] < high) return false;
            }
          }
          return true;
        },
        10s);
  }

  // True once the workers of `group` each own some partitions, together all of them, none twice.
  bool WaitForSplit(const std::vector<Node*>& group) {
    return WaitUntil(
        [&] {
          std::set<int32_t> all;
          size_t owned = 0;
          for (Node* n : group) {
            if (!n->worker || !n->worker->Joined()) return false;
            auto partitions = n->worker->OwnedPartitions();
            if (partitions.empty()) return false;
            owned += partitions.size();
            all.insert(partitions.begin(), partitions.end());
          }
          return owned == all.size() && static_cast<int32_t>(all.size()) == Partitions();
        },
        GroupSettleTimeout());
  }

  // `count` root ids of the form base-xxxxxx, `per_partition` on each partition.
  std::vector<std::string> RootsOnEveryPartition(const std::string& base, int per_partition) {
    std::map<int32_t, int> have;
    std::vector<std::string> roots;
    while (static_cast<int>(roots.size()) < per_partition * Partitions()) {
      std::string id = Unique(base);
      if (have[PartitionOf(id)] == per_partition) continue;
      ++have[PartitionOf(id)];
      roots.push_back(std::move(id));
    }
    return roots;
  }

  std::unique_ptr<testing::KafkaEnv> env;
  std::filesystem::path root;
  std::unique_ptr<Producer> producer;  // the test's own: providers, health, poison
  std::unique_ptr<Consumer> watermarks;
  std::vector<std::unique_ptr<Node>> nodes;

 private:
  Harness() = default;
  std::unique_ptr<InstanceLog> log_;
  std::mutex seq_mu_;
  int64_t last_probe_seq_ = 0;
};

// ---- one cluster, one worker, many tests ----------------------------------------------------

class InstanceFlowTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    harness_ = Harness::Create().release();
    ASSERT_NE(harness_, nullptr);
    sp_ = new FakeSp();
    node_ = &harness_->AddNode("suite");
    ASSERT_TRUE(node_->StartWorker(sp_, nullptr, {.name = "suite"}));
    // A provider no test uses, registered while the worker joins: a producer's first message
    // costs about a second on the mock.
    harness_->AddProvider("unused", Unique("svc"));
    ASSERT_TRUE(WaitUntil([] { return node_->worker->Joined(); }, harness_->GroupSettleTimeout()));
  }
  static void TearDownTestSuite() {
    sp_->Stop();  // nothing stays held
    delete harness_;
    delete sp_;
  }

  Harness& h() { return *harness_; }
  Node& node() { return *node_; }
  FakeSp& sp() { return *sp_; }
  InstanceWorker& worker() { return *node_->worker; }

  // One cleanup cycle, then waits until its facts are in the view.
  void CleanupCycle() {
    worker().RunCleanupCycle();
    ASSERT_TRUE(h().Settle());
  }

  static Harness* harness_;
  static Node* node_;
  static FakeSp* sp_;
};

Harness* InstanceFlowTest::harness_ = nullptr;
Node* InstanceFlowTest::node_ = nullptr;
FakeSp* InstanceFlowTest::sp_ = nullptr;

using Op = FakeSp::Op;

TEST_F(InstanceFlowTest, RehydrationAwayFromAnUnavailableProviderPlacesOnTheOtherAndQueuesTheOld) {
  const std::string type = Unique("svc");
  const ProviderRef a = h().AddProvider("a", type);
  const ProviderRef b = h().AddProvider("b", type);

  InstanceEvent create = CreateCii(type);
  auto created = node().Run(create);
  ASSERT_TRUE(created) << created.error().message;
  ASSERT_EQ(created->type, event_type::kOperationCompleted) << created->error;
  EXPECT_EQ(created->provider_name, a.name);  // both empty: ties go by name
  const std::string cii = create.catalog_item_instance_id;
  const std::string old_id = create.resource_id;
  EXPECT_EQ(sp().Count(Op::kCreate, a.endpoint, old_id), 1u);

  h().SetHealth(a, HealthStatus::kUnavailable);
  InstanceEvent rehydrate = RehydrateCii(node(), cii);
  const std::string new_id = rehydrate.new_resource_id;
  auto rehydrated = node().Run(rehydrate);
  ASSERT_TRUE(rehydrated) << rehydrated.error().message;
  ASSERT_EQ(rehydrated->type, event_type::kOperationCompleted) << rehydrated->error;
  EXPECT_EQ(rehydrated->provider_name, b.name);
  EXPECT_EQ(rehydrated->old_resource_id, old_id);
  EXPECT_EQ(rehydrated->new_resource_id, new_id);

  // Read-your-writes: the view has the outcome's state when the waiter fires.
  auto item = node().Cii(cii);
  ASSERT_TRUE(item);
  EXPECT_EQ(item->resource_id, new_id);
  EXPECT_EQ(item->provider_name, b.name);
  auto placed = node().ResourceOf(new_id);
  ASSERT_TRUE(placed);
  EXPECT_EQ(placed->provider_name, b.name);
  EXPECT_EQ(placed->root, cii);
  EXPECT_EQ(placed->intent, SpecOf(type));
  EXPECT_FALSE(node().ResourceOf(old_id));
  auto old_instance = node().InstanceOf(old_id);
  ASSERT_TRUE(old_instance);
  EXPECT_FALSE(old_instance->deleted);
  auto queued = node().CleanupOf(old_id);
  ASSERT_TRUE(queued);
  EXPECT_EQ(queued->provider_name, a.name);
  EXPECT_EQ(queued->status, kCleanupPending);
  EXPECT_EQ(sp().Count(Op::kCreate, b.endpoint, new_id), 1u);
  EXPECT_EQ(sp().Count(Op::kCreate, a.endpoint, new_id), 0u);

  // Cleanup cycles park the old record on its Unavailable provider instead of deleting.
  for (int i = 0; i < 3; ++i) CleanupCycle();
  queued = node().CleanupOf(old_id);
  ASSERT_TRUE(queued);
  EXPECT_EQ(queued->status, kCleanupPendingProvider);
  EXPECT_EQ(queued->retry_count, 0);
  EXPECT_EQ(sp().Count(Op::kDelete, a.endpoint), 0u);

  InstanceLog& log = h().Log();
  ASSERT_TRUE(log.CatchUp());
  EXPECT_EQ(
      Types(log.OfRequest(create.request_id)),
      (std::vector<std::string>{
          event_type::kOperationStarted, event_type::kResourcePlaced, event_type::kInstanceCreated,
          event_type::kCatalogItemInstanceCreated, event_type::kOperationCompleted}));
  const auto facts = log.OfRequest(rehydrate.request_id);
  ASSERT_EQ(
      Types(facts),
      (std::vector<std::string>{
          event_type::kOperationStarted, event_type::kResourcePlaced, event_type::kInstanceCreated,
          event_type::kCleanupEnqueued, event_type::kResourceDeleted,
          event_type::kCatalogItemInstanceRehydrated, event_type::kOperationCompleted}));
  EXPECT_EQ(facts[0].old_resource_id, old_id);
  EXPECT_EQ(facts[1].resource_id, new_id);
  EXPECT_EQ(facts[1].provider_name, b.name);
  EXPECT_EQ(facts[1].old_resource_id, old_id);
  EXPECT_EQ(facts[2].instance_id, new_id);
  EXPECT_EQ(facts[3].instance_id, old_id);
  EXPECT_EQ(facts[3].provider_name, a.name);
  EXPECT_EQ(facts[4].resource_id, old_id);
  EXPECT_EQ(facts[5].new_resource_id, new_id);
  for (const auto& f : facts) {
    EXPECT_EQ(f.root, cii);
    EXPECT_EQ(f.source, node().source);
  }
  EXPECT_EQ(log.Where([&](const InstanceEvent& e) {
                 return e.type == event_type::kCleanupParked && e.instance_id == old_id;
               })
                .size(),
            1u)
      << "a parked record is parked once, not once per cycle";
}

TEST_F(InstanceFlowTest, ConcurrentRehydrationsOfOneRootLetExactlyOneProceedAndFailTheRestWith409) {
  const std::string type = Unique("svc");
  const ProviderRef p = h().AddProvider("c", type);
  InstanceEvent create = CreateCii(type);
  auto created = node().Run(create);
  ASSERT_TRUE(created && created->type == event_type::kOperationCompleted);
  const std::string cii = create.catalog_item_instance_id;

  // A slow SP keeps the first rehydration in progress while the others are decided.
  sp().OnCreate(p.endpoint, FakeSp::Status(201, 800ms));
  constexpr int kConcurrent = 8;
  std::vector<InstanceEvent> requests;
  std::vector<std::future<Result<InstanceEvent>>> outcomes;
  for (int i = 0; i < kConcurrent; ++i) requests.push_back(RehydrateCii(node(), cii));
  for (auto& r : requests) outcomes.push_back(node().Submit(r));

  int completed = 0, conflicts = 0;
  std::string winner_new_id;
  for (int i = 0; i < kConcurrent; ++i) {
    auto outcome = outcomes[i].get();
    ASSERT_TRUE(outcome) << outcome.error().message;
    if (outcome->type == event_type::kOperationCompleted) {
      ++completed;
      winner_new_id = requests[i].new_resource_id;
    } else {
      ASSERT_EQ(outcome->type, event_type::kOperationFailed);
      EXPECT_EQ(outcome->http_status, 409) << outcome->error;
      EXPECT_EQ(outcome->reason, "conflict");
      ++conflicts;
    }
  }
  EXPECT_EQ(completed, 1);
  EXPECT_EQ(conflicts, kConcurrent - 1);

  size_t creates = 0;
  for (const auto& r : requests) creates += sp().Count(Op::kCreate, "", r.new_resource_id);
  EXPECT_EQ(creates, 1u) << "exactly one SP create for one new id";
  EXPECT_EQ(sp().Count(Op::kCreate, p.endpoint, winner_new_id), 1u);
  auto item = node().Cii(cii);
  ASSERT_TRUE(item);
  EXPECT_EQ(item->resource_id, winner_new_id);

  InstanceLog& log = h().Log();
  ASSERT_TRUE(log.CatchUp());
  for (const auto& r : requests) {
    const bool won = r.new_resource_id == winner_new_id;
    EXPECT_EQ(log.Count(r.request_id, event_type::kOperationCompleted), won ? 1u : 0u);
    EXPECT_EQ(log.Count(r.request_id, event_type::kOperationFailed), won ? 0u : 1u);
    EXPECT_EQ(log.Count(r.request_id, event_type::kOperationStarted), won ? 1u : 0u);
  }

  // One proceeds per generation: a late request naming the replaced resource is refused, the
  // next one naming the current resource proceeds.
  sp().OnCreate(p.endpoint, FakeSp::Status(201));
  InstanceEvent stale = RehydrateCii(node(), cii);
  stale.old_resource_id = create.resource_id;
  auto refused = node().Run(stale);
  ASSERT_TRUE(refused) << refused.error().message;
  ASSERT_EQ(refused->type, event_type::kOperationFailed);
  EXPECT_EQ(refused->http_status, 409) << refused->error;
  EXPECT_EQ(sp().Count(Op::kCreate, "", stale.new_resource_id), 0u);
  InstanceEvent next = RehydrateCii(node(), cii);
  EXPECT_EQ(next.old_resource_id, winner_new_id);
  auto proceeded = node().Run(next);
  ASSERT_TRUE(proceeded) << proceeded.error().message;
  EXPECT_EQ(proceeded->type, event_type::kOperationCompleted) << proceeded->error;
}

TEST_F(InstanceFlowTest,
       FailedSpCreateDuringRehydrationFailsWith502AndLeavesTheOldResourceInPlace) {
  const std::string type = Unique("svc");
  const ProviderRef p = h().AddProvider("d", type);
  InstanceEvent create = CreateCii(type);
  auto created = node().Run(create);
  ASSERT_TRUE(created && created->type == event_type::kOperationCompleted);
  const std::string cii = create.catalog_item_instance_id;
  const std::string old_id = create.resource_id;

  // A redirect is a failed create too: it is never followed.
  const std::pair<const char*, FakeSp::Answer> failures[] = {
      {"HTTP 500", FakeSp::Status(500)},
      {"HTTP 302", FakeSp::Status(302)},
      {"transport error", FakeSp::Transport()}};
  for (const auto& [name, answer] : failures) {
    SCOPED_TRACE(name);
    sp().OnCreate(p.endpoint, answer);
    InstanceEvent rehydrate = RehydrateCii(node(), cii);
    const std::string new_id = rehydrate.new_resource_id;
    EXPECT_EQ(rehydrate.old_resource_id, old_id);
    auto failed = node().Run(rehydrate);
    ASSERT_TRUE(failed) << failed.error().message;
    ASSERT_EQ(failed->type, event_type::kOperationFailed);
    EXPECT_EQ(failed->http_status, 502) << failed->error;
    EXPECT_EQ(failed->reason, "create_failed");
    EXPECT_EQ(sp().Count(Op::kCreate, p.endpoint, new_id), 1u);

    auto item = node().Cii(cii);
    ASSERT_TRUE(item);
    EXPECT_EQ(item->resource_id, old_id);
    EXPECT_TRUE(node().ResourceOf(old_id));
    EXPECT_FALSE(node().ResourceOf(new_id));
    EXPECT_FALSE(node().InstanceOf(new_id));
    auto old_instance = node().InstanceOf(old_id);
    ASSERT_TRUE(old_instance);
    EXPECT_FALSE(old_instance->deleted);
    EXPECT_FALSE(node().CleanupOf(old_id)) << "nothing is queued when the create failed";
    EXPECT_FALSE(*node().view->GetSaga(cii));
    EXPECT_EQ(sp().Count(Op::kDelete, p.endpoint), 0u);

    InstanceLog& log = h().Log();
    ASSERT_TRUE(log.CatchUp());
    EXPECT_EQ(Types(log.OfRequest(rehydrate.request_id)),
              (std::vector<std::string>{event_type::kOperationStarted, event_type::kResourcePlaced,
                                        event_type::kInstanceCreateFailed,
                                        event_type::kOperationFailed}));
  }
}

TEST_F(InstanceFlowTest, SpCreateAnswering409CountsAsCreated) {
  const std::string type = Unique("svc");
  const ProviderRef p = h().AddProvider("e", type);
  sp().OnCreate(p.endpoint, FakeSp::Status(409));  // the SP already has this id
  InstanceEvent create = CreateResource(type);
  auto created = node().Run(create);
  ASSERT_TRUE(created) << created.error().message;
  ASSERT_EQ(created->type, event_type::kOperationCompleted) << created->error;
  EXPECT_EQ(created->resource_id, create.resource_id);

  auto resource = node().ResourceOf(create.resource_id);
  ASSERT_TRUE(resource);
  EXPECT_EQ(resource->provider_name, p.name);
  EXPECT_EQ(resource->status, "PROVISIONING");
  auto instance = node().InstanceOf(create.resource_id);
  ASSERT_TRUE(instance);
  EXPECT_FALSE(instance->deleted);
  EXPECT_EQ(*node().view->LiveInstances(p.id), 1);

  InstanceLog& log = h().Log();
  ASSERT_TRUE(log.CatchUp());
  auto facts = log.Where([&](const InstanceEvent& e) {
    return e.request_id == create.request_id && e.type == event_type::kInstanceCreated;
  });
  ASSERT_EQ(facts.size(), 1u);
  EXPECT_EQ(facts[0].http_status, 409);
}

TEST_F(InstanceFlowTest, CleanupParksRecordsWhileTheProviderIsNotReadyAndDeletesOnceItIsReady) {
  const std::string type = Unique("svc");
  const ProviderRef p = h().AddProvider("f", type);
  InstanceEvent create = CreateResource(type);
  ASSERT_EQ(node().Run(create)->type, event_type::kOperationCompleted);
  const std::string id = create.resource_id;

  // DELETE of a resource on a provider that is not Ready queues it rather than calling the SP.
  h().SetHealth(p, HealthStatus::kUnavailable);
  InstanceEvent remove = DeleteResource(*node().ResourceOf(id));
  auto removed = node().Run(remove);
  ASSERT_TRUE(removed && removed->type == event_type::kOperationCompleted);
  auto record = node().CleanupOf(id);
  ASSERT_TRUE(record);
  EXPECT_EQ(record->status, kCleanupPending);

  for (int cycle = 1; cycle <= 4; ++cycle) {
    SCOPED_TRACE("cycle " + std::to_string(cycle));
    CleanupCycle();
    record = node().CleanupOf(id);
    ASSERT_TRUE(record);
    EXPECT_EQ(record->status, kCleanupPendingProvider);
    EXPECT_EQ(record->retry_count, 0) << "a parked record burns no retry";
    EXPECT_EQ(sp().Count(Op::kDelete, p.endpoint), 0u);
  }

  h().SetHealth(p, HealthStatus::kReady);
  CleanupCycle();
  EXPECT_FALSE(node().CleanupOf(id));
  EXPECT_EQ(sp().Count(Op::kDelete, p.endpoint, id), 1u);
  auto instance = node().InstanceOf(id);
  ASSERT_TRUE(instance);
  EXPECT_TRUE(instance->deleted);
  EXPECT_EQ(*node().view->LiveInstances(p.id), 0);
  CleanupCycle();
  EXPECT_EQ(sp().Count(Op::kDelete, p.endpoint, id), 1u) << "a deleted record is not retried";

  InstanceLog& log = h().Log();
  ASSERT_TRUE(log.CatchUp());
  auto parked = log.Where([&](const InstanceEvent& e) {
    return e.type == event_type::kCleanupParked && e.instance_id == id;
  });
  ASSERT_EQ(parked.size(), 1u);
  EXPECT_EQ(parked[0].status, kCleanupPendingProvider);
  auto attempts = log.Where([&](const InstanceEvent& e) {
    return e.type == event_type::kCleanupAttempted && e.instance_id == id;
  });
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0].outcome, "deleted");
}

TEST_F(InstanceFlowTest, CleanupTakesAnSp404AsGone) {
  const std::string type = Unique("svc");
  const ProviderRef p = h().AddProvider("g", type);
  InstanceEvent create = CreateResource(type);
  ASSERT_EQ(node().Run(create)->type, event_type::kOperationCompleted);
  const std::string id = create.resource_id;
  InstanceEvent remove = DeleteInstanceDeferred(*node().InstanceOf(id));
  auto removed = node().Run(remove);
  ASSERT_TRUE(removed && removed->type == event_type::kOperationCompleted);
  ASSERT_TRUE(node().CleanupOf(id));
  EXPECT_EQ(sp().Count(Op::kDelete, p.endpoint), 0u) << "a deferred delete does not call the SP";

  sp().OnDelete(p.endpoint, FakeSp::Status(404));
  CleanupCycle();
  EXPECT_FALSE(node().CleanupOf(id));
  EXPECT_EQ(sp().Count(Op::kDelete, p.endpoint, id), 1u);
  EXPECT_TRUE(node().InstanceOf(id)->deleted);

  InstanceLog& log = h().Log();
  ASSERT_TRUE(log.CatchUp());
  auto attempts = log.Where([&](const InstanceEvent& e) {
    return e.type == event_type::kCleanupAttempted && e.instance_id == id;
  });
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0].outcome, "gone");
  EXPECT_EQ(attempts[0].http_status, 404);
}

TEST_F(InstanceFlowTest, CleanupRetriesAFailingDeleteUpToMaxRetriesThenFailsUntilRetried) {
  const std::string type = Unique("svc");
  const ProviderRef p = h().AddProvider("h", type);
  InstanceEvent create = CreateResource(type);
  ASSERT_EQ(node().Run(create)->type, event_type::kOperationCompleted);
  const std::string id = create.resource_id;
  InstanceEvent remove = DeleteInstanceDeferred(*node().InstanceOf(id));
  ASSERT_EQ(node().Run(remove)->type, event_type::kOperationCompleted);

  // Only FAILED records can be retried.
  InstanceEvent early = RetryCleanup(*node().CleanupOf(id));
  auto refused = node().Run(early);
  ASSERT_TRUE(refused && refused->type == event_type::kOperationFailed);
  EXPECT_EQ(refused->http_status, 409);

  sp().OnDelete(p.endpoint, FakeSp::Status(500));
  constexpr int kMaxRetries = 3;  // WorkerSettings
  for (int cycle = 1; cycle <= kMaxRetries; ++cycle) {
    SCOPED_TRACE("cycle " + std::to_string(cycle));
    CleanupCycle();
    auto record = node().CleanupOf(id);
    ASSERT_TRUE(record);
    EXPECT_EQ(record->retry_count, cycle);
    EXPECT_EQ(record->status, cycle < kMaxRetries ? kCleanupPending : kCleanupFailedStatus);
    EXPECT_NE(record->last_error.find("500"), std::string::npos) << record->last_error;
    EXPECT_GT(record->last_attempt_ms, 0);
    EXPECT_EQ(sp().Count(Op::kDelete, p.endpoint, id), static_cast<size_t>(cycle));
  }
  for (int i = 0; i < 2; ++i) CleanupCycle();  // FAILED is left for an operator
  EXPECT_EQ(sp().Count(Op::kDelete, p.endpoint, id), static_cast<size_t>(kMaxRetries));
  EXPECT_EQ(node().CleanupOf(id)->status, kCleanupFailedStatus);

  {
    InstanceLog& log = h().Log();
    ASSERT_TRUE(log.CatchUp());
    auto attempts = log.Where([&](const InstanceEvent& e) {
      return e.type == event_type::kCleanupAttempted && e.instance_id == id;
    });
    ASSERT_EQ(attempts.size(), static_cast<size_t>(kMaxRetries));
    for (int i = 0; i < kMaxRetries; ++i) {
      EXPECT_EQ(attempts[i].outcome, "failed");
      EXPECT_EQ(attempts[i].retry_count, i + 1);
      EXPECT_EQ(attempts[i].http_status, 500);
      EXPECT_EQ(attempts[i].max_retries, kMaxRetries);
    }
    auto alerts = log.Where([&](const InstanceEvent& e) {
      return e.type == event_type::kCleanupFailed && e.instance_id == id;
    });
    ASSERT_EQ(alerts.size(), 1u);
    EXPECT_EQ(alerts[0].retry_count, kMaxRetries);
    EXPECT_EQ(alerts[0].max_retries, kMaxRetries);
    EXPECT_EQ(alerts[0].provider_name, p.name);
  }

  // The operator retries: PENDING with no retries used, then deleted at the next cycle.
  sp().OnDelete(p.endpoint, FakeSp::Status(204));
  InstanceEvent retry = RetryCleanup(*node().CleanupOf(id));
  auto retried = node().Run(retry);
  ASSERT_TRUE(retried) << retried.error().message;
  ASSERT_EQ(retried->type, event_type::kOperationCompleted) << retried->error;
  auto record = node().CleanupOf(id);
  ASSERT_TRUE(record);
  EXPECT_EQ(record->status, kCleanupPending);
  EXPECT_EQ(record->retry_count, 0);
  CleanupCycle();
  EXPECT_FALSE(node().CleanupOf(id));
  EXPECT_EQ(sp().Count(Op::kDelete, p.endpoint, id), static_cast<size_t>(kMaxRetries + 1));
  EXPECT_TRUE(node().InstanceOf(id)->deleted);
}

TEST_F(InstanceFlowTest, PoisonRequestsGoToTheDeadLetterTopicAndTheWorkerKeepsDeciding) {
  const std::string type = Unique("svc");
  h().AddProvider("i", type);
  const std::string root = Unique("res");
  const int32_t partition = h().PartitionOf(root);
  const std::string not_json = "not an event " + NewUuidV4();
  const std::string unknown_type =
      R"({"specversion":"1.0","id":")" + NewUuidV4() +
      R"(","source":"s","type":"dcm.instance.unknown_thing","time":"2026-01-01T00:00:00Z","data":{}})";
  // A fact is not a request either.
  InstanceEvent fact;
  fact.type = event_type::kOperationCompleted;
  fact.request_id = NewUuidV4();
  fact.root = root;
  fact.operation = OperationName(Operation::kCreateResource);
  fact.source = "s";
  fact.time_ms = NowMs();
  const std::string misplaced = EncodeCloudEvent(EncodeInstanceEvent(fact));
  for (const std::string& value : {not_json, unknown_type, misplaced}) {
    auto promise = std::make_shared<std::promise<Result<KafkaPosition>>>();
    h().producer->Produce(
        h().env->config.topics.InstanceRequests(), root, value, {},
        [promise](Result<KafkaPosition> r) { promise->set_value(std::move(r)); }, partition);
    ASSERT_TRUE(promise->get_future().get());
  }

  // A request behind them on the same partition is decided.
  InstanceEvent create = CreateResource(type, root);
  auto created = node().Run(create);
  ASSERT_TRUE(created) << created.error().message;
  EXPECT_EQ(created->type, event_type::kOperationCompleted) << created->error;

  auto consumer = Consumer::Create(h().env->kafka, "");
  ASSERT_TRUE(consumer);
  ASSERT_TRUE(
      (*consumer)->Assign(h().env->config.topics.DeadLetter(), {{0, Consumer::kBeginning}}));
  std::map<std::string, KafkaMessage> letters;  // by value
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto batch = (*consumer)->ConsumeBatch(100, 50);
        if (batch) {
          for (auto& m : *batch) letters[m.value] = m;
        }
        return letters.count(not_json) && letters.count(unknown_type) && letters.count(misplaced);
      },
      10s));
  for (const std::string& value : {not_json, unknown_type, misplaced}) {
    std::map<std::string, std::string> headers(letters[value].headers.begin(),
                                               letters[value].headers.end());
    EXPECT_EQ(headers["dcm-dlq-topic"], h().env->config.topics.InstanceRequests());
    EXPECT_EQ(headers["dcm-dlq-partition"], std::to_string(partition));
    EXPECT_EQ(headers["dcm-dlq-consumer"], "instance-worker");
    EXPECT_FALSE(headers["dcm-dlq-reason"].empty());
  }
  EXPECT_GE(node()
                .metrics.GetCounter("dcm_dead_letters_total", "", "consumer=\"instance-worker\"")
                .Value(),
            3u);
  EXPECT_FALSE(node().Decided(fact.request_id)) << "a misplaced fact is not folded as an outcome";
}

TEST_F(InstanceFlowTest, CopiesOfARequestDeliveredBeforeDuringAndAfterItsSagaAreDecidedOnce) {
  const std::string type = Unique("svc");
  const ProviderRef p = h().AddProvider("j", type);
  InstanceEvent create = CreateCii(type);
  ASSERT_EQ(node().Run(create)->type, event_type::kOperationCompleted);
  const std::string cii = create.catalog_item_instance_id;

  sp().OnCreate(p.endpoint, FakeSp::Hold());
  InstanceEvent rehydrate = RehydrateCii(node(), cii);
  auto answer = node().Submit(rehydrate);
  ASSERT_TRUE(WaitUntil([&] { return sp().Held() == 1; }, 10s));
  // Copies of the request event (a producer's retry, or the mock re-appending a batch) keep
  // arriving while the saga waits for the SP, while it finishes, and after.
  const std::string copy = EncodeCloudEvent(EncodeInstanceEvent(rehydrate));
  const std::string topic = h().env->config.topics.InstanceRequests();
  const int32_t partition = h().PartitionOf(cii);
  std::thread copier([&] {
    for (int burst = 0; burst < 30; ++burst) {
      for (int i = 0; i < 100; ++i) {
        h().producer->Produce(
            topic, cii, copy, {}, [](Result<KafkaPosition>) {}, partition);
      }
      std::this_thread::sleep_for(4ms);
    }
  });
  std::this_thread::sleep_for(40ms);
  sp().OnCreate(p.endpoint, FakeSp::Status(201));
  copier.join();
  ASSERT_TRUE(h().producer->Flush(10000));
  auto outcome = answer.get();
  ASSERT_TRUE(outcome) << outcome.error().message;
  ASSERT_EQ(outcome->type, event_type::kOperationCompleted) << outcome->error;

  // A later operation on the root, behind every copy: the root is free again.
  InstanceEvent next = RehydrateCii(node(), cii);
  auto after = node().Run(next);
  ASSERT_TRUE(after) << after.error().message;
  EXPECT_EQ(after->type, event_type::kOperationCompleted) << after->error;
  ASSERT_TRUE(h().Settle());
  InstanceLog& log = h().Log();
  ASSERT_TRUE(log.CatchUp());
  EXPECT_EQ(
      Types(log.OfRequest(rehydrate.request_id)),
      (std::vector<std::string>{
          event_type::kOperationStarted, event_type::kResourcePlaced, event_type::kInstanceCreated,
          event_type::kCleanupEnqueued, event_type::kResourceDeleted,
          event_type::kCatalogItemInstanceRehydrated, event_type::kOperationCompleted}));
  EXPECT_EQ(sp().Count(Op::kCreate, p.endpoint, rehydrate.new_resource_id), 1u);
  EXPECT_EQ(node().Cii(cii)->resource_id, next.new_resource_id);
}

// ---- the Policy Manager (its own cluster: the worker is built with the fake engine) ---------

TEST(InstanceFlowPolicyTest, PolicyVerdictsMapToHttpStatusesAndItsChoiceIsHonouredOnlyIfReady) {
  FakeSp sp;
  FakePolicy policy;
  auto h = Harness::Create();
  ASSERT_NE(h, nullptr);
  ReleaseOnExit release{{&sp}};
  Node& node = h->AddNode("a");
  ASSERT_TRUE(node.StartWorker(&sp, &policy, {.name = "a"}));
  const std::string type = Unique("svc");
  const ProviderRef a = h->AddProvider("a", type);  // the built-in choice: fewest, then name
  const ProviderRef b = h->AddProvider("b", type);
  ASSERT_TRUE(WaitUntil([&] { return node.worker->Joined(); }, h->GroupSettleTimeout()));

  struct Case {
    const char* name;
    Result<PolicyDecision> answer;
    milliseconds delay;
    int status;
    const char* reason;
  };
  const Case cases[] = {
      {"rejected", Verdict(PolicyDecision::Verdict::kRejected, "quota exceeded"), 0ms, 406,
       "policy_rejected"},
      {"conflict", Verdict(PolicyDecision::Verdict::kConflict, "name clash"), 0ms, 409,
       "policy_conflict"},
      {"unavailable", MakeError(ErrorCode::kUnavailable, "policy manager answered 500"), 0ms, 503,
       "policy_unavailable"},
      {"timeout", MakeError(ErrorCode::kTimeout, "no answer within 5s"), 300ms, 503,
       "policy_unavailable"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    policy.Answer(c.answer, c.delay);
    InstanceEvent create = CreateResource(type);
    auto outcome = node.Run(create);
    ASSERT_TRUE(outcome) << outcome.error().message;
    ASSERT_EQ(outcome->type, event_type::kOperationFailed);
    EXPECT_EQ(outcome->http_status, c.status) << outcome->error;
    EXPECT_EQ(outcome->reason, c.reason);
    EXPECT_EQ(sp.Count(FakeSp::Op::kCreate, "", create.resource_id), 0u);
    EXPECT_FALSE(node.ResourceOf(create.resource_id));
  }
  EXPECT_EQ(policy.Evaluated().size(), std::size(cases));
  EXPECT_EQ(policy.Evaluated().back(), SpecOf(type)) << "the policy sees the request's spec";

  // Approved with a provider and an evaluated spec: both are used.
  const std::string evaluated = R"({"service_type":")" + type + R"(","size":"large"})";
  policy.Answer(Approved(evaluated, b.name));
  InstanceEvent chosen = CreateResource(type);
  auto placed = node.Run(chosen);
  ASSERT_TRUE(placed) << placed.error().message;
  ASSERT_EQ(placed->type, event_type::kOperationCompleted) << placed->error;
  EXPECT_EQ(placed->provider_name, b.name);
  auto resource = node.ResourceOf(chosen.resource_id);
  ASSERT_TRUE(resource);
  EXPECT_EQ(resource->provider_name, b.name);
  EXPECT_EQ(resource->policy, "policy_manager");
  EXPECT_EQ(resource->spec, evaluated);
  EXPECT_EQ(resource->intent, SpecOf(type));
  auto calls = sp.Calls();
  auto call = std::find_if(calls.begin(), calls.end(),
                           [&](const FakeSp::Call& c) { return c.id == chosen.resource_id; });
  ASSERT_NE(call, calls.end());
  EXPECT_EQ(call->endpoint, b.endpoint);
  EXPECT_EQ(call->spec, evaluated);
  EXPECT_EQ(sp.Count(FakeSp::Op::kCreate, a.endpoint), 0u);

  // The selected provider must still be Ready.
  h->SetHealth(b, HealthStatus::kUnavailable);
  InstanceEvent refused = CreateResource(type);
  auto outcome = node.Run(refused);
  ASSERT_TRUE(outcome) << outcome.error().message;
  ASSERT_EQ(outcome->type, event_type::kOperationFailed);
  EXPECT_EQ(outcome->http_status, 503) << outcome->error;
  EXPECT_EQ(outcome->reason, "no_ready_provider");
  EXPECT_EQ(sp.Count(FakeSp::Op::kCreate, "", refused.resource_id), 0u);
}

// ---- a saga across a stop and restart, and across a partition handover ----------------------

TEST(InstanceFlowRestartTest,
     WorkerStoppedMidSagaAndRestartedOnItsStoreCompletesEachOperationOnce) {
  FakeSp sp_a, sp_b;
  auto h = Harness::Create();
  ASSERT_NE(h, nullptr);
  ReleaseOnExit release{{&sp_a, &sp_b}};
  // One saga thread: while one saga waits for the SP, the next one waits in the queue. Stop()
  // lets the step in flight finish (x may be completed by either worker) and drops the queue,
  // which leaves y's saga, started and nothing more, in the projection for the restart.
  Node* node = &h->AddNode("data");
  ASSERT_TRUE(
      node->StartWorker(&sp_a, nullptr, {.name = "a", .cleanup_interval = 200ms, .threads = 1}));
  const std::string type = Unique("svc");
  const ProviderRef p = h->AddProvider("p", type);  // while the worker joins
  ASSERT_TRUE(WaitUntil([&] { return node->worker->Joined(); }, h->GroupSettleTimeout()));
  InstanceEvent create_x = CreateCii(type), create_y = CreateCii(type);
  ASSERT_EQ(node->Run(create_x)->type, event_type::kOperationCompleted);
  ASSERT_EQ(node->Run(create_y)->type, event_type::kOperationCompleted);
  const std::string x = create_x.catalog_item_instance_id, y = create_y.catalog_item_instance_id;

  // x's rehydration is in its SP create and y's is started and queued when the worker stops.
  sp_a.OnCreate(p.endpoint, FakeSp::Hold());
  InstanceEvent rehydrate_x = RehydrateCii(*node, x), rehydrate_y = RehydrateCii(*node, y);
  auto answer_x = node->Submit(rehydrate_x);
  ASSERT_TRUE(WaitUntil([&] { return sp_a.Held() == 1; }, 10s));
  auto answer_y = node->Submit(rehydrate_y);
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto saga = node->view->GetSaga(y);
        return saga && *saga && (*saga)->started.request_id == rehydrate_y.request_id;
      },
      10s));
  std::thread stopper([&] { node->StopWorker(); });
  std::this_thread::sleep_for(300ms);              // Stop() is under way
  sp_a.OnCreate(p.endpoint, FakeSp::Status(201));  // the SP answers the create in flight
  stopper.join();
  const std::string source_a = node->source;
  h->RemoveNode(*node);  // the process exits: runners stopped, store closed

  // Restart on the same data dir.
  node = &h->AddNode("data");
  ASSERT_TRUE(
      node->StartWorker(&sp_b, nullptr, {.name = "a-restarted", .cleanup_interval = 200ms}));
  ASSERT_TRUE(WaitUntil(
      [&] {
        return node->Decided(rehydrate_x.request_id) && node->Decided(rehydrate_y.request_id);
      },
      h->GroupSettleTimeout()));
  ASSERT_TRUE(h->Settle());

  InstanceLog& log = h->Log();
  ASSERT_TRUE(log.CatchUp());
  for (const InstanceEvent* r : {&rehydrate_x, &rehydrate_y}) {
    SCOPED_TRACE(r->root);
    EXPECT_EQ(log.Count(r->request_id, event_type::kOperationStarted), 1u);
    EXPECT_EQ(log.Count(r->request_id, event_type::kOperationCompleted), 1u);
    EXPECT_EQ(log.Count(r->request_id, event_type::kOperationFailed), 0u);
    EXPECT_EQ(log.Count(r->request_id, event_type::kResourcePlaced), 1u);
    // Every SP create of the operation is for its new id, at least one.
    EXPECT_GE(sp_a.Count(FakeSp::Op::kCreate, "", r->new_resource_id) +
                  sp_b.Count(FakeSp::Op::kCreate, "", r->new_resource_id),
              1u);
    auto item = node->Cii(r->root);
    ASSERT_TRUE(item);
    EXPECT_EQ(item->resource_id, r->new_resource_id);
    EXPECT_FALSE(*node->view->GetSaga(r->root));
  }
  for (const FakeSp* sp : {&sp_a, &sp_b}) {
    for (const auto& call : sp->Calls()) {
      if (call.op != FakeSp::Op::kCreate) continue;
      EXPECT_TRUE(call.id == create_x.resource_id || call.id == create_y.resource_id ||
                  call.id == rehydrate_x.new_resource_id || call.id == rehydrate_y.new_resource_id)
          << call.id;
    }
  }
  const auto completed_x = log.Where([&](const InstanceEvent& e) {
    return e.request_id == rehydrate_x.request_id && e.type == event_type::kOperationCompleted;
  });
  if (!completed_x.empty()) {
    printf("the rehydration in flight at Stop() was completed by %s (the stopped worker: %s)\n",
           completed_x[0].source.c_str(), source_a.c_str());
  }
  // y's saga never ran before the stop: the restarted worker resumed it from the projection.
  for (const auto& f : log.OfRequest(rehydrate_y.request_id)) {
    EXPECT_EQ(f.source, f.type == event_type::kOperationStarted ? source_a : node->source)
        << f.type;
  }
  EXPECT_EQ(sp_a.Count(FakeSp::Op::kCreate, "", rehydrate_y.new_resource_id), 0u);
  EXPECT_EQ(sp_b.Count(FakeSp::Op::kCreate, "", rehydrate_y.new_resource_id), 1u);

  // The old resources are queued, and the restarted worker's cleanup thread deletes them once.
  for (const std::string& old_id : {create_x.resource_id, create_y.resource_id}) {
    ASSERT_TRUE(WaitUntil([&] { return !node->CleanupOf(old_id) && h->Settle(); }, 10s));
    EXPECT_EQ(
        sp_a.Count(FakeSp::Op::kDelete, "", old_id) + sp_b.Count(FakeSp::Op::kDelete, "", old_id),
        1u)
        << old_id;
  }
  // The stopped node answered its callers, or failed them when it shut down.
  (void)answer_x;
  (void)answer_y;
}

TEST(InstanceFlowRestartTest, SagasInFlightOnPartitionsThatMoveAreResumedByTheNewOwnerOnce) {
  FakeSp sp_a, sp_b;
  auto h = Harness::Create();
  ASSERT_NE(h, nullptr);
  ReleaseOnExit release{{&sp_a, &sp_b}};
  Node& a = h->AddNode("a");
  ASSERT_TRUE(a.StartWorker(&sp_a, nullptr, {.name = "a", .cleanup_interval = 200ms}));
  const std::string type = Unique("svc");
  const ProviderRef p = h->AddProvider("p", type);  // while the worker joins
  ASSERT_TRUE(h->WaitForSplit({&a}));

  // Two catalog item instances on every partition, all created by a.
  const auto roots = h->RootsOnEveryPartition("cii", 2);
  std::vector<InstanceEvent> creates;
  std::vector<std::future<Result<InstanceEvent>>> pending;
  for (const auto& r : roots) creates.push_back(CreateCii(type, r));
  for (auto& c : creates) pending.push_back(a.Submit(c));
  for (auto& f : pending) ASSERT_EQ(f.get()->type, event_type::kOperationCompleted);
  pending.clear();

  // Rehydrate them all; a's SP holds every create, so each saga is in flight after
  // resource.placed.
  sp_a.OnCreate(p.endpoint, FakeSp::Hold());
  std::vector<InstanceEvent> rehydrations;
  for (const auto& r : roots) rehydrations.push_back(RehydrateCii(a, r));
  for (auto& r : rehydrations) pending.push_back(a.Submit(r));
  ASSERT_TRUE(WaitUntil([&] { return sp_a.Held() == roots.size(); }, 10s));

  // b joins: the group moves some partitions to it, and it resumes their sagas.
  Node& b = h->AddNode("b");
  ASSERT_TRUE(b.StartWorker(&sp_b, nullptr, {.name = "b", .cleanup_interval = 200ms}));
  ASSERT_TRUE(h->WaitForSplit({&a, &b}));
  const auto b_partitions = b.worker->OwnedPartitions();
  const std::set<int32_t> on_b(b_partitions.begin(), b_partitions.end());
  std::vector<const InstanceEvent*> moved;
  for (const auto& r : rehydrations) {
    if (on_b.count(h->PartitionOf(r.root))) moved.push_back(&r);
  }
  ASSERT_FALSE(moved.empty());
  ASSERT_TRUE(WaitUntil(
      [&] {
        return std::all_of(moved.begin(), moved.end(),
                           [&](const InstanceEvent* r) { return b.Decided(r->request_id); });
      },
      15s))
      << "b resumed the sagas of its partitions while a's SP calls were still held";

  // a's calls answer now: it keeps its own sagas and abandons those it no longer owns.
  sp_a.OnCreate(p.endpoint, FakeSp::Status(201));
  for (auto& f : pending) {
    auto outcome = f.get();
    ASSERT_TRUE(outcome) << outcome.error().message;
    EXPECT_EQ(outcome->type, event_type::kOperationCompleted) << outcome->error;
  }
  ASSERT_TRUE(h->Settle());
  EXPECT_EQ(b.worker->OwnedPartitions(), b_partitions) << "no further rebalance";

  InstanceLog& log = h->Log();
  ASSERT_TRUE(log.CatchUp());
  for (const auto& r : rehydrations) {
    SCOPED_TRACE(r.root);
    const bool is_moved = on_b.count(h->PartitionOf(r.root)) > 0;
    EXPECT_EQ(log.Count(r.request_id, event_type::kOperationCompleted), 1u);
    EXPECT_EQ(log.Count(r.request_id, event_type::kOperationFailed), 0u);
    EXPECT_EQ(log.Count(r.request_id, event_type::kResourcePlaced), 1u);
    EXPECT_EQ(log.Count(r.request_id, event_type::kInstanceCreated), 1u);
    for (const auto& f : log.OfRequest(r.request_id)) {
      // a recorded the start and the placement; everything after is the owner's.
      const bool before_handover =
          f.type == event_type::kOperationStarted || f.type == event_type::kResourcePlaced;
      EXPECT_EQ(f.source, before_handover || !is_moved ? a.source : b.source) << f.type;
    }
    EXPECT_EQ(sp_a.Count(FakeSp::Op::kCreate, "", r.new_resource_id), 1u);
    EXPECT_EQ(sp_b.Count(FakeSp::Op::kCreate, "", r.new_resource_id), is_moved ? 1u : 0u);
    auto item = a.Cii(r.root);
    ASSERT_TRUE(item);
    EXPECT_EQ(item->resource_id, r.new_resource_id);
  }
}

// ---- two workers in one group ---------------------------------------------------------------

// /readyz waits for Joined(): a worker that the group gives no partition (more instances than
// partitions) gets no OnAssigned, and must still become ready.
TEST(InstanceFlowGroupTest, AWorkerTheGroupGivesNoPartitionIsStillJoined) {
  FakeSp sp_a, sp_b;
  auto h = Harness::Create(/*partitions=*/1);
  ASSERT_NE(h, nullptr);
  ReleaseOnExit release{{&sp_a, &sp_b}};
  Node& a = h->AddNode("a");
  Node& b = h->AddNode("b");
  ASSERT_TRUE(a.StartWorker(&sp_a, nullptr, {.name = "a"}));
  ASSERT_TRUE(b.StartWorker(&sp_b, nullptr, {.name = "b"}));
  ASSERT_TRUE(WaitUntil(
      [&] {
        return a.worker->Joined() && b.worker->Joined() &&
               a.worker->OwnedPartitions().size() + b.worker->OwnedPartitions().size() == 1;
      },
      h->GroupSettleTimeout()))
      << "a joined=" << a.worker->Joined() << " b joined=" << b.worker->Joined();
}

TEST(InstanceFlowGroupTest, TwoWorkersDecideEachRootOnceAndTheSurvivorTakesOverWhenOneStops) {
  FakeSp sp_a, sp_b;
  auto h = Harness::Create();
  ASSERT_NE(h, nullptr);
  ReleaseOnExit release{{&sp_a, &sp_b}};
  Node& a = h->AddNode("a");
  Node& b = h->AddNode("b");
  ASSERT_TRUE(a.StartWorker(&sp_a, nullptr, {.name = "a", .cleanup_interval = 200ms}));
  ASSERT_TRUE(b.StartWorker(&sp_b, nullptr, {.name = "b", .cleanup_interval = 200ms}));
  const std::string type = Unique("svc");
  const ProviderRef p1 = h->AddProvider("p1", type);  // while the workers join
  const ProviderRef p2 = h->AddProvider("p2", type);
  ASSERT_TRUE(h->WaitForSplit({&a, &b}));
  const auto a_partitions = a.worker->OwnedPartitions();
  const auto b_partitions = b.worker->OwnedPartitions();
  const std::set<int32_t> on_a(a_partitions.begin(), a_partitions.end());
  auto owner = [&](const std::string& root) -> Node& {
    return on_a.count(h->PartitionOf(root)) ? a : b;
  };

  // Resources on many roots, submitted through either node, then rehydrated.
  const auto roots = h->RootsOnEveryPartition("res", 4);
  std::vector<InstanceEvent> requests;
  std::vector<std::future<Result<InstanceEvent>>> pending;
  for (const auto& r : roots) requests.push_back(CreateResource(type, r));
  for (size_t i = 0; i < requests.size(); ++i)
    pending.push_back((i % 2 ? b : a).Submit(requests[i]));
  for (auto& f : pending) {
    auto outcome = f.get();
    ASSERT_TRUE(outcome) << outcome.error().message;
    ASSERT_EQ(outcome->type, event_type::kOperationCompleted) << outcome->error;
  }
  pending.clear();
  ASSERT_TRUE(h->Settle());
  const size_t creates = requests.size();
  for (size_t i = 0; i < creates; ++i) {
    requests.push_back(RehydrateResource(*a.ResourceOf(roots[i])));
  }
  for (size_t i = creates; i < requests.size(); ++i) {
    pending.push_back((i % 2 ? a : b).Submit(requests[i]));
  }
  for (auto& f : pending) {
    auto outcome = f.get();
    ASSERT_TRUE(outcome) << outcome.error().message;
    ASSERT_EQ(outcome->type, event_type::kOperationCompleted) << outcome->error;
  }
  pending.clear();
  ASSERT_EQ(a.worker->OwnedPartitions(), a_partitions) << "no rebalance while deciding";
  ASSERT_EQ(b.worker->OwnedPartitions(), b_partitions);

  // Each root was decided by exactly one worker: the owner of its partition.
  InstanceLog& log = h->Log();
  ASSERT_TRUE(log.CatchUp());
  std::map<std::string, int> roots_per_worker;
  for (const auto& r : requests) {
    const Node& expected = owner(r.root);
    const auto facts = log.OfRequest(r.request_id);
    ASSERT_FALSE(facts.empty());
    for (const auto& f : facts) EXPECT_EQ(f.source, expected.source) << r.root << " " << f.type;
    EXPECT_EQ(log.Count(r.request_id, event_type::kOperationCompleted), 1u);
    const FakeSp& other_sp = &expected == &a ? sp_b : sp_a;
    const std::string& id = r.new_resource_id.empty() ? r.resource_id : r.new_resource_id;
    EXPECT_EQ(other_sp.Count(FakeSp::Op::kCreate, "", id), 0u);
    ++roots_per_worker[expected.source];
  }
  EXPECT_EQ(roots_per_worker.size(), 2u);
  // Both cleanup threads delete the rehydrated-away resources of their partitions, once each.
  ASSERT_TRUE(WaitUntil(
      [&] {
        auto page = a.view->ListCleanup("", "", 1000);
        return page && page->items.empty() && h->Settle();
      },
      10s));
  for (const auto& r : roots) {
    EXPECT_EQ(sp_a.Count(FakeSp::Op::kDelete, "", r) + sp_b.Count(FakeSp::Op::kDelete, "", r), 1u)
        << r;
    EXPECT_EQ((&owner(r) == &a ? sp_a : sp_b).Count(FakeSp::Op::kDelete, "", r), 1u) << r;
  }

  // b stops and leaves the group; a takes over its partitions and decides b's roots.
  b.StopWorker();
  ASSERT_TRUE(WaitUntil(
      [&] { return static_cast<int32_t>(a.worker->OwnedPartitions().size()) == h->Partitions(); },
      h->GroupSettleTimeout()));
  std::string b_root;
  std::map<std::string, std::string> b_root_resource;  // root -> its resource now
  for (size_t i = 0; i < roots.size(); ++i) {
    if (on_a.count(h->PartitionOf(roots[i]))) continue;
    b_root = roots[i];
    b_root_resource[b_root] = requests[creates + i].new_resource_id;
  }
  ASSERT_FALSE(b_root.empty());
  auto current = a.ResourceOf(b_root_resource[b_root]);
  ASSERT_TRUE(current);
  InstanceEvent after = RehydrateResource(*current);
  auto outcome = a.Run(after);
  ASSERT_TRUE(outcome) << outcome.error().message;
  ASSERT_EQ(outcome->type, event_type::kOperationCompleted) << outcome->error;
  InstanceEvent fresh = CreateResource(type);
  while (on_a.count(h->PartitionOf(fresh.root))) fresh = CreateResource(type);
  outcome = b.Run(fresh);  // through b's node: its projection still serves reads
  ASSERT_TRUE(outcome) << outcome.error().message;
  ASSERT_EQ(outcome->type, event_type::kOperationCompleted) << outcome->error;
  ASSERT_TRUE(log.CatchUp());
  for (const auto* r : {&after, &fresh}) {
    for (const auto& f : log.OfRequest(r->request_id)) EXPECT_EQ(f.source, a.source);
  }
}

// ---- placement on a peer enclave (SPEC §10, the consumer side) --------------------------------

// Peers as the saga sees them through the FederationApi port: their offers, how each answers a
// hold, and every call made.
class FakeFederation final : public FederationApi {
 public:
  struct Peer {
    std::vector<PeerOffer> offers;
    int reserve_status = 201;  // 409: no capacity
    bool reachable = true;
  };
  std::map<std::string, Peer> peers;

  std::vector<PeerOffer> Discover(const std::string&, std::chrono::milliseconds) override {
    std::lock_guard lock(mu_);
    std::vector<PeerOffer> out;
    for (const auto& [id, p] : peers) out.insert(out.end(), p.offers.begin(), p.offers.end());
    calls_.push_back("discover");
    return out;
  }
  Result<PeerAnswer> Reserve(const std::string& peer, const std::string& reservation_id,
                             const std::string& flavor_id, const std::string&,
                             std::chrono::milliseconds) override {
    return Call("reserve " + peer + " " + flavor_id, peer, [&](PeerAnswer& a) {
      a.http_status = peers[peer].reserve_status;
      if (a.http_status == 409) a.reason = "no_capacity";
      a.expires_at_ms = 1767225600000;
      reservations_[reservation_id] = peer;
    });
  }
  Result<PeerAnswer> Confirm(const std::string& peer, const std::string& reservation_id) override {
    return Call("confirm " + peer, peer, [&](PeerAnswer& a) {
      a.http_status = 201;
      a.contract_id = "contract-of-" + reservation_id;
      a.remote_instance_id = "remote-of-" + reservation_id;
      a.expires_at_ms = 1767225600000;
    });
  }
  Result<PeerAnswer> Release(const std::string& peer, const std::string&) override {
    return Call("release " + peer, peer, [](PeerAnswer& a) { a.http_status = 200; });
  }
  Result<PeerAnswer> Renew(const std::string& peer, const std::string&) override {
    return Call("renew " + peer, peer, [](PeerAnswer& a) {
      a.http_status = 200;
      a.expires_at_ms = 1767225600000 + 600000;
    });
  }
  Result<PeerAnswer> Terminate(const std::string& peer, const std::string& contract) override {
    return Call("terminate " + peer + " " + contract, peer,
                [](PeerAnswer& a) { a.http_status = 200; });
  }
  std::vector<std::string> Calls(const std::string& prefix) const {
    std::lock_guard lock(mu_);
    std::vector<std::string> out;
    for (const auto& c : calls_) {
      if (c.starts_with(prefix)) out.push_back(c);
    }
    return out;
  }

 private:
  template <typename Fill>
  Result<PeerAnswer> Call(std::string what, const std::string& peer, Fill fill) {
    std::lock_guard lock(mu_);
    calls_.push_back(std::move(what));
    if (!peers[peer].reachable) return MakeError(ErrorCode::kUnavailable, "connect refused");
    PeerAnswer a;
    fill(a);
    return a;
  }
  mutable std::mutex mu_;
  std::vector<std::string> calls_;
  std::map<std::string, std::string> reservations_;
};

PeerOffer OfferOf(const std::string& peer, const std::string& flavor, double price) {
  PeerOffer o;
  o.peer = peer;
  o.owner = peer;
  o.flavor_id = flavor;
  o.price = price;
  o.instances_available = 2;
  return o;
}

TEST(InstanceFlowFederationTest, NoLocalProviderPlacesOnTheBestPeerThatTakesItAndDeleteTerminates) {
  FakeSp sp;
  FakeFederation fed;
  fed.peers["cheap"].offers = {OfferOf("cheap", "f-cheap", 1)};
  fed.peers["cheap"].reserve_status = 409;  // full by the time the hold comes
  fed.peers["down"].offers = {OfferOf("down", "f-down", 1.5)};
  fed.peers["down"].reachable = false;
  fed.peers["good"].offers = {OfferOf("good", "f-good-b", 2), OfferOf("good", "f-good-a", 2)};
  auto h = Harness::Create();
  ASSERT_NE(h, nullptr);
  ReleaseOnExit release{{&sp}};
  Node& node = h->AddNode("a");
  ASSERT_TRUE(node.StartWorker(&sp, nullptr, {.name = "a", .federation = &fed}));
  ASSERT_TRUE(WaitUntil([&] { return node.worker->Joined(); }, h->GroupSettleTimeout()));

  InstanceEvent create = CreateCii(Unique("nowhere"));  // no provider of this type here
  auto created = node.Run(create);
  ASSERT_TRUE(created) << created.error().message;
  ASSERT_EQ(created->type, event_type::kOperationCompleted) << created->error;
  EXPECT_EQ(created->provider_name, "peer:good");
  // Ranked by price: the full one refused, the unreachable one tried 3 times, then the best of
  // the good peer's two flavours (by id), once.
  EXPECT_EQ(fed.Calls("reserve"),
            (std::vector<std::string>{"reserve cheap f-cheap", "reserve down f-down",
                                      "reserve down f-down", "reserve down f-down",
                                      "reserve good f-good-a"}));
  EXPECT_EQ(fed.Calls("confirm"), (std::vector<std::string>{"confirm good"}));
  EXPECT_TRUE(sp.Calls().empty()) << "no local SP was called";

  auto resource = node.ResourceOf(create.resource_id);
  ASSERT_TRUE(resource);
  auto placement = DecodeRemotePlacement(resource->placement);
  ASSERT_TRUE(placement) << resource->placement;
  EXPECT_EQ(placement->peer, "good");
  const std::string reservation = ReservationIdFor(create.request_id, create.resource_id, "good");
  EXPECT_EQ(placement->contract_id, "contract-of-" + reservation);
  auto instance = node.InstanceOf(create.resource_id);
  ASSERT_TRUE(instance);
  EXPECT_EQ(instance->provider_name, "peer:good");
  EXPECT_EQ(instance->placement, resource->placement);

  InstanceEvent remove = NewRequest(Operation::kDeleteCatalogItemInstance, create.root);
  remove.catalog_item_instance_id = create.catalog_item_instance_id;
  auto removed = node.Run(remove);
  ASSERT_TRUE(removed) << removed.error().message;
  ASSERT_EQ(removed->type, event_type::kOperationCompleted) << removed->error;
  EXPECT_EQ(fed.Calls("terminate"),
            (std::vector<std::string>{"terminate good contract-of-" + reservation}));
  EXPECT_TRUE(node.InstanceOf(create.resource_id)->deleted);

  InstanceEvent home = CreateCii(Unique("nowhere"));
  home.spec = R"({"service_type":"nowhere","federation":"never"})";
  auto refused = node.Run(home);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->type, event_type::kOperationFailed);
  EXPECT_EQ(refused->http_status, 422);
  EXPECT_EQ(fed.Calls("reserve").size(), 5u) << "federation: never asks no peer";
}

TEST(InstanceFlowFederationTest, AContractThePeerCannotEndNowIsQueuedAndTheCleanupEndsItLater) {
  FakeSp sp;
  FakeFederation fed;
  fed.peers["b"].offers = {OfferOf("b", "f-b", 1)};
  auto h = Harness::Create();
  ASSERT_NE(h, nullptr);
  ReleaseOnExit release{{&sp}};
  Node& node = h->AddNode("a");
  ASSERT_TRUE(node.StartWorker(&sp, nullptr, {.name = "a", .federation = &fed}));
  ASSERT_TRUE(WaitUntil([&] { return node.worker->Joined(); }, h->GroupSettleTimeout()));
  InstanceEvent create = CreateCii(Unique("nowhere"));
  auto created = node.Run(create);
  ASSERT_TRUE(created && created->type == event_type::kOperationCompleted);
  const std::string contract =
      "contract-of-" + ReservationIdFor(create.request_id, create.resource_id, "b");

  fed.peers["b"].reachable = false;
  InstanceEvent remove = NewRequest(Operation::kDeleteCatalogItemInstance, create.root);
  remove.catalog_item_instance_id = create.catalog_item_instance_id;
  auto removed = node.Run(remove);
  ASSERT_TRUE(removed) << removed.error().message;
  ASSERT_EQ(removed->type, event_type::kOperationCompleted) << removed->error;
  auto queued = node.CleanupOf(create.resource_id);
  ASSERT_TRUE(queued) << "a peer that cannot be reached leaves the contract to the cleanup queue";
  EXPECT_EQ(queued->provider_name, "peer:b");
  EXPECT_EQ(fed.Calls("terminate").size(), 3u);

  node.worker->RunCleanupCycle();  // still unreachable: parked, no retry burned
  ASSERT_TRUE(h->Settle());
  queued = node.CleanupOf(create.resource_id);
  ASSERT_TRUE(queued);
  EXPECT_EQ(queued->status, kCleanupPendingProvider);
  EXPECT_EQ(queued->retry_count, 0);

  fed.peers["b"].reachable = true;
  node.worker->RunCleanupCycle();
  ASSERT_TRUE(h->Settle());
  EXPECT_FALSE(node.CleanupOf(create.resource_id));
  EXPECT_TRUE(node.InstanceOf(create.resource_id)->deleted);
  EXPECT_EQ(fed.Calls("terminate").size(), 5u);
  EXPECT_EQ(fed.Calls("terminate").back(), "terminate b " + contract);
}

// SPEC §10: `:rehydrate` with prefer_local brings an instance home: placed on a local provider,
// the old contract queued for cleanup (which terminates it); with no local provider it fails as a
// local placement would and never goes to a peer.
TEST(InstanceFlowFederationTest, RehydrateWithPreferLocalBringsAPeerInstanceHomeOrFails) {
  FakeSp sp;
  FakeFederation fed;
  fed.peers["b"].offers = {OfferOf("b", "f-b", 1)};
  auto h = Harness::Create();
  ASSERT_NE(h, nullptr);
  ReleaseOnExit release{{&sp}};
  Node& node = h->AddNode("a");
  ASSERT_TRUE(node.StartWorker(&sp, nullptr, {.name = "a", .federation = &fed}));
  ASSERT_TRUE(WaitUntil([&] { return node.worker->Joined(); }, h->GroupSettleTimeout()));
  const std::string type = Unique("nowhere");
  InstanceEvent create = CreateCii(type);
  auto created = node.Run(create);
  ASSERT_TRUE(created && created->type == event_type::kOperationCompleted);
  ASSERT_EQ(created->provider_name, "peer:b");
  const std::string contract =
      "contract-of-" + ReservationIdFor(create.request_id, create.resource_id, "b");
  const size_t discovered = fed.Calls("discover").size();

  InstanceEvent stay = RehydrateCii(node, create.catalog_item_instance_id);
  stay.prefer_local = true;
  auto refused = node.Run(stay);
  ASSERT_TRUE(refused) << refused.error().message;
  EXPECT_EQ(refused->type, event_type::kOperationFailed);
  EXPECT_EQ(refused->http_status, 422);
  EXPECT_EQ(refused->reason, "no_provider");
  EXPECT_EQ(fed.Calls("discover").size(), discovered) << "prefer_local never asks a peer";
  EXPECT_EQ(fed.Calls("reserve").size(), 1u);
  EXPECT_EQ(node.Cii(create.catalog_item_instance_id)->resource_id, create.resource_id);

  const ProviderRef home = h->AddProvider("home", type);
  InstanceEvent back = RehydrateCii(node, create.catalog_item_instance_id);
  back.prefer_local = true;
  auto moved = node.Run(back);
  ASSERT_TRUE(moved) << moved.error().message;
  ASSERT_EQ(moved->type, event_type::kOperationCompleted) << moved->error;
  EXPECT_EQ(moved->provider_name, home.name);
  EXPECT_EQ(node.Cii(create.catalog_item_instance_id)->resource_id, back.new_resource_id);
  auto resource = node.ResourceOf(back.new_resource_id);
  ASSERT_TRUE(resource);
  EXPECT_EQ(resource->provider_id, home.id);
  EXPECT_EQ(resource->placement, "");
  EXPECT_EQ(fed.Calls("reserve").size(), 1u);
  auto queued = node.CleanupOf(create.resource_id);
  ASSERT_TRUE(queued) << "the old contract is queued for cleanup";
  EXPECT_EQ(queued->provider_name, "peer:b");
  node.worker->RunCleanupCycle();
  ASSERT_TRUE(h->Settle());
  EXPECT_EQ(fed.Calls("terminate"), (std::vector<std::string>{"terminate b " + contract}));
}

// FEDERATION_REPATRIATE: the renewer asks a peer instance home (a rehydration with prefer_local)
// once a local Ready provider of its type exists; without the flag it stays on the peer.
TEST(InstanceFlowFederationTest, TheRenewerRepatriatesOnlyWhenAskedAndALocalProviderIsReady) {
  for (const bool repatriate : {false, true}) {
    SCOPED_TRACE(repatriate ? "FEDERATION_REPATRIATE=true" : "off");
    FakeSp sp;
    FakeFederation fed;
    fed.peers["b"].offers = {OfferOf("b", "f-b", 1)};
    auto h = Harness::Create();
    ASSERT_NE(h, nullptr);
    ReleaseOnExit release{{&sp}};
    Node& node = h->AddNode("a");
    ASSERT_TRUE(node.StartWorker(&sp, nullptr,
                                 {.name = "a",
                                  .federation = &fed,
                                  .repatriate = repatriate,
                                  .repatriate_interval = milliseconds(200)}));
    ASSERT_TRUE(WaitUntil([&] { return node.worker->Joined(); }, h->GroupSettleTimeout()));
    const std::string type = Unique("later");
    InstanceEvent create = CreateCii(type);
    auto created = node.Run(create);
    ASSERT_TRUE(created && created->type == event_type::kOperationCompleted);
    ASSERT_EQ(created->provider_name, "peer:b");
    std::this_thread::sleep_for(milliseconds(1500));  // checks with no local provider: none
    EXPECT_EQ(node.Cii(create.catalog_item_instance_id)->resource_id, create.resource_id);

    const ProviderRef home = h->AddProvider("home", type);
    auto& counter = node.metrics.GetCounter("dcm_federation_repatriations_total", "", "peer=\"b\"");
    if (!repatriate) {
      std::this_thread::sleep_for(milliseconds(2500));  // two renewer ticks and more
      EXPECT_EQ(node.Cii(create.catalog_item_instance_id)->resource_id, create.resource_id);
      EXPECT_EQ(counter.Value(), 0u);
      continue;
    }
    ASSERT_TRUE(WaitUntil(
        [&] {
          auto cii = node.Cii(create.catalog_item_instance_id);
          return cii && cii->resource_id != create.resource_id && cii->provider_name == home.name;
        },
        std::chrono::seconds(20)));
    EXPECT_GE(counter.Value(), 1u);
    EXPECT_TRUE(node.CleanupOf(create.resource_id)) << "the old contract is queued for cleanup";
    EXPECT_EQ(fed.Calls("reserve").size(), 1u) << "never placed on a peer again";
  }
}

}  // namespace
}  // namespace dcm
