// RegistryProjection folds dcm.providers (the registrar's outcomes) into the provider registry
// that GET /providers serves. RegistryView is its read-only query side.
//
// Keys:  reg/p/<id> -> 'P' + seq (16 hex) + provider JSON, or 'T' + seq for an id deleted or
//                      moved away at that decision (a tombstone; views skip it)
//        reg/r/<request_id> -> outcome type (each request's outcome applied once)
//
// dcm.providers is keyed by provider id over many partitions, so events of two ids can arrive
// in any order (an id change touches two ids). Every outcome carries the registrar's decision
// sequence `seq`; a key takes a write only if its seq is newer than what it holds. The fold is
// therefore idempotent (duplicates are no-ops) and its final state does not depend on how
// partitions interleave (SPEC §5.3, §5.4).
//
// Two writers fold into it: the registry runner (every outcome on dcm.providers) and, on the
// instance that owns the request partition, the registrar, which applies its own outcomes as soon
// as the broker acknowledged them, in the RocksDB batch that commits its decisions (one write, and
// no wait for the runner's fetch before the waiter completes). Because the fold is idempotent and
// order-free, this changes no state: the runner, reaching such an outcome later, skips it
// (ApplyOwn records its position), and leaves the offsets to the runner alone: they still mean
// "everything before is applied". Should the runner get there first, the registrar skips what
// the runner's published offsets cover. LockBatch serializes the two writers' read-modify-writes
// (so, against the mock, the registry runner does not take this process's outcomes from their
// acknowledgements: KafkaOptions::take_deliveries).
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "events/provider.h"
#include "events/provider_events.h"
#include "projections/outcome_waiters.h"
#include "projections/projection.h"
#include "src/common/metrics.h"

namespace dcm {

// A provider whose registry record changed: its new state, or nullopt once it is deleted or moved
// to another id. Delivered after the change is durable (the prober follows the registry so).
struct ProviderChange {
  std::string id;
  std::optional<Provider> provider;
  // A removal: the outcome that removed it (dcm.provider.deleted / .expired / .id_changed) and
  // its request id; empty for an upsert.
  std::string removed_by;
  std::string request_id;
  int64_t removed_at_ms = 0;  // the removal's time (its outcome event's)
};

class RegistryProjection final : public Projection {
 public:
  using ChangeListener = std::function<void(const std::vector<ProviderChange>&)>;

  static constexpr char kName[] = "registry";
  static constexpr char kPrefix[] = "reg/";

  RegistryProjection(Store* store, OutcomeWaiters* waiters, Metrics* metrics);

  std::string Name() const override { return kName; }
  Status Apply(const CloudEvent& event, const EventPosition& position, StoreBatch& batch) override;
  void AfterCommit(const std::vector<CloudEvent>& applied) override;
  std::unique_lock<std::mutex> LockBatch() override { return std::unique_lock(batch_mu_); }
  // The registrar applied it (Committed marked it): the runner need not decode it, nor wait for
  // the registrar's batch to move its offset past it.
  bool AppliedAlready(const EventPosition& position) override {
    return TakeOwn(position.partition, position.offset);
  }

  // The registrar's side (see above), called with LockBatch held: ApplyOwn stages the outcome
  // acknowledged at `position` like Apply; once `batch` is written, Committed(positions of the
  // outcomes ApplyOwn accepted) marks them for the runner to skip and completes their waiters
  // (AfterCommit).
  Status ApplyOwn(const CloudEvent& event, const EventPosition& position, StoreBatch& batch);
  void Committed(const std::vector<std::pair<int32_t, int64_t>>& positions,
                 const std::vector<CloudEvent>& applied);
  // The batch Apply or ApplyOwn staged into was not written: forgets what it staged (no waiter
  // is completed, no change reported; the outcomes are applied again when read again).
  void Abandoned() override;
  // Called after each committed batch that changed providers, on the runner's thread or the
  // registrar's (ApplyOwn), with LockBatch held: it must not call back into the projection. Added
  // before the runner starts (the prober, the provider-loss watcher).
  void AddChangeListener(ChangeListener listener) { listeners_.push_back(std::move(listener)); }

 private:
  Result<int64_t> CurrentSeq(const std::string& id, const StoreBatch& batch) const;
  Status Upsert(const Provider& provider, StoreBatch& batch);
  Status Tombstone(const std::string& id, const ProviderOutcome& outcome, int64_t time_ms,
                   StoreBatch& batch);

  // True (and forgets it) if the registrar applied the outcome at `partition`/`offset`; forgets
  // the partition's older marks too, which the runner has passed.
  bool TakeOwn(int32_t partition, int64_t offset);

  Store* store_;
  OutcomeWaiters* waiters_;
  std::mutex batch_mu_;
  std::mutex own_mu_;
  std::map<int32_t, std::set<int64_t>> own_;  // partition -> offsets ApplyOwn applied; own_mu_
  AppliedCounters applied_;
  std::vector<std::string> applied_request_ids_;  // of the batch in progress, in order
  std::vector<OutcomePosition> applied_at_;       // where each of those outcomes is
  std::vector<ChangeListener> listeners_;
  std::vector<ProviderChange> changes_;  // of the batch in progress
};

struct ProviderFilter {
  std::string service_type;  // empty = any
  // Further condition (the handlers join health here); empty = any.
  std::function<bool(const Provider&)> accept;
};

struct ProviderPage {
  std::vector<Provider> providers;
  std::string next_page_token;  // empty on the last page
};

// Thread-safe (reads the Store only).
class RegistryView {
 public:
  explicit RegistryView(const Store* store) : store_(store) {}
  Result<std::optional<Provider>> Get(const std::string& id) const;
  // `page_token` is opaque to clients (it is the hex of the last id returned).
  Result<ProviderPage> List(const ProviderFilter& filter, const std::string& page_token,
                            size_t max_page_size) const;
  Result<bool> HasOutcome(const std::string& request_id) const;
  // The type of the outcome applied for `request_id` ("dcm.provider.rejected", ...), if any.
  Result<std::optional<std::string>> OutcomeType(const std::string& request_id) const;

 private:
  const Store* store_;
};

}  // namespace dcm
