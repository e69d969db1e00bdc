// The health state machine (SPEC §3.2, seed sp-health-check): a pure fold of
// dcm.provider.health_probed events into one HealthRecord per provider. The prober runs the same
// fold on its in-memory copy to decide when to emit dcm.provider.health_changed, and the health
// projection runs it to serve reads, so both agree by construction, and a replay from offset 0
// yields the same states (the thresholds travel in each probe event).
//
//   any ──reset (probe with newer registration_seq)──▶ Pending, counters 0, then:
//   healthy            successes+1, failures 0; ─▶ Ready once successes ≥ success_threshold
//   reported_unhealthy failures 0, successes 0; ─▶ Unhealthy at once
//   other failure      failures+1, successes 0; ─▶ Unavailable once failures ≥ failure_threshold
//                      (until then the state is kept)
//
// Unavailable providers are probed with backoff base·2ⁿ (n = failures beyond the threshold) up
// to the maximum; every other state at the interval (ProbeDelay).
//
// Truncation-safe (probe retention, HEALTH_EVENTS_RETENTION): the prober folds each probe on its
// in-memory record and writes the result into the event (health_probed v3 `state`,
// CarriedStateOf). Folding a probe that carries a state takes it instead of recomputing, so the
// record after a probe depends on that probe alone, and folding any suffix of the log that holds
// a provider's latest probe gives the live record. Probes without a state (v1/v2, written before
// the upgrade) are folded as above, from the record.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "events/health_events.h"
#include "events/heartbeat_events.h"
#include "src/common/result.h"

namespace dcm {

struct HealthRecord {
  std::string provider_id;
  HealthStatus status = HealthStatus::kPending;
  int64_t seq = 0;                // last folded probe seq (0: never probed)
  int64_t registration_seq = -1;  // registration the counters belong to
  int consecutive_failures = 0;
  int consecutive_successes = 0;
  int64_t last_probe_time_ms = 0;
  std::string last_probe_id;
  std::string last_result;  // "healthy" or the failure class
  int last_http_status = 0;
  int64_t last_latency_us = 0;
  int64_t last_transition_time_ms = 0;
  std::string last_transition_reason;
  std::string last_error;  // of the latest failed probe (kept after recovery, with its time)
  int64_t last_error_time_ms = 0;
  // Probe ids of the current run of equal results (failures, or successes), newest last, at
  // most max(thresholds): what a health_changed event names as its cause.
  std::vector<std::string> streak_probe_ids;
  // Liveness by heartbeat (SPEC §8): the newest beat folded (0: none). Stored only when set, so
  // the records of probed providers keep their bytes.
  int64_t last_beat_time_ms = 0;
  // Liveness `both` (SPEC §8): the two signals kept apart, once a beat recorded as `both` under
  // the current registration was folded (a probe or beat of a newer registration clears it).
  // Then `status` is CombinedHealthStatus(probe_status, beat_status), the probe counters and
  // `last_result` are the probes' alone, and beats set only `beat_status`. Stored only when set,
  // so the records of probe and heartbeat providers keep their bytes.
  bool both = false;
  HealthStatus probe_status = HealthStatus::kPending;  // what the probes alone say
  HealthStatus beat_status = HealthStatus::kPending;   // what the beats alone say

  bool operator==(const HealthRecord&) const = default;
};

// Liveness `both`: Unavailable if either signal is, else Unhealthy if either is, else the
// probe's (so Pending until probed). A provider not beaten yet is not failing on heartbeat.
HealthStatus CombinedHealthStatus(HealthStatus probe, HealthStatus beat);
// The status the probes alone give `record` (the one ProbeDelay backs off on and a probe
// carries): `probe_status` in two-signal mode, else `status`.
HealthStatus ProbeStatusOf(const HealthRecord& record);
// Whether `record`'s heartbeat has expired (and no beat came since): for a `both` record its
// beat_status, else its status and last_result (a later probe result cannot hide it).
bool HeartbeatExpired(const HealthRecord& record);
// The prober keeps two in-memory copies of a `both` provider's record (probe scheduler,
// heartbeat tracker), each folding its own signal. Before deciding on a transition, each takes
// the other signal from `projected` (the local projection), if it is of the same registration
// and newer; `status` is recomputed without a transition (the projection made it).
void AdoptProbeSignal(HealthRecord& record, const HealthRecord& projected);
void AdoptBeatSignal(HealthRecord& record, const HealthRecord& projected);

struct FoldResult {
  bool applied = false;                // false: a duplicate or older probe (seq not newer)
  std::optional<HealthChange> change;  // set when the status changed
};

// Folds `probe` into `record` (whose provider_id it must match). Deterministic. A probe with a
// `state` sets the record to it (plus what the probe itself says); one without is folded by the
// rules above.
FoldResult FoldProbe(HealthRecord& record, const HealthProbe& probe);

// Liveness `both` (SPEC §8): a record in two-signal mode (HealthRecord::both) folds a probe by the
// rules above on its `probe_status` and a beat by the rules below on its `beat_status`; the
// transition is the change of the combined status. A probe carrying a state sets
// `probe_status` to it (the prober writes the probe's status alone there).
//
// Folds a heartbeat record (events/heartbeat_events.h) into `record`, on the same state machine:
//   a record under a newer registration resets the record first (Pending, counters 0), then
//   healthy            successes+1, failures 0 ─▶ Ready ("heartbeat")
//   reported_unhealthy counters 0 ─▶ Unhealthy ("provider reported unhealthy")
//   heartbeat_expired  failures+1, successes 0 ─▶ Unavailable ("heartbeat_expired")
// A beat applies only if it is newer than the newest beat folded (duplicates and stragglers are
// skipped); an expiry only if it timed the newest beat folded, so a beat recorded before an
// expiry that had not seen it wins. A record of an older registration is skipped. Leaves the
// probe fields (seq, last probe) alone. A record with `both` switches `record` to two-signal
// mode (probe_status: the status so far); in that mode beats leave the counters and
// `last_result` alone. Deterministic.
FoldResult FoldHeartbeat(HealthRecord& record, const HeartbeatRecord& heartbeat);

// What `record` (just folded from a probe) carries in that probe's event: the prober sets
// `probe.state = CarriedStateOf(record)` after FoldProbe.
CarriedHealthState CarriedStateOf(const HealthRecord& record);

// The delay before the next probe, before jitter: `interval`, or for Unavailable providers
// base_backoff·2ⁿ capped at max_backoff, n = failures beyond the threshold that tripped it.
std::chrono::milliseconds ProbeDelay(const HealthRecord& record, int failure_threshold,
                                     std::chrono::milliseconds interval,
                                     std::chrono::milliseconds base_backoff,
                                     std::chrono::milliseconds max_backoff);

// The status a provider shows: Pending until its current registration (registry seq) has been
// probed, else the folded status.
HealthStatus EffectiveHealthStatus(const HealthRecord* record, int64_t registration_seq);

// Storage form (JSON) of a record, and back. kCorruption on unreadable input.
std::string EncodeHealthRecord(const HealthRecord& record);
Result<HealthRecord> DecodeHealthRecord(std::string_view json);

}  // namespace dcm
