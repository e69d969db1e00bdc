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
#pragma once

#include <functional>
#include <map>
#include <optional>
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
  // Called on the runner thread after each committed batch that changed providers. Set before
  // the runner starts.
  void SetChangeListener(ChangeListener listener) { listener_ = std::move(listener); }

 private:
  Result<int64_t> CurrentSeq(const std::string& id, const StoreBatch& batch) const;
  Status Upsert(const Provider& provider, StoreBatch& batch);
  Status Tombstone(const std::string& id, int64_t seq, StoreBatch& batch);

  Store* store_;
  OutcomeWaiters* waiters_;
  AppliedCounters applied_;
  std::vector<std::string> applied_request_ids_;  // of the batch in progress, in order
  ChangeListener listener_;
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
