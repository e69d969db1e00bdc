// Heartbeat records (SPEC §8) on the probes topic (`<prefix>health-probes`), keyed by provider
// id like the probes, so one provider's records and probes share a partition and stay in order:
//
//   POST /providers/{id}/heartbeat ─▶ owner of the provider's partition (consumers/prober.h)
//     ─▶ heartbeat_recorded (coalesced) ─▶ probes topic ─▶ HealthProjection (FoldHeartbeat)
//   the owner, HEARTBEAT_TIMEOUT after the last beat ─▶ heartbeat_recorded `heartbeat_expired`
//
// Beats are not one event each: the owner records a beat when it changes the provider's state
// (its first beat, healthy ↔ unhealthy, a beat after an expiry), and otherwise at most one
// "still beating" record per HEARTBEAT_RECORD_EVERY, counting the beats it coalesced. A beat
// that reaches an instance not owning the provider is recorded as it comes (`forwarded`), which
// is how it reaches the owner: the owner reads it back from its health projection.
// Catalogue with examples: docs/events.md; golden files: events/golden/.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "events/cloud_event.h"
#include "src/common/result.h"

namespace dcm {

namespace event_type {
inline constexpr char kHeartbeatRecorded[] = "dcm.provider.heartbeat_recorded";
}  // namespace event_type

inline constexpr int kHeartbeatRecordedSchemaVersion = 1;

// The reason of the transition an expiry makes (SPEC §8, exact).
inline constexpr char kHeartbeatExpiredReason[] = "heartbeat_expired";

enum class BeatResult {
  kHealthy,            // a beat without a status, or with "healthy"
  kReportedUnhealthy,  // a beat with "status":"unhealthy"
  kExpired,            // no beat for HEARTBEAT_TIMEOUT (decided by the owner)
};
// "healthy", "reported_unhealthy", "heartbeat_expired" (the record's `last_result`).
const char* BeatResultName(BeatResult result);

// Data of dcm.provider.heartbeat_recorded.
struct HeartbeatRecord {
  std::string record_id;  // the event id (not repeated in data)
  int64_t time_ms = 0;    // the event time: when it was recorded
  std::string provider_id;
  // Per-provider record sequence of the owner (max(previous + 1, time in ms)); a forwarded
  // record uses its time. Names the health_changed event a record causes.
  int64_t seq = 0;
  int64_t registration_seq = 0;  // the registry's seq of the provider's registration
  BeatResult result = BeatResult::kHealthy;
  int64_t beats = 1;              // beats this record stands for (0 for an expiry)
  int64_t last_beat_time_ms = 0;  // the newest beat it knows of (an expiry: the one it timed)
  int64_t timeout_ms = 0;         // HEARTBEAT_TIMEOUT in effect
  bool forwarded = false;         // recorded by an instance that does not own the provider
  // The provider's liveness is `both` (probed too): the fold keeps the beat's status apart from
  // the probes' (projections/health_state.h). Written only when true.
  bool both = false;

  bool operator==(const HeartbeatRecord&) const = default;
};

// `source` names the emitting instance; the event id is `record.record_id` (fresh when empty).
CloudEvent EncodeHeartbeatRecord(const HeartbeatRecord& record, const std::string& source);
// kCorruption for another type or malformed data (dead-letter it).
Result<HeartbeatRecord> DecodeHeartbeatRecord(const CloudEvent& event);

}  // namespace dcm
