// Time travel (`as_of`) latency against the history length h of one entity (issue #5).
//
//   BM_ProviderAsOf/h              PastState::OfProviders for one provider at a time after all of
//                                  its events: its registration + h health probes (h = 0: the
//                                  registration alone, the fixed cost).
//   BM_ProviderAsOfMidHistory/h    the same with T in the middle of its probes (~h/2 folded).
//   BM_CatalogItemInstanceAsOf/h   PastState::OfCatalogItemInstance for a root created once and
//                                  rehydrated n times (5 + 7n facts, n = round((h - 5) / 7)).
//   BM_ProviderAsOfUnknown         OfProviders for an id without events: store open + one seek.
//   BM_InMemoryStoreOpen           Store::Open of the in-memory store PastState folds into.
//   BM_LiveGet                     RegistryView::Get + HealthView::Get on the live store: what a
//                                  GET without as_of reads.
//   BM_LiveGetCatalogItemInstance  InstanceView::GetCatalogItemInstance + GetSpStatus, live.
//
// Setup (once, without Kafka): a Store on disk in a temp dir with live options, into which the
// audit index and the live projections fold --background events of 1,000 other providers
// (registration + probes, interleaved in time) and the measured entities, 1,000 events per
// batch; then the store is reopened, so the index is read from table files as after a restart.
// The counter `folded` is PastState::folded(); `per_event` is the latency divided by it. Run:
//   build/tests/bench/as_of_bench --benchmark_repetitions=3
//   build/tests/bench/as_of_bench --background=2000 --max-h=100 --benchmark_min_time=0  (smoke)
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "events/health_events.h"
#include "events/instance_events.h"
#include "events/provider_events.h"
#include "projections/audit_projection.h"
#include "projections/health_projection.h"
#include "projections/instance_projection.h"
#include "projections/registry_projection.h"
#include "projections/time_travel.h"
#include "src/common/uuid.h"

namespace dcm {
namespace {

constexpr int64_t kT0 = 1767225600000;  // 2026-01-01T00:00:00.000Z
constexpr int kPartitions = 16;
constexpr int kBackgroundProviders = 1000;
constexpr int64_t kProviderHs[] = {0, 10, 100, 1000, 10000, 100000};
constexpr int64_t kInstanceHs[] = {10, 100, 1000, 10000};

int64_t g_background = 200000;
int64_t g_max_h = 100000;

const Topics kTopics;  // dcm.providers, dcm.health, dcm.instances, dcm.status

std::string TargetId(int64_t h) { return "target-h" + std::to_string(h); }
std::string RootId(int64_t h) { return "cii-h" + std::to_string(h); }

// The live store and the times the benchmarks ask about.
struct World {
  std::filesystem::path dir;
  std::unique_ptr<Store> store;
  std::map<int64_t, int64_t> provider_end_ms;  // h -> time of its last event
  std::map<int64_t, int64_t> provider_mid_ms;  // h -> time of probe h/2
  std::map<int64_t, int64_t> instance_end_ms;  // h -> time of the root's last fact
  std::map<int64_t, std::string> last_resource;
  int64_t events = 0;
  double setup_s = 0;
};
World* g_world = nullptr;

// Folds events into the audit index and the live projections, 1,000 per batch, with Kafka-like
// positions (partition by key, offsets increasing per partition).
class Folder {
 public:
  explicit Folder(Store* store)
      : store_(store),
        audit_(store, kTopics.Providers(), nullptr),
        registry_(store, nullptr, nullptr),
        health_(store, nullptr),
        instances_(store, nullptr, nullptr) {}

