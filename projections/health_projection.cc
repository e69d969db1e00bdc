#include "projections/health_projection.h"

#include <algorithm>

namespace dcm {
namespace {

constexpr std::string_view kRecordKey = "hl/";

std::string Key(std::string_view id) {
  std::string key;
  key.reserve(kRecordKey.size() + id.size());
  key.append(kRecordKey).append(id);
  return key;
}

}  // namespace

HealthProjection::HealthProjection(Store* store, Metrics* metrics)
    : store_(store), applied_(metrics, kName) {}

Status HealthProjection::Apply(const CloudEvent& event, const EventPosition&, StoreBatch& batch) {
  if (event.type == event_type::kHealthChanged) {
    RETURN_IF_ERROR(DecodeHealthChange(event));  // a malformed one is still poison
  } else if (event.type == event_type::kHeartbeatRecorded) {
    RETURN_IF_ERROR(ApplyHeartbeat(event, batch));
  } else {
    ASSIGN_OR_RETURN(auto probe, DecodeHealthProbe(event));
    if (probe.provider_id != event.subject) {
      return MakeError(ErrorCode::kCorruption, "probe subject is not its provider_id");
    }
    const std::string key = Key(probe.provider_id);
    ASSIGN_OR_RETURN(auto stored, store_->Get(key, &batch));
    HealthRecord fresh;
    HealthRecord* record = &fresh;
    if (stored) {
      auto cached = records_.Find(probe.provider_id, std::move(*stored));
      // A stored record we cannot read is our bug or disk damage, not a poison event.
      if (!cached) return MakeError(ErrorCode::kInternal, cached.error().message + " at " + key);
      record = *cached;
    }
    if (!FoldProbe(*record, probe).applied) return OkStatus();  // unchanged
    std::string json = EncodeHealthRecord(*record);
    batch.Put(key, json);
    if (record == &fresh) {
      records_.Written(probe.provider_id, std::move(json), std::move(fresh));
    } else {
      records_.Written(probe.provider_id, std::move(json));  // changed in place
    }
  }
  applied_.Inc(event.type);
  return OkStatus();
}

Status HealthProjection::ApplyHeartbeat(const CloudEvent& event, StoreBatch& batch) {
  ASSIGN_OR_RETURN(auto heartbeat, DecodeHeartbeatRecord(event));
  if (heartbeat.provider_id != event.subject) {
    return MakeError(ErrorCode::kCorruption, "heartbeat subject is not its provider_id");
  }
  const std::string key = Key(heartbeat.provider_id);
  ASSIGN_OR_RETURN(auto stored, store_->Get(key, &batch));
  HealthRecord fresh;
  HealthRecord* record = &fresh;
  if (stored) {
    auto cached = records_.Find(heartbeat.provider_id, std::move(*stored));
    if (!cached) return MakeError(ErrorCode::kInternal, cached.error().message + " at " + key);
    record = *cached;
  }
  if (!FoldHeartbeat(*record, heartbeat).applied) return OkStatus();
  std::string json = EncodeHealthRecord(*record);
  batch.Put(key, json);
  if (record == &fresh) {
    records_.Written(heartbeat.provider_id, std::move(json), std::move(fresh));
  } else {
    records_.Written(heartbeat.provider_id, std::move(json));
  }
  return OkStatus();
}

bool HealthRecordExpires(std::string_view, std::string_view value, int64_t cutoff_ms) {
  auto record = DecodeHealthRecord(value);
  return record && std::max(record->last_probe_time_ms, record->last_beat_time_ms) < cutoff_ms;
}

Result<std::optional<HealthRecord>> HealthView::Get(const std::string& provider_id) const {
  ASSIGN_OR_RETURN(auto stored, store_->Get(Key(provider_id)));
  if (!stored) return std::optional<HealthRecord>();
  ASSIGN_OR_RETURN(auto record, DecodeHealthRecord(*stored));
  return std::optional<HealthRecord>(std::move(record));
}

Status HealthView::ForEach(const std::function<bool(const HealthRecord&)>& fn) const {
  Status status = OkStatus();
  RETURN_IF_ERROR(store_->Scan(kRecordKey, "", [&](std::string_view, std::string_view value) {
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
