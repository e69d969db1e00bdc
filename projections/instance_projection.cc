#include "projections/instance_projection.h"

#include <algorithm>

#include "projections/instance_fold.h"
#include "projections/instance_records.h"

namespace dcm {
namespace {

using namespace instance_records;  // NOLINT(google-build-using-namespace): this file's records

bool IsTerminal(std::string_view type) {
  return type == event_type::kOperationCompleted || type == event_type::kOperationFailed;
}

}  // namespace

bool Saga::Has(std::string_view type) const {
  return std::find(steps.begin(), steps.end(), type) != steps.end();
}

InstanceProjection::InstanceProjection(Store* store, OutcomeWaiters* waiters, Metrics* metrics)
    : store_(store), waiters_(waiters), applied_(metrics, kName), sagas_(&DecodeSaga, 10000) {}

Status InstanceProjection::Apply(const CloudEvent& event, const EventPosition& position,
                                 StoreBatch& batch) {
  if (event.type == event_type::kOperationRequested) {
    // Not a fact (it belongs on dcm.instance-requests): nothing to fold. A placeholder keeps
    // batch_events_ aligned with the runner's applied events.
    InstanceEvent ignored;
    ignored.type = event.type;
    batch_events_.push_back(std::move(ignored));
    batch_at_.push_back({position.partition, position.offset});
    return OkStatus();
  }
  // Flat for the listener and the waiters below, typed for the fold.
  auto decoded = DecodeInstanceEvent(event);
  if (!decoded) return MakeError(ErrorCode::kCorruption, decoded.error().message);
  ASSIGN_OR_RETURN(auto fact, ToInstanceFact(*decoded));
  RETURN_IF_ERROR(FoldInstanceFact(store_, batch, sagas_, fact));
  applied_.Inc(decoded->type);
  batch_events_.push_back(std::move(*decoded));
  batch_at_.push_back({position.partition, position.offset});
  return OkStatus();
}

void InstanceProjection::AfterCommit(const std::vector<CloudEvent>& applied) {
  // Apply pushed one entry per applied event; a batch that failed part-way (the runner stops)
  // may have left a head behind, so this batch's entries are the tail.
  if (batch_events_.size() >= applied.size()) {
    batch_events_.erase(batch_events_.begin(),
                        batch_events_.end() - static_cast<ptrdiff_t>(applied.size()));
    batch_at_.erase(batch_at_.begin(), batch_at_.end() - static_cast<ptrdiff_t>(applied.size()));
    // The listener first: the worker frees the roots whose operation ended before a caller,
    // answered below, can send its next request on them.
    if (listener_) {
      std::vector<InstanceEvent> facts;
      for (const auto& e : batch_events_) {
        if (e.type != event_type::kOperationRequested) facts.push_back(e);
      }
      if (!facts.empty()) listener_(facts);
    }
    for (size_t i = 0; waiters_ && i < applied.size(); ++i) {
      if (IsTerminal(applied[i].type) && batch_events_[i].type == applied[i].type) {
        waiters_->Complete(batch_events_[i].request_id, applied[i], batch_at_[i]);
      }
    }
  }
  batch_events_.clear();
  batch_at_.clear();
}

SpStatusProjection::SpStatusProjection(Store* store, Metrics* metrics)
    : store_(store), applied_(metrics, kName) {}

Status SpStatusProjection::Apply(const CloudEvent& event, const EventPosition&, StoreBatch& batch) {
  auto decoded = DecodeSpStatusEvent(event);
  if (!decoded) return MakeError(ErrorCode::kCorruption, decoded.error().message);
  if (decoded->instance_id.empty()) {
    return MakeError(ErrorCode::kCorruption, "status event without an instance id");
  }
  const std::string key = Key(kSpStatusKey, decoded->instance_id);
  ASSIGN_OR_RETURN(auto stored, Load<SpStatus>(store_, key, &batch, &DecodeSpStatus));
  if (stored && stored->time_ms > decoded->time_ms) return OkStatus();  // older than we have
  SpStatus status{decoded->status, decoded->message, decoded->time_ms};
  if (stored && *stored == status) return OkStatus();
  batch.Put(key, EncodeSpStatus(status));
  applied_.Inc(event.type);
  return OkStatus();
}

// ---- InstanceView.

namespace {
constexpr auto kAll = [](const auto&) { return true; };
}  // namespace

Result<std::optional<CatalogItemInstance>> InstanceView::GetCatalogItemInstance(
    const std::string& id) const {
  return Load<CatalogItemInstance>(store_, Key(kCatalogItemInstanceKey, id), overlay_,
                                   &DecodeCatalogItemInstance);
}

Result<Page<CatalogItemInstance>> InstanceView::ListCatalogItemInstances(
    const std::string& page_token, size_t max) const {
  return ListPage<CatalogItemInstance>(store_, kCatalogItemInstanceKey, &DecodeCatalogItemInstance,
                                       page_token, max, kAll);
}

Result<std::optional<Resource>> InstanceView::GetResource(const std::string& id) const {
  return Load<Resource>(store_, Key(kResourceKey, id), overlay_, &DecodeResource);
}

Result<Page<Resource>> InstanceView::ListResources(const std::string& page_token,
                                                   size_t max) const {
  return ListPage<Resource>(store_, kResourceKey, &DecodeResource, page_token, max, kAll);
}

Result<std::optional<ServiceTypeInstance>> InstanceView::GetInstance(const std::string& id) const {
  return Load<ServiceTypeInstance>(store_, Key(kInstanceKey, id), overlay_,
                                   &DecodeServiceTypeInstance);
}

Result<Page<ServiceTypeInstance>> InstanceView::ListInstances(const InstanceFilter& filter,
                                                              const std::string& page_token,
                                                              size_t max) const {
  return ListPage<ServiceTypeInstance>(
      store_, kInstanceKey, &DecodeServiceTypeInstance, page_token, max,
      [&](const ServiceTypeInstance& s) {
        return (filter.show_deleted || !s.deleted) &&
               (filter.provider.empty() || s.provider_name == filter.provider) &&
               (filter.service_type.empty() || s.service_type == filter.service_type);
      });
}

Result<std::optional<CleanupRecord>> InstanceView::GetCleanup(
    const std::string& instance_id) const {
  return Load<CleanupRecord>(store_, Key(kCleanupKey, instance_id), overlay_, &DecodeCleanupRecord);
}

Result<Page<CleanupRecord>> InstanceView::ListCleanup(const std::string& status,
                                                      const std::string& page_token,
                                                      size_t max) const {
  return ListPage<CleanupRecord>(
      store_, kCleanupKey, &DecodeCleanupRecord, page_token, max,
      [&](const CleanupRecord& q) { return status.empty() || q.status == status; });
}

Result<std::optional<Saga>> InstanceView::GetSaga(const std::string& root) const {
  return Load<Saga>(store_, Key(kSagaKey, root), overlay_, &DecodeSaga);
}

Result<std::vector<Saga>> InstanceView::ListSagas(
    const std::function<bool(const std::string& root)>& accept) const {
  std::string root;
  return ListAll<Saga>(
      store_, kSagaKey, &DecodeSaga, [&](std::string_view id) { return accept(root.assign(id)); },
      kAll);
}

Result<std::vector<CleanupRecord>> InstanceView::ListCleanupFor(
    const std::function<bool(const std::string& root)>& accept) const {
  return ListAll<CleanupRecord>(
      store_, kCleanupKey, &DecodeCleanupRecord, [](std::string_view) { return true; },
      [&](const CleanupRecord& q) { return accept(q.root); });
}

Result<std::vector<ServiceTypeInstance>> InstanceView::ListPeerInstancesFor(
    const std::function<bool(const std::string& root)>& accept) const {
  std::vector<std::string> ids;
  RETURN_IF_ERROR(
      store_->Scan(kPeerInstanceKey, "", [&](std::string_view key, std::string_view root) {
        if (accept(std::string(root))) ids.emplace_back(key.substr(kPeerInstanceKey.size()));
        return true;
      }));
  std::vector<ServiceTypeInstance> out;
  for (const std::string& id : ids) {
    ASSIGN_OR_RETURN(auto instance, GetInstance(id));
    if (instance && !instance->deleted) out.push_back(std::move(*instance));
  }
  return out;
}

Result<int64_t> InstanceView::LiveInstances(const std::string& provider_id) const {
  ASSIGN_OR_RETURN(auto stored, store_->Get(Key(kLoadKey, provider_id), overlay_));
  if (!stored) return int64_t{0};
  return DecodeCount(*stored);
}

Result<std::optional<SpStatus>> InstanceView::GetSpStatus(const std::string& instance_id) const {
  return Load<SpStatus>(store_, Key(kSpStatusKey, instance_id), overlay_, &DecodeSpStatus);
}

Result<std::optional<std::string>> InstanceView::RequestOutcome(
    const std::string& request_id) const {
  return store_->Get(Key(kOutcomeKey, request_id), overlay_);
}

}  // namespace dcm
