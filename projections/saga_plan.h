// The saga plan: the steps of each instance operation (SPEC §3.3, seed rehydration-flow) as
// data, so the order (create before delete, always) is stated once and tested without running
// anything. The saga runner (consumers/saga_runner.h) executes a plan step by step; a resumed
// saga skips the steps whose fact it already recorded.
//
//   create (catalog item instance / resource):
//     place(resource) ─▶ create(resource) ─▶ [record catalog_item_instance.created] ─▶ complete
//   delete (catalog item instance / resource):
//     delete(resource, direct or queue) ─▶ record resource.deleted ─▶
//     [record catalog_item_instance.deleted] ─▶ complete
//   rehydrate (catalog item instance / resource):
//     place(new, the old one's intent) ─▶ create(new) ─▶ delete(old, deferred: queued) ─▶
//     record resource.deleted(old) ─▶ [record catalog_item_instance.rehydrated] ─▶ complete
//   create service-type instance: check the named provider ─▶ create(instance) ─▶ complete
//   delete service-type instance: delete(instance, direct, or deferred) ─▶ complete
//   retry cleanup: record cleanup.retried ─▶ complete
//   recover lost resource (SPEC §8): record resource.lost ─▶ [the rehydration's steps] ─▶ complete
//
// Any step may end the operation in operation_failed instead (nothing is deleted or queued
// before the new resource is created). Pure: no I/O.
#pragma once

#include <string>
#include <vector>

#include "events/instance_events.h"
#include "events/instance_facts.h"
#include "projections/instance_projection.h"

namespace dcm {

enum class StepKind {
  kPlace,               // choose a provider (policy), then resource.placed
  kCheckNamedProvider,  // the service-type instance's provider exists and is Ready
  kCreate,              // SP create, then service_type_instance.created (or create_failed)
  kDelete,              // SP delete or queue, then service_type_instance.deleted / cleanup.enqueued
  kRecord,              // produce `fact` (no outside call)
};

// kDirect: DELETE on the SP, a failure fails the operation. kDirectOrQueue: DELETE if the
// provider is Ready, else (or on failure) queue it for cleanup. kDeferred: queue it.
enum class DeleteMode { kDirect, kDirectOrQueue, kDeferred };

struct SagaStep {
  StepKind kind = StepKind::kRecord;
  std::string target;           // the resource / instance id the step acts on
  std::string intent;           // kPlace: the spec to place (empty: the old resource's intent)
  std::string old_resource_id;  // kPlace of a rehydration: the resource it replaces
  DeleteMode mode = DeleteMode::kDirect;
  InstanceFact fact = {};      // kRecord: the fact (type and ids)
  bool with_provider = false;  // kRecord: the fact names the placed provider
  // The step is done once the saga recorded any of these fact types (empty: never skipped).
  std::vector<std::string> done_when = {};

  bool DoneIn(const Saga& saga) const;
};

// The steps of `started`'s operation (an operation_started), in order. Empty for an unknown
// operation.
std::vector<SagaStep> PlanSaga(const InstanceEvent& started);

// The operation_completed data of a saga whose steps are all done.
OperationCompleted CompletionOf(const Saga& saga);

}  // namespace dcm
