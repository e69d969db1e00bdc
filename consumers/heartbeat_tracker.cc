#include "consumers/heartbeat_tracker.h"

#include <algorithm>

namespace dcm {

namespace {

// The status the beats alone give `r`.
HealthStatus BeatStatusOf(const HealthRecord& r) { return r.both ? r.beat_status : r.status; }

}  // namespace

void HeartbeatTracker::Merge(Target& t, const std::optional<HealthRecord>& projected) {
  if (!projected) return;
  if (projected->last_beat_time_ms > t.record.last_beat_time_ms ||
      projected->registration_seq > t.record.registration_seq) {
    t.record = *projected;  // a beat recorded elsewhere (forwarded), newer than ours
  }
  if (t.both) AdoptProbeSignal(t.record, *projected);
}

void HeartbeatTracker::Upsert(const std::string& id, int64_t registration_seq,
                              const std::optional<HealthRecord>& projected, bool both) {
  auto [it, added] = targets_.try_emplace(id);
  Target& t = it->second;
  t.registration_seq = std::max(t.registration_seq, registration_seq);
  t.both = both;
  if (!added) return;
  if (projected) t.record = *projected;
  t.record.provider_id = id;
  // The log's last beat: a takeover times expiry from it, and the next record is due one
  // HEARTBEAT_RECORD_EVERY after it.
  t.last_recorded_ms = t.record.last_beat_time_ms;
  if (t.record.last_beat_time_ms > 0 && !HeartbeatExpired(t.record)) {
    t.log_bound_ms = t.record.last_beat_time_ms + options_.record_every.count();
  }
}

bool HeartbeatTracker::Remove(const std::string& id) { return targets_.erase(id) > 0; }

std::vector<std::string> HeartbeatTracker::Ids() const {
  std::vector<std::string> ids;
  ids.reserve(targets_.size());
  for (const auto& [id, t] : targets_) ids.push_back(id);
  return ids;
}

HeartbeatRecord HeartbeatTracker::NewRecord(const std::string& id, Target& t, BeatResult result,
                                            int64_t now_ms, std::string record_id) const {
  HeartbeatRecord h;
  h.record_id = std::move(record_id);
  h.time_ms = now_ms;
  h.provider_id = id;
  h.seq = std::max(t.record_seq + 1, now_ms);
  h.registration_seq = t.registration_seq;
  h.result = result;
  h.timeout_ms = options_.timeout.count();
  h.both = t.both;
  return h;
}

std::optional<int64_t> HeartbeatTracker::Deadline(const Target& t) const {
  if (t.record.last_beat_time_ms == 0 || HeartbeatExpired(t.record)) return std::nullopt;
  return std::max(t.record.last_beat_time_ms, t.log_bound_ms) + options_.timeout.count();
}

bool HeartbeatTracker::ExpiryDue(const Target& t, int64_t now_ms) const {
  const auto deadline = Deadline(t);
  return deadline && *deadline <= now_ms;
}

void HeartbeatTracker::MarkRecorded(Target& t, const HeartbeatRecord& h, int64_t now_ms) {
  t.last_recorded_ms = now_ms;
  t.record_seq = h.seq;
  t.unrecorded = 0;
}

std::optional<BeatOutcome> HeartbeatTracker::Beat(const std::string& id, BeatResult result,
                                                  int64_t now_ms,
                                                  const std::optional<HealthRecord>& projected,
                                                  std::string record_id) {
  auto it = targets_.find(id);
  if (it == targets_.end()) return std::nullopt;
  Target& t = it->second;
  Merge(t, projected);
  HeartbeatRecord h = NewRecord(id, t, result, now_ms, std::move(record_id));
  h.beats = t.unrecorded + 1;
  h.last_beat_time_ms = now_ms;
  const bool new_registration = t.record.registration_seq < t.registration_seq;
  const HealthStatus before = t.record.status;
  const std::string before_result = t.record.last_result;
  const HealthStatus before_beat = BeatStatusOf(t.record);
  const bool before_both = t.record.both;
  FoldResult folded = FoldHeartbeat(t.record, h);
  t.log_bound_ms = 0;     // a beat of its own: the log's gaps no longer matter
  if (!folded.applied) {  // a second beat within the same millisecond: nothing new
    return BeatOutcome{.health = t.record, .record = std::nullopt, .change = std::nullopt};
  }
  const bool due = now_ms - t.last_recorded_ms >= options_.record_every.count();
  // A change of either signal, or of the record's mode (a `both` provider's first beat), is a
  // transition: recorded at once.
  if (folded.change || new_registration || due || before != t.record.status ||
      before_result != t.record.last_result || before_beat != BeatStatusOf(t.record) ||
      before_both != t.record.both) {
    MarkRecorded(t, h, now_ms);
    return BeatOutcome{
        .health = t.record, .record = std::move(h), .change = std::move(folded.change)};
  }
  ++t.unrecorded;
  return BeatOutcome{.health = t.record, .record = std::nullopt, .change = std::nullopt};
}

std::vector<std::string> HeartbeatTracker::Due(int64_t now_ms) const {
  std::vector<std::string> due;
  for (const auto& [id, t] : targets_) {
    if (ExpiryDue(t, now_ms)) due.push_back(id);
  }
  return due;
}

std::optional<BeatOutcome> HeartbeatTracker::Expire(const std::string& id, int64_t now_ms,
                                                    const std::optional<HealthRecord>& projected,
                                                    std::string record_id) {
  auto it = targets_.find(id);
  if (it == targets_.end()) return std::nullopt;
  Target& t = it->second;
  Merge(t, projected);
  if (!ExpiryDue(t, now_ms)) return std::nullopt;
  HeartbeatRecord h = NewRecord(id, t, BeatResult::kExpired, now_ms, std::move(record_id));
  h.beats = t.unrecorded;
  h.last_beat_time_ms = t.record.last_beat_time_ms;
  FoldResult folded = FoldHeartbeat(t.record, h);
  MarkRecorded(t, h, now_ms);
  BeatOutcome out;
  out.health = t.record;
  out.record = std::move(h);
  out.change = std::move(folded.change);
  return out;
}

std::vector<std::string> HeartbeatTracker::Unarmed() const {
  std::vector<std::string> ids;
  for (const auto& [id, t] : targets_) {
    if (t.record.last_beat_time_ms == 0 || HeartbeatExpired(t.record)) ids.push_back(id);
  }
  return ids;
}

void HeartbeatTracker::Refresh(const std::string& id,
                               const std::optional<HealthRecord>& projected) {
  auto it = targets_.find(id);
  if (it != targets_.end()) Merge(it->second, projected);
}

std::optional<int64_t> HeartbeatTracker::NextDeadline() const {
  std::optional<int64_t> next;
  for (const auto& [id, t] : targets_) {
    const auto deadline = Deadline(t);
    if (deadline && (!next || *deadline < *next)) next = deadline;
  }
  return next;
}

std::vector<HeartbeatRecord> HeartbeatTracker::Unrecorded(int64_t now_ms) {
  std::vector<HeartbeatRecord> records;
  for (auto& [id, t] : targets_) {
    if (t.unrecorded == 0 || HeartbeatExpired(t.record)) continue;
    const BeatResult result = BeatStatusOf(t.record) == HealthStatus::kUnhealthy
                                  ? BeatResult::kReportedUnhealthy
                                  : BeatResult::kHealthy;
    HeartbeatRecord h = NewRecord(id, t, result, now_ms, "");
    h.beats = t.unrecorded;
    h.last_beat_time_ms = t.record.last_beat_time_ms;
    MarkRecorded(t, h, now_ms);
    records.push_back(std::move(h));
  }
  return records;
}

std::vector<GcCandidate> HeartbeatTracker::GcDue(int64_t now_ms) {
  std::vector<GcCandidate> due;
  if (options_.gc_after.count() <= 0) return due;
  for (auto& [id, t] : targets_) {
    const int64_t last_beat = t.record.last_beat_time_ms;
    if (!HeartbeatExpired(t.record) || last_beat <= 0 || t.gc_asked_seq == t.registration_seq ||
        last_beat + options_.gc_after.count() > now_ms) {
      continue;
    }
    t.gc_asked_seq = t.registration_seq;
    due.push_back({id, t.registration_seq, last_beat});
  }
  return due;
}

}  // namespace dcm
