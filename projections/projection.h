// Projection: state folded from one topic's events into the Store. A ProjectionRunner
// (consumers/projection_runner.h) feeds it:
//
//   assign(partitions at stored offsets) ─▶ poll batch ─▶ Apply(event) × n ─▶ offsets into the
//   same StoreBatch ─▶ Store::Write ─▶ AfterCommit(applied events) ─▶ poll batch ...
//
// Apply must be idempotent and deterministic: the broker may deliver an event twice (the mock
// duplicates retried batches), and a rebuild from offset 0 must yield byte-identical state.
// Apply is called from the runner's thread only; views may read the Store concurrently.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "events/cloud_event.h"
#include "projections/store.h"
#include "src/common/metrics.h"
#include "src/common/result.h"

namespace dcm {

struct EventPosition {
  std::string_view topic;
  int32_t partition = 0;
  int64_t offset = 0;
  int64_t timestamp_ms = 0;     // the Kafka message timestamp
  std::string_view key = {};    // the Kafka message key
  std::string_view value = {};  // the message as stored (the CloudEvent's JSON before decoding)
};

class Projection {
 public:
  virtual ~Projection() = default;
  // Stable name: the namespace of this projection's offsets in the Store.
  virtual std::string Name() const = 0;
  // Folds `event` into `batch`. An error of kind kCorruption means "poison event" (the runner
  // dead-letters it and goes on); any other error stops the runner (a broken invariant or I/O).
  virtual Status Apply(const CloudEvent& event, const EventPosition& position,
                       StoreBatch& batch) = 0;
  // True when the record `value` (its JSON as stored) is certainly not this projection's: the
  // runner then neither decodes nor applies it (its offset still moves), so neither does it
  // dead-letter it when it is poison; only a projection whose topics another projection also
  // reads (and dead-letters) may say so. A cheap test on the raw bytes; when unsure, false (the
  // record is decoded and given to Apply as usual).
  virtual bool SkipsRaw(std::string_view value) const {
    (void)value;
    return false;
  }
  // True when a second writer already folded the record at `position` (the registry: the
  // registrar's own outcomes): the runner skips it like SkipsRaw, without decoding it and without
  // LockBatch, and counts it as applied. Thread-safe; when unsure, false (Apply then decides).
  virtual bool AppliedAlready(const EventPosition& position) {
    (void)position;
    return false;
  }
  // Called after the batch holding `applied` is durable, on the runner's thread.
  virtual void AfterCommit(const std::vector<CloudEvent>& applied) { (void)applied; }
  // Called instead of AfterCommit when the batch was not written (the runner reads it again):
  // forget what Apply kept for AfterCommit. Under LockBatch.
  virtual void Abandoned() {}
  // Held by the runner from the first Apply of a batch until AfterCommit (or Abandoned) returns;
  // a batch with no Apply takes it for AfterCommit alone, after its offsets are written. A
  // projection that a second writer also folds into (the registry: the registrar applies its own
  // outcomes) returns a lock that serializes the two; the others none.
  virtual std::unique_lock<std::mutex> LockBatch() { return {}; }
};

// dcm_events_applied_total{projection,type}: one counter per event type, looked up once.
// Runner thread only.
class AppliedCounters {
 public:
  AppliedCounters(Metrics* metrics, std::string projection)
      : metrics_(metrics), projection_(std::move(projection)) {}
  void Inc(const std::string& type) {
    if (!metrics_) return;
    auto it = by_type_.find(type);
    if (it == by_type_.end()) {
      it = by_type_
               .emplace(type, &metrics_->GetCounter(
                                  "dcm_events_applied_total", "Events folded into projections",
                                  "projection=\"" + projection_ + "\",type=\"" + type + "\""))
               .first;
    }
    it->second->Inc();
  }

 private:
  Metrics* metrics_;
  std::string projection_;
  std::map<std::string, Counter*> by_type_;
};

}  // namespace dcm
