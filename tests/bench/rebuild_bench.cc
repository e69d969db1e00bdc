// Rebuild throughput (issue #5): every projection (audit included) folded from the head of the
// log into a fresh side store in bulk mode, as `dcm projections rebuild` does it. A plain main
// printing one JSON line per step, so the rebuilding process can be measured on its own (peak RSS
// from getrusage; the mock cluster lives in another process). scripts/bench-rebuild.sh runs:
//
//   dcm dev-kafka --partitions 192 --topic-prefix bench.          (the mock, its own process)
//   rebuild_bench produce --brokers B --prefix bench. --events 1000000 --providers 10000
//   rebuild_bench rebuild --brokers B --prefix bench.              (× runs; median; with a
//                                                                   baseline build alternating)
//
// `rebuild_bench smoke --events 5000` does all three in one process on an embedded mock (CI).
#include "tests/bench/rebuild_bench.h"

#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>

#include "consumers/mock_cluster.h"
#include "consumers/rebuild.h"
#include "consumers/topic_admin.h"
#include "src/common/log.h"

namespace dcm::bench {
namespace {

using Args = std::map<std::string, std::string>;

std::string Arg(const Args& args, const std::string& name, const std::string& fallback) {
  auto it = args.find(name);
  return it == args.end() ? fallback : it->second;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

int Produce(const std::string& brokers, const Topics& topics, int64_t events, int providers) {
  KafkaOptions kafka;
  kafka.brokers = brokers;
  kafka.client_id = "rebuild-bench-producer";
  kafka.extra = {{"linger.ms", "20"}, {"batch.num.messages", "10000"}};
  auto producer = Producer::Create(kafka);
  if (!producer) {
    fprintf(stderr, "producer: %s\n", producer.error().message.c_str());
    return 1;
  }
  MixedWorkload workload(topics, providers);
  std::atomic<int64_t> failed{0};
  int64_t bytes = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < events; ++i) {
    WorkloadEvent e = workload.Next();
    bytes += static_cast<int64_t>(e.value.size());
    (*producer)->Produce(e.topic, e.key, e.value, {}, [&failed](Result<KafkaPosition> r) {
      if (!r) ++failed;
    });
  }
  const bool flushed = static_cast<bool>((*producer)->Flush(120000));
  printf(
      "{\"step\":\"produce\",\"events\":%ld,\"mean_bytes\":%ld,\"failed\":%ld,\"flushed\":%s,"
      "\"seconds\":%.2f}\n",
      static_cast<long>(events), static_cast<long>(events ? bytes / events : 0),
      static_cast<long>(failed.load()), flushed ? "true" : "false", Seconds(start));
  return failed == 0 && flushed ? 0 : 1;
}

int Rebuild(const std::string& brokers, const Topics& topics, const std::string& dir,
            size_t batch_size, bool keep, const std::string& only, size_t fold_threads) {
  std::filesystem::remove_all(dir);
  auto store = Store::Open(dir, StoreOptions{.bulk_load = true, .in_memory = false});
  if (!store) {
    fprintf(stderr, "store: %s\n", store.error().message.c_str());
    return 1;
  }
  Metrics metrics;
  ProjectionSet set = BuildProjectionSet(store->get(), topics, &metrics);
  std::vector<RebuildSource> sources;
  for (size_t i = 0; i < set.entries.size(); ++i) {
    if (!only.empty() && set.entries[i].name != only) continue;
    sources.push_back(SourceOf(set, i));
  }
  RebuildOptions options;
  options.kafka.brokers = brokers;
  options.kafka.client_id = "rebuild-bench";
  options.kafka.fetch_wait_max_ms = 10;
  options.batch_size = batch_size;
  options.fold_threads = fold_threads;
  const auto start = std::chrono::steady_clock::now();
  auto result = Rebuilder(options, store->get()).Run(sources);
  if (!result) {
    fprintf(stderr, "rebuild: %s\n", result.error().message.c_str());
    return 1;
  }
  const double fold_s = Seconds(start);
  const auto finish_start = std::chrono::steady_clock::now();
  auto finished = (*store)->FinishBulkLoad();
  const double finish_s = Seconds(finish_start);
  if (!finished) {
    fprintf(stderr, "finish: %s\n", finished.error().message.c_str());
    return 1;
  }
  store->reset();
  if (!keep) std::filesystem::remove_all(dir);
  int64_t poison = 0;
  for (const auto& p : result->projections) poison += p.poison;
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double events = static_cast<double>(result->messages);
  printf(
      "{\"step\":\"rebuild\",\"events\":%ld,\"fold_s\":%.2f,\"events_per_s\":%.0f,"
      "\"finish_s\":%.2f,\"events_per_s_with_finish\":%.0f,\"peak_rss_mb\":%.0f,\"poison\":%ld,"
      "\"warnings\":%zu,\"fold_threads\":%zu,\"cpu_user_s\":%.1f,\"cpu_sys_s\":%.1f}\n",
      static_cast<long>(result->messages), fold_s, events / fold_s, finish_s,
      events / (fold_s + finish_s), static_cast<double>(usage.ru_maxrss) / 1024.0,
      static_cast<long>(poison), result->warnings.size(), fold_threads,
      static_cast<double>(usage.ru_utime.tv_sec) + usage.ru_utime.tv_usec / 1e6,
      static_cast<double>(usage.ru_stime.tv_sec) + usage.ru_stime.tv_usec / 1e6);
  for (const auto& w : result->warnings) fprintf(stderr, "warning: %s\n", w.c_str());
  return 0;
}

}  // namespace
}  // namespace dcm::bench

int main(int argc, char** argv) {
  using namespace dcm;
  using namespace dcm::bench;
  if (argc < 2) {
    fprintf(stderr,
            "usage: rebuild_bench produce|rebuild|smoke [--brokers B] [--prefix P] [--events N] "
            "[--providers N] [--dir D] [--batch N] [--keep 1] [--only PROJECTION] "
            "[--fold-threads N]\n");
    return 2;
  }
  const std::string mode = argv[1];
  Args args;
  for (int i = 2; i + 1 < argc; i += 2) args[argv[i]] = argv[i + 1];
  InitLogging("warn");
  Topics topics;
  topics.prefix = Arg(args, "--prefix", "bench.");
  const int64_t events = std::stoll(Arg(args, "--events", "1000000"));
  const int providers = std::stoi(Arg(args, "--providers", "2000"));
  const std::string dir =
      Arg(args, "--dir", (std::filesystem::temp_directory_path() / "dcm-rebuild-bench").string());
  const size_t batch = std::stoul(Arg(args, "--batch", "10000"));
  const bool keep = Arg(args, "--keep", "0") == "1";
  if (mode == "produce") return Produce(Arg(args, "--brokers", ""), topics, events, providers);
  const size_t fold_threads = std::stoul(Arg(args, "--fold-threads", "2"));
  const std::string only = Arg(args, "--only", "");  // one projection by name; empty = all
  if (mode == "rebuild") {
    return Rebuild(Arg(args, "--brokers", ""), topics, dir, batch, keep, only, fold_threads);
  }
  if (mode == "smoke") {
    auto mock = MockCluster::Create(1);
    if (!mock) return 1;
    Config config;
    config.topics = topics;
    config.partitions = 8;
    if (!(*mock)->CreateTopics(ProjectTopics(config))) return 1;
    if (Produce((*mock)->bootstrap(), topics, events, 50) != 0) return 1;
    return Rebuild((*mock)->bootstrap(), topics, dir, batch, false, only, fold_threads);
  }
  fprintf(stderr, "unknown mode %s\n", mode.c_str());
  return 2;
}
