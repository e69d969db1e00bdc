// Replay throughput: events/s folded into the registry projection from offset 0 (issue #2).
//
//   BM_LiveFold     a ProjectionRunner on a fresh store with live options (WAL on): the speed of
//                   a new instance catching up, and an upper bound on live apply.
//   BM_BulkRebuild  the same fold into a fresh side directory in bulk mode (WAL off, vector
//                   memtable), including the final flush + compaction: `projections rebuild`.
//
// Setup produces --events registered/updated outcomes once to a 64-partition topic of an
// embedded mock cluster (each partition stays under the mock's 5 MiB retention). Each iteration
// times from Start() to CaughtUp() (manual time). Run:
//   build/tests/bench/replay_bench --benchmark_repetitions=3 --events=300000
#include <benchmark/benchmark.h>

#include <filesystem>
#include <thread>

#include "consumers/mock_cluster.h"
#include "consumers/projection_runner.h"
#include "events/provider_events.h"
#include "projections/registry_projection.h"
#include "src/common/clock.h"
#include "src/common/uuid.h"

namespace dcm {
namespace {

constexpr int kPartitions = 64;
int64_t g_events = 100000;
std::unique_ptr<MockCluster> g_mock;
const std::string kTopic = "bench.providers";
const std::string kDeadLetter = "bench.dead-letter";

void ProduceOnce() {
  if (g_mock) return;
  g_mock = std::move(*MockCluster::Create(1));
  (void)g_mock->CreateTopic(kTopic, kPartitions);
  (void)g_mock->CreateTopic(kDeadLetter, 1);
  KafkaOptions kafka;
  kafka.brokers = g_mock->bootstrap();
  kafka.extra = {{"linger.ms", "20"}, {"batch.num.messages", "10000"}};
  kafka.client_id = "bench-producer";
  auto producer = std::move(*Producer::Create(kafka));
  std::atomic<int64_t> failed{0};
  for (int64_t i = 0; i < g_events; ++i) {
    ProviderOutcome o;
    // Every fourth event updates an existing provider, like re-registrations do.
    const int64_t entity = i % 4 == 3 ? i - 3 : i;
    o.kind = i % 4 == 3 ? OutcomeKind::kUpdated : OutcomeKind::kRegistered;
    o.request_id = DeterministicUuid("req" + std::to_string(i));
    o.seq = i;
    o.provider.id = DeterministicUuid("p" + std::to_string(entity));
    o.provider.spec.name = "provider-" + std::to_string(entity);
    o.provider.spec.endpoint = "http://10.0.0.1:8443/api/v1/vm";
    o.provider.spec.service_type = "vm";
    o.provider.spec.operations = {"create", "read", "delete"};
    o.provider.spec.metadata = R"({"region_code":"eu-west-1","zone":"a"})";
    o.provider.create_time = o.provider.update_time = "2026-01-01T00:00:00.000Z";
    const CloudEvent e = EncodeProviderOutcome(o, "bench", 1767225600000 + i);
    producer->Produce(kTopic, e.subject, EncodeCloudEvent(e), {},
                      [&failed](Result<KafkaPosition> r) {
                        if (!r) ++failed;
                      });
  }
  (void)producer->Flush(60000);
  if (failed) fprintf(stderr, "replay_bench: %ld produce failures\n", static_cast<long>(failed));
}

// Baseline: the same runner and decoding, with a projection that writes nothing. The ratio of
// BM_LiveFold to this is what the registry fold itself costs.
class NullProjection final : public Projection {
 public:
  std::string Name() const override { return "null"; }
  Status Apply(const CloudEvent&, const EventPosition&, StoreBatch&) override { return {}; }
};

enum class Mode { kNull, kLive, kBulk };

void Fold(benchmark::State& state, Mode mode) {
  const bool bulk = mode == Mode::kBulk;
  ProduceOnce();
  Metrics metrics;
  KafkaOptions kafka;
  kafka.brokers = g_mock->bootstrap();
  kafka.fetch_wait_max_ms = 10;
  kafka.extra = {{"fetch.max.bytes", "52428800"},
                 {"max.partition.fetch.bytes", "4194304"},
                 {"queued.min.messages", "200000"}};
  auto producer = std::move(*Producer::Create(kafka));
  for (auto _ : state) {
    const auto dir = std::filesystem::temp_directory_path() / ("dcm-bench-" + NewUuidV4());
    auto store = std::move(*Store::Open(dir.string(), StoreOptions{bulk, false}));
    RegistryProjection registry(store.get(), nullptr, &metrics);
    NullProjection null_projection;
    Projection* projection =
        mode == Mode::kNull ? static_cast<Projection*>(&null_projection) : &registry;
    ProjectionRunner runner(RunnerOptions{kTopic, kDeadLetter, kafka, 5000}, store.get(),
                            projection, producer.get(), &metrics);
    const auto start = std::chrono::steady_clock::now();
    if (!runner.Start()) {
      state.SkipWithError("runner did not start");
      break;
    }
    while (!runner.CaughtUp()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const auto folded = std::chrono::steady_clock::now();
    runner.Stop();
    if (bulk) (void)store->FinishBulkLoad();
    state.counters["fold_ms"] = std::chrono::duration<double, std::milli>(folded - start).count();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    state.SetIterationTime(seconds);
    state.counters["events"] = static_cast<double>(runner.Applied());
    state.counters["events_per_s"] = static_cast<double>(runner.Applied()) / seconds;
    store.reset();
    std::filesystem::remove_all(dir);
  }
}

void BM_ConsumeDecodeOnly(benchmark::State& state) { Fold(state, Mode::kNull); }
void BM_LiveFold(benchmark::State& state) { Fold(state, Mode::kLive); }
void BM_BulkRebuild(benchmark::State& state) { Fold(state, Mode::kBulk); }

BENCHMARK(BM_ConsumeDecodeOnly)->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_LiveFold)->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BulkRebuild)->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dcm

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--events=", 0) == 0) dcm::g_events = std::stoll(arg.substr(9));
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  dcm::g_mock.reset();
  return 0;
}
