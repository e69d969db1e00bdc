#include "projections/health_projection.h"

#include <algorithm>

namespace dcm {
namespace {

// Every peer event type starts so (event_type::kPeerHealthProbed, kPeerHealthChanged).
constexpr std::string_view kPeerTypePrefix = "dcm.peer.";

std::string KeyOf(std::string_view prefix, std::string_view id) {
  std::string key;
  key.reserve(prefix.size() + id.size());
  key.append(prefix).append(id);
  return key;
}

}  // namespace

HealthProjection::HealthProjection(Store* store, Metrics* metrics, const HealthFold& fold)
    : fold_(fold), store_(store), applied_(metrics, fold.name) {}

std::string HealthProjection::Key(std::string_view id) const { return KeyOf(fold_.prefix, id); }

bool HealthProjection::Skips(std::string_view type) const {
  const bool peer_event = type.starts_with(kPeerTypePrefix);
  return fold_.heartbeats ? peer_event : !peer_event;
}

bool HealthProjection::SkipsRaw(std::string_view value) const {
  if (fold_.heartbeats) return false;  // the providers' fold skips only the few peer events
  // A type without JSON escapes appears verbatim; with any "\u" in the record, decode it.
  return value.find(kPeerTypePrefix) == std::string_view::npos &&
         value.find("\\u") == std::string_view::npos;
}

Status HealthProjection::Apply(const CloudEvent& event, const EventPosition&, StoreBatch& batch) {
  if (Skips(event.type)) return OkStatus();
  if (event.type == fold_.subject.changed_type) {
    RETURN_IF_ERROR(DecodeHealthChange(event, fold_.subject));  // a malformed one is poison
  } else if (fold_.heartbeats && event.type == event_type::kHeartbeatRecorded) {
    RETURN_IF_ERROR(ApplyHeartbeat(event, batch));
  } else {
    RETURN_IF_ERROR(ApplyProbe(event, batch));
  }
  applied_.Inc(event.type);
  return OkStatus();
}

Status HealthProjection::ApplyProbe(const CloudEvent& event, StoreBatch& batch) {
  ASSIGN_OR_RETURN(auto probe, DecodeHealthProbe(event, fold_.subject));
  if (probe.provider_id != event.subject) {
    return MakeError(ErrorCode::kCorruption, "probe subject is not its id");
  }
  return FoldRecord(probe.provider_id, batch,
                    [&](HealthRecord& record) { return FoldProbe(record, probe).applied; });
}

Status HealthProjection::ApplyHeartbeat(const CloudEvent& event, StoreBatch& batch) {
  ASSIGN_OR_RETURN(auto heartbeat, DecodeHeartbeatRecord(event));
  if (heartbeat.provider_id != event.subject) {
    return MakeError(ErrorCode::kCorruption, "heartbeat subject is not its provider_id");
  }
  return FoldRecord(heartbeat.provider_id, batch,
                    [&](HealthRecord& record) { return FoldHeartbeat(record, heartbeat).applied; });
}

Status HealthProjection::FoldRecord(const std::string& id, StoreBatch& batch,
                                    const std::function<bool(HealthRecord&)>& fold) {
  const std::string key = Key(id);
  ASSIGN_OR_RETURN(auto stored, store_->Get(key, &batch));
  HealthRecord fresh;
  HealthRecord* record = &fresh;
  if (stored) {
    auto cached = records_.Find(id, std::move(*stored));
    // A stored record we cannot read is our bug or disk damage, not a poison event.
    if (!cached) return MakeError(ErrorCode::kInternal, cached.error().message + " at " + key);
    record = *cached;
  }
  if (!fold(*record)) return OkStatus();  // unchanged
  std::string json = EncodeHealthRecord(*record);
  batch.Put(key, json);
  if (record == &fresh) {
    records_.Written(id, std::move(json), std::move(fresh));
  } else {
    records_.Written(id, std::move(json));  // changed in place
  }
  return OkStatus();
}

bool HealthRecordExpires(std::string_view, std::string_view value, int64_t cutoff_ms) {
  auto record = DecodeHealthRecord(value);
  return record && std::max(record->last_probe_time_ms, record->last_beat_time_ms) < cutoff_ms;
}

Result<std::optional<HealthRecord>> HealthView::Get(const std::string& provider_id) const {
  ASSIGN_OR_RETURN(auto stored, store_->Get(KeyOf(prefix_, provider_id)));
  if (!stored) return std::optional<HealthRecord>();
  ASSIGN_OR_RETURN(auto record, DecodeHealthRecord(*stored));
  return std::optional<HealthRecord>(std::move(record));
}

Status HealthView::ForEach(const std::function<bool(const HealthRecord&)>& fn) const {
  Status status = OkStatus();
  RETURN_IF_ERROR(store_->Scan(prefix_, "", [&](std::string_view, std::string_view value) {
    auto record = DecodeHealthRecord(value);
    if (!record) {
      status = tl::unexpected(record.error());
      return false;
    }
    return fn(*record);
  }));
  return status;
}

}  // namespace dcm
