#include "projections/saga_plan.h"

#include <algorithm>

namespace dcm {
namespace {

SagaStep Place(const std::string& target, const std::string& intent,
               const std::string& old_resource_id) {
  SagaStep s;
  s.kind = StepKind::kPlace;
  s.target = target;
  s.intent = intent;
  s.old_resource_id = old_resource_id;
  s.done_when = {event_type::kResourcePlaced};
  return s;
}

SagaStep Create(const std::string& target) {
  SagaStep s;
  s.kind = StepKind::kCreate;
  s.target = target;
  s.done_when = {event_type::kInstanceCreated};
  return s;
}

SagaStep Delete(const std::string& target, DeleteMode mode) {
  SagaStep s;
  s.kind = StepKind::kDelete;
  s.target = target;
  s.mode = mode;
  s.done_when = {event_type::kInstanceDeleted, event_type::kCleanupEnqueued};
  return s;
}

SagaStep Record(InstanceFact fact, bool with_provider = false) {
  SagaStep s;
  s.kind = StepKind::kRecord;
  s.done_when = {TypeOf(fact)};
  s.fact = std::move(fact);
  s.with_provider = with_provider;
  return s;
}

ResourceDeleted ResourceGone(const std::string& resource_id, const char* reason) {
  ResourceDeleted e;
  e.resource_id = resource_id;
  e.reason = reason;
  return e;
}

std::vector<SagaStep> CreatePlan(const InstanceEvent& s, bool catalog) {
  std::vector<SagaStep> plan = {Place(s.resource_id, s.spec, ""), Create(s.resource_id)};
  if (catalog) {
    CatalogItemInstanceCreated created;
    created.catalog_item_instance_id = s.catalog_item_instance_id;
    created.resource_id = s.resource_id;
    created.spec = s.spec;
    created.display_name = s.display_name;
    plan.push_back(Record(std::move(created), /*with_provider=*/true));
  }
  return plan;
}

std::vector<SagaStep> DeletePlan(const InstanceEvent& s, bool catalog) {
  std::vector<SagaStep> plan = {Delete(s.resource_id, DeleteMode::kDirectOrQueue),
                                Record(ResourceGone(s.resource_id, "deleted"))};
  if (catalog) {
    CatalogItemInstanceDeleted deleted;
    deleted.catalog_item_instance_id = s.catalog_item_instance_id;
    deleted.resource_id = s.resource_id;
    plan.push_back(Record(std::move(deleted)));
  }
  return plan;
}

// Create before delete, always: the old resource is queued for cleanup (the SP is not
// contacted) only once the new one is accepted.
std::vector<SagaStep> RehydratePlan(const InstanceEvent& s) {
  std::vector<SagaStep> plan = {Place(s.new_resource_id, "", s.old_resource_id),
                                Create(s.new_resource_id),
                                Delete(s.old_resource_id, DeleteMode::kDeferred),
                                Record(ResourceGone(s.old_resource_id, "rehydrated"))};
  plan[2].done_when = {event_type::kCleanupEnqueued};  // queued, never deleted directly
  if (!s.catalog_item_instance_id.empty()) {
    CatalogItemInstanceRehydrated moved;
    moved.catalog_item_instance_id = s.catalog_item_instance_id;
    moved.old_resource_id = s.old_resource_id;
    moved.new_resource_id = s.new_resource_id;
    plan.push_back(Record(std::move(moved), /*with_provider=*/true));
  }
  return plan;
}

// SPEC §8: record the loss, then (REHYDRATE_ON_PROVIDER_LOSS: a new resource id) rehydrate it;
// the lost resource waits in the cleanup queue for its provider to come back.
std::vector<SagaStep> RecoverLostPlan(const InstanceEvent& s) {
  ResourceLost lost;
  lost.resource_id = s.resource_id;
  lost.provider_name = s.provider_name;
  lost.provider_id = s.provider_id;
  lost.reason = s.reason;
  std::vector<SagaStep> plan = {Record(std::move(lost))};
  if (s.new_resource_id.empty()) return plan;
  auto rehydrate = RehydratePlan(s);
  plan.insert(plan.end(), std::make_move_iterator(rehydrate.begin()),
              std::make_move_iterator(rehydrate.end()));
  return plan;
}

}  // namespace

bool SagaStep::DoneIn(const Saga& saga) const {
  return std::any_of(done_when.begin(), done_when.end(),
                     [&](const std::string& type) { return saga.Has(type); });
}

std::vector<SagaStep> PlanSaga(const InstanceEvent& s) {
  auto op = ParseOperation(s.operation);
  if (!op) return {};
  switch (*op) {
    case Operation::kCreateCatalogItemInstance:
    case Operation::kCreateResource:
      return CreatePlan(s, *op == Operation::kCreateCatalogItemInstance);
    case Operation::kDeleteCatalogItemInstance:
    case Operation::kDeleteResource:
      return DeletePlan(s, *op == Operation::kDeleteCatalogItemInstance);
    case Operation::kRehydrateCatalogItemInstance:
    case Operation::kRehydrateResource:
      return RehydratePlan(s);
    case Operation::kCreateServiceTypeInstance: {
      SagaStep check;
      check.kind = StepKind::kCheckNamedProvider;
      check.target = s.provider_name;
      return {std::move(check), Create(s.instance_id)};
    }
    case Operation::kDeleteServiceTypeInstance:
      return {Delete(s.instance_id, s.deferred ? DeleteMode::kDeferred : DeleteMode::kDirect)};
    case Operation::kRetryCleanup: {
      CleanupRetried retried;
      retried.instance_id = s.instance_id;
      return {Record(std::move(retried))};
    }
    case Operation::kRecoverLostResource:
      return RecoverLostPlan(s);
  }
  return {};
}

OperationCompleted CompletionOf(const Saga& saga) {
  const InstanceEvent& s = saga.started;
  OperationCompleted result;
  result.operation = s.operation;
  auto op = ParseOperation(s.operation);
  if (!op) return result;
  switch (*op) {
    case Operation::kCreateCatalogItemInstance:
    case Operation::kCreateResource:
      result.resource_id = s.resource_id;
      result.catalog_item_instance_id = s.catalog_item_instance_id;
      result.provider_name = saga.provider_name;
      break;
    case Operation::kDeleteCatalogItemInstance:
    case Operation::kDeleteResource:
      result.resource_id = s.resource_id;
      result.catalog_item_instance_id = s.catalog_item_instance_id;
      break;
    case Operation::kRecoverLostResource:
      if (s.new_resource_id.empty()) {
        result.resource_id = s.resource_id;
        break;
      }
      [[fallthrough]];
    case Operation::kRehydrateCatalogItemInstance:
    case Operation::kRehydrateResource:
      result.resource_id = s.new_resource_id;
      result.old_resource_id = s.old_resource_id;
      result.new_resource_id = s.new_resource_id;
      result.catalog_item_instance_id = s.catalog_item_instance_id;
      result.provider_name = saga.provider_name;
      break;
    case Operation::kCreateServiceTypeInstance:
      result.instance_id = s.instance_id;
      result.provider_name = saga.provider_name;
      break;
    case Operation::kDeleteServiceTypeInstance:
    case Operation::kRetryCleanup:
      result.instance_id = s.instance_id;
      break;
  }
  return result;
}

}  // namespace dcm
