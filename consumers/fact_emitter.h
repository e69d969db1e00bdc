// FactEmitter: how the instance worker's parts (intake, sagas, cleanup) put facts on
// dcm.instances. It holds which partitions this instance owns (only the owner of a root's
// partition emits facts for it), produces each fact to its root's partition, and folds every
// acknowledged fact into the InstanceDecider, so the next decision sees it without waiting for
// the projection.
//
//   Emit(root, fact) ─▶ owned? ─no─▶ false (the saga stops; the new owner resumes it)
//                        └─yes─▶ produce ─▶ ack ─▶ decider.Apply ─▶ [crash hook] ─▶ true
//
// Thread-safety: every method may be called from any thread. Producing holds the ownership lock
// shared; Disown takes it exclusively, so nothing is produced for a partition after Disown.
#pragma once

#include <future>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <vector>

#include "consumers/kafka.h"
#include "events/instance_events.h"
#include "events/instance_facts.h"
#include "projections/instance_decider.h"
#include "src/common/clock.h"

namespace dcm {

struct FactEmitterOptions {
  std::string instances_topic;
  std::string source;  // `source` of the facts
  // Test hook (crash injection): SIGKILL this process right after a fact of this type is
  // acknowledged. Empty: off.
  std::string crash_after_fact;
};

class FactEmitter {
 public:
  // A fact handed to the producer and its delivery report.
  struct Sent {
    std::future<Result<KafkaPosition>> ack;
    InstanceFact fact;  // as produced (root, source, time filled in)
  };

  FactEmitter(FactEmitterOptions options, Producer* producer, InstanceDecider* decider,
              const Clock* clock);

  // The partition count of dcm.instances (before anything is produced).
  void SetPartitions(int32_t partitions) { partitions_ = partitions; }
  int32_t PartitionOf(const std::string& root) const { return KeyPartition(root, partitions_); }

  void Own(const std::vector<int32_t>& partitions);
  // Gives every partition up, then flushes what was produced (the next owner reads the high
  // watermark after this instance left).
  void DisownAll();
  bool Owns(const std::string& root) const;
  bool OwnsPartition(int32_t partition) const;
  std::set<int32_t> Owned() const;

  // Produces `fact` on `root`'s partition whether or not this instance owns it (intake checks
  // ownership per message).
  Sent Produce(const std::string& root, InstanceFact fact);
  // Waits for `sent`'s ack and folds the fact into the decider.
  Status Fold(Sent& sent);
  // Produces `fact` if this instance owns `root` (nullopt otherwise).
  std::optional<Sent> EmitAsync(const std::string& root, InstanceFact fact);
  // Waits for the ack, folds it, fires the crash hook. False if Kafka did not acknowledge.
  bool Acknowledged(Sent sent);
  // EmitAsync + Acknowledged.
  bool Emit(const std::string& root, InstanceFact fact);

  // False once an own fact did not fold (a broken invariant).
  bool Healthy() const { return healthy_.load(); }

 private:
  FactEmitterOptions options_;
  Producer* producer_;
  InstanceDecider* decider_;
  const Clock* clock_;
  int32_t partitions_ = 1;
  std::atomic<bool> healthy_{true};
  mutable std::shared_mutex own_mu_;
  std::set<int32_t> owned_;
};

}  // namespace dcm
