// InstanceProjection / SpStatusProjection / InstanceView: the instance worker's facts folded into
// RocksDB (in memory), one test per fold rule; idempotence and determinism (a duplicate is a
// no-op, replaying twice is byte-identical); poison events are kCorruption; the list views page
// and filter.
#include "projections/instance_projection.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "events/cloud_event.h"
#include "src/common/time_format.h"

namespace dcm {
namespace {

constexpr int64_t kT0 = 1767225600000;  // 2026-01-01T00:00:00.000Z

std::unique_ptr<Store> OpenInMemory(const std::string& path) {
  auto store = Store::Open(path, StoreOptions{.bulk_load = false, .in_memory = true});
  EXPECT_TRUE(store.has_value()) << store.error().message;
  return store ? std::move(*store) : nullptr;
}

struct Sp {
  std::string name;
  std::string id;
};
const Sp kA{"sp-a", "p-a"};
const Sp kB{"sp-b", "p-b"};

const std::string kCreateCii = OperationName(Operation::kCreateCatalogItemInstance);
const std::string kRehydrateCii = OperationName(Operation::kRehydrateCatalogItemInstance);
const std::string kVmSpec = R"({"service_type":"vm","memory":"2GB"})";

// Builds the facts the instance worker produces (events/instance_events.h).
class Facts {
 public:
  Facts(std::string request_id, std::string root, int64_t t = kT0)
      : request_id_(std::move(request_id)), root_(std::move(root)), t_(t) {}

  InstanceEvent Base(const char* type) {
    InstanceEvent e;
    e.type = type;
    e.source = "dcm/instance-worker/test";
    e.request_id = request_id_;
    e.root = root_;
    e.time_ms = t_;
    t_ += 1000;  // every fact a second after the previous one
    return e;
  }
  static CloudEvent Cloud(const InstanceEvent& e) { return EncodeInstanceEvent(e); }

  CloudEvent Started(const std::string& operation) {
    auto e = Base(event_type::kOperationStarted);
    e.operation = operation;
    return Cloud(e);
  }
  CloudEvent Completed(const std::string& operation, const std::string& resource_id = "") {
    auto e = Base(event_type::kOperationCompleted);
    e.operation = operation;
    e.resource_id = resource_id;
    return Cloud(e);
  }
  CloudEvent Failed(const std::string& operation) {
    auto e = Base(event_type::kOperationFailed);
    e.operation = operation;
    e.http_status = 503;
    e.reason = "no_ready_provider";
    e.error = "no Ready provider of vm";
    return Cloud(e);
  }
  CloudEvent Placed(const std::string& resource_id, const Sp& sp, const std::string& cii_id = "") {
    auto e = Base(event_type::kResourcePlaced);
    e.resource_id = resource_id;
    e.catalog_item_instance_id = cii_id;
    e.provider_name = sp.name;
    e.provider_id = sp.id;
    e.service_type = "vm";
    e.intent = kVmSpec;
    e.spec = R"({"service_type":"vm","memory":"2GB","evaluated":true})";
    e.policy = "builtin";
    return Cloud(e);
  }
  CloudEvent ResourceDeleted(const std::string& resource_id) {
    auto e = Base(event_type::kResourceDeleted);
    e.resource_id = resource_id;
    return Cloud(e);
  }
  CloudEvent Lost(const std::string& resource_id, const Sp& sp) {
    auto e = Base(event_type::kResourceLost);
    e.resource_id = resource_id;
    e.provider_name = sp.name;
    e.provider_id = sp.id;
    e.reason = "provider_expired";
    return Cloud(e);
  }
  CloudEvent Created(const std::string& instance_id, const Sp& sp,
                     const std::string& status = "PROVISIONING",
                     const std::string& service_type = "vm") {
    auto e = Base(event_type::kInstanceCreated);
    e.instance_id = instance_id;
    e.provider_name = sp.name;
    e.provider_id = sp.id;
    e.service_type = service_type;
    e.spec = kVmSpec;
    e.status = status;
    return Cloud(e);
  }
  CloudEvent CreateFailed(const std::string& instance_id, const Sp& sp) {
    auto e = Base(event_type::kInstanceCreateFailed);
    e.instance_id = instance_id;
    e.provider_name = sp.name;
    e.error = "SP answered 500";
    return Cloud(e);
  }
  CloudEvent Deleted(const std::string& instance_id, const Sp& sp) {
    auto e = Base(event_type::kInstanceDeleted);
    e.instance_id = instance_id;
    e.provider_name = sp.name;
    e.provider_id = sp.id;
    return Cloud(e);
  }
  CloudEvent DeleteFailed(const std::string& instance_id, const Sp& sp) {
    auto e = Base(event_type::kInstanceDeleteFailed);
    e.instance_id = instance_id;
    e.provider_name = sp.name;
    e.error = "SP answered 500";
    return Cloud(e);
  }
  CloudEvent Enqueued(const std::string& instance_id, const Sp& sp) {
    auto e = Base(event_type::kCleanupEnqueued);
    e.instance_id = instance_id;
    e.provider_name = sp.name;
    e.provider_id = sp.id;
    e.service_type = "vm";
    e.requested_at_ms = e.time_ms;
    return Cloud(e);
  }
  CloudEvent Parked(const std::string& instance_id, const Sp& sp) {
    auto e = Base(event_type::kCleanupParked);
    e.instance_id = instance_id;
    e.provider_name = sp.name;
    e.status = kCleanupPendingProvider;
    return Cloud(e);
  }
  CloudEvent Attempted(const std::string& instance_id, const std::string& outcome,
                       const std::string& status, int retry_count, const std::string& error = "") {
    auto e = Base(event_type::kCleanupAttempted);
    e.instance_id = instance_id;
    e.outcome = outcome;
    e.status = status;
    e.retry_count = retry_count;
    e.max_retries = 3;
    e.error = error;
    return Cloud(e);
  }
  CloudEvent CleanupFailed(const std::string& instance_id, int retry_count) {
    auto e = Base(event_type::kCleanupFailed);
    e.instance_id = instance_id;
    e.retry_count = retry_count;
    e.max_retries = 3;
    e.error = "gave up after 3 attempts: SP answered 500";
    return Cloud(e);
  }
  CloudEvent Retried(const std::string& instance_id) {
    auto e = Base(event_type::kCleanupRetried);
    e.instance_id = instance_id;
    return Cloud(e);
  }
  CloudEvent CiiCreated(const std::string& resource_id, const Sp& sp) {
    auto e = Base(event_type::kCatalogItemInstanceCreated);
    e.catalog_item_instance_id = root_;
    e.display_name = "my vm";
    e.spec = kVmSpec;
    e.resource_id = resource_id;
    e.provider_name = sp.name;
    return Cloud(e);
  }
  CloudEvent Rehydrated(const std::string& old_id, const std::string& new_id, const Sp& sp) {
    auto e = Base(event_type::kCatalogItemInstanceRehydrated);
    e.catalog_item_instance_id = root_;
    e.old_resource_id = old_id;
    e.new_resource_id = new_id;
    e.provider_name = sp.name;
    return Cloud(e);
  }
  CloudEvent CiiDeleted() {
    auto e = Base(event_type::kCatalogItemInstanceDeleted);
    e.catalog_item_instance_id = root_;
    return Cloud(e);
  }

  int64_t now() const { return t_; }

