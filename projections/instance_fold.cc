#include "projections/instance_fold.h"

#include <algorithm>
#include <string>
#include <variant>

#include "projections/instance_records.h"

namespace dcm {
namespace {

using namespace instance_records;  // NOLINT(google-build-using-namespace): this file's records

// One Apply per fact type, called through std::visit: a type without one does not compile.
class Fold {
 public:
  Fold(const Store* store, StoreBatch& batch, DecodedCache<Saga>& sagas)
      : store_(store), batch_(batch), sagas_(sagas) {}

  // Not a fact (it belongs on dcm.instance-requests).
  Status operator()(const OperationRequested& e) {
    return MakeError(ErrorCode::kCorruption, std::string("not an instance fact: ") + e.kType);
  }
  Status operator()(const OperationStarted& e) { return Started(e); }
  Status operator()(const OperationCompleted& e) { return Finished(e); }
  Status operator()(const OperationFailed& e) { return Finished(e); }

  // Every other fact is first remembered as a step of the saga in progress on its root.
  template <typename Fact>
  Status operator()(const Fact& e) {
    RETURN_IF_ERROR(RecordStep(e));
    return Apply(e);
  }

 private:
  // The id a fact is keyed by must be there (the codec checks required fields; this keeps a
  // codec gap from writing an "in/r/" key).
  template <typename Fact>
  static Status Require(const Fact&, const std::string& value, const char* field) {
    if (value.empty()) {
      return MakeError(ErrorCode::kCorruption, std::string(Fact::kType) + " without " + field);
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

  void PutSaga(const std::string& root, Saga saga) {
    std::string json = EncodeSaga(saga);
    batch_.Put(Key(kSagaKey, root), json);
    sagas_.Written(root, std::move(json), std::move(saga));
  }

  Status Started(const OperationStarted& e) {
    RETURN_IF_ERROR(Require(e, e.root, "root"));
    RETURN_IF_ERROR(Require(e, e.request_id, "request_id"));
    // A duplicate after the operation ended must not bring its saga back.
    ASSIGN_OR_RETURN(auto outcome, store_->Get(Key(kOutcomeKey, e.request_id), &batch_));
    if (outcome) return OkStatus();
    ASSIGN_OR_RETURN(auto saga, SagaOf(e.root));
    if (saga && saga->started.request_id == e.request_id) return OkStatus();
    Saga started;
    started.started = ToInstanceEvent(e);
    PutSaga(e.root, std::move(started));
    return OkStatus();
  }

  template <typename Fact>
  Status Finished(const Fact& e) {
    RETURN_IF_ERROR(Require(e, e.request_id, "request_id"));
    if (!e.root.empty()) {
      ASSIGN_OR_RETURN(auto saga, SagaOf(e.root));
      if (saga && saga->started.request_id == e.request_id) {
        batch_.Delete(Key(kSagaKey, e.root));
        sagas_.Forget(e.root);
      }
    }
    batch_.Put(Key(kOutcomeKey, e.request_id), Fact::kType);
    return OkStatus();
  }

  // What a step adds to its saga beyond its type: the placement.
  static void Remember(const InstanceEnvelope&, Saga&) {}
  static void Remember(const ResourcePlaced& e, Saga& saga) {
    saga.placed_resource_id = e.resource_id;
    saga.provider_name = e.provider_name;
    saga.provider_id = e.provider_id;
    saga.spec = e.spec;
  }
  static void Remember(const RemoteFact& e, Saga& saga) {
    saga.peer = e.peer;
    saga.flavor_id = e.flavor_id.empty() ? saga.flavor_id : e.flavor_id;
    saga.reservation_id = e.reservation_id;
    saga.contract_id = e.contract_id;
  }
  static void Remember(const RemoteReservationRefused&, Saga& saga) {
    saga.peer = saga.flavor_id = saga.reservation_id = "";
  }

  // A fact of the saga in progress on its root: remember it as a step.
  template <typename Fact>
  Status RecordStep(const Fact& e) {
    if (e.request_id.empty() || e.root.empty()) return OkStatus();
    ASSIGN_OR_RETURN(auto saga, SagaOf(e.root));
    if (!saga || saga->started.request_id != e.request_id) return OkStatus();
    Saga updated = *saga;
    if (!updated.Has(Fact::kType)) updated.steps.push_back(Fact::kType);
    Remember(e, updated);
    if (updated != *saga) PutSaga(e.root, std::move(updated));
    return OkStatus();
  }

  Status Apply(const ResourcePlaced& e) {
    RETURN_IF_ERROR(Require(e, e.resource_id, "resource_id"));
    const std::string key = Key(kResourceKey, e.resource_id);
    ASSIGN_OR_RETURN(auto stored, store_->Get(key, &batch_));
    if (stored) return OkStatus();
    Resource r;
    r.id = e.resource_id;
    r.root = e.root;
    r.catalog_item_instance_id = e.catalog_item_instance_id;
    r.provider_name = e.provider_name;
    r.provider_id = e.provider_id;
    r.service_type = e.service_type;
    if (!e.intent.empty()) r.intent = e.intent;
    if (!e.spec.empty()) r.spec = e.spec;
    r.policy = e.policy;
    r.placement = e.placement;
    r.status = kPlacedStatus;
    r.create_time_ms = e.time_ms;
    r.update_time_ms = e.time_ms;
    batch_.Put(key, EncodeResource(r));
    return OkStatus();
  }

  Status Apply(const ResourceDeleted& e) {
    RETURN_IF_ERROR(Require(e, e.resource_id, "resource_id"));
    batch_.Delete(Key(kResourceKey, e.resource_id));
    return OkStatus();
  }

  // The resource stays (its cleanup or rehydration removes it), marked LOST.
  Status Apply(const ResourceLost& e) {
    RETURN_IF_ERROR(Require(e, e.resource_id, "resource_id"));
    ASSIGN_OR_RETURN(auto resource, Get<Resource>(kResourceKey, e.resource_id, &DecodeResource));
    if (!resource || resource->status == kLostStatus) return OkStatus();
    resource->status = kLostStatus;
    resource->update_time_ms = e.time_ms;
    batch_.Put(Key(kResourceKey, e.resource_id), EncodeResource(*resource));
    return OkStatus();
  }

  Status Apply(const InstanceCreated& e) {
    RETURN_IF_ERROR(Require(e, e.instance_id, "instance_id"));
    const std::string key = Key(kInstanceKey, e.instance_id);
    ASSIGN_OR_RETURN(auto stored, store_->Get(key, &batch_));
    if (!stored) {
      ServiceTypeInstance s;
      s.id = e.instance_id;
      s.root = e.root;
      s.provider_name = e.provider_name;
      s.provider_id = e.provider_id;
      s.service_type = e.service_type;
      if (!e.spec.empty()) s.spec = e.spec;
      s.status = e.status;
      s.placement = e.placement;
      s.create_time_ms = e.time_ms;
      s.update_time_ms = e.time_ms;
      batch_.Put(key, EncodeServiceTypeInstance(s));
      if (!s.placement.empty()) batch_.Put(Key(kPeerInstanceKey, s.id), s.root);
      RETURN_IF_ERROR(AddLoad(s.provider_id, +1));
    }
    ASSIGN_OR_RETURN(auto resource, Get<Resource>(kResourceKey, e.instance_id, &DecodeResource));
    if (resource && (resource->status != e.status || resource->update_time_ms != e.time_ms)) {
      resource->status = e.status;
      resource->update_time_ms = e.time_ms;
      batch_.Put(Key(kResourceKey, e.instance_id), EncodeResource(*resource));
    }
    return OkStatus();
  }

  Status Apply(const InstanceCreateFailed& e) {
    RETURN_IF_ERROR(Require(e, e.instance_id, "instance_id"));
    batch_.Delete(Key(kResourceKey, e.instance_id));
    return OkStatus();
  }

  Status Apply(const InstanceDeleted& e) { return Gone(e, e.instance_id); }

  Status Apply(const InstanceDeleteFailed&) { return OkStatus(); }

  // A peer placement's steps live in the saga (RecordStep) and the audit log; the resource and
  // the instance are the placed and created facts'.
  Status Apply(const RemoteFact&) { return OkStatus(); }

  // The SP confirmed `id` is gone: the instance is kept as deleted (its live flag flips once,
  // so the provider's load drops once), and its cleanup and placement records go.
  template <typename Fact>
  Status Gone(const Fact& e, const std::string& id) {
    RETURN_IF_ERROR(Require(e, id, "instance_id"));
    ASSIGN_OR_RETURN(auto s,
                     Get<ServiceTypeInstance>(kInstanceKey, id, &DecodeServiceTypeInstance));
    if (s && !s->deleted) {
      s->deleted = true;
      s->status = kDeletedStatus;
      s->update_time_ms = e.time_ms;
      batch_.Put(Key(kInstanceKey, id), EncodeServiceTypeInstance(*s));
      RETURN_IF_ERROR(AddLoad(s->provider_id, -1));
    }
    batch_.Delete(Key(kCleanupKey, id));
    batch_.Delete(Key(kResourceKey, id));
    batch_.Delete(Key(kPeerInstanceKey, id));
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

  // The cleanup record a cleanup fact is about (nullopt: none).
  template <typename Fact>
  Result<std::optional<CleanupRecord>> CleanupOf(const Fact& e) const {
    RETURN_IF_ERROR(Require(e, e.instance_id, "instance_id"));
    return Get<CleanupRecord>(kCleanupKey, e.instance_id, &DecodeCleanupRecord);
  }

  void Put(const CleanupRecord& q) {
    batch_.Put(Key(kCleanupKey, q.instance_id), EncodeCleanupRecord(q));
  }

  Status Apply(const CleanupEnqueued& e) {
    RETURN_IF_ERROR(Require(e, e.instance_id, "instance_id"));
    ASSIGN_OR_RETURN(auto stored, store_->Get(Key(kCleanupKey, e.instance_id), &batch_));
    if (stored) return OkStatus();
    CleanupRecord q;
    q.instance_id = e.instance_id;
    q.root = e.root;
    q.provider_name = e.provider_name;
    q.provider_id = e.provider_id;
    q.service_type = e.service_type;
    q.requested_at_ms = e.requested_at_ms != 0 ? e.requested_at_ms : e.time_ms;
    q.retry_count = 0;
    q.status = kCleanupPending;
    Put(q);
    return OkStatus();
  }

  Status Apply(const CleanupParked& e) {
    ASSIGN_OR_RETURN(auto q, CleanupOf(e));
    if (!q) return OkStatus();
    q->status = e.status.empty() ? kCleanupPendingProvider : e.status;
    Put(*q);
    return OkStatus();
  }

  Status Apply(const CleanupAttempted& e) {
    RETURN_IF_ERROR(Require(e, e.instance_id, "instance_id"));
    if (e.outcome == "deleted" || e.outcome == "gone") return Gone(e, e.instance_id);
    ASSIGN_OR_RETURN(auto q, CleanupOf(e));
    if (!q) return OkStatus();
    q->retry_count = e.retry_count;
    if (!e.status.empty()) q->status = e.status;
    q->last_attempt_ms = e.time_ms;
    q->last_error = e.error;
    Put(*q);
    return OkStatus();
  }

  Status Apply(const CleanupFailed& e) {
    ASSIGN_OR_RETURN(auto q, CleanupOf(e));
    if (!q) return OkStatus();
    q->status = kCleanupFailedStatus;
    q->retry_count = e.retry_count;
    if (!e.error.empty()) q->last_error = e.error;
    Put(*q);
    return OkStatus();
  }

  Status Apply(const CleanupRetried& e) {
    ASSIGN_OR_RETURN(auto q, CleanupOf(e));
    if (!q) return OkStatus();
    q->status = kCleanupPending;
    q->retry_count = 0;
    Put(*q);
    return OkStatus();
  }

  Status Apply(const CatalogItemInstanceCreated& e) {
    RETURN_IF_ERROR(Require(e, e.catalog_item_instance_id, "catalog_item_instance_id"));
    const std::string key = Key(kCatalogItemInstanceKey, e.catalog_item_instance_id);
    ASSIGN_OR_RETURN(auto stored, store_->Get(key, &batch_));
    if (stored) return OkStatus();
    CatalogItemInstance c;
    c.id = e.catalog_item_instance_id;
    c.display_name = e.display_name;
    if (!e.spec.empty()) c.spec = e.spec;
    c.resource_id = e.resource_id;
    c.provider_name = e.provider_name;
    c.create_time_ms = e.time_ms;
    c.update_time_ms = e.time_ms;
    batch_.Put(key, EncodeCatalogItemInstance(c));
    return OkStatus();
  }

  Status Apply(const CatalogItemInstanceRehydrated& e) {
    RETURN_IF_ERROR(Require(e, e.catalog_item_instance_id, "catalog_item_instance_id"));
    ASSIGN_OR_RETURN(auto c,
                     Get<CatalogItemInstance>(kCatalogItemInstanceKey, e.catalog_item_instance_id,
                                              &DecodeCatalogItemInstance));
    if (!c) return OkStatus();
    c->resource_id = e.new_resource_id.empty() ? e.resource_id : e.new_resource_id;
    c->provider_name = e.provider_name;
    c->update_time_ms = e.time_ms;
    batch_.Put(Key(kCatalogItemInstanceKey, c->id), EncodeCatalogItemInstance(*c));
    return OkStatus();
  }

  Status Apply(const CatalogItemInstanceDeleted& e) {
    RETURN_IF_ERROR(Require(e, e.catalog_item_instance_id, "catalog_item_instance_id"));
    batch_.Delete(Key(kCatalogItemInstanceKey, e.catalog_item_instance_id));
    return OkStatus();
  }

  const Store* store_;
  StoreBatch& batch_;
  DecodedCache<Saga>& sagas_;
};

}  // namespace

Status FoldInstanceFact(const Store* store, StoreBatch& batch, DecodedCache<Saga>& sagas,
                        const InstanceFact& fact) {
  Fold fold(store, batch, sagas);
  return std::visit(fold, fact);
}

}  // namespace dcm