  Status Add(const CloudEvent& event, const std::string& topic, const std::string& key) {
    const std::string json = EncodeCloudEvent(event);
    const int32_t partition = static_cast<int32_t>(std::hash<std::string>{}(key) % kPartitions);
    int64_t& offset = offsets_[{topic, partition}];
    const EventPosition position{topic, partition, offset++, kT0, key, json};
    RETURN_IF_ERROR(audit_.Apply(event, position, batch_));
    Projection* live = topic == kTopics.Providers() ? static_cast<Projection*>(&registry_)
                       : topic == kTopics.Health()  ? static_cast<Projection*>(&health_)
                                                    : static_cast<Projection*>(&instances_);
    RETURN_IF_ERROR(live->Apply(event, position, batch_));
    ++count_;
    if (++in_batch_ == 1000) return Flush();
    return OkStatus();
  }
  Status Flush() {
    in_batch_ = 0;
    RETURN_IF_ERROR(store_->Write(batch_));
    batch_.Clear();
    return OkStatus();
  }
  int64_t count() const { return count_; }

 private:
  Store* store_;
  AuditProjection audit_;
  RegistryProjection registry_;
  HealthProjection health_;
  InstanceProjection instances_;
  StoreBatch batch_;
  int in_batch_ = 0;
  int64_t count_ = 0;
  std::map<std::pair<std::string, int32_t>, int64_t> offsets_;
};

CloudEvent Registration(const std::string& id, int64_t seq, int64_t time_ms) {
  ProviderOutcome o;
  o.kind = OutcomeKind::kRegistered;
  o.request_id = DeterministicUuid("req/" + id);
  o.seq = seq;
  o.provider.id = id;
  o.provider.spec.name = id;
  o.provider.spec.endpoint = "http://10.0.0.1:8443/api/v1/vm";
  o.provider.spec.service_type = "vm";
  o.provider.spec.operations = {"create", "read", "delete"};
  o.provider.spec.metadata = R"({"region_code":"eu-west-1","zone":"a"})";
  o.provider.create_time = o.provider.update_time = "2026-01-01T00:00:00.000Z";
  return EncodeProviderOutcome(o, "bench", time_ms);
}

// Probe i of a provider: runs of 4 healthy and 4 failing (timeouts) probes, so the state moves
// Ready -> (3 failures) Unavailable -> Ready ...
CloudEvent Probe(const std::string& id, int64_t registration_seq, int64_t i, int64_t time_ms) {
  HealthProbe p;
  p.probe_id = DeterministicUuid("probe/" + id + "/" + std::to_string(i));
  p.time_ms = time_ms;
  p.provider_id = id;
  p.seq = time_ms;
  p.registration_seq = registration_seq;
  p.url = "http://10.0.0.1:8443/health";
  const bool healthy = (i / 4) % 2 == 0;
  p.failure = healthy ? ProbeFailure::kNone : ProbeFailure::kTimeout;
  p.http_status = healthy ? 200 : 0;
  p.latency_us = healthy ? 1500 + i % 100 : 5000000;
  p.error = healthy ? "" : "no response within 5000 ms";
  return EncodeHealthProbe(p, "dcm/prober/bench");
}

// The facts of one catalog item instance operation (events/instance_events.h), a second apart.
class Facts {
 public:
  Facts(std::string request_id, std::string root, int64_t t)
      : request_id_(std::move(request_id)), root_(std::move(root)), t_(t) {}
  InstanceEvent Base(const char* type) {
    InstanceEvent e;
    e.type = type;
    e.source = "dcm/instance-worker/bench";
    e.request_id = request_id_;
    e.root = root_;
    e.time_ms = t_;
    t_ += 1000;
    return e;
  }
  CloudEvent Op(const char* type, const std::string& operation, const std::string& resource_id) {
    auto e = Base(type);
    e.operation = operation;
    e.resource_id = resource_id;
    return EncodeInstanceEvent(e);
  }
  CloudEvent Placed(const std::string& resource_id, const std::string& sp) {
    auto e = Base(event_type::kResourcePlaced);
    e.resource_id = resource_id;
    e.catalog_item_instance_id = root_;
    e.provider_name = sp;
    e.provider_id = sp;
    e.service_type = "vm";
    e.intent = R"({"service_type":"vm","memory":"2GB"})";
    e.spec = R"({"service_type":"vm","memory":"2GB","evaluated":true})";
    e.policy = "builtin";
    return EncodeInstanceEvent(e);
  }
  CloudEvent Created(const std::string& instance_id, const std::string& sp) {
    auto e = Base(event_type::kInstanceCreated);
    e.instance_id = instance_id;
    e.provider_name = sp;
    e.provider_id = sp;
    e.service_type = "vm";
    e.spec = R"({"service_type":"vm","memory":"2GB"})";
    e.status = "PROVISIONING";
    return EncodeInstanceEvent(e);
  }
  CloudEvent Enqueued(const std::string& instance_id, const std::string& sp) {
    auto e = Base(event_type::kCleanupEnqueued);
    e.instance_id = instance_id;
    e.provider_name = sp;
    e.provider_id = sp;
    e.service_type = "vm";
    e.requested_at_ms = e.time_ms;
    return EncodeInstanceEvent(e);
  }
  CloudEvent CiiCreated(const std::string& resource_id, const std::string& sp) {
    auto e = Base(event_type::kCatalogItemInstanceCreated);
    e.catalog_item_instance_id = root_;
    e.display_name = "my vm";
    e.spec = R"({"service_type":"vm","memory":"2GB"})";
    e.resource_id = resource_id;
    e.provider_name = sp;
    return EncodeInstanceEvent(e);
  }
  CloudEvent Rehydrated(const std::string& old_id, const std::string& new_id,
                        const std::string& sp) {
    auto e = Base(event_type::kCatalogItemInstanceRehydrated);
    e.catalog_item_instance_id = root_;
    e.old_resource_id = old_id;
    e.new_resource_id = new_id;
    e.provider_name = sp;
    return EncodeInstanceEvent(e);
  }
  CloudEvent ResourceDeleted(const std::string& resource_id) {
    auto e = Base(event_type::kResourceDeleted);
    e.resource_id = resource_id;
    return EncodeInstanceEvent(e);
  }
  int64_t last() const { return t_ - 1000; }