 private:
  std::string request_id_;
  std::string root_;
  int64_t t_;
};

// The create of catalog item instance `root` on `sp` as resource `resource_id`.
std::vector<CloudEvent> CreateSequence(const std::string& request_id, const std::string& root,
                                       const std::string& resource_id, const Sp& sp,
                                       int64_t t = kT0) {
  Facts f(request_id, root, t);
  return {f.Started(kCreateCii), f.Placed(resource_id, sp, root), f.Created(resource_id, sp),
          f.CiiCreated(resource_id, sp), f.Completed(kCreateCii, resource_id)};
}

// Its rehydration onto `sp` as `new_id` (create before delete; the old one queued for cleanup).
std::vector<CloudEvent> RehydrateSequence(const std::string& request_id, const std::string& root,
                                          const std::string& old_id, const Sp& old_sp,
                                          const std::string& new_id, const Sp& sp,
                                          int64_t t = kT0 + 60000) {
  Facts f(request_id, root, t);
  return {f.Started(kRehydrateCii),
          f.Placed(new_id, sp, root),
          f.Created(new_id, sp),
          f.Enqueued(old_id, old_sp),
          f.Rehydrated(old_id, new_id, sp),
          f.ResourceDeleted(old_id),
          f.Completed(kRehydrateCii, new_id)};
}

class Instances {
 public:
  explicit Instances(const std::string& path)
      : store_(OpenInMemory(path)),
        projection_(store_.get(), &waiters_, &metrics_),
        sp_status_(store_.get(), &metrics_),
        view_(store_.get()) {}

  // One batch holding `events`, then AfterCommit, as the runner does it.
  Status Apply(const std::vector<CloudEvent>& events) {
    StoreBatch batch;
    for (const auto& e : events) {
      RETURN_IF_ERROR(
          projection_.Apply(e, EventPosition{"dcm.instances", 2, next_offset_++, kT0}, batch));
    }
    RETURN_IF_ERROR(store_->Write(batch));
    projection_.AfterCommit(events);
    return OkStatus();
  }
  int64_t next_offset_ = 0;  // of the next event Apply folds (partition 2)
  Status ApplyEach(const std::vector<CloudEvent>& events) {
    for (const auto& e : events) RETURN_IF_ERROR(Apply({e}));
    return OkStatus();
  }
  Status ApplyStatus(const std::vector<CloudEvent>& events) {
    StoreBatch batch;
    for (const auto& e : events) {
      RETURN_IF_ERROR(sp_status_.Apply(e, EventPosition{"dcm.status", 0, 0, kT0}, batch));
    }
    return store_->Write(batch);
  }
  std::string Digest(std::string_view prefix = InstanceProjection::kPrefix) const {
    return *store_->Digest(prefix);
  }

  Saga SagaOf(const std::string& root) const {
    auto saga = view_.GetSaga(root);
    EXPECT_TRUE(saga.has_value());
    EXPECT_TRUE(saga && saga->has_value()) << "no saga on " << root;
    return saga && *saga ? **saga : Saga{};
  }
  bool HasSaga(const std::string& root) const { return view_.GetSaga(root).value().has_value(); }
  ServiceTypeInstance InstanceOf(const std::string& id) const {
    auto s = view_.GetInstance(id);
    EXPECT_TRUE(s && s->has_value()) << "no instance " << id;
    return s && *s ? **s : ServiceTypeInstance{};
  }
  CleanupRecord CleanupOf(const std::string& id) const {
    auto q = view_.GetCleanup(id);
    EXPECT_TRUE(q && q->has_value()) << "no cleanup record " << id;
    return q && *q ? **q : CleanupRecord{};
  }
  bool HasCleanup(const std::string& id) const { return view_.GetCleanup(id).value().has_value(); }
  std::optional<Resource> ResourceOf(const std::string& id) const {
    return view_.GetResource(id).value();
  }
  std::optional<CatalogItemInstance> CiiOf(const std::string& id) const {
    return view_.GetCatalogItemInstance(id).value();
  }
  int64_t Load(const Sp& sp) const { return view_.LiveInstances(sp.id).value(); }

