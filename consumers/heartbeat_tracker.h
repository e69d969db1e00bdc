// HeartbeatTracker: liveness by heartbeat (SPEC §8) for the heartbeat providers this instance
// owns (the prober group's partitions, consumers/prober.h). Pure logic with time passed in, so
// it is tested with fake times; the Prober wraps it with its lock, its threads and Kafka.
//
//   Upsert ─▶ seeded from the provider's health record in the projection: the last beat the log
//             knows of, so a taking-over instance times expiry from the log, not from joining
//             (see "Expiry from the log" below)
//   Beat   ─▶ the same fold the projection runs (FoldHeartbeat); a record to produce when the
//             beat changes the state, after a re-registration, or when the last record is
//             HEARTBEAT_RECORD_EVERY old; otherwise the beat is only counted (coalesced)
//   Expire ─▶ last beat + HEARTBEAT_TIMEOUT passed ─▶ a heartbeat_expired record (once)
//   Unrecorded ─▶ "still beating" records for beats not yet recorded (before handing over)
//   GcDue  ─▶ expired, and last beat + PROVIDER_GC_AFTER passed ─▶ ask the registrar to remove it
//             (once per registration; the registrar refuses a registration it does not know)
//
// Every call that decides takes `projected`, the provider's record in the local projection:
// beats that reached other instances are recorded as they come (`forwarded`) and show there, so
// the owner adopts a projected record that knows a newer beat than it does. Providers without a
// deadline (Unarmed: never beaten or expired here) are refreshed from the projection by the
// Prober once per second, so a forwarded beat arms them.
//
// Liveness `both` (SPEC §8): such a provider is also probed (ProbeScheduler); its records carry
// `both`, so the fold keeps the beat's status apart from the probes'.
//
// Expiry from the log. The previous owner records beats coalesced, so when it crashed it may have
// taken beats newer than the log's last one, but each fewer than HEARTBEAT_RECORD_EVERY after a
// beat the log holds (else it would have recorded it). So while a provider's last beat is known
// only from the log (seeded, or forwarded: no beat taken by this tracker since it added it), it
// expires at max(last beat, seeded beat + HEARTBEAT_RECORD_EVERY) + HEARTBEAT_TIMEOUT; once this
// tracker takes a beat itself, at last beat + HEARTBEAT_TIMEOUT. A provider seeded as never
// beaten or expired has no such bound: its next beat is a transition, always recorded. Cost: a
// dead provider whose owner also went away expires up to HEARTBEAT_RECORD_EVERY late.
// Not thread-safe: the Prober serialises calls.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "events/heartbeat_events.h"
#include "projections/health_state.h"

namespace dcm {

struct HeartbeatOptions {
  std::chrono::milliseconds timeout{12000};       // HEARTBEAT_TIMEOUT
  std::chrono::milliseconds record_every{60000};  // HEARTBEAT_RECORD_EVERY
  std::chrono::milliseconds gc_after{0};          // PROVIDER_GC_AFTER (0: off)
};

// An expired provider to garbage-collect: the registration it is about and its last beat.
struct GcCandidate {
  std::string id;
  int64_t registration_seq = 0;
  int64_t last_beat_ms = 0;
};

// What a beat or an expiry leads to: the provider's health after it (the reply), and the record
// to produce (with the transition it makes), if any.
struct BeatOutcome {
  HealthRecord health;
  std::optional<HeartbeatRecord> record;
  std::optional<HealthChange> change;
};

class HeartbeatTracker {
 public:
  explicit HeartbeatTracker(HeartbeatOptions options) : options_(options) {}

  // Adds an owned heartbeat provider, or updates its registration seq. `both`: its liveness is
  // `both` (probed too): its records say so, and before deciding, Beat and Expire take the
  // probes' signal from `projected` (AdoptProbeSignal).
  void Upsert(const std::string& id, int64_t registration_seq,
              const std::optional<HealthRecord>& projected, bool both = false);
  bool Remove(const std::string& id);
  void Clear() { targets_.clear(); }
  bool Has(const std::string& id) const { return targets_.count(id) > 0; }
  size_t size() const { return targets_.size(); }
  std::vector<std::string> Ids() const;

  // A beat of `id` at `now_ms`; nullopt if `id` is not tracked here. `record_id`: the id of the
  // record, should one be produced.
  std::optional<BeatOutcome> Beat(const std::string& id, BeatResult result, int64_t now_ms,
                                  const std::optional<HealthRecord>& projected,
                                  std::string record_id);
  // Ids whose last beat is HEARTBEAT_TIMEOUT old or older and not yet expired.
  std::vector<std::string> Due(int64_t now_ms) const;
  // Expires `id` if its last beat (its own, or a newer one in `projected`) is timed out and it is
  // not expired yet; nullopt otherwise.
  std::optional<BeatOutcome> Expire(const std::string& id, int64_t now_ms,
                                    const std::optional<HealthRecord>& projected,
                                    std::string record_id);
  // Ids with no deadline: never beaten, or expired, as far as this tracker knows. A beat
  // forwarded by another instance arms them only once Refresh sees it in the projection.
  std::vector<std::string> Unarmed() const;
  // Adopts `projected` if it knows a newer beat (or registration) than the tracker.
  void Refresh(const std::string& id, const std::optional<HealthRecord>& projected);
  // The earliest time a provider can expire (nullopt: none can).
  std::optional<int64_t> NextDeadline() const;
  // Records for the beats coalesced and not yet recorded, and marks them recorded.
  std::vector<HeartbeatRecord> Unrecorded(int64_t now_ms);
  // Expired providers whose last beat is PROVIDER_GC_AFTER old, each returned once per
  // registration (none when gc_after is 0).
  std::vector<GcCandidate> GcDue(int64_t now_ms);

 private:
  struct Target {
    int64_t registration_seq = 0;
    bool both = false;    // liveness both
    HealthRecord record;  // the fold of every beat, recorded or not
    int64_t last_recorded_ms = 0;
    int64_t record_seq = 0;     // seq of the last record produced here
    int64_t unrecorded = 0;     // beats folded since the last record
    int64_t gc_asked_seq = -1;  // the registration GcDue returned it for (seqs start at 0)
    // Until this tracker takes a beat itself: the seeded (logged) last beat +
    // HEARTBEAT_RECORD_EVERY, before which the previous owner may have taken beats it did not
    // record. 0: no such bound.
    int64_t log_bound_ms = 0;
  };

  // Adopts `projected` if it knows a newer beat (or registration); for a `both` provider, takes
  // the probes' signal from it too.
  static void Merge(Target& target, const std::optional<HealthRecord>& projected);
  // When `target` expires: its last beat, or its log bound if later, + HEARTBEAT_TIMEOUT;
  // nullopt when it cannot (never beaten, or expired).
  std::optional<int64_t> Deadline(const Target& target) const;
  // Whether `target` has a deadline and it has passed.
  bool ExpiryDue(const Target& target, int64_t now_ms) const;
  // `h` is recorded at `now_ms`: the beats it stands for are no longer pending.
  static void MarkRecorded(Target& target, const HeartbeatRecord& h, int64_t now_ms);
  HeartbeatRecord NewRecord(const std::string& id, Target& target, BeatResult result,
                            int64_t now_ms, std::string record_id) const;

  HeartbeatOptions options_;
  std::unordered_map<std::string, Target> targets_;
};

}  // namespace dcm
