// Registrar: the one decision maker for provider registrations (SPEC §4, §5.1).
//
// Every `dcm serve` runs one, all in the consumer group `<prefix>registrar` on the
// one-partition topic dcm.provider-requests, so exactly one of them owns the partition at a time
// and decides every request in the topic's total order. A killed owner's partition moves to a
// survivor after the group's session timeout.
//
//   revoked ──assign──▶ owner: seek to the decider's stored offset
//      ▲                  │  poll batch ─▶ decide each request (ProviderDecider) ─▶ produce the
//      │                  │  outcomes to dcm.providers ─▶ wait for acks ─▶ commit decider state
//      └────revoke────────┘  + offset in one RocksDB batch (+ the outcomes, folded into this
//                                instance's registry projection: RegistrarOptions::registry)
//
// On the mock (RegistrarOptions::take_deliveries), while it owns the partition, the requests this
// process produced also come straight from their acknowledgements (consumers/local_deliveries.h),
// so they are decided without waiting for the fetch; the fetched copies are skipped by offset.
//
// A new owner's decider state may be behind (another instance decided since). Before deciding,
// it reads the outcomes on dcm.providers from the offsets it stored (0 for a fresh store) to the
// high watermarks, and folds them in decision order (`seq`, the request's offset: a topic made
// with several partitions spreads them by provider id) with ProviderDecider::Fold. It holds them
// in memory meanwhile (the outcomes produced since it last owned the partition; all of them
// for a fresh store: ~1 KB each). Then it resumes the request log after the last request
// those outcomes answer. Its state is thus rebuilt from the outcome log, which is kept forever,
// never from the request log, whose head may be gone (SPEC §7 retention gaps). When the outcome
// log itself lost records this registrar needs, it cannot know the state: it reports the gap
// (Gaps(), /readyz), leaves the group so that an instance with a whole state decides, and decides
// nothing. Requests between its resume offset and the request log's start were never decided by
// anyone (their callers got 503): that gap is reported, and deciding goes on from the start.
// Requests it decides again (their outcomes were not on the topic yet) produce only the outcomes
// this instance's registry has not seen (duplicates are harmless: outcome ids derive from request
// ids and the registry is idempotent).
//
// Why one partition scales: registrations are rare (SPs register on start), and one partition
// carries tens of thousands of events per second (BENCHMARKS.md).
//
// One decision input is not in the request: a deletion without force needs the provider's live
// instances (SPEC §6: a request produced straight to Kafka cannot delete a provider that hosts
// them). The registrar reads it from this instance's instance projection at decision time. So
// that a re-decision reaches the same outcome, a request whose outcome this instance's registry
// already holds follows that outcome instead (a recorded rejection means the check failed). Both
// reads need projections that hold what was produced before: after each assignment, the first
// such deletion takes the high watermarks of dcm.providers and dcm.instances, and the registrar
// decides it only once the registry and instance projections have applied them. Until then it
// commits what it decided before the deletion and reads the deletion again (every 50 ms).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "consumers/kafka.h"
#include "consumers/retention_gap.h"
#include "projections/applied_offsets.h"
#include "projections/provider_decider.h"
#include "projections/registry_projection.h"
#include "src/common/clock.h"
#include "src/common/metrics.h"
#include "src/common/retry.h"

namespace dcm {

struct RegistrarOptions {
  std::string requests_topic;
  std::string outcomes_topic;
  std::string dead_letter_topic;
  std::string group_id;
  std::string source = "dcm/registrar";  // `source` of the outcome events
  ProviderRules rules;  // the same as the HTTP edge's (SPEC §6: deciders enforce what HTTP does)
  KafkaOptions kafka;
  size_t batch_size = 1000;
  // The live instances of a provider id (the instance projection); null: never any.
  std::function<Result<int64_t>(const std::string& provider_id)> live_instances;
  // The instance facts topic: the instance projection the live-instance count comes from.
  std::string instances_topic;
  // Where the registry and instance projection runners publish their progress: a deletion waits
  // on it (null: deletions do not wait for the projections).
  const AppliedOffsets* applied = nullptr;
  // This instance's registry projection (the one `registry` views), or null. When set, the
  // registrar folds each acknowledged outcome into it in the batch that commits the decision, so
  // the request's waiter completes without waiting for the registry runner to fetch the outcome
  // (projections/registry_projection.h explains why that changes no state).
  RegistryProjection* registry = nullptr;
  // librdkafka's mock only (its acknowledgements carry no log time, and it answers a fetch only
  // after the fetch wait): while this instance owns the request partition and has caught up, the
  // requests a producer of this process wrote there are decided from their acknowledgements
  // (LocalDeliveries), as the log holds them, as soon as every request before them is decided.
  bool take_deliveries = false;
};

class Registrar {
 public:
  Registrar(RegistrarOptions options, Store* store, const RegistryView* registry,
            Producer* producer, Metrics* metrics, const Clock* clock);
  ~Registrar();