  Metrics metrics_;
  OutcomeWaiters waiters_;
  std::unique_ptr<Store> store_;
  InstanceProjection projection_;
  SpStatusProjection sp_status_;
  InstanceView view_;
};

InstanceEvent Decoded(const CloudEvent& e) { return DecodeInstanceEvent(e).value(); }

// ---- Sagas.

TEST(InstanceProjectionTest, OperationStartedOpensASagaCarryingTheStartedEvent) {
  Instances in("/mem/inst-started");
  Facts f("req-1", "cii-1");
  const CloudEvent started = f.Started(kCreateCii);
  ASSERT_TRUE(in.Apply({started}));
  const Saga saga = in.SagaOf("cii-1");
  EXPECT_EQ(saga.started, Decoded(started));
  EXPECT_TRUE(saga.steps.empty());
  EXPECT_TRUE(saga.placed_resource_id.empty());
}

TEST(InstanceProjectionTest, DuplicateOperationStartedKeepsTheSagaAndItsSteps) {
  Instances in("/mem/inst-started-dup");
  Facts f("req-1", "cii-1");
  const CloudEvent started = f.Started(kCreateCii);
  ASSERT_TRUE(in.Apply({started, f.Placed("res-1", kA, "cii-1")}));
  ASSERT_TRUE(in.Apply({started}));
  EXPECT_EQ(in.SagaOf("cii-1").steps, std::vector<std::string>{event_type::kResourcePlaced});
}

TEST(InstanceProjectionTest, OperationStartedOfAnotherRequestReplacesTheSaga) {
  Instances in("/mem/inst-started-other");
  Facts first("req-1", "cii-1");
  Facts second("req-2", "cii-1", kT0 + 5000);
  ASSERT_TRUE(in.Apply({first.Started(kCreateCii), first.Placed("res-1", kA, "cii-1")}));
  ASSERT_TRUE(in.Apply({second.Started(kRehydrateCii)}));
  const Saga saga = in.SagaOf("cii-1");
  EXPECT_EQ(saga.started.request_id, "req-2");
  EXPECT_TRUE(saga.steps.empty());
}

TEST(InstanceProjectionTest, DuplicateOperationStartedAfterTheOutcomeDoesNotReopenTheSaga) {
  Instances in("/mem/inst-started-late");
  Facts f("req-1", "cii-1");
  const CloudEvent started = f.Started(kCreateCii);
  ASSERT_TRUE(in.Apply({started, f.Completed(kCreateCii, "res-1")}));
  ASSERT_TRUE(in.Apply({started}));
  EXPECT_FALSE(in.HasSaga("cii-1"));
}

TEST(InstanceProjectionTest, FactsOfTheSagaAreRecordedAsStepsOnceInOrder) {
  Instances in("/mem/inst-steps");
  Facts f("req-1", "cii-1");
  ASSERT_TRUE(in.Apply({f.Started(kCreateCii), f.Placed("res-1", kA, "cii-1")}));
  const CloudEvent created = f.Created("res-1", kA);
  ASSERT_TRUE(in.Apply({created, created}));
  const Saga saga = in.SagaOf("cii-1");
  EXPECT_EQ(saga.steps,
            (std::vector<std::string>{event_type::kResourcePlaced, event_type::kInstanceCreated}));
  EXPECT_TRUE(saga.Has(event_type::kInstanceCreated));
  EXPECT_FALSE(saga.Has(event_type::kCatalogItemInstanceCreated));
}

TEST(InstanceProjectionTest, ResourcePlacedRecordsThePlacementOnTheSaga) {
  Instances in("/mem/inst-steps-placed");
  Facts f("req-1", "cii-1");
  const CloudEvent placed = f.Placed("res-1", kB, "cii-1");
  ASSERT_TRUE(in.Apply({f.Started(kCreateCii), placed}));
  const Saga saga = in.SagaOf("cii-1");
  EXPECT_EQ(saga.placed_resource_id, "res-1");
  EXPECT_EQ(saga.provider_name, "sp-b");
  EXPECT_EQ(saga.provider_id, "p-b");
  EXPECT_EQ(saga.spec, Decoded(placed).spec);
}

TEST(InstanceProjectionTest, FactsOfAnotherRequestAreNotStepsOfTheSaga) {
  Instances in("/mem/inst-steps-other");
  Facts f("req-1", "cii-1");
  Facts other("req-9", "cii-1");
  Facts other_root("req-1", "cii-2");
  ASSERT_TRUE(in.Apply({f.Started(kCreateCii), other.Placed("res-9", kA, "cii-1"),
                        other_root.Placed("res-2", kA, "cii-2")}));
  const Saga saga = in.SagaOf("cii-1");
  EXPECT_TRUE(saga.steps.empty());
  EXPECT_TRUE(saga.placed_resource_id.empty());
}

TEST(InstanceProjectionTest, OperationCompletedClosesTheSagaAndRecordsTheOutcome) {
  Instances in("/mem/inst-completed");
  Facts f("req-1", "cii-1");
  ASSERT_TRUE(in.Apply({f.Started(kCreateCii), f.Completed(kCreateCii, "res-1")}));
  EXPECT_FALSE(in.HasSaga("cii-1"));
  EXPECT_EQ(in.view_.RequestOutcome("req-1").value(),
            std::optional<std::string>(event_type::kOperationCompleted));
  EXPECT_EQ(in.view_.RequestOutcome("req-2").value(), std::nullopt);
}

TEST(InstanceProjectionTest, OperationFailedClosesTheSagaAndRecordsTheOutcome) {
  Instances in("/mem/inst-failed");
  Facts f("req-1", "cii-1");
  ASSERT_TRUE(in.Apply({f.Started(kCreateCii), f.Failed(kCreateCii)}));
  EXPECT_FALSE(in.HasSaga("cii-1"));
  EXPECT_EQ(in.view_.RequestOutcome("req-1").value(),
            std::optional<std::string>(event_type::kOperationFailed));
}

TEST(InstanceProjectionTest, OutcomeOfAnotherRequestLeavesTheSagaInProgress) {
  Instances in("/mem/inst-completed-other");
  Facts f("req-1", "cii-1");
  Facts stale("req-0", "cii-1");
  ASSERT_TRUE(in.Apply({f.Started(kCreateCii), stale.Failed(kCreateCii)}));
  EXPECT_EQ(in.SagaOf("cii-1").started.request_id, "req-1");
  EXPECT_EQ(in.view_.RequestOutcome("req-0").value(),
            std::optional<std::string>(event_type::kOperationFailed));
}

TEST(InstanceProjectionTest, AfterCommitCompletesTheWaitersOfTerminalEvents) {
  Instances in("/mem/inst-waiters");
  std::vector<std::pair<std::string, CloudEvent>> completed;
  for (const char* req : {"req-1", "req-2", "req-3"}) {
    in.waiters_.Expect(req, kT0 + 60000, [&completed, req](Result<CloudEvent> r) {
      ASSERT_TRUE(r.has_value());
      completed.emplace_back(req, *r);
    });
  }
  Facts one("req-1", "cii-1");
  Facts two("req-2", "cii-2");
  const CloudEvent ok = one.Completed(kCreateCii, "res-1");
  const CloudEvent failed = two.Failed(kCreateCii);
  ASSERT_TRUE(in.Apply({one.Started(kCreateCii), two.Started(kCreateCii), ok, failed}));
  ASSERT_EQ(completed.size(), 2u);
  EXPECT_EQ(completed[0].first, "req-1");
  EXPECT_EQ(completed[0].second, ok);
  EXPECT_EQ(completed[1].first, "req-2");
  EXPECT_EQ(completed[1].second, failed);
  EXPECT_EQ(in.waiters_.Pending(), 1u);  // req-3: no outcome yet
}

TEST(InstanceProjectionTest, AWaiterLearnsWhereItsTerminalEventIs) {
  Instances in("/mem/inst-waiter-positions");
  std::vector<std::pair<std::string, OutcomePosition>> completed;
  for (const char* req : {"req-1", "req-2"}) {
    in.waiters_.ExpectPositioned(req, kT0 + 60000,
                                 [&completed, req](Result<CloudEvent> r, OutcomePosition at) {
                                   ASSERT_TRUE(r.has_value());
                                   completed.emplace_back(req, at);
                                 });
  }
  Facts one("req-1", "cii-1");
  Facts two("req-2", "cii-2");
  InstanceEvent request;  // a request on the facts topic: not folded, but it has an offset
  request.type = event_type::kOperationRequested;
  request.source = "dcm/http/test";
  request.root = "cii-3";
  request.operation = kCreateCii;
  request.time_ms = kT0;
  // Offsets 0..2 in one batch, then 3 and 4 in another.
  ASSERT_TRUE(in.Apply(
      {one.Started(kCreateCii), EncodeInstanceEvent(request), one.Completed(kCreateCii, "res-1")}));
  ASSERT_TRUE(in.Apply({two.Started(kCreateCii), two.Failed(kCreateCii)}));
  ASSERT_EQ(completed.size(), 2u);
  EXPECT_EQ(completed[0].first, "req-1");
  EXPECT_EQ(completed[0].second.partition, 2);
  EXPECT_EQ(completed[0].second.offset, 2);
  EXPECT_EQ(completed[1].first, "req-2");
  EXPECT_EQ(completed[1].second.partition, 2);
  EXPECT_EQ(completed[1].second.offset, 4);
}

TEST(InstanceProjectionTest, WorksWithoutWaiters) {
  auto store = OpenInMemory("/mem/inst-no-waiters");
  InstanceProjection projection(store.get(), nullptr, nullptr);
  Facts f("req-1", "cii-1");
  std::vector<CloudEvent> events = {f.Started(kCreateCii), f.Completed(kCreateCii, "res-1")};
  StoreBatch batch;
  for (const auto& e : events) ASSERT_TRUE(projection.Apply(e, {}, batch));
  ASSERT_TRUE(store->Write(batch));
  projection.AfterCommit(events);
  EXPECT_TRUE(InstanceView(store.get()).RequestOutcome("req-1").value().has_value());
}

TEST(InstanceProjectionTest, ListenerHearsTheBatchsDecodedFactsInOrderAfterCommit) {
  Instances in("/mem/inst-listener");
  std::vector<std::vector<InstanceEvent>> heard;
  in.projection_.SetListener([&](const std::vector<InstanceEvent>& events) {
    heard.push_back(events);
    // Durable before the listener hears of it.
    EXPECT_TRUE(in.view_.GetInstance("res-1").value().has_value());
  });
  const auto events = CreateSequence("req-1", "cii-1", "res-1", kA);
  ASSERT_TRUE(in.Apply(events));
  ASSERT_EQ(heard.size(), 1u);
  ASSERT_EQ(heard[0].size(), events.size());
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(heard[0][i], Decoded(events[i]));
  ASSERT_TRUE(in.Apply({}));
  EXPECT_EQ(heard.size(), 1u);  // nothing applied, nothing heard
}

// ---- Resources.

TEST(InstanceProjectionTest, ResourcePlacedRecordsThePlacementOnce) {
  Instances in("/mem/inst-placed");
  Facts f("req-1", "cii-1");
  const CloudEvent placed = f.Placed("res-1", kA, "cii-1");
  ASSERT_TRUE(in.Apply({placed}));
  auto r = in.ResourceOf("res-1");
  ASSERT_TRUE(r);
  const InstanceEvent e = Decoded(placed);
  EXPECT_EQ(r->id, "res-1");
  EXPECT_EQ(r->root, "cii-1");
  EXPECT_EQ(r->catalog_item_instance_id, "cii-1");
  EXPECT_EQ(r->provider_name, "sp-a");
  EXPECT_EQ(r->provider_id, "p-a");
  EXPECT_EQ(r->service_type, "vm");
  EXPECT_EQ(r->intent, e.intent);
  EXPECT_EQ(r->spec, e.spec);
  EXPECT_EQ(r->policy, "builtin");
  EXPECT_EQ(r->status, "PLACED");
  EXPECT_EQ(r->create_time_ms, e.time_ms);
  EXPECT_EQ(r->update_time_ms, e.time_ms);
  // A later placement of the same id does not overwrite it.
  ASSERT_TRUE(in.Apply({f.Placed("res-1", kB, "cii-1")}));
  EXPECT_EQ(in.ResourceOf("res-1"), r);
}

TEST(InstanceProjectionTest, ResourceDeletedRemovesThePlacement) {
  Instances in("/mem/inst-res-deleted");
  Facts f("req-1", "res-1");
  ASSERT_TRUE(in.Apply({f.Placed("res-1", kA), f.ResourceDeleted("res-1")}));
  EXPECT_FALSE(in.ResourceOf("res-1"));
  ASSERT_TRUE(in.Apply({f.ResourceDeleted("res-1")}));  // a duplicate
  EXPECT_FALSE(in.ResourceOf("res-1"));
}

TEST(InstanceProjectionTest, ResourceLostMarksThePlacementLostAndKeepsIt) {
  Instances in("/mem/inst-res-lost");
  Facts f("req-1", "res-1");
  ASSERT_TRUE(in.Apply({f.Placed("res-1", kA), f.Lost("res-1", kA)}));
  auto r = in.ResourceOf("res-1");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, "LOST");
  ASSERT_TRUE(in.Apply({f.Lost("res-1", kA), f.Lost("res-9", kA)}));  // a duplicate; unknown
  EXPECT_EQ(in.ResourceOf("res-1"), r);
  EXPECT_FALSE(in.ResourceOf("res-9"));
}

// ---- Service-type instances and load.

TEST(InstanceProjectionTest, InstanceCreatedStoresTheLiveInstanceAndCountsItOnce) {
  Instances in("/mem/inst-created");
  Facts f("req-1", "res-1");
  const CloudEvent created = f.Created("res-1", kA);
  ASSERT_TRUE(in.Apply({created}));
  ASSERT_TRUE(in.Apply({created}));
  const ServiceTypeInstance s = in.InstanceOf("res-1");
  EXPECT_EQ(s.id, "res-1");
  EXPECT_EQ(s.root, "res-1");
  EXPECT_EQ(s.provider_name, "sp-a");
  EXPECT_EQ(s.provider_id, "p-a");
  EXPECT_EQ(s.service_type, "vm");
  EXPECT_EQ(s.spec, Decoded(created).spec);
  EXPECT_EQ(s.status, "PROVISIONING");
  EXPECT_FALSE(s.deleted);
  EXPECT_EQ(s.create_time_ms, Decoded(created).time_ms);
  EXPECT_EQ(in.Load(kA), 1);
  EXPECT_EQ(in.Load(kB), 0);
}

TEST(InstanceProjectionTest, InstanceCreatedSetsThePlacementsStatus) {
  Instances in("/mem/inst-created-res");
  Facts f("req-1", "res-1");
  const CloudEvent placed = f.Placed("res-1", kA);
  const CloudEvent created = f.Created("res-1", kA, "READY");
  ASSERT_TRUE(in.Apply({placed, created}));
  auto r = in.ResourceOf("res-1");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, "READY");
  EXPECT_EQ(r->update_time_ms, Decoded(created).time_ms);
  EXPECT_LT(r->create_time_ms, r->update_time_ms);
}

