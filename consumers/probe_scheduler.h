// ProbeScheduler: which provider to probe when, for the providers this instance owns (SPEC
// §3.2). Pure logic with time passed in, so it is tested with a fake clock; the Prober
// (consumers/prober.h) wraps it with threads, the HTTP checker and Kafka.
//
//   Upsert ─▶ due: at once after a (re-)registration; else phase-preserving from the last probe
//             in the record; else a random point within the interval (spreads a fleet).
//   TakeDue(now) ─▶ tasks, at most max_in_flight outstanding, one per provider at a time
//   Complete(task, response) ─▶ health_probed event (+ health_changed) from the same fold the
//             projection runs; next due = previous due + delay·U(0.9, 1.1), delay = interval, or
//             the backoff while Unavailable
//
// Tasks carry a token: a completion for a provider removed, revoked or re-added since is
// dropped, so a partition handed to another instance is never written to by this one again.
// Not thread-safe: the Prober serialises calls.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <queue>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "events/health_events.h"
#include "projections/health_state.h"
#include "src/common/clock.h"
#include "src/common/config.h"
#include "src/common/health_check.h"

namespace dcm {

struct ScheduleOptions {
  std::chrono::milliseconds interval{10000};
  std::chrono::milliseconds base_backoff{10000};
  std::chrono::milliseconds max_backoff{300000};
  int failure_threshold = 3;
  int success_threshold = 1;
  size_t max_in_flight = 4096;
  double jitter = 0.1;  // each delay is scaled by U(1 - jitter, 1 + jitter)
};

// The schedule of HEALTH_CHECK_* (providers and peers alike).
ScheduleOptions ScheduleOptionsOf(const HealthCheckConfig& health);

struct ProbeTarget {
  std::string id;
  std::string url;               // {endpoint without trailing /}/health
  int64_t registration_seq = 0;  // the registry's decision seq of the provider's current state
};

struct ProbeTask {
  std::string id;
  std::string url;
  int64_t registration_seq = 0;
  TimePoint due;
  uint64_t token = 0;
};

struct CompletedProbe {
  HealthProbe probe;
  std::optional<HealthChange> change;
};

class ProbeScheduler {
 public:
  ProbeScheduler(ScheduleOptions options, uint64_t seed);

  // Adds or refreshes a provider. `record`: its folded health from the projection, if any (used
  // only when the provider is new here). `registered_now`: a live (re-)registration, so probe
  // at once. Returns true when the provider's URL changed (drop its pooled connection).
  bool Upsert(const ProbeTarget& target, const std::optional<HealthRecord>& record, TimePoint now,
              bool registered_now);
  // Liveness `both`: takes the beats' signal of `id` from `projected` (the local projection)
  // before its next probe is folded (AdoptBeatSignal), so the transition that probe makes is
  // the combined status's.
  void RefreshBeatSignal(const std::string& id, const HealthRecord& projected);
  // Stops probing `id`; true if it was known.
  bool Remove(const std::string& id);
  // Forgets every provider (partitions revoked). In-flight completions are then dropped.
  void Clear();

  // Due tasks in due order, marking them in flight; `lags` (if given) receives now - due of each.
  std::vector<ProbeTask> TakeDue(TimePoint now, std::vector<std::chrono::microseconds>* lags);
  // Folds the response of `task` and reschedules. nullopt if the task is stale.
  std::optional<CompletedProbe> Complete(const ProbeTask& task, ProbeResponse response,
                                         TimePoint now, std::string probe_id);

  // The earliest due time of a provider not in flight.
  std::optional<TimePoint> NextDue();
  size_t size() const { return targets_.size(); }
  size_t in_flight() const { return in_flight_; }
  const HealthRecord* Record(const std::string& id) const;
  std::vector<std::string> Ids() const;

 private:
  struct Target {
    std::string url;
    int64_t registration_seq = 0;
    HealthRecord record;
    TimePoint due;
    uint64_t token = 0;
    bool in_flight = false;
    bool probe_again_at_once = false;  // re-registered while a probe was in flight
  };
  struct Entry {
    TimePoint due;
    uint64_t token;
    std::string id;
    bool operator>(const Entry& other) const { return due > other.due; }
  };

  std::chrono::milliseconds Jittered(std::chrono::milliseconds delay);
  std::chrono::milliseconds Uniform(std::chrono::milliseconds upper);
  void Schedule(const std::string& id, Target& target, TimePoint due);
  std::chrono::milliseconds DelayOf(const HealthRecord& record) const;

  ScheduleOptions options_;
  std::mt19937_64 random_;
  uint64_t next_token_ = 1;
  size_t in_flight_ = 0;
  std::unordered_map<std::string, Target> targets_;
  // Lazily cleaned: entries whose token no longer matches their target are skipped.
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap_;
};

}  // namespace dcm