  Status Start();
  void Stop();
  bool IsOwner() const { return owner_.load(); }
  bool Healthy() const { return healthy_.load(); }
  // Ready to decide the first request sent to it (/readyz): the group has answered, and this
  // instance either owns nothing or has caught up with the outcome log. Once true, stays true.
  bool Joined() const { return joined_.load(); }
  // What retention dropped that it needed (see above); with an outcome-log gap it stands by and
  // is never Healthy() again.
  const RetentionGaps& Gaps() const { return gaps_; }

 private:
  void Run();
  // The next requests to decide: the delivered ones that continue the log at next_offset_,
  // followed by what the consumer has fetched beyond them (no wait); else a poll.
  Result<std::vector<KafkaMessage>> NextBatch();
  std::vector<KafkaMessage> TakeDelivered();
  // Listens for this process's deliveries of requests while it owns the partition (a delivery
  // ends the poll), and stops. Registrar thread, or Stop's after it joined.
  void ListenForDeliveries();
  void StopListening();
  // Folds the outcomes other owners produced since this instance's stored outcome offset, then
  // seeks the request log to the first request they do not answer. False: the outcome log lost
  // records it needs (a gap, reported in gaps_).
  Result<bool> CatchUp();
  // Run's catch-up: retries a failed one with backoff; false when it found a gap and left the
  // group (the registrar stands by: unhealthy, deciding nothing, until restarted).
  bool CatchUpOrStandBy(int& failures);
  using Offsets = std::map<int32_t, int64_t>;  // partition -> offset
  // Folds the outcome log [from, high) into the decider state, in decision order; returns the
  // request offset after the last one those outcomes answer, or nullopt at a gap (reported).
  Result<std::optional<int64_t>> FoldOutcomes(const Offsets& from, const Offsets& high);
  // The outcomes [from, high) of every partition; nullopt when records were missing (a gap).
  Result<std::optional<std::vector<ProviderOutcome>>> ReadOutcomes(const Offsets& from,
                                                                   const Offsets& high);
  // Decides, produces and commits `messages`; true when it stopped at a deletion that must wait
  // for the projections (the consumer was sought back to it).
  Result<bool> ProcessBatch(const std::vector<KafkaMessage>& messages);
  // An outcome produced for the batch in progress: its bytes and its acknowledgement.
  struct Produced {
    std::string key;
    std::string value;
    std::future<Result<KafkaPosition>> acked;
  };
  // Produces the batch's outcomes, waits for their acks (and the dead letters'), then commits
  // the decider's state and offset `next` (and the outcomes, into the registry projection) in
  // one write.
  Status CommitBatch(StoreBatch& batch, std::vector<std::future<Status>>& dead_letters,
                     std::vector<Produced>& produced, int64_t next);
  std::map<int32_t, int64_t> OnAssign(const std::vector<int32_t>& partitions);
  // What Decide needs beyond the request and the decider's state (see above).
  Result<DecisionInputs> InputsFor(const ProviderRequest& request) const;
  // Whether the registry and instance projections hold what was produced before the first
  // deletion decided since the assignment (see above). kUnavailable when a watermark is unknown.
  Result<bool> ProjectionsCaughtUp();

  RegistrarOptions options_;
  Store* store_;
  const RegistryView* registry_;
  Producer* producer_;
  Metrics* metrics_;
  const Clock* clock_;
  ProviderDecider decider_;
  std::unique_ptr<Consumer> consumer_;
  std::thread thread_;
  std::atomic<bool> running_{false};
  std::atomic<bool> owner_{false};
  std::atomic<bool> healthy_{true};
  std::atomic<bool> joined_{false};
  RetentionGaps gaps_;
  bool catch_up_pending_ = false;  // assigned, outcomes not folded yet; runner thread only
  std::map<int32_t, int64_t> outcomes_next_;  // the outcome log folded up to here; runner only
  RetryWait retry_wait_;                      // the retry backoff, cut short by Stop
  int64_t next_offset_ = 0;                   // runner thread only
  // ProjectionsCaughtUp's targets: projection name, topic, partition -> offset to reach. Reset at
  // each assignment; runner thread only.
  std::map<std::pair<std::string, std::string>, std::map<int32_t, int64_t>> catch_up_targets_;
  bool caught_up_ = false;
  uint64_t deliveries_ = 0;  // the LocalDeliveries listener while it owns the partition; 0: none
};

}  // namespace dcm