TEST(InstanceProjectionTest, LiveInstancesCountsPerProvider) {
  Instances in("/mem/inst-load");
  Facts f("req-1", "root");
  ASSERT_TRUE(in.Apply({f.Created("i-1", kA), f.Created("i-2", kA), f.Created("i-3", kB)}));
  EXPECT_EQ(in.Load(kA), 2);
  EXPECT_EQ(in.Load(kB), 1);
  EXPECT_EQ(in.view_.LiveInstances("p-unknown").value(), 0);
  ASSERT_TRUE(in.Apply({f.Deleted("i-1", kA), f.Deleted("i-3", kB)}));
  EXPECT_EQ(in.Load(kA), 1);
  EXPECT_EQ(in.Load(kB), 0);
  // A provider at zero has no key at all (a rebuild never writes one).
  EXPECT_FALSE(in.store_->Get("in/l/p-b").value().has_value());
}

TEST(InstanceProjectionTest, InstanceCreateFailedRemovesThePlacement) {
  Instances in("/mem/inst-create-failed");
  Facts f("req-1", "res-1");
  ASSERT_TRUE(in.Apply({f.Placed("res-1", kA), f.CreateFailed("res-1", kA)}));
  EXPECT_FALSE(in.ResourceOf("res-1"));
  EXPECT_FALSE(in.view_.GetInstance("res-1").value());
  EXPECT_EQ(in.Load(kA), 0);
}

TEST(InstanceProjectionTest, InstanceDeletedKeepsItAsDeletedAndDropsLoadOnce) {
  Instances in("/mem/inst-deleted");
  Facts f("req-1", "res-1");
  ASSERT_TRUE(in.Apply({f.Placed("res-1", kA), f.Created("res-1", kA), f.Created("res-2", kA),
                        f.Enqueued("res-1", kA)}));
  ASSERT_EQ(in.Load(kA), 2);
  const CloudEvent deleted = f.Deleted("res-1", kA);
  ASSERT_TRUE(in.Apply({deleted}));
  ASSERT_TRUE(in.Apply({deleted}));
  const ServiceTypeInstance s = in.InstanceOf("res-1");
  EXPECT_TRUE(s.deleted);
  EXPECT_EQ(s.status, "DELETED");
  EXPECT_EQ(s.update_time_ms, Decoded(deleted).time_ms);
  EXPECT_EQ(in.Load(kA), 1);
  EXPECT_FALSE(in.HasCleanup("res-1"));
  EXPECT_FALSE(in.ResourceOf("res-1"));
}

TEST(InstanceProjectionTest, DuplicateInstanceCreatedAfterTheDeleteDoesNotReviveIt) {
  Instances in("/mem/inst-no-revive");
  Facts f("req-1", "res-1");
  const CloudEvent created = f.Created("res-1", kA);
  ASSERT_TRUE(in.Apply({created, f.Deleted("res-1", kA)}));
  const std::string before = in.Digest();
  ASSERT_TRUE(in.Apply({created}));
  EXPECT_TRUE(in.InstanceOf("res-1").deleted);
  EXPECT_EQ(in.Load(kA), 0);
  EXPECT_EQ(in.Digest(), before);
}

TEST(InstanceProjectionTest, InstanceDeleteFailedOnlyRecordsASagaStep) {
  Instances in("/mem/inst-delete-failed");
  Facts create("req-0", "res-1");
  ASSERT_TRUE(in.Apply({create.Placed("res-1", kA), create.Created("res-1", kA)}));
  Facts f("req-1", "res-1", kT0 + 10000);
  ASSERT_TRUE(in.Apply({f.Started(OperationName(Operation::kDeleteResource))}));
  const std::string resource = *in.store_->Get("in/r/res-1").value();
  const std::string instance = *in.store_->Get("in/s/res-1").value();
  ASSERT_TRUE(in.Apply({f.DeleteFailed("res-1", kA)}));
  EXPECT_EQ(in.SagaOf("res-1").steps, std::vector<std::string>{event_type::kInstanceDeleteFailed});
  EXPECT_EQ(*in.store_->Get("in/r/res-1").value(), resource);
  EXPECT_EQ(*in.store_->Get("in/s/res-1").value(), instance);
  EXPECT_EQ(in.Load(kA), 1);
}

// ---- Cleanup queue.

TEST(InstanceProjectionTest, CleanupEnqueuedQueuesAPendingRecordOnce) {
  Instances in("/mem/inst-enqueued");
  Facts f("req-1", "cii-1");
  const CloudEvent enqueued = f.Enqueued("res-1", kA);
  ASSERT_TRUE(in.Apply({enqueued}));
  const CleanupRecord q = in.CleanupOf("res-1");
  EXPECT_EQ(q.instance_id, "res-1");
  EXPECT_EQ(q.root, "cii-1");
  EXPECT_EQ(q.provider_name, "sp-a");
  EXPECT_EQ(q.provider_id, "p-a");
  EXPECT_EQ(q.service_type, "vm");
  EXPECT_EQ(q.requested_at_ms, Decoded(enqueued).requested_at_ms);
  EXPECT_EQ(q.retry_count, 0);
  EXPECT_EQ(q.status, "PENDING");
  EXPECT_EQ(q.last_attempt_ms, 0);
  // A second enqueue (another request) keeps the record as it is.
  ASSERT_TRUE(in.Apply({f.Attempted("res-1", "failed", kCleanupPending, 1, "SP answered 500")}));
  const CleanupRecord attempted = in.CleanupOf("res-1");
  ASSERT_TRUE(in.Apply({Facts("req-2", "cii-1", kT0 + 9000).Enqueued("res-1", kA)}));
  EXPECT_EQ(in.CleanupOf("res-1"), attempted);
}

