// Health events (SPEC §3.2) on dcm.health, keyed by provider id:
//
//   prober ──health_probed──▶ dcm.health ──▶ HealthProjection (projections/health_projection.h)
//          ──health_changed─▶   (same key, so one provider's events stay in order)
//
// `health_probed` is the fact every state is folded from: one per probe, with the failure class,
// HTTP status and latency, and the thresholds in effect, so the state machine
// (projections/health_state.h) is a pure fold of these events and replays identically even if
// an operator later changes the thresholds. `health_changed` records each state change and
// names the probe events that caused it; it is for auditors and alerting, and the projection
// does not need it to compute states.
// Catalogue with examples: docs/events.md; golden files: events/golden/.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "events/cloud_event.h"
#include "src/common/health_check.h"
#include "src/common/result.h"

namespace dcm {

namespace event_type {
inline constexpr char kHealthProbed[] = "dcm.provider.health_probed";
inline constexpr char kHealthChanged[] = "dcm.provider.health_changed";
// Peer enclaves (SPEC §10) are probed and folded like providers: same data, another subject.
inline constexpr char kPeerHealthProbed[] = "dcm.peer.health_probed";
inline constexpr char kPeerHealthChanged[] = "dcm.peer.health_changed";
}  // namespace event_type

// The `actor` of every health event (SPEC §6): probing is the control plane's own decision.
inline constexpr char kProberActor[] = "dcm/prober";

// The newest `schemaversion` of each health event's data, which the encoders write. Decoders read
// every version from 1 (older ones through the upcaster, events/upcast.h); newer ones are poison.
//   health_probed v1: `latency_ms`, a JSON float of milliseconds (5000.125).
//   health_probed v2: `latency_us`, an integer of microseconds (5000125). Integers are exact and
//     print the same in every encoder, so byte-identical rebuilds never depend on how a language
//     formats floats; the struct always held microseconds.
//   health_probed v3: an optional `state`, the record the probe leaves its provider at
//     (CarriedHealthState). The prober writes it on every probe, on the probes topic
//     (`<prefix>health-probes`, which has a retention: HEALTH_EVENTS_RETENTION), so folding any
//     suffix of that topic gives the live state. v2 data is v3 data without `state`.
inline constexpr int kHealthProbedSchemaVersion = 3;
inline constexpr int kHealthChangedSchemaVersion = 1;
// Peer health events (SPEC §10) started at the providers' latest data: peer health_probed v1 is
// provider health_probed v3 (with `state`) whose `provider_id` is called `peer_id`.
inline constexpr int kPeerHealthProbedSchemaVersion = 1;
inline constexpr int kPeerHealthChangedSchemaVersion = 1;

// What a health event is about: providers (SPEC §3.2) or peer enclaves (SPEC §10). The data and
// the fold are the same; the types, the name of the id member and the versions differ. A
// HealthProbe's and HealthChange's `provider_id` holds the peer id for peers.
struct HealthSubject {
  const char* probed_type;
  const char* changed_type;
  const char* id_member;  // "provider_id" | "peer_id"
  int probed_version;
  int changed_version;
};
inline constexpr HealthSubject kProviderHealth{
    event_type::kHealthProbed, event_type::kHealthChanged, "provider_id",
    kHealthProbedSchemaVersion, kHealthChangedSchemaVersion};
inline constexpr HealthSubject kPeerHealth{
    event_type::kPeerHealthProbed, event_type::kPeerHealthChanged, "peer_id",
    kPeerHealthProbedSchemaVersion, kPeerHealthChangedSchemaVersion};

enum class HealthStatus { kPending, kReady, kUnhealthy, kUnavailable };
// "Pending", "Ready", "Unhealthy", "Unavailable" (SPEC §3.2 spelling).
const char* HealthStatusName(HealthStatus status);
// Case-insensitive.
std::optional<HealthStatus> ParseHealthStatus(std::string_view name);

// The part of a provider's health record (projections/health_state.h) that a probe alone does
// not determine: what the fold had reached when this probe was folded. A probe carrying it
// (health_probed v3) folds to a record that depends on no earlier event, so old probes can be
// dropped (HEALTH_EVENTS_RETENTION) without changing what a replay of the rest gives.
struct CarriedHealthState {
  HealthStatus status = HealthStatus::kPending;
  int64_t registration_seq = 0;  // the registration the counters belong to
  int consecutive_failures = 0;
  int consecutive_successes = 0;
  int64_t last_transition_time_ms = 0;
  std::string last_transition_reason;
  std::string last_error;  // of the latest failed probe up to this one (empty: none)
  int64_t last_error_time_ms = 0;
  // The current streak's probe ids before this probe, oldest first (this probe's id, the event
  // id, is always the streak's last).
  std::vector<std::string> earlier_streak_probe_ids;

