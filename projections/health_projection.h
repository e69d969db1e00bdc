// HealthProjection folds dcm.health into one HealthRecord per provider (the state machine in
// projections/health_state.h); HealthView is its read-only query side, joined with the registry
// when providers are rendered (SPEC §3.2: `health_status` and `health` on every provider).
//
// Keys:  hl/<provider_id> -> HealthRecord JSON
//
// Folding is idempotent: a probe whose per-provider seq the record has passed is skipped (the
// mock duplicates retried batches), and one provider's events share a key and so a partition,
// which keeps them in order. health_changed events are counted, not folded: the state is a
// function of the probes alone.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>

#include "projections/health_state.h"
#include "projections/projection.h"
#include "src/common/metrics.h"

namespace dcm {

class HealthProjection final : public Projection {
 public:
  static constexpr char kName[] = "health";
  static constexpr char kPrefix[] = "hl/";

  HealthProjection(Store* store, Metrics* metrics);

  std::string Name() const override { return kName; }
  Status Apply(const CloudEvent& event, const EventPosition& position, StoreBatch& batch) override;

 private:
  // The record last read or written per provider, decoded, with the JSON it was decoded from or
  // encoded to. Apply uses it only while the store still holds exactly that JSON (so a batch that
  // was never written, or a record changed behind our back, costs a decode, never a wrong fold):
  // a probe then costs one encode instead of a decode and an encode. Bounded: cleared when full.
  struct Cached {
    std::optional<std::string> json;  // nullopt: no record yet (the default HealthRecord)
    HealthRecord record;
  };
  static constexpr size_t kMaxCached = 100000;
  Store* store_;
  AppliedCounters applied_;
  std::unordered_map<std::string, Cached> cache_;
};

// Thread-safe (reads the Store only).
class HealthView {
 public:
  explicit HealthView(const Store* store) : store_(store) {}
  Result<std::optional<HealthRecord>> Get(const std::string& provider_id) const;
  // Calls fn for every record, in provider id order, until it returns false.
  Status ForEach(const std::function<bool(const HealthRecord&)>& fn) const;

 private:
  const Store* store_;
};

}  // namespace dcm