TEST(InstanceProjectionTest, CleanupParkedWaitsForTheProvider) {
  Instances in("/mem/inst-parked");
  Facts f("req-1", "cii-1");
  ASSERT_TRUE(in.Apply({f.Enqueued("res-1", kA), f.Parked("res-1", kA)}));
  const CleanupRecord q = in.CleanupOf("res-1");
  EXPECT_EQ(q.status, "PENDING_PROVIDER");
  EXPECT_EQ(q.retry_count, 0);  // no attempt burned
  // Parking an unknown record creates none.
  ASSERT_TRUE(in.Apply({f.Parked("res-9", kA)}));
  EXPECT_FALSE(in.HasCleanup("res-9"));
}

TEST(InstanceProjectionTest, CleanupAttemptFailedCountsTheRetry) {
  Instances in("/mem/inst-attempt-failed");
  Facts f("req-1", "cii-1");
  ASSERT_TRUE(in.Apply({f.Created("res-1", kA), f.Enqueued("res-1", kA)}));
  const CloudEvent attempt = f.Attempted("res-1", "failed", kCleanupPending, 1, "SP answered 500");
  ASSERT_TRUE(in.Apply({attempt}));
  const CleanupRecord q = in.CleanupOf("res-1");
  EXPECT_EQ(q.status, "PENDING");
  EXPECT_EQ(q.retry_count, 1);
  EXPECT_EQ(q.last_attempt_ms, Decoded(attempt).time_ms);
  EXPECT_EQ(q.last_error, "SP answered 500");
  EXPECT_FALSE(in.InstanceOf("res-1").deleted);
  EXPECT_EQ(in.Load(kA), 1);
  ASSERT_TRUE(in.Apply({attempt}));  // a duplicate
  EXPECT_EQ(in.CleanupOf("res-1"), q);
}

TEST(InstanceProjectionTest, FinalCleanupFailureMarksTheRecordFailed) {
  Instances in("/mem/inst-cleanup-failed");
  Facts f("", "cii-1");
  ASSERT_TRUE(
      in.Apply({f.Enqueued("res-1", kA), f.Attempted("res-1", "failed", kCleanupPending, 1, "500"),
                f.Attempted("res-1", "failed", kCleanupPending, 2, "500"),
                f.Attempted("res-1", "failed", kCleanupFailedStatus, 3, "500"),
                f.CleanupFailed("res-1", 3)}));
  const CleanupRecord q = in.CleanupOf("res-1");
  EXPECT_EQ(q.status, "FAILED");
  EXPECT_EQ(q.retry_count, 3);
  EXPECT_EQ(q.last_error, "gave up after 3 attempts: SP answered 500");
}

TEST(InstanceProjectionTest, CleanupRetriedPutsAFailedRecordBackToPending) {
  Instances in("/mem/inst-cleanup-retried");
  Facts f("", "cii-1");
  ASSERT_TRUE(in.Apply({f.Enqueued("res-1", kA),
                        f.Attempted("res-1", "failed", kCleanupFailedStatus, 3, "500"),
                        f.CleanupFailed("res-1", 3)}));
  ASSERT_TRUE(in.Apply({Facts("req-retry", "cii-1", kT0 + 10000).Retried("res-1")}));
  const CleanupRecord q = in.CleanupOf("res-1");
  EXPECT_EQ(q.status, "PENDING");
  EXPECT_EQ(q.retry_count, 0);
}

TEST(InstanceProjectionTest, CleanupAttemptDeletedOrGoneDeletesTheInstance) {
  for (const char* outcome : {"deleted", "gone"}) {
    SCOPED_TRACE(outcome);
    Instances in(std::string("/mem/inst-cleanup-") + outcome);
    Facts f("req-1", "cii-1");
    ASSERT_TRUE(in.Apply({f.Placed("res-1", kA, "cii-1"), f.Created("res-1", kA),
                          f.Created("res-2", kA), f.Enqueued("res-1", kA)}));
    const CloudEvent attempt = f.Attempted("res-1", outcome, kCleanupPending, 0);
    ASSERT_TRUE(in.Apply({attempt}));
    ASSERT_TRUE(in.Apply({attempt}));
    EXPECT_FALSE(in.HasCleanup("res-1"));
    EXPECT_FALSE(in.ResourceOf("res-1"));
    const ServiceTypeInstance s = in.InstanceOf("res-1");
    EXPECT_TRUE(s.deleted);
    EXPECT_EQ(s.status, "DELETED");
    EXPECT_EQ(in.Load(kA), 1);
  }
}

// ---- Catalog item instances.

TEST(InstanceProjectionTest, CatalogItemInstanceCreatedStoresItOnce) {
  Instances in("/mem/inst-cii-created");
  Facts f("req-1", "cii-1");
  const CloudEvent created = f.CiiCreated("res-1", kA);
  ASSERT_TRUE(in.Apply({created}));
  auto c = in.CiiOf("cii-1");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->id, "cii-1");
  EXPECT_EQ(c->display_name, "my vm");
  EXPECT_EQ(c->spec, Decoded(created).spec);
  EXPECT_EQ(c->resource_id, "res-1");
  EXPECT_EQ(c->provider_name, "sp-a");
  EXPECT_EQ(c->create_time_ms, Decoded(created).time_ms);
  EXPECT_EQ(c->update_time_ms, c->create_time_ms);
  ASSERT_TRUE(in.Apply({f.CiiCreated("res-other", kB)}));
  EXPECT_EQ(in.CiiOf("cii-1"), c);
}

TEST(InstanceProjectionTest, CatalogItemInstanceRehydratedPointsAtTheNewResource) {
  Instances in("/mem/inst-cii-rehydrated");
  Facts f("req-1", "cii-1");
  ASSERT_TRUE(in.Apply({f.CiiCreated("res-1", kA)}));
  const CloudEvent rehydrated = f.Rehydrated("res-1", "res-2", kB);
  ASSERT_TRUE(in.Apply({rehydrated}));
  auto c = in.CiiOf("cii-1");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->resource_id, "res-2");
  EXPECT_EQ(c->provider_name, "sp-b");
  EXPECT_EQ(c->update_time_ms, Decoded(rehydrated).time_ms);
  EXPECT_EQ(c->display_name, "my vm");
  // Rehydrating an unknown one creates nothing.
  ASSERT_TRUE(in.Apply({Facts("req-2", "cii-2").Rehydrated("a", "b", kA)}));
  EXPECT_FALSE(in.CiiOf("cii-2"));
}

TEST(InstanceProjectionTest, CatalogItemInstanceDeletedRemovesIt) {
  Instances in("/mem/inst-cii-deleted");
  Facts f("req-1", "cii-1");
  ASSERT_TRUE(in.Apply({f.CiiCreated("res-1", kA), f.CiiDeleted()}));
  EXPECT_FALSE(in.CiiOf("cii-1"));
}

// ---- Whole flows.

