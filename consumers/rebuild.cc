#include "consumers/rebuild.h"

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <map>
#include <thread>

#include "consumers/rebuild_consume.h"
#include "consumers/rebuild_fold.h"
#include "consumers/rebuild_plan.h"
#include "consumers/rebuild_queue.h"
#include "src/common/log.h"

namespace dcm {
namespace {

using rebuild_detail::BatchQueue;
using rebuild_detail::FoldLoop;
using rebuild_detail::Plan;
using rebuild_detail::ProgressBoard;

// Large fetches (../shared/KAFKA-NOTES.md: batch consume with big fetch sizes, 1.1M msg/s).
KafkaOptions RebuildConsumerOptions(KafkaOptions kafka) {
  for (const auto& [k, v] :
       std::map<std::string, std::string>{{"fetch.max.bytes", "52428800"},
                                          {"max.partition.fetch.bytes", "4194304"},
                                          {"queued.min.messages", "200000"},
                                          {"queued.max.messages.kbytes", "65536"}}) {
    kafka.extra.emplace(k, v);  // the caller's properties win
  }
  return kafka;
}

// The fold groups of one run, each with its queue; the consume thread feeds them all.
struct FoldGroups {
  std::vector<std::vector<size_t>> members;  // [group] -> indexes into the sources
  std::vector<std::unique_ptr<BatchQueue>> queues;
  std::vector<std::unique_ptr<FoldLoop>> folds;

  std::vector<BatchQueue*> QueuePointers() const {
    std::vector<BatchQueue*> out;
    for (const auto& q : queues) out.push_back(q.get());
    return out;
  }
  void CloseAll() {
    for (auto& q : queues) q->Close();
  }
};

// Group 0 folds on the caller's thread, the others on their own; one failing stops them all.
std::vector<Status> RunFolds(FoldGroups& groups) {
  const size_t n = groups.folds.size();
  std::vector<Status> statuses(n);
  auto run = [&](size_t g) {
    statuses[g] = groups.folds[g]->Run(*groups.queues[g]);
    if (!statuses[g]) groups.CloseAll();
  };
  std::vector<std::thread> threads;
  for (size_t g = 1; g < n; ++g) threads.emplace_back(run, g);
  run(0);
  for (auto& t : threads) t.join();
  return statuses;
}

}  // namespace

Rebuilder::Rebuilder(RebuildOptions options, Store* store)
    : options_(std::move(options)), store_(store) {}

Result<RebuildResult> Rebuilder::Run(const std::vector<RebuildSource>& sources) {
  ASSIGN_OR_RETURN(auto consumer, Consumer::Create(RebuildConsumerOptions(options_.kafka), ""));
  Plan plan;
  RebuildResult result;
  RETURN_IF_ERROR(rebuild_detail::BuildPlan(sources, *consumer, options_.metadata_timeout_ms, plan,
                                            result.warnings, options_.windowed_topics));
  RETURN_IF_ERROR(rebuild_detail::AssignAll(consumer->handle(), plan));
  FoldGroups groups;
  groups.members = rebuild_detail::SplitIntoGroups(plan, sources, options_.fold_threads);
  Logger("rebuild")->info(
      "msg=\"rebuild started\" projections={} topics={} events={} fold_threads={}", sources.size(),
      plan.topics.size(), plan.total, groups.members.size());

  ProgressBoard board(groups.members.size());
  board.messages = plan.total;
  for (size_t g = 0; g < groups.members.size(); ++g) {
    groups.queues.push_back(std::make_unique<BatchQueue>(options_.queue_depth));
    groups.folds.push_back(std::make_unique<FoldLoop>(
        options_, store_, sources, rebuild_detail::Subplan(plan, groups.members[g]), &board, g));
  }
  rebuild_detail::ConsumeLoop consume(consumer->handle(), plan, options_.batch_size,
                                      groups.QueuePointers());
  std::thread consume_thread([&] { consume.Run(); });
  const auto statuses = RunFolds(groups);
  groups.CloseAll();  // unblocks the consume thread if a fold stopped early
  consume_thread.join();
  // Drop what the consume thread queued after the folds stopped: its messages belong to the
  // consumer, which must outlive them.
  for (auto& q : groups.queues) {
    for (std::optional<Error> ignored; q->Pop(std::chrono::milliseconds(0), &ignored);) {
    }
  }
  for (const auto& status : statuses) {
    if (!status) return tl::unexpected(status.error());
  }
  result.seconds =
      std::chrono::duration<double>(rebuild_detail::Clock::now() - board.start).count();
  result.projections.resize(sources.size());
  for (size_t g = 0; g < groups.folds.size(); ++g) {
    for (size_t j : groups.members[g]) result.projections[j] = groups.folds[g]->stats()[j];
  }
  result.messages = plan.total;  // every group reached its targets: all of them were folded
  if (options_.on_progress) options_.on_progress(board.Snapshot());
  return result;
}

ProjectionSet BuildProjectionSet(Store* store, const Topics& topics, Metrics* metrics) {
  return BuildProjections(ProjectionCatalog(topics),
                          ProjectionDeps{.store = store, .topics = &topics, .metrics = metrics});
}

RebuildSource SourceOf(const ProjectionSet& set, size_t i) {
  return RebuildSource{set.projections[i].get(), set.entries[i].topics, std::nullopt,
                       set.entries[i].fold_cost};
}

Result<TopicOffsets> LiveTargets(const Store& live, const ProjectionEntry& entry) {
  TopicOffsets targets;
  for (const auto& topic : entry.topics) {
    ASSIGN_OR_RETURN(targets[topic], live.LoadOffsets(entry.name, topic));
  }
  return targets;
}

Result<ProjectionComparison> CompareProjection(const Store& live, const Store& rebuilt,
                                               const ProjectionEntry& entry, int64_t cutoff_ms) {
  ProjectionComparison comparison;
  comparison.name = entry.name;
  Store::KeyFilter skip;
  if (entry.expires && cutoff_ms > 0) {
    skip = [&entry, cutoff_ms](std::string_view key, std::string_view value) {
      return entry.expires(key, value, cutoff_ms);
    };
  }
  ASSIGN_OR_RETURN(comparison.rebuilt_digest, rebuilt.Digest(entry.prefix, skip));
  auto live_digest = live.Digest(entry.prefix, skip);
  if (!live_digest && live_digest.error().code == ErrorCode::kStorage) {
    // A corrupt live store is what a rebuild repairs: report it as a difference, not a failure.
    comparison.live_digest = "unreadable (" + live_digest.error().message + ")";
    return comparison;
  }
  ASSIGN_OR_RETURN(comparison.live_digest, std::move(live_digest));
  if (!comparison.match()) {
    ASSIGN_OR_RETURN(comparison.first_difference,
                     Store::FirstDifference(live, rebuilt, entry.prefix, skip));
  }
  return comparison;
}

}  // namespace dcm
