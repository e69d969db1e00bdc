#include "projections/instance_fold.h"

#include <algorithm>

#include "projections/instance_records.h"

namespace dcm {
namespace {

using namespace instance_records;  // NOLINT(google-build-using-namespace): this file's records

class Fold {
 public:
  Fold(const Store* store, StoreBatch& batch, DecodedCache<Saga>& sagas, const InstanceEvent& e)
      : store_(store), batch_(batch), sagas_(sagas), e_(e) {}

  Status Run() {
    const std::string& t = e_.type;
    if (t == event_type::kOperationStarted) return Started();
    if (t == event_type::kOperationCompleted || t == event_type::kOperationFailed) {
      return Finished();
    }
    RETURN_IF_ERROR(RecordStep());
    if (t == event_type::kResourcePlaced) return ResourcePlaced();
    if (t == event_type::kResourceDeleted) return ResourceDeleted();
    if (t == event_type::kInstanceCreated) return InstanceCreated();
    if (t == event_type::kInstanceCreateFailed) return InstanceCreateFailed();
    if (t == event_type::kInstanceDeleted) return InstanceDeleted(e_.instance_id);
    if (t == event_type::kInstanceDeleteFailed) return OkStatus();
    if (t == event_type::kCleanupEnqueued) return CleanupEnqueued();
    if (t == event_type::kCleanupParked) return CleanupParked();
    if (t == event_type::kCleanupAttempted) return CleanupAttempted();
    if (t == event_type::kCleanupFailed) return CleanupFailed();
    if (t == event_type::kCleanupRetried) return CleanupRetried();
    if (t == event_type::kCatalogItemInstanceCreated) return CatalogItemInstanceCreated();
    if (t == event_type::kCatalogItemInstanceRehydrated) return CatalogItemInstanceRehydrated();
    if (t == event_type::kCatalogItemInstanceDeleted) return CatalogItemInstanceDeleted();
    return MakeError(ErrorCode::kCorruption, "not an instance fact: " + t);
  }

 private:
  // The id a fact is keyed by must be there (the codec checks required fields; this keeps a
  // codec gap from writing an "in/r/" key).
  Status Require(const std::string& value, const char* field) const {
    if (value.empty()) {
      return MakeError(ErrorCode::kCorruption, e_.type + " without " + field);
    }
    return OkStatus();
  }

  template <typename T>
  Result<std::optional<T>> Get(std::string_view prefix, std::string_view id,
                               Result<T> (*decode)(std::string_view)) const {
    return Load<T>(store_, Key(prefix, id), &batch_, decode);
  }

  // The saga in progress on `root` (nullptr: none). Change it only through PutSaga.
  Result<Saga*> SagaOf(const std::string& root) const {
    const std::string key = Key(kSagaKey, root);
    ASSIGN_OR_RETURN(auto stored, store_->Get(key, &batch_));
    if (!stored) return static_cast<Saga*>(nullptr);
    auto saga = sagas_.Find(root, std::move(*stored));
    if (!saga) return MakeError(ErrorCode::kInternal, saga.error().message + " at " + key);
    return *saga;
  }

  void PutSaga(Saga saga) {
    std::string json = EncodeSaga(saga);
    batch_.Put(Key(kSagaKey, e_.root), json);
    sagas_.Written(e_.root, std::move(json), std::move(saga));
  }

  Status Started() {
    RETURN_IF_ERROR(Require(e_.root, "root"));
    RETURN_IF_ERROR(Require(e_.request_id, "request_id"));
    // A duplicate after the operation ended must not bring its saga back.
    ASSIGN_OR_RETURN(auto outcome, store_->Get(Key(kOutcomeKey, e_.request_id), &batch_));
    if (outcome) return OkStatus();
    ASSIGN_OR_RETURN(auto saga, SagaOf(e_.root));
    if (saga && saga->started.request_id == e_.request_id) return OkStatus();
    Saga started;
    started.started = e_;
    PutSaga(std::move(started));
    return OkStatus();
  }

  Status Finished() {
    RETURN_IF_ERROR(Require(e_.request_id, "request_id"));
    if (!e_.root.empty()) {
      ASSIGN_OR_RETURN(auto saga, SagaOf(e_.root));
      if (saga && saga->started.request_id == e_.request_id) {
        batch_.Delete(Key(kSagaKey, e_.root));
        sagas_.Forget(e_.root);
      }
    }
    batch_.Put(Key(kOutcomeKey, e_.request_id), e_.type);
    return OkStatus();
  }

  // A fact of the saga in progress on its root: remember it as a step.
  Status RecordStep() {
    if (e_.request_id.empty() || e_.root.empty()) return OkStatus();
    ASSIGN_OR_RETURN(auto saga, SagaOf(e_.root));
    if (!saga || saga->started.request_id != e_.request_id) return OkStatus();
    Saga updated = *saga;
    if (!updated.Has(e_.type)) updated.steps.push_back(e_.type);
    if (e_.type == event_type::kResourcePlaced) {
      updated.placed_resource_id = e_.resource_id;
      updated.provider_name = e_.provider_name;
      updated.provider_id = e_.provider_id;
      updated.spec = e_.spec;
    }
    if (updated != *saga) PutSaga(std::move(updated));
    return OkStatus();
  }

