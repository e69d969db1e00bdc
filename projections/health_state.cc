#include "projections/health_state.h"

#include <algorithm>
#include <charconv>

#include "events/json_read.h"
#include "src/common/json_writer.h"

namespace dcm {
namespace {

std::string Plural(int n, const char* noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

void Remember(HealthRecord& r, const std::string& probe_id, size_t limit) {
  r.streak_probe_ids.push_back(probe_id);
  if (r.streak_probe_ids.size() > limit) {
    r.streak_probe_ids.erase(r.streak_probe_ids.begin(),
                             r.streak_probe_ids.end() - static_cast<ptrdiff_t>(limit));
  }
}

// A probe or beat under a newer registration starts the record over: Pending, no streaks, one
// signal (a `both` beat of it switches to two again).
void Reset(HealthRecord& r, int64_t registration_seq) {
  r.registration_seq = registration_seq;
  r.status = HealthStatus::kPending;
  r.consecutive_failures = 0;
  r.consecutive_successes = 0;
  r.streak_probe_ids.clear();
  r.both = false;
  r.probe_status = HealthStatus::kPending;
  r.beat_status = HealthStatus::kPending;
}

bool ResetOnReRegistration(HealthRecord& r, const HealthProbe& p) {
  if (p.registration_seq <= r.registration_seq) return false;
  Reset(r, p.registration_seq);
  return true;
}

// The reason of a change of the combined status that a carried probe makes in the projection
// but did not make in the prober's copy (which then names none at this probe's time).
std::string ProbeReason(const HealthProbe& p) {
  if (p.failure == ProbeFailure::kNone) return "healthy probe";
  if (p.failure == ProbeFailure::kReportedUnhealthy) return "provider reported unhealthy";
  return "probe failed (" + std::string(ProbeFailureName(p.failure)) + ")";
}

// The three folds below return the reason of the transition they make ("" for none).
std::string FoldHealthy(HealthRecord& r, const HealthProbe& p, size_t streak_limit) {
  r.last_result = "healthy";
  if (r.consecutive_successes == 0) r.streak_probe_ids.clear();
  r.consecutive_failures = 0;
  ++r.consecutive_successes;
  Remember(r, p.probe_id, streak_limit);
  if (r.status == HealthStatus::kReady || r.consecutive_successes < p.success_threshold) return "";
  r.status = HealthStatus::kReady;
  return r.consecutive_successes == 1
             ? "healthy probe"
             : Plural(r.consecutive_successes, "consecutive healthy probe");
}

std::string FoldReportedUnhealthy(HealthRecord& r, const HealthProbe& p, size_t streak_limit) {
  r.last_result = ProbeFailureName(p.failure);
  r.last_error = p.error;
  r.last_error_time_ms = p.time_ms;
  r.consecutive_failures = 0;
  r.consecutive_successes = 0;
  r.streak_probe_ids.clear();
  Remember(r, p.probe_id, streak_limit);
  r.status = HealthStatus::kUnhealthy;
  return "provider reported unhealthy";
}

std::string FoldFailure(HealthRecord& r, const HealthProbe& p, size_t streak_limit) {
  r.last_result = ProbeFailureName(p.failure);
  r.last_error = p.error;
  r.last_error_time_ms = p.time_ms;
  if (r.consecutive_failures == 0) r.streak_probe_ids.clear();
  r.consecutive_successes = 0;
  ++r.consecutive_failures;
  Remember(r, p.probe_id, streak_limit);
  if (r.status == HealthStatus::kUnavailable || r.consecutive_failures < p.failure_threshold) {
    return "";
  }
  r.status = HealthStatus::kUnavailable;
  return Plural(r.consecutive_failures, "consecutive failure") + " (" +
         std::string(ProbeFailureName(p.failure)) + ")";
}

// A probe that carries its resulting state: the record becomes that state and the probe's own
// fields, whatever it held before.
FoldResult AdoptCarried(HealthRecord& r, const HealthProbe& p) {
  const CarriedHealthState& s = *p.state;
  FoldResult result;
  result.applied = true;
  const HealthStatus before = r.status;
  if (r.provider_id.empty()) r.provider_id = p.provider_id;
  r.seq = p.seq;
  if (s.registration_seq != r.registration_seq) {  // another registration's: one signal again
    r.both = false;
    r.probe_status = r.beat_status = HealthStatus::kPending;
  }
  r.registration_seq = s.registration_seq;
  r.consecutive_failures = s.consecutive_failures;
  r.consecutive_successes = s.consecutive_successes;
  r.last_probe_time_ms = p.time_ms;
  r.last_probe_id = p.probe_id;
  r.last_result = p.failure == ProbeFailure::kNone ? "healthy" : ProbeFailureName(p.failure);
  r.last_http_status = p.http_status;
  r.last_latency_us = p.latency_us;
  if (!r.both) {
    r.status = s.status;
    r.last_transition_time_ms = s.last_transition_time_ms;
    r.last_transition_reason = s.last_transition_reason;
  } else {  // the probe's side only; the transition is the combined status's
    r.probe_status = s.status;
    r.status = CombinedHealthStatus(r.probe_status, r.beat_status);
    if (r.status != before) {
      r.last_transition_time_ms = p.time_ms;
      r.last_transition_reason =
          s.last_transition_time_ms == p.time_ms ? s.last_transition_reason : ProbeReason(p);
    }
  }
  if (!r.both || s.last_error_time_ms >= r.last_error_time_ms) {  // a beat's error may be newer
    r.last_error = s.last_error;
    r.last_error_time_ms = s.last_error_time_ms;
  }
  r.streak_probe_ids = s.earlier_streak_probe_ids;
  r.streak_probe_ids.push_back(p.probe_id);
  if (r.status != before) {
    result.change =
        HealthChange{r.provider_id, p.time_ms,         before, r.status, r.last_transition_reason,
                     p.seq,         r.streak_probe_ids};
  }
  return result;
}

// The status a heartbeat result leads to, its transition reason, and its error ("" for none).
struct BeatEffect {
  HealthStatus status;
  std::string reason;
  std::string error;
};

BeatEffect EffectOf(const HeartbeatRecord& h) {
  switch (h.result) {
    case BeatResult::kHealthy:
      return {HealthStatus::kReady, "heartbeat", ""};
    case BeatResult::kReportedUnhealthy:
      return {HealthStatus::kUnhealthy, "provider reported unhealthy",
              "provider reported unhealthy (heartbeat)"};
    case BeatResult::kExpired:
      break;
  }
  return {HealthStatus::kUnavailable, kHeartbeatExpiredReason,
          "no heartbeat for " + std::to_string(h.timeout_ms) + " ms"};
}

// Whether `h` is news to `r`: not of an older registration; a beat newer than the newest beat
// folded; an expiry that timed it.
bool BeatApplies(const HealthRecord& r, const HeartbeatRecord& h) {
  if (h.registration_seq != r.registration_seq) return h.registration_seq > r.registration_seq;
  return h.result == BeatResult::kExpired ? h.last_beat_time_ms >= r.last_beat_time_ms
                                          : h.last_beat_time_ms > r.last_beat_time_ms;
}

}  // namespace

HealthStatus CombinedHealthStatus(HealthStatus probe, HealthStatus beat) {
  for (HealthStatus failing : {HealthStatus::kUnavailable, HealthStatus::kUnhealthy}) {
    if (probe == failing || beat == failing) return failing;
  }
  return probe;
}

HealthStatus ProbeStatusOf(const HealthRecord& r) { return r.both ? r.probe_status : r.status; }

bool HeartbeatExpired(const HealthRecord& r) {
  if (r.both) return r.beat_status == HealthStatus::kUnavailable;
  return r.status == HealthStatus::kUnavailable && r.last_result == kHeartbeatExpiredReason;
}

namespace {
// `into` takes `other`'s last transition and last error where they are newer.
void KeepNewerNotes(HealthRecord& into, const HealthRecord& other) {
  if (other.last_transition_time_ms > into.last_transition_time_ms) {
    into.last_transition_time_ms = other.last_transition_time_ms;
    into.last_transition_reason = other.last_transition_reason;
  }
  if (other.last_error_time_ms > into.last_error_time_ms) {
    into.last_error = other.last_error;
    into.last_error_time_ms = other.last_error_time_ms;
  }
}
}  // namespace

void AdoptProbeSignal(HealthRecord& r, const HealthRecord& from) {
  if (from.registration_seq != r.registration_seq || from.seq <= r.seq) return;
  HealthRecord merged = from;
  merged.both = r.both;
  merged.beat_status = r.beat_status;
  merged.last_beat_time_ms = r.last_beat_time_ms;
  merged.probe_status = ProbeStatusOf(from);
  merged.status =
      r.both ? CombinedHealthStatus(merged.probe_status, r.beat_status) : merged.probe_status;
  KeepNewerNotes(merged, r);
  r = std::move(merged);
}

void AdoptBeatSignal(HealthRecord& r, const HealthRecord& from) {
  if (!from.both || from.registration_seq != r.registration_seq ||
      (r.both && from.last_beat_time_ms < r.last_beat_time_ms)) {
    return;
  }
  if (!r.both) r.probe_status = r.status;
  r.both = true;
  r.beat_status = from.beat_status;
  r.last_beat_time_ms = from.last_beat_time_ms;
  r.status = CombinedHealthStatus(r.probe_status, r.beat_status);
  KeepNewerNotes(r, from);
}

FoldResult FoldHeartbeat(HealthRecord& r, const HeartbeatRecord& h) {
  FoldResult result;
  if (!BeatApplies(r, h)) return result;
  result.applied = true;
  const HealthStatus before = r.status;
  if (r.provider_id.empty()) r.provider_id = h.provider_id;
  if (h.registration_seq > r.registration_seq) Reset(r, h.registration_seq);
  if (h.both && !r.both) {  // two signals from now on; what the probes said so far stays
    r.both = true;
    r.probe_status = r.status;
  }
  r.last_beat_time_ms = std::max(r.last_beat_time_ms, h.last_beat_time_ms);
  BeatEffect effect = EffectOf(h);
  if (h.result != BeatResult::kHealthy) {
    r.last_error = effect.error;
    r.last_error_time_ms = h.time_ms;
  }
  if (r.both) {  // the probes' counters and last_result are theirs alone
    r.beat_status = effect.status;
    r.status = CombinedHealthStatus(r.probe_status, r.beat_status);
  } else {
    r.last_result = BeatResultName(h.result);
    const bool healthy = h.result == BeatResult::kHealthy;
    r.consecutive_successes = healthy ? r.consecutive_successes + 1 : 0;
    r.consecutive_failures = h.result == BeatResult::kExpired ? r.consecutive_failures + 1 : 0;
    r.status = effect.status;
  }
  if (r.status != before) {
    r.last_transition_time_ms = h.time_ms;
    r.last_transition_reason = effect.reason;
    result.change = HealthChange{
        r.provider_id, h.time_ms, before, r.status, std::move(effect.reason), h.seq, {h.record_id}};
  }
  return result;
}

CarriedHealthState CarriedStateOf(const HealthRecord& r) {
  CarriedHealthState s;
  s.status = ProbeStatusOf(r);  // a `both` provider's probe carries the probes' status alone
  s.registration_seq = r.registration_seq;
  s.consecutive_failures = r.consecutive_failures;
  s.consecutive_successes = r.consecutive_successes;
  s.last_transition_time_ms = r.last_transition_time_ms;
  s.last_transition_reason = r.last_transition_reason;
  s.last_error = r.last_error;
  s.last_error_time_ms = r.last_error_time_ms;
  if (!r.streak_probe_ids.empty()) {
    s.earlier_streak_probe_ids.assign(r.streak_probe_ids.begin(), r.streak_probe_ids.end() - 1);
  }
  return s;
}

FoldResult FoldProbe(HealthRecord& r, const HealthProbe& p) {
  FoldResult result;
  if (p.seq <= r.seq) return result;
  if (p.state) return AdoptCarried(r, p);
  result.applied = true;
  const HealthStatus before = r.status;
  const bool first_probe = r.seq == 0;
  const size_t streak_limit =
      static_cast<size_t>(std::max({p.failure_threshold, p.success_threshold, 1}));
  if (r.provider_id.empty()) r.provider_id = p.provider_id;
  r.seq = p.seq;
  const bool reset = ResetOnReRegistration(r, p);
  r.last_probe_time_ms = p.time_ms;
  r.last_probe_id = p.probe_id;
  r.last_http_status = p.http_status;
  r.last_latency_us = p.latency_us;
  if (r.both) r.status = r.probe_status;  // the rules below run on the probes' side alone
  std::string reason = p.failure == ProbeFailure::kNone ? FoldHealthy(r, p, streak_limit)
                       : p.failure == ProbeFailure::kReportedUnhealthy
                           ? FoldReportedUnhealthy(r, p, streak_limit)
                           : FoldFailure(r, p, streak_limit);
  if (r.both) {
    r.probe_status = r.status;
    r.status = CombinedHealthStatus(r.probe_status, r.beat_status);
  }
  if (r.status != before) {
    // A reset names itself, unless it is the first probe of a new provider.
    if (reset && !first_probe) {
      reason = r.status == HealthStatus::kPending ? "re-registered" : "re-registered; " + reason;
    }
    r.last_transition_time_ms = p.time_ms;
    r.last_transition_reason = reason;
    result.change = HealthChange{
        r.provider_id, p.time_ms, before, r.status, std::move(reason), p.seq, r.streak_probe_ids};
  }
  return result;
}

std::chrono::milliseconds ProbeDelay(const HealthRecord& r, int failure_threshold,
                                     std::chrono::milliseconds interval,
                                     std::chrono::milliseconds base_backoff,
                                     std::chrono::milliseconds max_backoff) {
  if (ProbeStatusOf(r) != HealthStatus::kUnavailable) return interval;
  const int n = std::clamp(r.consecutive_failures - failure_threshold, 0, 40);
  auto delay = base_backoff;
  for (int i = 0; i < n && delay < max_backoff; ++i) delay *= 2;
  return std::min(delay, max_backoff);
}

HealthStatus EffectiveHealthStatus(const HealthRecord* record, int64_t registration_seq) {
  if (record == nullptr || record->registration_seq < registration_seq) {
    return HealthStatus::kPending;
  }
  return record->status;
}

std::string EncodeHealthRecord(const HealthRecord& r) {
  // Written by hand, not through JsonWriter: every probe of a replay or rebuild re-encodes its
  // provider's record, and the literal keys halve the cost. The bytes are what JsonWriter wrote
  // (HealthStateTest.StoredRecordBytesStayTheSame): live stores and rebuilds must agree.
  std::string out;
  out.reserve(448 + r.provider_id.size() + r.last_error.size());
  auto text = [&out](std::string_view key, std::string_view value) {
    out.append(key);
    out.push_back('"');
    AppendJsonEscaped(out, value);
    out.push_back('"');
  };
  auto number = [&out](std::string_view key, int64_t value) {
    out.append(key);
    char digits[24];
    out.append(digits, std::to_chars(digits, digits + sizeof(digits), value).ptr);
  };
  text("{\"provider_id\":", r.provider_id);
  text(",\"status\":", HealthStatusName(r.status));
  number(",\"seq\":", r.seq);
  number(",\"registration_seq\":", r.registration_seq);
  number(",\"consecutive_failures\":", r.consecutive_failures);
  number(",\"consecutive_successes\":", r.consecutive_successes);
  number(",\"last_probe_time_ms\":", r.last_probe_time_ms);
  text(",\"last_probe_id\":", r.last_probe_id);
  text(",\"last_result\":", r.last_result);
  number(",\"last_http_status\":", r.last_http_status);
  number(",\"last_latency_us\":", r.last_latency_us);
  number(",\"last_transition_time_ms\":", r.last_transition_time_ms);
  text(",\"last_transition_reason\":", r.last_transition_reason);
  text(",\"last_error\":", r.last_error);
  number(",\"last_error_time_ms\":", r.last_error_time_ms);
  out.append(",\"streak_probe_ids\":[");
  for (size_t i = 0; i < r.streak_probe_ids.size(); ++i) {
    text(i == 0 ? "" : ",", r.streak_probe_ids[i]);
  }
  out.push_back(']');
  if (r.last_beat_time_ms != 0) number(",\"last_beat_time_ms\":", r.last_beat_time_ms);
  if (r.both) {
    out.append(",\"liveness\":\"both\"");
    text(",\"probe_status\":", HealthStatusName(r.probe_status));
    text(",\"beat_status\":", HealthStatusName(r.beat_status));
  }
  out.push_back('}');
  return out;
}

namespace {

// `"liveness":"both"` and the two signals' statuses (written only for a `both` record); false
// when unreadable.
bool ReadTwoSignals(simdjson::dom::object o, HealthRecord& r) {
  std::string_view liveness;
  if (o["liveness"].get(liveness) || liveness != "both") return true;
  std::string_view probe_name, beat_name;
  if (o["probe_status"].get(probe_name) || o["beat_status"].get(beat_name)) return false;
  auto probe = ParseHealthStatus(probe_name);
  auto beat = ParseHealthStatus(beat_name);
  if (!probe || !beat) return false;
  r.both = true;
  r.probe_status = *probe;
  r.beat_status = *beat;
  return true;
}

}  // namespace

Result<HealthRecord> DecodeHealthRecord(std::string_view json) {
  auto parsed = ParseJson(json);
  simdjson::dom::object o;
  if (!parsed || parsed->get(o)) {
    return MakeError(ErrorCode::kCorruption, "unreadable health record");
  }
  HealthRecord r;
  bool ok = true;
  auto str = [&](std::string_view key, std::string& out) {
    std::string_view v;
    if (o[key].get(v)) ok = false;
    out.assign(v);
  };
  auto i64 = [&](std::string_view key, int64_t& out) {
    if (o[key].get(out)) ok = false;
  };
  auto i32 = [&](std::string_view key, int& out) {
    int64_t v = 0;
    if (o[key].get(v)) ok = false;
    out = static_cast<int>(v);
  };
  std::string status;
  str("provider_id", r.provider_id);
  str("status", status);
  i64("seq", r.seq);
  i64("registration_seq", r.registration_seq);
  i32("consecutive_failures", r.consecutive_failures);
  i32("consecutive_successes", r.consecutive_successes);
  i64("last_probe_time_ms", r.last_probe_time_ms);
  str("last_probe_id", r.last_probe_id);
  str("last_result", r.last_result);
  i32("last_http_status", r.last_http_status);
  i64("last_latency_us", r.last_latency_us);
  i64("last_transition_time_ms", r.last_transition_time_ms);
  str("last_transition_reason", r.last_transition_reason);
  str("last_error", r.last_error);
  i64("last_error_time_ms", r.last_error_time_ms);
  simdjson::dom::array ids;
  if (o["streak_probe_ids"].get(ids)) {
    ok = false;
  } else {
    for (auto item : ids) {
      std::string_view id;
      if (!item.get(id)) r.streak_probe_ids.emplace_back(id);
    }
  }
  if (int64_t beat = 0; !o["last_beat_time_ms"].get(beat)) r.last_beat_time_ms = beat;
  if (!ReadTwoSignals(o, r)) ok = false;
  auto parsed_status = ParseHealthStatus(status);
  if (!ok || !parsed_status) return MakeError(ErrorCode::kCorruption, "unreadable health record");
  r.status = *parsed_status;
  return r;
}

}  // namespace dcm