TEST(InstanceProjectionTest, RehydrationMovesTheInstanceAndQueuesTheOldOneForCleanup) {
  Instances in("/mem/inst-rehydrate");
  std::vector<std::string> done;
  in.waiters_.Expect("req-rehydrate", kT0 + 120000, [&](Result<CloudEvent> r) {
    ASSERT_TRUE(r.has_value());
    done.push_back(r->type);
  });
  ASSERT_TRUE(in.Apply(CreateSequence("req-create", "cii-1", "res-1", kA)));
  ASSERT_EQ(in.CiiOf("cii-1")->resource_id, "res-1");
  ASSERT_TRUE(in.ApplyEach(RehydrateSequence("req-rehydrate", "cii-1", "res-1", kA, "res-2", kB)));

  auto c = in.CiiOf("cii-1");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->resource_id, "res-2");
  EXPECT_EQ(c->provider_name, "sp-b");
  // The new resource is placed and live; the old placement is gone.
  auto placed = in.ResourceOf("res-2");
  ASSERT_TRUE(placed);
  EXPECT_EQ(placed->status, "PROVISIONING");
  EXPECT_EQ(placed->provider_name, "sp-b");
  EXPECT_FALSE(in.ResourceOf("res-1"));
  // Create before delete: the old instance stays live until the cleanup worker deletes it.
  EXPECT_FALSE(in.InstanceOf("res-1").deleted);
  EXPECT_FALSE(in.InstanceOf("res-2").deleted);
  EXPECT_EQ(in.CleanupOf("res-1").status, "PENDING");
  EXPECT_EQ(in.Load(kA), 1);
  EXPECT_EQ(in.Load(kB), 1);
  // The saga is over and the waiting call was answered.
  EXPECT_FALSE(in.HasSaga("cii-1"));
  EXPECT_EQ(in.view_.RequestOutcome("req-rehydrate").value(),
            std::optional<std::string>(event_type::kOperationCompleted));
  EXPECT_EQ(done, std::vector<std::string>{event_type::kOperationCompleted});

  // The cleanup worker then deletes the old one.
  ASSERT_TRUE(in.Apply(
      {Facts("", "cii-1", kT0 + 90000).Attempted("res-1", "deleted", kCleanupPending, 0)}));
  EXPECT_TRUE(in.InstanceOf("res-1").deleted);
  EXPECT_FALSE(in.HasCleanup("res-1"));
  EXPECT_EQ(in.Load(kA), 0);
}

TEST(InstanceProjectionTest, SagaInTheMiddleOfARehydrationNamesItsProgress) {
  Instances in("/mem/inst-rehydrate-mid");
  ASSERT_TRUE(in.Apply(CreateSequence("req-create", "cii-1", "res-1", kA)));
  auto rehydrate = RehydrateSequence("req-rehydrate", "cii-1", "res-1", kA, "res-2", kB);
  ASSERT_TRUE(in.Apply({rehydrate.begin(), rehydrate.begin() + 4}));  // up to cleanup.enqueued
  const Saga saga = in.SagaOf("cii-1");
  EXPECT_EQ(saga.started.operation, kRehydrateCii);
  EXPECT_EQ(saga.steps,
            (std::vector<std::string>{event_type::kResourcePlaced, event_type::kInstanceCreated,
                                      event_type::kCleanupEnqueued}));
  EXPECT_EQ(saga.placed_resource_id, "res-2");
  EXPECT_EQ(saga.provider_id, "p-b");
  EXPECT_EQ(in.CiiOf("cii-1")->resource_id, "res-1");  // not switched yet
}

// Everything the projection folds, in one order: two roots, a create, a rehydration, cleanup
// attempts, a failure, a delete.
std::vector<CloudEvent> Everything() {
  std::vector<CloudEvent> all;
  auto add = [&](std::vector<CloudEvent> events) {
    all.insert(all.end(), events.begin(), events.end());
  };
  add(CreateSequence("req-c1", "cii-1", "res-1", kA));
  add(CreateSequence("req-c2", "cii-2", "res-2", kB, kT0 + 1000));
  add(RehydrateSequence("req-r1", "cii-1", "res-1", kA, "res-3", kB));
  Facts cleanup("", "cii-1", kT0 + 100000);
  add({cleanup.Parked("res-1", kA), cleanup.Attempted("res-1", "failed", kCleanupPending, 1, "x"),
       cleanup.Attempted("res-1", "failed", kCleanupFailedStatus, 3, "x"),
       cleanup.CleanupFailed("res-1", 3)});
  Facts retry("req-retry", "cii-1", kT0 + 200000);
  add({retry.Started(OperationName(Operation::kRetryCleanup)), retry.Retried("res-1"),
       retry.Completed(OperationName(Operation::kRetryCleanup))});
  add({cleanup.Attempted("res-1", "gone", kCleanupPending, 0)});
  Facts failing("req-c3", "cii-3", kT0 + 300000);
  add({failing.Started(kCreateCii), failing.Placed("res-4", kA, "cii-3"),
       failing.CreateFailed("res-4", kA), failing.Failed(kCreateCii)});
  Facts del("req-d2", "cii-2", kT0 + 400000);
  const std::string op = OperationName(Operation::kDeleteCatalogItemInstance);
  add({del.Started(op), del.Deleted("res-2", kB), del.ResourceDeleted("res-2"), del.CiiDeleted(),
       del.Completed(op)});
  return all;
}

TEST(InstanceProjectionTest, ApplyingEveryEventTwiceIsByteIdenticalToApplyingItOnce) {
  const auto events = Everything();
  Instances once("/mem/inst-once");
  ASSERT_TRUE(once.Apply(events));
  Instances twice_in_batch("/mem/inst-twice-batch");
  Instances twice_each("/mem/inst-twice-each");
  std::vector<CloudEvent> doubled;
  for (const auto& e : events) {
    doubled.push_back(e);
    doubled.push_back(e);
    ASSERT_TRUE(twice_each.Apply({e}));
    ASSERT_TRUE(twice_each.Apply({e}));
  }
  ASSERT_TRUE(twice_in_batch.Apply(doubled));
  Instances one_by_one("/mem/inst-one-by-one");
  ASSERT_TRUE(one_by_one.ApplyEach(events));

  EXPECT_EQ(twice_in_batch.Digest(), once.Digest());
  EXPECT_EQ(twice_each.Digest(), once.Digest());
  EXPECT_EQ(one_by_one.Digest(), once.Digest());
  // And the end state is the expected one.
  EXPECT_EQ(once.CiiOf("cii-1")->resource_id, "res-3");
  EXPECT_FALSE(once.CiiOf("cii-2"));
  EXPECT_FALSE(once.CiiOf("cii-3"));
  EXPECT_TRUE(once.InstanceOf("res-1").deleted);
  EXPECT_TRUE(once.InstanceOf("res-2").deleted);
  EXPECT_FALSE(once.InstanceOf("res-3").deleted);
  EXPECT_FALSE(once.view_.GetInstance("res-4").value());
  EXPECT_EQ(once.Load(kA), 0);
  EXPECT_EQ(once.Load(kB), 1);
  EXPECT_FALSE(once.HasCleanup("res-1"));
  EXPECT_TRUE(once.view_.ListSagas([](const std::string&) { return true; })->empty());
  auto resources = once.view_.ListResources("", 10);
  ASSERT_TRUE(resources);
  ASSERT_EQ(resources->items.size(), 1u);
  EXPECT_EQ(resources->items[0].id, "res-3");
}

TEST(InstanceProjectionTest, CountsAppliedEventsByType) {
  Instances in("/mem/inst-metrics");
  ASSERT_TRUE(in.Apply(CreateSequence("req-1", "cii-1", "res-1", kA)));
  ASSERT_TRUE(in.Apply(CreateSequence("req-2", "cii-2", "res-2", kA)));
  const std::string text = in.metrics_.RenderPrometheus();
  EXPECT_NE(text.find("dcm_events_applied_total{projection=\"instances\",type=\"dcm.resource."
                      "placed\"} 2"),
            std::string::npos)
      << text;
}

// ---- Bad input.