  Status ResourcePlaced() {
    RETURN_IF_ERROR(Require(e_.resource_id, "resource_id"));
    const std::string key = Key(kResourceKey, e_.resource_id);
    ASSIGN_OR_RETURN(auto stored, store_->Get(key, &batch_));
    if (stored) return OkStatus();
    Resource r;
    r.id = e_.resource_id;
    r.root = e_.root;
    r.catalog_item_instance_id = e_.catalog_item_instance_id;
    r.provider_name = e_.provider_name;
    r.provider_id = e_.provider_id;
    r.service_type = e_.service_type;
    if (!e_.intent.empty()) r.intent = e_.intent;
    if (!e_.spec.empty()) r.spec = e_.spec;
    r.policy = e_.policy;
    r.status = kPlacedStatus;
    r.create_time_ms = e_.time_ms;
    r.update_time_ms = e_.time_ms;
    batch_.Put(key, EncodeResource(r));
    return OkStatus();
  }

  Status ResourceDeleted() {
    RETURN_IF_ERROR(Require(e_.resource_id, "resource_id"));
    batch_.Delete(Key(kResourceKey, e_.resource_id));
    return OkStatus();
  }

  Status InstanceCreated() {
    RETURN_IF_ERROR(Require(e_.instance_id, "instance_id"));
    const std::string key = Key(kInstanceKey, e_.instance_id);
    ASSIGN_OR_RETURN(auto stored, store_->Get(key, &batch_));
    if (!stored) {
      ServiceTypeInstance s;
      s.id = e_.instance_id;
      s.root = e_.root;
      s.provider_name = e_.provider_name;
      s.provider_id = e_.provider_id;
      s.service_type = e_.service_type;
      if (!e_.spec.empty()) s.spec = e_.spec;
      s.status = e_.status;
      s.create_time_ms = e_.time_ms;
      s.update_time_ms = e_.time_ms;
      batch_.Put(key, EncodeServiceTypeInstance(s));
      RETURN_IF_ERROR(AddLoad(s.provider_id, +1));
    }
    ASSIGN_OR_RETURN(auto resource, Get<Resource>(kResourceKey, e_.instance_id, &DecodeResource));
    if (resource && (resource->status != e_.status || resource->update_time_ms != e_.time_ms)) {
      resource->status = e_.status;
      resource->update_time_ms = e_.time_ms;
      batch_.Put(Key(kResourceKey, e_.instance_id), EncodeResource(*resource));
    }
    return OkStatus();
  }

  Status InstanceCreateFailed() {
    RETURN_IF_ERROR(Require(e_.instance_id, "instance_id"));
    batch_.Delete(Key(kResourceKey, e_.instance_id));
    return OkStatus();
  }

  // The SP confirmed `id` is gone: the instance is kept as deleted (its live flag flips once,
  // so the provider's load drops once), and its cleanup and placement records go.
  Status InstanceDeleted(const std::string& id) {
    RETURN_IF_ERROR(Require(id, "instance_id"));
    ASSIGN_OR_RETURN(auto s,
                     Get<ServiceTypeInstance>(kInstanceKey, id, &DecodeServiceTypeInstance));
    if (s && !s->deleted) {
      s->deleted = true;
      s->status = kDeletedStatus;
      s->update_time_ms = e_.time_ms;
      batch_.Put(Key(kInstanceKey, id), EncodeServiceTypeInstance(*s));
      RETURN_IF_ERROR(AddLoad(s->provider_id, -1));
    }
    batch_.Delete(Key(kCleanupKey, id));
    batch_.Delete(Key(kResourceKey, id));
    return OkStatus();
  }

  Status AddLoad(const std::string& provider_id, int64_t delta) {
    if (provider_id.empty()) return OkStatus();
    const std::string key = Key(kLoadKey, provider_id);
    ASSIGN_OR_RETURN(auto stored, store_->Get(key, &batch_));
    int64_t n = 0;
    if (stored) {
      auto count = DecodeCount(*stored);
      if (!count) return MakeError(ErrorCode::kInternal, count.error().message + " at " + key);
      n = *count;
    }
    n = std::max<int64_t>(0, n + delta);
    if (n == 0) {
      batch_.Delete(key);
    } else {
      batch_.Put(key, std::to_string(n));
    }
    return OkStatus();
  }

  Result<std::optional<CleanupRecord>> CleanupOf(const std::string& id) const {
    return Get<CleanupRecord>(kCleanupKey, id, &DecodeCleanupRecord);
  }

