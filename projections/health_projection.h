// HealthProjection folds dcm.health into one HealthRecord per provider (the state machine in
// projections/health_state.h); HealthView is its read-only query side, joined with the registry
// when providers are rendered (SPEC §3.2: `health_status` and `health` on every provider).
//
// Keys:  hl/<provider_id> -> HealthRecord JSON
//
// Folding is idempotent: a probe whose per-provider seq the record has passed is skipped (the
// mock duplicates retried batches), and one provider's events share a key and so a partition,
// which keeps them in order. health_changed events are counted, not folded: the state is a
// function of the probes alone. It folds two topics: dcm.health (transitions, and the probes of
// builds before issue #13) and the probes topic (probes since, which carry their resulting
// state: health_state.h). A provider's probes move from one topic to the other once, at the
// upgrade; the probes' seqs keep increasing across it, so in whatever order the two topics
// interleave, the newest probe decides.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "events/health_events.h"
#include "projections/decoded_cache.h"
#include "projections/health_state.h"
#include "projections/projection.h"
#include "src/common/metrics.h"

namespace dcm {

// Which records a HealthProjection keeps: the providers' (SPEC §3.2) or the peer enclaves'
// (SPEC §10, consumers/peer_prober.h). Both fold the same probe data with the same state machine
// from the same topics; each skips the other's events.
struct HealthFold {
  const char* name;    // Projection::Name()
  const char* prefix;  // of its keys: <prefix><id> -> HealthRecord JSON
  HealthSubject subject;
  bool heartbeats;  // folds dcm.provider.heartbeat_recorded (providers only)
};

class HealthProjection final : public Projection {
 public:
  static constexpr char kName[] = "health";
  static constexpr char kPrefix[] = "hl/";
  static constexpr char kPeerName[] = "peer-health";
  static constexpr char kPeerPrefix[] = "pe/";
  static constexpr HealthFold kProviders{kName, kPrefix, kProviderHealth, true};
  static constexpr HealthFold kPeers{kPeerName, kPeerPrefix, kPeerHealth, false};

  HealthProjection(Store* store, Metrics* metrics, const HealthFold& fold = kProviders);

  std::string Name() const override { return fold_.name; }
  Status Apply(const CloudEvent& event, const EventPosition& position, StoreBatch& batch) override;
  // The peers' fold skips a record that cannot be a peer event without decoding it: the
  // providers' probes are nearly all of the health topics (~10 µs each to decode).
  bool SkipsRaw(std::string_view value) const override;

 private:
  // dcm.provider.heartbeat_recorded (SPEC §8): folded into the same record (FoldHeartbeat).
  Status ApplyHeartbeat(const CloudEvent& event, StoreBatch& batch);
  Status ApplyProbe(const CloudEvent& event, StoreBatch& batch);
  // Folds into the record of `id` (read through the batch and the cache); writes it when `fold`
  // says it changed.
  Status FoldRecord(const std::string& id, StoreBatch& batch,
                    const std::function<bool(HealthRecord&)>& fold);
  // Whether `type` is the other fold's (skipped): peer events for providers, and anything but
  // peer events for peers.
  bool Skips(std::string_view type) const;
  std::string Key(std::string_view id) const;

  HealthFold fold_;
  Store* store_;
  AppliedCounters applied_;
  // By provider id; ~1 KB per provider (the record twice: JSON and decoded).
  DecodedCache<HealthRecord> records_{&DecodeHealthRecord, 20000};
};

// Whether a stored health record (hl/ key, JSON value) was last folded from a probe older than
// `cutoff_ms`: a rebuild may no longer hold that probe (HEALTH_EVENTS_RETENTION), so `dcm
// projections verify` does not compare the record. An unreadable record does not expire.
bool HealthRecordExpires(std::string_view key, std::string_view value, int64_t cutoff_ms);

// Thread-safe (reads the Store only).
class HealthView {
 public:
  // `prefix`: HealthProjection::kPrefix (providers) or kPeerPrefix (peers).
  explicit HealthView(const Store* store, std::string prefix = HealthProjection::kPrefix)
      : store_(store), prefix_(std::move(prefix)) {}
  Result<std::optional<HealthRecord>> Get(const std::string& provider_id) const;
  // Calls fn for every record, in provider id order, until it returns false.
  Status ForEach(const std::function<bool(const HealthRecord&)>& fn) const;

 private:
  const Store* store_;
  std::string prefix_;
};

}  // namespace dcm