TEST(InstanceProjectionTest, MalformedEventsArePoison) {
  Instances in("/mem/inst-poison");
  Facts f("req-1", "cii-1");
  std::vector<CloudEvent> poison;
  CloudEvent unknown = f.Created("res-1", kA);
  unknown.type = "dcm.service_type_instance.exploded";
  poison.push_back(unknown);
  CloudEvent not_json = f.Created("res-1", kA);
  not_json.data = "{\"instance_id\":";
  poison.push_back(not_json);
  CloudEvent missing = f.Created("res-1", kA);
  missing.data = R"({"request_id":"req-1","root":"cii-1"})";
  poison.push_back(missing);
  CloudEvent wrong_type = f.Placed("res-1", kA);
  wrong_type.data.replace(wrong_type.data.find("\"builtin\""), 9, "42");
  poison.push_back(wrong_type);
  CloudEvent future = f.Started(kCreateCii);
  future.schema_version = kInstanceEventSchemaVersion + 1;
  poison.push_back(future);
  CloudEvent bad_outcome = f.Attempted("res-1", "failed", kCleanupPending, 1);
  bad_outcome.data.replace(bad_outcome.data.find("\"failed\""), 8, "\"maybe\"");
  poison.push_back(bad_outcome);
  for (const auto& e : poison) {
    SCOPED_TRACE(e.type + " " + e.data);
    StoreBatch batch;
    auto status = in.projection_.Apply(e, EventPosition{"dcm.instances", 0, 0, kT0}, batch);
    ASSERT_FALSE(status.has_value());
    EXPECT_EQ(status.error().code, ErrorCode::kCorruption);
    EXPECT_EQ(batch.Count(), 0u);
  }
}

TEST(InstanceProjectionTest, OperationRequestedIsIgnored) {
  Instances in("/mem/inst-requested");
  InstanceEvent request;
  request.type = event_type::kOperationRequested;
  request.source = "dcm/http/test";
  request.root = "cii-1";
  request.operation = kCreateCii;
  request.time_ms = kT0;
  std::vector<std::vector<InstanceEvent>> heard;
  in.projection_.SetListener([&](const std::vector<InstanceEvent>& e) { heard.push_back(e); });
  Facts f("req-1", "cii-2");
  const CloudEvent started = f.Started(kCreateCii);
  ASSERT_TRUE(in.Apply({EncodeInstanceEvent(request), started}));
  EXPECT_FALSE(in.HasSaga("cii-1"));
  ASSERT_EQ(heard.size(), 1u);
  EXPECT_EQ(heard[0], std::vector<InstanceEvent>{Decoded(started)});
}

// ---- SP status.

CloudEvent StatusEvent(const std::string& id, const std::string& status, int64_t time_ms,
                       const std::string& message = "") {
  CloudEvent e;
  e.id = "status-" + id + "-" + std::to_string(time_ms) + "-" + status;
  e.source = "sp-a";
  e.type = "dcm.status.vm";
  e.subject = id;
  e.time = FormatRfc3339Millis(time_ms);
  e.data = R"({"id":")" + id + R"(","status":")" + status + R"(","message":")" + message + "\"}";
  return e;
}

TEST(SpStatusProjectionTest, StoresTheUpperCasedStatus) {
  Instances in("/mem/ss-store");
  ASSERT_TRUE(in.ApplyStatus({StatusEvent("res-1", "running", kT0, "booted")}));
  auto s = in.view_.GetSpStatus("res-1");
  ASSERT_TRUE(s && *s);
  EXPECT_EQ(**s, (SpStatus{"RUNNING", "booted", kT0}));
  EXPECT_FALSE(in.view_.GetSpStatus("res-2").value());
  // Its own key space: nothing under in/.
  EXPECT_EQ(in.Digest(), Instances("/mem/ss-empty").Digest());
}

TEST(SpStatusProjectionTest, NewerStatusWinsAndOlderIsIgnored) {
  Instances in("/mem/ss-newer");
  ASSERT_TRUE(in.ApplyStatus({StatusEvent("res-1", "PROVISIONING", kT0 + 1000),
                              StatusEvent("res-1", "RUNNING", kT0 + 2000),
                              StatusEvent("res-1", "PROVISIONING", kT0 + 1500)}));
  EXPECT_EQ(in.view_.GetSpStatus("res-1").value()->status, "RUNNING");
  ASSERT_TRUE(in.ApplyStatus({StatusEvent("res-1", "FAILED", kT0 + 500)}));
  EXPECT_EQ(in.view_.GetSpStatus("res-1").value()->status, "RUNNING");
  // Same time: the later one (offset) wins.
  ASSERT_TRUE(in.ApplyStatus({StatusEvent("res-1", "STOPPED", kT0 + 2000)}));
  EXPECT_EQ(in.view_.GetSpStatus("res-1").value()->status, "STOPPED");
  ASSERT_TRUE(in.ApplyStatus({StatusEvent("res-1", "DELETING", kT0 + 3000)}));
  EXPECT_EQ(in.view_.GetSpStatus("res-1").value()->time_ms, kT0 + 3000);
}

TEST(SpStatusProjectionTest, ReplayInAnyBatchingIsByteIdentical) {
  std::vector<CloudEvent> events;
  for (int i = 0; i < 6; ++i) {
    events.push_back(StatusEvent("res-" + std::to_string(i % 2), i % 3 ? "RUNNING" : "FAILED",
                                 kT0 + (i * 7 % 5) * 1000));
  }
  Instances one_batch("/mem/ss-one");
  Instances each("/mem/ss-each");
  ASSERT_TRUE(one_batch.ApplyStatus(events));
  for (const auto& e : events) {
    ASSERT_TRUE(each.ApplyStatus({e}));
    ASSERT_TRUE(each.ApplyStatus({e}));
  }
  EXPECT_EQ(one_batch.Digest(SpStatusProjection::kPrefix),
            each.Digest(SpStatusProjection::kPrefix));
}

TEST(SpStatusProjectionTest, MalformedStatusEventsArePoison) {
  Instances in("/mem/ss-poison");
  std::vector<CloudEvent> poison;
  CloudEvent no_type = StatusEvent("res-1", "RUNNING", kT0);
  no_type.type = "dcm.status.";
  poison.push_back(no_type);
  CloudEvent other = StatusEvent("res-1", "RUNNING", kT0);
  other.type = "dcm.provider.registered";
  poison.push_back(other);
  CloudEvent no_id = StatusEvent("res-1", "RUNNING", kT0);
  no_id.data = R"({"status":"RUNNING"})";
  poison.push_back(no_id);
  CloudEvent bad_status = StatusEvent("res-1", "RUNNING", kT0);
  bad_status.data = R"({"id":"res-1","status":7})";
  poison.push_back(bad_status);
  for (const auto& e : poison) {
    SCOPED_TRACE(e.type + " " + e.data);
    StoreBatch batch;
    auto status = in.sp_status_.Apply(e, EventPosition{"dcm.status", 0, 0, kT0}, batch);
    ASSERT_FALSE(status.has_value());
    EXPECT_EQ(status.error().code, ErrorCode::kCorruption);
  }
}

// ---- Lists.

template <typename T, typename List>
std::vector<std::string> Walk(const List& list, size_t page_size, std::vector<size_t>* sizes,
                              std::string (*id_of)(const T&)) {
  std::vector<std::string> ids;
  std::string token;
  do {
    Result<Page<T>> page = list(token, page_size);
    EXPECT_TRUE(page.has_value()) << page.error().message;
    if (!page) break;
    sizes->push_back(page->items.size());
    for (const auto& item : page->items) ids.push_back(id_of(item));
    token = page->next_page_token;
    EXPECT_EQ(token.find("-"), std::string::npos) << "token should be opaque: " << token;
  } while (!token.empty());
  return ids;
}

