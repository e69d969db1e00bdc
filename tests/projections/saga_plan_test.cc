// The saga plan (projections/saga_plan.h): the steps of each instance operation as data. Create
// before delete, always; a resumed saga skips the steps whose fact it recorded. Pure: no store.
#include "projections/saga_plan.h"

#include <gtest/gtest.h>

#include <string>
#include <variant>
#include <vector>

namespace dcm {
namespace {

InstanceEvent Started(Operation op) {
  InstanceEvent s;
  s.type = event_type::kOperationStarted;
  s.operation = OperationName(op);
  s.request_id = "r1";
  s.root = "c1";
  s.catalog_item_instance_id = "c1";
  s.resource_id = "res-1";
  s.old_resource_id = "res-1";
  s.new_resource_id = "res-2";
  s.instance_id = "i-1";
  s.provider_name = "p1";
  s.spec = R"({"service_type":"vm"})";
  return s;
}

// "kind target" per step, a kRecord step as its fact type.
std::vector<std::string> Steps(const std::vector<SagaStep>& plan) {
  std::vector<std::string> out;
  for (const auto& s : plan) {
    switch (s.kind) {
      case StepKind::kPlace:
        out.push_back("place " + s.target);
        break;
      case StepKind::kCheckNamedProvider:
        out.push_back("check " + s.target);
        break;
      case StepKind::kCreate:
        out.push_back("create " + s.target);
        break;
      case StepKind::kDelete:
        out.push_back("delete " + s.target);
        break;
      case StepKind::kRecord:
        out.push_back(TypeOf(s.fact));
        break;
    }
  }
  return out;
}

TEST(SagaPlanTest, CreateCatalogItemInstancePlacesCreatesThenRecordsIt) {
  const auto plan = PlanSaga(Started(Operation::kCreateCatalogItemInstance));
  EXPECT_EQ(Steps(plan), (std::vector<std::string>{"place res-1", "create res-1",
                                                   event_type::kCatalogItemInstanceCreated}));
  EXPECT_EQ(plan[0].intent, R"({"service_type":"vm"})");
  EXPECT_TRUE(plan[2].with_provider);
}

TEST(SagaPlanTest, RehydrationCreatesTheNewResourceBeforeQueueingTheOld) {
  const auto plan = PlanSaga(Started(Operation::kRehydrateCatalogItemInstance));
  EXPECT_EQ(Steps(plan), (std::vector<std::string>{"place res-2", "create res-2", "delete res-1",
                                                   event_type::kResourceDeleted,
                                                   event_type::kCatalogItemInstanceRehydrated}));
  EXPECT_EQ(plan[0].old_resource_id, "res-1");
  EXPECT_TRUE(plan[0].intent.empty());  // the old resource's intent
  EXPECT_EQ(plan[2].mode, DeleteMode::kDeferred);
  EXPECT_EQ(std::get<ResourceDeleted>(plan[3].fact).reason, "rehydrated");
}

TEST(SagaPlanTest, RehydratingAResourceOutsideTheCatalogHasNoCatalogStep) {
  InstanceEvent s = Started(Operation::kRehydrateResource);
  s.catalog_item_instance_id.clear();
  EXPECT_EQ(Steps(PlanSaga(s)),
            (std::vector<std::string>{"place res-2", "create res-2", "delete res-1",
                                      event_type::kResourceDeleted}));
}

TEST(SagaPlanTest, ALostResourceIsRecordedLostThenRehydratedWhenANewIdIsGiven) {
  InstanceEvent s = Started(Operation::kRecoverLostResource);
  s.provider_id = "p1-id";
  s.reason = "provider_expired";
  const auto plan = PlanSaga(s);
  EXPECT_EQ(Steps(plan),
            (std::vector<std::string>{event_type::kResourceLost, "place res-2", "create res-2",
                                      "delete res-1", event_type::kResourceDeleted,
                                      event_type::kCatalogItemInstanceRehydrated}));
  const auto& lost = std::get<ResourceLost>(plan[0].fact);
  EXPECT_EQ(lost.resource_id, "res-1");
  EXPECT_EQ(lost.provider_id, "p1-id");
  EXPECT_EQ(lost.reason, "provider_expired");
  EXPECT_EQ(plan[3].mode, DeleteMode::kDeferred) << "waits for its provider in the queue";
  Saga done;
  done.started = s;
  EXPECT_EQ(CompletionOf(done).resource_id, "res-2");

  s.new_resource_id.clear();  // REHYDRATE_ON_PROVIDER_LOSS off: only marked
  EXPECT_EQ(Steps(PlanSaga(s)), (std::vector<std::string>{event_type::kResourceLost}));
  done.started = s;
  EXPECT_EQ(CompletionOf(done).resource_id, "res-1");
}

TEST(SagaPlanTest, DeletesCallTheProviderOrQueueThenRecord) {
  const auto plan = PlanSaga(Started(Operation::kDeleteCatalogItemInstance));
  EXPECT_EQ(Steps(plan), (std::vector<std::string>{"delete res-1", event_type::kResourceDeleted,
                                                   event_type::kCatalogItemInstanceDeleted}));
  EXPECT_EQ(plan[0].mode, DeleteMode::kDirectOrQueue);
  InstanceEvent sti = Started(Operation::kDeleteServiceTypeInstance);
  EXPECT_EQ(PlanSaga(sti)[0].mode, DeleteMode::kDirect);
  sti.deferred = true;
  EXPECT_EQ(PlanSaga(sti)[0].mode, DeleteMode::kDeferred);
}

TEST(SagaPlanTest, ServiceTypeInstanceChecksItsNamedProviderFirst) {
  EXPECT_EQ(Steps(PlanSaga(Started(Operation::kCreateServiceTypeInstance))),
            (std::vector<std::string>{"check p1", "create i-1"}));
  EXPECT_EQ(Steps(PlanSaga(Started(Operation::kRetryCleanup))),
            (std::vector<std::string>{event_type::kCleanupRetried}));
  InstanceEvent unknown = Started(Operation::kRetryCleanup);
  unknown.operation = "teleport";
  EXPECT_TRUE(PlanSaga(unknown).empty());
}

TEST(SagaPlanTest, AResumedSagaSkipsTheStepsItRecorded) {
  Saga saga;
  saga.started = Started(Operation::kRehydrateCatalogItemInstance);
  saga.steps = {event_type::kResourcePlaced, event_type::kInstanceCreated};
  const auto plan = PlanSaga(saga.started);
  std::vector<bool> done;
  for (const auto& s : plan) done.push_back(s.DoneIn(saga));
  EXPECT_EQ(done, (std::vector<bool>{true, true, false, false, false}));
  // A service-type check runs on every resume (the provider may have changed).
  Saga sti;
  sti.started = Started(Operation::kCreateServiceTypeInstance);
  sti.steps = {event_type::kInstanceCreated};
  EXPECT_FALSE(PlanSaga(sti.started)[0].DoneIn(sti));
  EXPECT_TRUE(PlanSaga(sti.started)[1].DoneIn(sti));
}

TEST(SagaPlanTest, CompletionNamesTheResultOfTheOperation) {
  Saga saga;
  saga.started = Started(Operation::kRehydrateCatalogItemInstance);
  saga.provider_name = "p2";
  OperationCompleted done = CompletionOf(saga);
  EXPECT_EQ(done.operation, saga.started.operation);
  EXPECT_EQ(done.resource_id, "res-2");
  EXPECT_EQ(done.old_resource_id, "res-1");
  EXPECT_EQ(done.provider_name, "p2");
  saga.started = Started(Operation::kDeleteServiceTypeInstance);
  done = CompletionOf(saga);
  EXPECT_EQ(done.instance_id, "i-1");
  EXPECT_TRUE(done.provider_name.empty());
}

}  // namespace
}  // namespace dcm
