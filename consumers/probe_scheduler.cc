#include "consumers/probe_scheduler.h"

#include <algorithm>

namespace dcm {

using std::chrono::milliseconds;

ScheduleOptions ScheduleOptionsOf(const HealthCheckConfig& h) {
  ScheduleOptions s;
  s.interval = h.interval;
  s.base_backoff = h.base_backoff;
  s.max_backoff = h.max_backoff;
  s.failure_threshold = h.max_consecutive_failures;
  s.success_threshold = h.success_threshold;
  s.max_in_flight = static_cast<size_t>(h.max_in_flight);
  return s;
}

ProbeScheduler::ProbeScheduler(ScheduleOptions options, uint64_t seed)
    : options_(options), random_(seed) {}

milliseconds ProbeScheduler::Uniform(milliseconds upper) {
  if (upper.count() <= 0) return milliseconds(0);
  std::uniform_int_distribution<int64_t> dist(0, upper.count() - 1);
  return milliseconds(dist(random_));
}

milliseconds ProbeScheduler::Jittered(milliseconds delay) {
  std::uniform_real_distribution<double> dist(1.0 - options_.jitter, 1.0 + options_.jitter);
  return milliseconds(static_cast<int64_t>(static_cast<double>(delay.count()) * dist(random_)));
}

milliseconds ProbeScheduler::DelayOf(const HealthRecord& record) const {
  return ProbeDelay(record, options_.failure_threshold, options_.interval, options_.base_backoff,
                    options_.max_backoff);
}

void ProbeScheduler::Schedule(const std::string& id, Target& target, TimePoint due) {
  target.due = due;
  target.token = next_token_++;
  heap_.push(Entry{due, target.token, id});
}

bool ProbeScheduler::Upsert(const ProbeTarget& p, const std::optional<HealthRecord>& record,
                            TimePoint now, bool registered_now) {
  auto it = targets_.find(p.id);
  if (it != targets_.end()) {
    Target& t = it->second;
    if (p.registration_seq <= t.registration_seq) return false;  // nothing newer
    const bool url_changed = t.url != p.url;
    t.url = p.url;
    t.registration_seq = p.registration_seq;
    // A (re-)registration: probe at once (SPEC §3.2), right after a probe in flight.
    if (t.in_flight) {
      t.probe_again_at_once = true;
    } else {
      Schedule(p.id, t, now);
    }
    return url_changed;
  }
  Target& t = targets_[p.id];
  t.url = p.url;
  t.registration_seq = p.registration_seq;
  if (record) t.record = *record;
  t.record.provider_id = p.id;
  TimePoint due;
  if (registered_now || (t.record.seq > 0 && t.record.registration_seq < p.registration_seq)) {
    due = now;  // registered since it was last probed
  } else if (t.record.seq > 0) {
    // Keep the phase the previous owner had, so a takeover does not bunch probes together.
    const milliseconds delay = DelayOf(t.record);
    due = TimePoint(milliseconds(t.record.last_probe_time_ms)) + delay;
    if (due < now) due = now + Uniform(std::min(delay, options_.interval));
  } else {
    due = now + Uniform(options_.interval);  // never probed: a random point in the interval
  }
  Schedule(p.id, t, due);
  return false;
}

bool ProbeScheduler::Remove(const std::string& id) {
  auto it = targets_.find(id);
  if (it == targets_.end()) return false;
  if (it->second.in_flight) --in_flight_;
  targets_.erase(it);
  return true;
}

void ProbeScheduler::Clear() {
  targets_.clear();
  heap_ = {};
  in_flight_ = 0;
}

std::vector<ProbeTask> ProbeScheduler::TakeDue(TimePoint now,
                                               std::vector<std::chrono::microseconds>* lags) {
  std::vector<ProbeTask> tasks;
  while (!heap_.empty() && heap_.top().due <= now && in_flight_ < options_.max_in_flight) {
    Entry entry = heap_.top();
    heap_.pop();
    auto it = targets_.find(entry.id);
    if (it == targets_.end() || it->second.token != entry.token || it->second.in_flight) continue;
    Target& t = it->second;
    t.in_flight = true;
    ++in_flight_;
    if (lags)
      lags->push_back(std::chrono::duration_cast<std::chrono::microseconds>(now - entry.due));
    tasks.push_back(ProbeTask{entry.id, t.url, t.registration_seq, entry.due, t.token});
  }
  return tasks;
}

std::optional<CompletedProbe> ProbeScheduler::Complete(const ProbeTask& task,
                                                       ProbeResponse response, TimePoint now,
                                                       std::string probe_id) {
  auto it = targets_.find(task.id);
  if (it == targets_.end() || it->second.token != task.token || !it->second.in_flight) {
    return std::nullopt;
  }
  Target& t = it->second;
  t.in_flight = false;
  --in_flight_;
  response = ClassifyHealthResponse(std::move(response));
  CompletedProbe done;
  HealthProbe& probe = done.probe;
  probe.probe_id = std::move(probe_id);
  probe.time_ms = std::chrono::duration_cast<milliseconds>(now.time_since_epoch()).count();
  probe.provider_id = task.id;
  // Strictly increasing per provider, and at least the probe time in ms: an owner that starts
  // from a stale record (its projection was still catching up) still writes seqs newer than
  // the previous owner's, which the fold would otherwise drop as duplicates (clock skew aside).
  probe.seq = std::max(t.record.seq + 1, probe.time_ms);
  probe.registration_seq = task.registration_seq;
  probe.url = task.url;
  probe.failure = response.failure;
  probe.http_status = response.http_status;
  probe.latency_us = response.latency_us;
  probe.error = std::move(response.error);
  probe.failure_threshold = options_.failure_threshold;
  probe.success_threshold = options_.success_threshold;
  done.change = FoldProbe(t.record, probe).change;
  // The event carries what it folded to: a replay of any retained suffix needs nothing older.
  probe.state = CarriedStateOf(t.record);

  TimePoint next;
  if (t.probe_again_at_once) {
    t.probe_again_at_once = false;
    next = now;
  } else {
    // Fixed rate from the due time keeps the provider's phase; never in the past.
    next = std::max(task.due + Jittered(DelayOf(t.record)), now);
  }
  Schedule(task.id, t, next);
  return done;
}

std::optional<TimePoint> ProbeScheduler::NextDue() {
  while (!heap_.empty()) {
    const Entry& top = heap_.top();
    auto it = targets_.find(top.id);
    if (it != targets_.end() && it->second.token == top.token && !it->second.in_flight) {
      return top.due;
    }
    heap_.pop();
  }
  return std::nullopt;
}

void ProbeScheduler::RefreshBeatSignal(const std::string& id, const HealthRecord& projected) {
  auto it = targets_.find(id);
  if (it != targets_.end()) AdoptBeatSignal(it->second.record, projected);
}

const HealthRecord* ProbeScheduler::Record(const std::string& id) const {
  auto it = targets_.find(id);
  return it == targets_.end() ? nullptr : &it->second.record;
}

std::vector<std::string> ProbeScheduler::Ids() const {
  std::vector<std::string> ids;
  ids.reserve(targets_.size());
  for (const auto& [id, t] : targets_) ids.push_back(id);
  return ids;
}

}  // namespace dcm