class InstanceViewListTest : public testing::Test {
 protected:
  void SetUp() override {
    // cii-1..5 on res-1..5: odd ones on sp-a, even on sp-b; res-2 and res-4 deleted; res-6 a
    // database instance on sp-a; cleanup records for res-1 (PENDING), res-3 (FAILED), res-5
    // (PENDING_PROVIDER), res-6 (PENDING, another root).
    for (int i = 1; i <= 5; ++i) {
      const std::string n = std::to_string(i);
      ASSERT_TRUE(in_.Apply(
          CreateSequence("req-" + n, "cii-" + n, "res-" + n, i % 2 ? kA : kB, kT0 + i * 1000)));
    }
    Facts f("", "cii-2", kT0 + 50000);
    Facts g("", "cii-4", kT0 + 50000);
    Facts h("req-6", "res-6", kT0 + 50000);
    ASSERT_TRUE(in_.Apply({f.Deleted("res-2", kB), g.Deleted("res-4", kB),
                           h.Created("res-6", kA, "READY", "database")}));
    Facts q1("", "cii-1", kT0 + 60000), q3("", "cii-3", kT0 + 60000), q5("", "cii-5", kT0 + 60000),
        q6("", "res-6", kT0 + 60000);
    ASSERT_TRUE(
        in_.Apply({q1.Enqueued("res-1", kA), q3.Enqueued("res-3", kA), q3.CleanupFailed("res-3", 3),
                   q5.Enqueued("res-5", kA), q5.Parked("res-5", kA), q6.Enqueued("res-6", kA)}));
    // Two sagas in progress.
    ASSERT_TRUE(in_.Apply({Facts("req-7", "cii-7").Started(kCreateCii),
                           Facts("req-8", "cii-8").Started(kCreateCii)}));
  }
  Instances in_{"/mem/inst-list"};
};

std::string CiiId(const CatalogItemInstance& c) { return c.id; }
std::string ResourceId(const Resource& r) { return r.id; }
std::string InstanceId(const ServiceTypeInstance& s) { return s.id; }
std::string CleanupId(const CleanupRecord& q) { return q.instance_id; }

TEST_F(InstanceViewListTest, CatalogItemInstancesPageInIdOrder) {
  std::vector<size_t> sizes;
  auto ids = Walk<CatalogItemInstance>(
      [&](const std::string& t, size_t n) { return in_.view_.ListCatalogItemInstances(t, n); }, 2,
      &sizes, &CiiId);
  EXPECT_EQ(ids, (std::vector<std::string>{"cii-1", "cii-2", "cii-3", "cii-4", "cii-5"}));
  EXPECT_EQ(sizes, (std::vector<size_t>{2, 2, 1}));
}

TEST_F(InstanceViewListTest, ResourcesPageInIdOrder) {
  std::vector<size_t> sizes;
  auto ids =
      Walk<Resource>([&](const std::string& t, size_t n) { return in_.view_.ListResources(t, n); },
                     3, &sizes, &ResourceId);
  // Deleted instances took their placements with them.
  EXPECT_EQ(ids, (std::vector<std::string>{"res-1", "res-3", "res-5"}));
  EXPECT_EQ(sizes, (std::vector<size_t>{3}));
}

TEST_F(InstanceViewListTest, InstancesHideDeletedUnlessAsked) {
  std::vector<size_t> sizes;
  auto live = Walk<ServiceTypeInstance>(
      [&](const std::string& t, size_t n) { return in_.view_.ListInstances({}, t, n); }, 2, &sizes,
      &InstanceId);
  EXPECT_EQ(live, (std::vector<std::string>{"res-1", "res-3", "res-5", "res-6"}));
  EXPECT_EQ(sizes, (std::vector<size_t>{2, 2}));
  sizes.clear();
  InstanceFilter all;
  all.show_deleted = true;
  auto every = Walk<ServiceTypeInstance>(
      [&](const std::string& t, size_t n) { return in_.view_.ListInstances(all, t, n); }, 4, &sizes,
      &InstanceId);
  EXPECT_EQ(every,
            (std::vector<std::string>{"res-1", "res-2", "res-3", "res-4", "res-5", "res-6"}));
  EXPECT_EQ(sizes, (std::vector<size_t>{4, 2}));
}

TEST_F(InstanceViewListTest, InstancesFilterByProviderAndServiceType) {
  std::vector<size_t> sizes;
  InstanceFilter on_a;
  on_a.provider = "sp-a";
  auto a = Walk<ServiceTypeInstance>(
      [&](const std::string& t, size_t n) { return in_.view_.ListInstances(on_a, t, n); }, 1,
      &sizes, &InstanceId);
  EXPECT_EQ(a, (std::vector<std::string>{"res-1", "res-3", "res-5", "res-6"}));
  InstanceFilter b_deleted;
  b_deleted.provider = "sp-b";
  b_deleted.show_deleted = true;
  auto b = Walk<ServiceTypeInstance>(
      [&](const std::string& t, size_t n) { return in_.view_.ListInstances(b_deleted, t, n); }, 10,
      &sizes, &InstanceId);
  EXPECT_EQ(b, (std::vector<std::string>{"res-2", "res-4"}));
  InstanceFilter db;
  db.service_type = "database";
  auto d = Walk<ServiceTypeInstance>(
      [&](const std::string& t, size_t n) { return in_.view_.ListInstances(db, t, n); }, 10, &sizes,
      &InstanceId);
  EXPECT_EQ(d, std::vector<std::string>{"res-6"});
  InstanceFilter vm_on_b;
  vm_on_b.provider = "sp-b";
  vm_on_b.service_type = "vm";
  auto none = in_.view_.ListInstances(vm_on_b, "", 10);
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->items.empty());
  EXPECT_TRUE(none->next_page_token.empty());
}

TEST_F(InstanceViewListTest, CleanupQueueFiltersByStatus) {
  std::vector<size_t> sizes;
  auto list = [&](const std::string& status) {
    return Walk<CleanupRecord>(
        [&](const std::string& t, size_t n) { return in_.view_.ListCleanup(status, t, n); }, 1,
        &sizes, &CleanupId);
  };
  EXPECT_EQ(list(""), (std::vector<std::string>{"res-1", "res-3", "res-5", "res-6"}));
  EXPECT_EQ(list("PENDING"), (std::vector<std::string>{"res-1", "res-6"}));
  EXPECT_EQ(list("FAILED"), std::vector<std::string>{"res-3"});
  EXPECT_EQ(list("PENDING_PROVIDER"), std::vector<std::string>{"res-5"});
  EXPECT_TRUE(list("BOGUS").empty());
}

TEST_F(InstanceViewListTest, FullLastPageHasNoToken) {
  auto page = in_.view_.ListCatalogItemInstances("", 5);
  ASSERT_TRUE(page);
  EXPECT_EQ(page->items.size(), 5u);
  EXPECT_TRUE(page->next_page_token.empty());
}

TEST_F(InstanceViewListTest, RejectsTokensItDidNotIssue) {
  for (const char* token : {"zz", "abc", "1z", "not-a-token"}) {
    SCOPED_TRACE(token);
    auto page = in_.view_.ListInstances({}, token, 10);
    ASSERT_FALSE(page.has_value());
    EXPECT_EQ(page.error().code, ErrorCode::kInvalidArgument);
    ASSERT_EQ(page.error().fields.size(), 1u);
    EXPECT_EQ(page.error().fields[0].field, "page_token");
  }
}

TEST_F(InstanceViewListTest, SagasAndCleanupRecordsOfTheAcceptedRoots) {
  auto sagas = in_.view_.ListSagas([](const std::string& root) { return root == "cii-8"; });
  ASSERT_TRUE(sagas);
  ASSERT_EQ(sagas->size(), 1u);
  EXPECT_EQ((*sagas)[0].started.request_id, "req-8");
  auto all = in_.view_.ListSagas([](const std::string&) { return true; });
  ASSERT_TRUE(all);
  EXPECT_EQ(all->size(), 2u);

  auto records = in_.view_.ListCleanupFor(
      [](const std::string& root) { return root == "cii-3" || root == "res-6"; });
  ASSERT_TRUE(records);
  std::vector<std::string> ids;
  for (const auto& q : *records) ids.push_back(q.instance_id);
  EXPECT_EQ(ids, (std::vector<std::string>{"res-3", "res-6"}));
}

}  // namespace
}  // namespace dcm