  void Put(const CleanupRecord& q) {
    batch_.Put(Key(kCleanupKey, q.instance_id), EncodeCleanupRecord(q));
  }

  Status CleanupEnqueued() {
    RETURN_IF_ERROR(Require(e_.instance_id, "instance_id"));
    ASSIGN_OR_RETURN(auto stored, store_->Get(Key(kCleanupKey, e_.instance_id), &batch_));
    if (stored) return OkStatus();
    CleanupRecord q;
    q.instance_id = e_.instance_id;
    q.root = e_.root;
    q.provider_name = e_.provider_name;
    q.provider_id = e_.provider_id;
    q.service_type = e_.service_type;
    q.requested_at_ms = e_.requested_at_ms != 0 ? e_.requested_at_ms : e_.time_ms;
    q.retry_count = 0;
    q.status = kCleanupPending;
    Put(q);
    return OkStatus();
  }

  Status CleanupParked() {
    RETURN_IF_ERROR(Require(e_.instance_id, "instance_id"));
    ASSIGN_OR_RETURN(auto q, CleanupOf(e_.instance_id));
    if (!q) return OkStatus();
    q->status = e_.status.empty() ? kCleanupPendingProvider : e_.status;
    Put(*q);
    return OkStatus();
  }

  Status CleanupAttempted() {
    RETURN_IF_ERROR(Require(e_.instance_id, "instance_id"));
    if (e_.outcome == "deleted" || e_.outcome == "gone") return InstanceDeleted(e_.instance_id);
    ASSIGN_OR_RETURN(auto q, CleanupOf(e_.instance_id));
    if (!q) return OkStatus();
    q->retry_count = e_.retry_count;
    if (!e_.status.empty()) q->status = e_.status;
    q->last_attempt_ms = e_.time_ms;
    q->last_error = e_.error;
    Put(*q);
    return OkStatus();
  }

  Status CleanupFailed() {
    RETURN_IF_ERROR(Require(e_.instance_id, "instance_id"));
    ASSIGN_OR_RETURN(auto q, CleanupOf(e_.instance_id));
    if (!q) return OkStatus();
    q->status = kCleanupFailedStatus;
    q->retry_count = e_.retry_count;
    if (!e_.error.empty()) q->last_error = e_.error;
    Put(*q);
    return OkStatus();
  }

  Status CleanupRetried() {
    RETURN_IF_ERROR(Require(e_.instance_id, "instance_id"));
    ASSIGN_OR_RETURN(auto q, CleanupOf(e_.instance_id));
    if (!q) return OkStatus();
    q->status = kCleanupPending;
    q->retry_count = 0;
    Put(*q);
    return OkStatus();
  }

  Status CatalogItemInstanceCreated() {
    RETURN_IF_ERROR(Require(e_.catalog_item_instance_id, "catalog_item_instance_id"));
    const std::string key = Key(kCatalogItemInstanceKey, e_.catalog_item_instance_id);
    ASSIGN_OR_RETURN(auto stored, store_->Get(key, &batch_));
    if (stored) return OkStatus();
    CatalogItemInstance c;
    c.id = e_.catalog_item_instance_id;
    c.display_name = e_.display_name;
    if (!e_.spec.empty()) c.spec = e_.spec;
    c.resource_id = e_.resource_id;
    c.provider_name = e_.provider_name;
    c.create_time_ms = e_.time_ms;
    c.update_time_ms = e_.time_ms;
    batch_.Put(key, EncodeCatalogItemInstance(c));
    return OkStatus();
  }

  Status CatalogItemInstanceRehydrated() {
    RETURN_IF_ERROR(Require(e_.catalog_item_instance_id, "catalog_item_instance_id"));
    ASSIGN_OR_RETURN(auto c,
                     Get<CatalogItemInstance>(kCatalogItemInstanceKey, e_.catalog_item_instance_id,
                                              &DecodeCatalogItemInstance));
    if (!c) return OkStatus();
    c->resource_id = e_.new_resource_id.empty() ? e_.resource_id : e_.new_resource_id;
    c->provider_name = e_.provider_name;
    c->update_time_ms = e_.time_ms;
    batch_.Put(Key(kCatalogItemInstanceKey, c->id), EncodeCatalogItemInstance(*c));
    return OkStatus();
  }

  Status CatalogItemInstanceDeleted() {
    RETURN_IF_ERROR(Require(e_.catalog_item_instance_id, "catalog_item_instance_id"));
    batch_.Delete(Key(kCatalogItemInstanceKey, e_.catalog_item_instance_id));
    return OkStatus();
  }

  const Store* store_;
  StoreBatch& batch_;
  DecodedCache<Saga>& sagas_;
  const InstanceEvent& e_;
};

}  // namespace

Status FoldInstanceFact(const Store* store, StoreBatch& batch, DecodedCache<Saga>& sagas,
                        const InstanceEvent& fact) {
  return Fold(store, batch, sagas, fact).Run();
}

}  // namespace dcm