 private:
  std::string request_id_;
  std::string root_;
  int64_t t_;
};

// A root created on sp-0, then rehydrated `n` times alternating between sp-1 and sp-0. Returns
// the time of its last fact; `resource` is the resource it points at in the end.
Result<int64_t> AddInstanceHistory(Folder& folder, const std::string& root, int64_t n,
                                   std::string& resource) {
  const std::string create = OperationName(Operation::kCreateCatalogItemInstance);
  const std::string rehydrate = OperationName(Operation::kRehydrateCatalogItemInstance);
  const std::string& topic = kTopics.Instances();
  resource = root + "-res-0";
  Facts f("req/" + root + "/0", root, kT0);
  for (const CloudEvent& e :
       {f.Op(event_type::kOperationStarted, create, ""), f.Placed(resource, "sp-0"),
        f.Created(resource, "sp-0"), f.CiiCreated(resource, "sp-0"),
        f.Op(event_type::kOperationCompleted, create, resource)}) {
    RETURN_IF_ERROR(folder.Add(e, topic, root));
  }
  int64_t last = f.last();
  for (int64_t k = 1; k <= n; ++k) {
    const std::string old_sp = (k - 1) % 2 == 0 ? "sp-0" : "sp-1";
    const std::string sp = k % 2 == 0 ? "sp-0" : "sp-1";
    const std::string next = root + "-res-" + std::to_string(k);
    Facts r("req/" + root + "/" + std::to_string(k), root, kT0 + k * 60000);
    for (const CloudEvent& e :
         {r.Op(event_type::kOperationStarted, rehydrate, ""), r.Placed(next, sp),
          r.Created(next, sp), r.Enqueued(resource, old_sp), r.Rehydrated(resource, next, sp),
          r.ResourceDeleted(resource), r.Op(event_type::kOperationCompleted, rehydrate, next)}) {
      RETURN_IF_ERROR(folder.Add(e, topic, root));
    }
    resource = next;
    last = r.last();
  }
  return last;
}

Status BuildWorld(World& w) {
  const auto start = std::chrono::steady_clock::now();
  w.dir = std::filesystem::temp_directory_path() / ("dcm-as-of-bench-" + NewUuidV4());
  {
    ASSIGN_OR_RETURN(auto store, Store::Open(w.dir.string(), StoreOptions{false, false}));
    Folder folder(store.get());
    // Background: 1,000 providers registered, then probed in rounds (interleaved in time).
    const int64_t rounds = std::max<int64_t>(1, g_background / kBackgroundProviders);
    for (int64_t r = 0; r < rounds; ++r) {
      for (int p = 0; p < kBackgroundProviders; ++p) {
        const std::string id = "bg-" + std::to_string(p);
        const int64_t t = kT0 + r * 10000 + p;
        RETURN_IF_ERROR(folder.Add(r == 0 ? Registration(id, 1 + p, t) : Probe(id, 1 + p, r, t),
                                   r == 0 ? kTopics.Providers() : kTopics.Health(), id));
      }
    }
    // The measured providers: a registration, then h probes a second apart.
    for (const int64_t h : kProviderHs) {
      if (h > g_max_h) continue;
      const std::string id = TargetId(h);
      const int64_t seq = 1000000 + h;
      RETURN_IF_ERROR(folder.Add(Registration(id, seq, kT0 - 1000), kTopics.Providers(), id));
      w.provider_end_ms[h] = kT0 - 1000;
      for (int64_t i = 1; i <= h; ++i) {
        const int64_t t = kT0 + i * 1000;
        RETURN_IF_ERROR(folder.Add(Probe(id, seq, i, t), kTopics.Health(), id));
        if (i == h / 2) w.provider_mid_ms[h] = t;
      }
      if (h > 0) w.provider_end_ms[h] = kT0 + h * 1000;
      if (h == 0) w.provider_mid_ms[h] = kT0 - 1000;
    }
    // The measured catalog item instances.
    for (const int64_t h : kInstanceHs) {
      if (h > g_max_h) continue;
      const int64_t n = std::max<int64_t>(0, (h - 5 + 3) / 7);
      ASSIGN_OR_RETURN(w.instance_end_ms[h],
                       AddInstanceHistory(folder, RootId(h), n, w.last_resource[h]));
    }
    RETURN_IF_ERROR(folder.Flush());
    w.events = folder.count();
  }
  // Reopen: the WAL is recovered into table files, as after a restart.
  ASSIGN_OR_RETURN(w.store, Store::Open(w.dir.string(), StoreOptions{false, false}));
  w.setup_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fprintf(stderr, "as_of_bench: setup folded %ld events in %.1f s into %s\n",
          static_cast<long>(w.events), w.setup_s, w.dir.c_str());
  return OkStatus();
}

World* GetWorld(benchmark::State& state) {
  if (!g_world) {
    auto* w = new World();
    auto built = BuildWorld(*w);
    if (!built) {
      fprintf(stderr, "as_of_bench: setup failed: %s\n", built.error().message.c_str());
      delete w;
      state.SkipWithError("setup failed");
      return nullptr;
    }
    g_world = w;
  }
  return g_world;
}

void Report(benchmark::State& state, int64_t folded) {
  state.counters["folded"] = static_cast<double>(folded);
  // Seconds per folded event (rate over real time, inverted).
  state.counters["per_event"] = benchmark::Counter(
      static_cast<double>(std::max<int64_t>(folded, 1)),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void ProviderAsOf(benchmark::State& state, bool mid) {
  World* w = GetWorld(state);
  if (!w) return;
  const int64_t h = state.range(0);
  if (!w->provider_end_ms.count(h)) return state.SkipWithError("h > --max-h");
  const int64_t as_of = mid ? w->provider_mid_ms[h] : w->provider_end_ms[h];
  const AuditView audit(w->store.get());
  const std::vector<std::string> ids{TargetId(h)};
  int64_t folded = 0;
  for (auto _ : state) {
    auto past = PastState::OfProviders(audit, kTopics, ids, as_of);
    if (!past) return state.SkipWithError(past.error().message.c_str());
    auto provider = (*past)->registry().Get(ids[0]);
    auto health = (*past)->health().Get(ids[0]);
    if (!provider || !*provider || !health) return state.SkipWithError("no past provider");
    benchmark::DoNotOptimize(health);
    folded = (*past)->folded();
  }
  Report(state, folded);
}

void BM_ProviderAsOf(benchmark::State& state) { ProviderAsOf(state, false); }
void BM_ProviderAsOfMidHistory(benchmark::State& state) { ProviderAsOf(state, true); }

void BM_CatalogItemInstanceAsOf(benchmark::State& state) {
  World* w = GetWorld(state);
  if (!w) return;
  const int64_t h = state.range(0);
  if (!w->instance_end_ms.count(h)) return state.SkipWithError("h > --max-h");
  const AuditView audit(w->store.get());
  const std::string id = RootId(h);
  int64_t folded = 0;
  for (auto _ : state) {
    auto past = PastState::OfCatalogItemInstance(audit, kTopics, id, w->instance_end_ms[h]);
    if (!past) return state.SkipWithError(past.error().message.c_str());
    auto cii = (*past)->instances().GetCatalogItemInstance(id);
    if (!cii || !*cii || (*cii)->resource_id != w->last_resource[h]) {
      return state.SkipWithError("wrong past catalog item instance");
    }
    folded = (*past)->folded();
  }
  Report(state, folded);
}

void BM_ProviderAsOfUnknown(benchmark::State& state) {
  World* w = GetWorld(state);
  if (!w) return;
  const AuditView audit(w->store.get());
  const std::vector<std::string> ids{"no-such-provider"};
  for (auto _ : state) {
    auto past = PastState::OfProviders(audit, kTopics, ids, kT0 + 1);
    if (!past) return state.SkipWithError(past.error().message.c_str());
    benchmark::DoNotOptimize((*past)->folded());
  }
}

void BM_InMemoryStoreOpen(benchmark::State& state) {
  for (auto _ : state) {
    auto store = Store::Open("/past", StoreOptions{false, true});
    if (!store) return state.SkipWithError(store.error().message.c_str());
    benchmark::DoNotOptimize(store);
  }
}

void BM_LiveGet(benchmark::State& state) {
  World* w = GetWorld(state);
  if (!w) return;
  const RegistryView registry(w->store.get());
  const HealthView health(w->store.get());
  const std::string id = TargetId(w->provider_end_ms.rbegin()->first);
  for (auto _ : state) {
    auto provider = registry.Get(id);
    auto record = health.Get(id);
    if (!provider || !*provider || !record || !*record) return state.SkipWithError("no provider");
    benchmark::DoNotOptimize(record);
  }
}

void BM_LiveGetCatalogItemInstance(benchmark::State& state) {
  World* w = GetWorld(state);
  if (!w) return;
  if (w->instance_end_ms.empty()) return state.SkipWithError("no instance below --max-h");
  const InstanceView instances(w->store.get());
  const int64_t h = w->instance_end_ms.rbegin()->first;
  const std::string id = RootId(h);
  for (auto _ : state) {
    auto cii = instances.GetCatalogItemInstance(id);
    if (!cii || !*cii) return state.SkipWithError("no catalog item instance");
    auto status = instances.GetSpStatus((*cii)->resource_id);
    benchmark::DoNotOptimize(status);
  }
}

void ProviderArgs(benchmark::internal::Benchmark* b) {
  for (const int64_t h : kProviderHs) b->Arg(h);
}
void InstanceArgs(benchmark::internal::Benchmark* b) {
  for (const int64_t h : kInstanceHs) b->Arg(h);
}

BENCHMARK(BM_LiveGet)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LiveGetCatalogItemInstance)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_InMemoryStoreOpen)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ProviderAsOfUnknown)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ProviderAsOf)->Apply(ProviderArgs)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ProviderAsOfMidHistory)
    ->Apply(ProviderArgs)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CatalogItemInstanceAsOf)
    ->Apply(InstanceArgs)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dcm

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--background=", 0) == 0) dcm::g_background = std::stoll(arg.substr(13));
    if (arg.rfind("--max-h=", 0) == 0) dcm::g_max_h = std::stoll(arg.substr(8));
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (dcm::g_world) {
    const auto dir = dcm::g_world->dir;
    dcm::g_world->store.reset();
    delete dcm::g_world;
    std::filesystem::remove_all(dir);
  }
  return 0;
}