  bool operator==(const CarriedHealthState&) const = default;
};

// Data of dcm.provider.health_probed.
struct HealthProbe {
  std::string probe_id;  // the event id (not repeated in data)
  int64_t time_ms = 0;   // the event time: when the probe completed
  std::string provider_id;
  // Per-provider probe sequence: max(previous seq + 1, probe time in ms), continued by whichever
  // instance probes the provider next. Strictly increasing, so the fold ignores a probe whose
  // seq it has passed (a duplicated batch); time-based, so a new owner seeded from a stale
  // record still writes newer seqs than the previous owner.
  int64_t seq = 0;
  // The registry's decision seq (provider.seq) of the registration this probe checked. A probe
  // with a newer registration_seq than the state holds resets the counters first: it is the
  // immediate probe after a (re-)registration.
  int64_t registration_seq = 0;
  std::string url;
  ProbeFailure failure = ProbeFailure::kNone;  // kNone: 200 {"status":"healthy"}
  int http_status = 0;                         // 0: no response
  int64_t latency_us = 0;
  std::string error;  // empty when healthy
  int failure_threshold = 3;
  int success_threshold = 1;
  // v3: the state this probe leaves the record at (the prober sets it after folding). Absent in
  // v1/v2 events: the fold then computes it from the record it has.
  std::optional<CarriedHealthState> state;

  bool operator==(const HealthProbe&) const = default;
};

// Data of dcm.provider.health_changed.
struct HealthChange {
  std::string provider_id;
  int64_t time_ms = 0;
  HealthStatus from = HealthStatus::kPending;
  HealthStatus to = HealthStatus::kPending;
  std::string reason;  // "3 consecutive failures (timeout)", "provider reported unhealthy", ...
  int64_t seq = 0;     // of the probe that completed the change
  std::vector<std::string> probe_ids;  // the probe events that caused it, oldest first

  bool operator==(const HealthChange&) const = default;
};

// `source` names the emitting prober instance. The probe's event id is `probe.probe_id`
// (a fresh UUID when empty).
CloudEvent EncodeHealthProbe(const HealthProbe& probe, const std::string& source,
                             const HealthSubject& subject = kProviderHealth);
CloudEvent EncodeHealthChange(const HealthChange& change, const std::string& source,
                              const HealthSubject& subject = kProviderHealth);
// kCorruption for anything else or malformed data (dead-letter it). DecodeHealthProbe reads v1,
// v2 and v3 alike: a v1 or v2 event decodes to the same HealthProbe as its v3 twin (no state).
Result<HealthProbe> DecodeHealthProbe(const CloudEvent& event,
                                      const HealthSubject& subject = kProviderHealth);
Result<HealthChange> DecodeHealthChange(const CloudEvent& event,
                                        const HealthSubject& subject = kProviderHealth);

// The upcast step health_probed v1 → v2 (registered in events/upcast.cc): `latency_ms` becomes
// `latency_us` = round(latency_ms × 1000) in the same position; every other member is kept. A
// `latency_us` member in v1 data (not a v1 field, ignored by v1 readers) is dropped, and so is
// any repeated `latency_ms` (readers took the first). kCorruption when `data` is not a JSON
// object or `latency_ms` is not a number in 0..1e9.
Result<std::string> UpcastHealthProbedV1ToV2(std::string_view data);
// The upcast step health_probed v2 → v3: v3 only adds the optional `state`, so the data is kept
// as it is (kCorruption when it is not a JSON object).
Result<std::string> UpcastHealthProbedV2ToV3(std::string_view data);

// Classifies what the transport saw (SPEC §3.2): 200 + JSON object whose `status` is "healthy"
// → kNone; "unhealthy" → kReportedUnhealthy; any other 200 body → kBadBody; another status →
// kHttpStatus. Transport failures pass through. `status` is matched case-insensitively.
ProbeResponse ClassifyHealthResponse(ProbeResponse response);

}  // namespace dcm
