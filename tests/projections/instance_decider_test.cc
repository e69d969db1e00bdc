// InstanceDecider: every decision rule of the instance worker (SPEC §3.3) without Kafka. The
// state is an in-memory store (the projection as of a takeover) plus the facts the decider is
// told were acknowledged (Apply); AppliedOffsets stands in for the projection runner. No clock,
// no sleeps.
#include "projections/instance_decider.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "projections/instance_fold.h"
#include "projections/instance_records.h"

namespace dcm {
namespace {

using Kind = InstanceDecision::Kind;

constexpr char kTopic[] = "dcm.instances";
constexpr int64_t kT0 = 1767225600000;  // 2026-01-01T00:00:00.000Z

std::unique_ptr<Store> OpenInMemory() {
  auto store = Store::Open("/decider", StoreOptions{.bulk_load = false, .in_memory = true});
  EXPECT_TRUE(store.has_value()) << store.error().message;
  return store ? std::move(*store) : nullptr;
}

InstanceEvent Request(Operation op, const std::string& request_id, const std::string& root) {
  InstanceEvent r;
  r.type = event_type::kOperationRequested;
  r.operation = OperationName(op);
  r.request_id = request_id;
  r.root = root;
  r.actor = "alice";
  r.spec = R"({"service_type":"vm"})";
  return r;
}

InstanceEvent CreateCii(const std::string& request_id, const std::string& cii,
                        const std::string& resource) {
  InstanceEvent r = Request(Operation::kCreateCatalogItemInstance, request_id, cii);
  r.catalog_item_instance_id = cii;
  r.resource_id = resource;
  return r;
}

InstanceEvent RehydrateCii(const std::string& request_id, const std::string& cii,
                           const std::string& old_resource, const std::string& new_resource) {
  InstanceEvent r = Request(Operation::kRehydrateCatalogItemInstance, request_id, cii);
  r.catalog_item_instance_id = cii;
  r.old_resource_id = old_resource;
  r.new_resource_id = new_resource;
  return r;
}

InstanceEvent Fact(const char* type, const InstanceEvent& started) {
  InstanceEvent f;
  f.type = type;
  f.request_id = started.request_id;
  f.root = started.root;
  f.operation = started.operation;
  f.time_ms = kT0;
  return f;
}

class InstanceDeciderTest : public testing::Test {
 protected:
  // Acknowledges `fact` at the next offset of partition 0, as the worker produced it.
  void Ack(InstanceEvent fact) {
    fact.source = "dcm/instance-worker/test";
    fact.time_ms = kT0;
    auto typed = ToInstanceFact(fact);
    ASSERT_TRUE(typed) << typed.error().message;
    auto applied = decider_.Apply(*typed, 0, next_offset_++);
    ASSERT_TRUE(applied) << applied.error().message;
    acked_.push_back(std::move(fact));
  }

  // The projection applies the first `n` acknowledged facts (to the store) and says so.
  void ProjectionApplies(size_t n) {
    StoreBatch batch;
    DecodedCache<Saga> sagas(&instance_records::DecodeSaga, 10);
    for (size_t i = 0; i < n; ++i) {
      auto typed = ToInstanceFact(acked_[i]);
      ASSERT_TRUE(typed);
      ASSERT_TRUE(FoldInstanceFact(store_.get(), batch, sagas, *typed));
    }
    ASSERT_TRUE(store_->Write(batch));
    applied_.Publish(InstanceProjection::kName, kTopic, 0, static_cast<int64_t>(n));
  }

  InstanceDecision Decide(const InstanceEvent& request, const StartedInBatch& batch = {}) {
    auto d = decider_.Decide(request, batch);
    EXPECT_TRUE(d) << d.error().message;
    return d ? std::move(*d) : InstanceDecision{};
  }

  // Decides `request`, which must start, and acknowledges its operation_started.
  InstanceEvent Start(const InstanceEvent& request) {
    InstanceDecision d = Decide(request);
    EXPECT_EQ(d.kind, Kind::kStarted) << d.fact.error;
    Ack(d.fact);
    return d.fact;
  }

  // The facts of a successful create of `started`'s resource on provider p1, then its outcome.
  void CompleteCreate(const InstanceEvent& started) {
    InstanceEvent placed = Fact(event_type::kResourcePlaced, started);
    placed.resource_id = started.resource_id;
    placed.catalog_item_instance_id = started.catalog_item_instance_id;
    placed.provider_name = "p1";
    placed.provider_id = "id-p1";
    Ack(placed);
    InstanceEvent created = Fact(event_type::kInstanceCreated, started);
    created.instance_id = started.resource_id;
    created.provider_name = "p1";
    created.provider_id = "id-p1";
    created.status = "PROVISIONING";
    Ack(created);
    if (!started.catalog_item_instance_id.empty()) {
      InstanceEvent cii = Fact(event_type::kCatalogItemInstanceCreated, started);
      cii.catalog_item_instance_id = started.catalog_item_instance_id;
      cii.resource_id = started.resource_id;
      cii.provider_name = "p1";
      Ack(cii);
    }
    Ack(Fact(event_type::kOperationCompleted, started));
  }

  // A catalog item instance `cii` on resource `resource`, created and completed.
  void Existing(const std::string& cii, const std::string& resource) {
    CompleteCreate(Start(CreateCii("req-" + cii, cii, resource)));
  }

  // The facts of a completed rehydration of `started` (old -> new resource).
  void CompleteRehydration(const InstanceEvent& started) {
    InstanceEvent placed = Fact(event_type::kResourcePlaced, started);
    placed.resource_id = started.new_resource_id;
    placed.catalog_item_instance_id = started.catalog_item_instance_id;
    placed.provider_id = "id-p1";
    Ack(placed);
    InstanceEvent created = Fact(event_type::kInstanceCreated, started);
    created.instance_id = started.new_resource_id;
    created.provider_id = "id-p1";
    Ack(created);
    InstanceEvent deleted = Fact(event_type::kResourceDeleted, started);
    deleted.resource_id = started.old_resource_id;
    Ack(deleted);
    InstanceEvent moved = Fact(event_type::kCatalogItemInstanceRehydrated, started);
    moved.catalog_item_instance_id = started.catalog_item_instance_id;
    moved.old_resource_id = started.old_resource_id;
    moved.new_resource_id = started.new_resource_id;
    Ack(moved);
    Ack(Fact(event_type::kOperationCompleted, started));
  }

  void ExpectFailure(const InstanceDecision& d, int status, const std::string& reason) {
    EXPECT_EQ(d.kind, Kind::kFailed);
    EXPECT_EQ(d.fact.type, event_type::kOperationFailed);
    EXPECT_EQ(d.fact.http_status, status) << d.fact.error;
    EXPECT_EQ(d.fact.reason, reason) << d.fact.error;
  }

  std::unique_ptr<Store> store_ = OpenInMemory();
  AppliedOffsets applied_;
  InstanceDecider decider_{store_.get(), &applied_, kTopic};
  int64_t next_offset_ = 0;
  std::vector<InstanceEvent> acked_;
};

// ---- duplicates and the busy root ----------------------------------------------------------

TEST_F(InstanceDeciderTest, StartsANewOperationAsOperationStartedCarryingItsParameters) {
  InstanceDecision d = Decide(CreateCii("r1", "c1", "res-1"));
  ASSERT_EQ(d.kind, Kind::kStarted);
  EXPECT_EQ(d.fact.type, event_type::kOperationStarted);
  EXPECT_EQ(d.fact.request_id, "r1");
  EXPECT_EQ(d.fact.resource_id, "res-1");
  EXPECT_EQ(d.saga.started, d.fact);
  EXPECT_TRUE(d.saga.steps.empty());
}

TEST_F(InstanceDeciderTest, AnUnreadableRecordIsAnErrorNotAConflictOrNotFound) {
  StoreBatch batch;
  batch.Put(instance_records::Key(instance_records::kResourceKey, "r-bad"), "{not json");
  ASSERT_TRUE(store_->Write(batch));
  InstanceEvent create = Request(Operation::kCreateResource, "req-1", "r-bad");
  create.resource_id = "r-bad";
  EXPECT_FALSE(decider_.Decide(create)) << "a read error decides nothing (the request is read "
                                           "again), it is not 'id taken'";
  InstanceEvent remove = Request(Operation::kDeleteResource, "req-2", "r-bad");
  remove.resource_id = "r-bad";
  EXPECT_FALSE(CheckOperation(InstanceView(store_.get()), remove)) << "nor 'not found'";
}

TEST_F(InstanceDeciderTest, SkipsARequestWhoseOutcomeIsRecorded) {
  const InstanceEvent request = CreateCii("r1", "c1", "res-1");
  CompleteCreate(Start(request));
  EXPECT_EQ(Decide(request).kind, Kind::kDuplicate);
}

TEST_F(InstanceDeciderTest, SkipsARequestThatFailedBefore) {
  const InstanceEvent request = Request(Operation::kDeleteResource, "r1", "res-x");
  InstanceDecision failed = Decide(request);
  ExpectFailure(failed, 404, "not_found");
  Ack(failed.fact);
  EXPECT_EQ(Decide(request).kind, Kind::kDuplicate);
}

TEST_F(InstanceDeciderTest, ResumesARequestWhoseSagaIsInProgressInsteadOfStartingItAgain) {
  const InstanceEvent request = CreateCii("r1", "c1", "res-1");
  const InstanceEvent started = Start(request);
  InstanceEvent placed = Fact(event_type::kResourcePlaced, started);
  placed.resource_id = "res-1";
  placed.provider_id = "id-p1";
  Ack(placed);
  InstanceDecision d = Decide(request);
  ASSERT_EQ(d.kind, Kind::kResume);
  EXPECT_EQ(d.saga.started.request_id, "r1");
  EXPECT_EQ(d.saga.steps, std::vector<std::string>{event_type::kResourcePlaced});
}

TEST_F(InstanceDeciderTest, SkipsACopyOfARequestStartedEarlierInTheSameBatch) {
  const InstanceEvent request = CreateCii("r1", "c1", "res-1");
  EXPECT_EQ(Decide(request, {{"c1", "r1"}}).kind, Kind::kDuplicate);
}

TEST_F(InstanceDeciderTest, FailsARequestOnARootWithAnOperationInProgressWith409) {
  Start(CreateCii("r1", "c1", "res-1"));
  InstanceDecision d = Decide(CreateCii("r2", "c1", "res-2"));
  ExpectFailure(d, 409, "conflict");
  EXPECT_NE(d.fact.error.find("request r1"), std::string::npos) << d.fact.error;
  EXPECT_EQ(d.fact.root, "c1");
  EXPECT_EQ(d.fact.request_id, "r2");
}

TEST_F(InstanceDeciderTest, FailsARequestOnARootStartedEarlierInTheSameBatchWith409) {
  ExpectFailure(Decide(CreateCii("r2", "c1", "res-2"), {{"c1", "r1"}}), 409, "conflict");
}

TEST_F(InstanceDeciderTest, FreesTheRootAsSoonAsTheOutcomeIsAcknowledged) {
  Existing("c1", "res-1");
  // No projection has applied anything (AppliedOffsets is empty): the decider's own facts are
  // its state.
  EXPECT_EQ(Decide(RehydrateCii("r2", "c1", "res-1", "res-2")).kind, Kind::kStarted);
}

// ---- rehydrations ---------------------------------------------------------------------------

TEST_F(InstanceDeciderTest, ConcurrentRehydrationsOfOneGenerationLetExactlyOneProceed) {
  Existing("c1", "res-1");
  const InstanceEvent first = Start(RehydrateCii("r2", "c1", "res-1", "res-2"));
  EXPECT_EQ(first.old_resource_id, "res-1");
  // While the first runs, the others of its generation find the root busy ...
  ExpectFailure(Decide(RehydrateCii("r3", "c1", "res-1", "res-3")), 409, "conflict");
  CompleteRehydration(first);
  // ... and once it is done they name a resource that was replaced.
  InstanceDecision late = Decide(RehydrateCii("r4", "c1", "res-1", "res-4"));
  ExpectFailure(late, 409, "conflict");
  EXPECT_NE(late.fact.error.find("rehydrated meanwhile"), std::string::npos) << late.fact.error;
  // The next generation proceeds.
  InstanceDecision next = Decide(RehydrateCii("r5", "c1", "res-2", "res-5"));
  ASSERT_EQ(next.kind, Kind::kStarted) << next.fact.error;
  EXPECT_EQ(next.fact.old_resource_id, "res-2");
}

TEST_F(InstanceDeciderTest, RehydrationWithoutANamedResourceReplacesTheCurrentOne) {
  Existing("c1", "res-1");
  InstanceDecision d = Decide(RehydrateCii("r2", "c1", "", "res-2"));
  ASSERT_EQ(d.kind, Kind::kStarted);
  EXPECT_EQ(d.fact.old_resource_id, "res-1");
}

TEST_F(InstanceDeciderTest, RehydrateResourceMovesTheCatalogReferenceOnlyIfItPointsThere) {
  Existing("c1", "res-1");
  InstanceEvent request = Request(Operation::kRehydrateResource, "r2", "c1");
  request.resource_id = "res-1";
  request.new_resource_id = "res-2";
  request.catalog_item_instance_id = "ignored";
  InstanceDecision d = Decide(request);
  ASSERT_EQ(d.kind, Kind::kStarted) << d.fact.error;
  EXPECT_EQ(d.fact.old_resource_id, "res-1");
  EXPECT_EQ(d.fact.catalog_item_instance_id, "c1");
}

TEST_F(InstanceDeciderTest, RecoveringALostResourceRehydratesItLikeARehydrationOrOnlyMarksIt) {
  Existing("c1", "res-1");
  InstanceEvent request = Request(Operation::kRecoverLostResource, "r2", "c1");
  request.resource_id = "res-1";
  request.new_resource_id = "res-2";
  InstanceDecision d = Decide(request);
  ASSERT_EQ(d.kind, Kind::kStarted) << d.fact.error;
  EXPECT_EQ(d.fact.old_resource_id, "res-1");
  EXPECT_EQ(d.fact.catalog_item_instance_id, "c1");
  request.new_resource_id.clear();
  EXPECT_EQ(Decide(request).kind, Kind::kStarted);
  request.resource_id = "res-9";
  ExpectFailure(Decide(request), 404, "not_found");
}

TEST_F(InstanceDeciderTest, DeleteCatalogItemInstanceTargetsItsCurrentResource) {
  Existing("c1", "res-1");
  InstanceEvent request = Request(Operation::kDeleteCatalogItemInstance, "r2", "c1");
  request.catalog_item_instance_id = "c1";
  InstanceDecision d = Decide(request);
  ASSERT_EQ(d.kind, Kind::kStarted);
  EXPECT_EQ(d.fact.resource_id, "res-1");
}

// ---- unknown entities and taken ids ----------------------------------------------------------

TEST_F(InstanceDeciderTest, FailsOperationsOnUnknownEntitiesWith404) {
  InstanceEvent cii = Request(Operation::kDeleteCatalogItemInstance, "r1", "c9");
  cii.catalog_item_instance_id = "c9";
  ExpectFailure(Decide(cii), 404, "not_found");
  ExpectFailure(Decide(RehydrateCii("r2", "c9", "", "res-2")), 404, "not_found");
  InstanceEvent resource = Request(Operation::kRehydrateResource, "r3", "res-9");
  resource.resource_id = "res-9";
  resource.new_resource_id = "res-10";
  ExpectFailure(Decide(resource), 404, "not_found");
  InstanceEvent instance = Request(Operation::kDeleteServiceTypeInstance, "r4", "i-9");
  instance.instance_id = "i-9";
  ExpectFailure(Decide(instance), 404, "not_found");
  InstanceEvent retry = Request(Operation::kRetryCleanup, "r5", "i-9");
  retry.instance_id = "i-9";
  ExpectFailure(Decide(retry), 404, "not_found");
}

TEST_F(InstanceDeciderTest, FailsCreatesOfTakenIdsWith409) {
  Existing("c1", "res-1");
  ExpectFailure(Decide(CreateCii("r2", "c1", "res-2")), 409, "conflict");  // the cii id
  ExpectFailure(Decide(CreateCii("r3", "c2", "res-1")), 409, "conflict");  // its resource id
  InstanceEvent resource = Request(Operation::kCreateResource, "r4", "res-1");
  resource.resource_id = "res-1";
  ExpectFailure(Decide(resource), 409, "conflict");
  InstanceEvent instance = Request(Operation::kCreateServiceTypeInstance, "r5", "res-1");
  instance.instance_id = "res-1";  // an instance id a resource's instance uses
  ExpectFailure(Decide(instance), 409, "conflict");
  ExpectFailure(Decide(RehydrateCii("r6", "c1", "res-1", "res-1")), 409, "conflict");
}

TEST_F(InstanceDeciderTest, DeletedServiceTypeInstanceIsNotFound) {
  InstanceEvent create = Request(Operation::kCreateServiceTypeInstance, "r1", "i-1");
  create.instance_id = "i-1";
  const InstanceEvent started = Start(create);
  InstanceEvent created = Fact(event_type::kInstanceCreated, started);
  created.instance_id = "i-1";
  created.provider_id = "id-p1";
  Ack(created);
  Ack(Fact(event_type::kOperationCompleted, started));
  InstanceEvent remove = Request(Operation::kDeleteServiceTypeInstance, "r2", "i-1");
  remove.instance_id = "i-1";
  const InstanceEvent removing = Start(remove);
  InstanceEvent deleted = Fact(event_type::kInstanceDeleted, removing);
  deleted.instance_id = "i-1";
  Ack(deleted);
  Ack(Fact(event_type::kOperationCompleted, removing));
  InstanceEvent again = Request(Operation::kDeleteServiceTypeInstance, "r3", "i-1");
  again.instance_id = "i-1";
  ExpectFailure(Decide(again), 404, "not_found");
}

TEST_F(InstanceDeciderTest, RetriesOnlyACleanupRecordThatFailed) {
  InstanceEvent enqueued;
  enqueued.type = event_type::kCleanupEnqueued;
  enqueued.root = "c1";
  enqueued.instance_id = "res-1";
  enqueued.provider_id = "id-p1";
  enqueued.time_ms = kT0;
  Ack(enqueued);
  InstanceEvent retry = Request(Operation::kRetryCleanup, "r1", "c1");
  retry.instance_id = "res-1";
  ExpectFailure(Decide(retry), 409, "conflict");
  InstanceEvent failed;
  failed.type = event_type::kCleanupFailed;
  failed.root = "c1";
  failed.instance_id = "res-1";
  failed.retry_count = 10;
  failed.time_ms = kT0;
  Ack(failed);
  EXPECT_EQ(Decide(retry).kind, Kind::kStarted);
}

TEST_F(InstanceDeciderTest, FailsAnUnknownOperationWith400) {
  InstanceEvent request = CreateCii("r1", "c1", "res-1");
  request.operation = "teleport";
  ExpectFailure(Decide(request), 400, "invalid");
}

// ---- the state: the projection at takeover plus own acknowledged facts -----------------------

TEST_F(InstanceDeciderTest, DecidesFromWhatTheProjectionHeldAtTakeover) {
  // Another owner's facts, applied by the local projection before this decider took over.
  StoreBatch batch;
  DecodedCache<Saga> sagas(&instance_records::DecodeSaga, 10);
  InstanceEvent started = CreateCii("r1", "c1", "res-1");
  started.type = event_type::kOperationStarted;
  started.source = "dcm/instance-worker/other";
  started.time_ms = kT0;
  auto typed = ToInstanceFact(started);
  ASSERT_TRUE(typed);
  ASSERT_TRUE(FoldInstanceFact(store_.get(), batch, sagas, *typed));
  ASSERT_TRUE(store_->Write(batch));
  InstanceDecision d = Decide(CreateCii("r2", "c1", "res-2"));
  ExpectFailure(d, 409, "conflict");
  EXPECT_EQ(Decide(CreateCii("r1", "c1", "res-1")).kind, Kind::kResume);
}

TEST_F(InstanceDeciderTest, DropsItsOverlayOnlyOnceTheProjectionAppliedEveryFactInIt) {
  Existing("c1", "res-1");  // offsets 0..4 of partition 0
  ASSERT_GT(decider_.OverlaySize(), 0u);
  applied_.Publish(InstanceProjection::kName, kTopic, 0, 3);
  EXPECT_FALSE(decider_.Compact());
  EXPECT_GT(decider_.OverlaySize(), 0u);
  applied_.Publish(InstanceProjection::kName, kTopic, 0, next_offset_);
  EXPECT_TRUE(decider_.Compact());
  EXPECT_EQ(decider_.OverlaySize(), 0u);
}

TEST_F(InstanceDeciderTest, KeepsTheFactsTheProjectionHasNotAppliedWhenItDropsTheOthers) {
  Existing("c1", "res-1");                                                          // offsets 0..4
  const InstanceEvent started = Start(RehydrateCii("r2", "c1", "res-1", "res-2"));  // 5
  ProjectionApplies(5);
  EXPECT_FALSE(decider_.Compact());  // the operation_started is not applied yet
  ExpectFailure(Decide(CreateCii("r3", "c1", "res-3")), 409, "conflict");  // busy (overlay)
  InstanceDecision resumed = Decide(RehydrateCii("r2", "c1", "res-1", "res-2"));
  EXPECT_EQ(resumed.kind, Kind::kResume);
  CompleteRehydration(started);
  ProjectionApplies(acked_.size());
  EXPECT_TRUE(decider_.Compact());
  ExpectFailure(Decide(RehydrateCii("r4", "c1", "res-1", "res-4")), 409, "conflict");
  EXPECT_EQ(Decide(RehydrateCii("r5", "c1", "res-2", "res-5")).kind, Kind::kStarted);
}

TEST_F(InstanceDeciderTest, AForcedCompactionAtTakeoverLetsTheStoreShowWhatAnotherOwnerDidSince) {
  Existing("c1", "res-1");  // offsets 0..4: c1's saga started and ended (deleted in the overlay)
  for (int i = 2; i <= 7; ++i) {  // 5..10: not applied yet, the larger part of the overlay
    Start(CreateCii("r" + std::to_string(i), "c" + std::to_string(i), "res-" + std::to_string(i)));
  }
  ProjectionApplies(5);
  // Meanwhile another owner of c1's partition started a rehydration of c1 (in the store now).
  InstanceEvent other = RehydrateCii("other", "c1", "res-1", "res-9");
  other.type = event_type::kOperationStarted;
  other.source = "dcm/instance-worker/b";
  other.time_ms = kT0;
  auto typed = ToInstanceFact(other);
  ASSERT_TRUE(typed) << typed.error().message;
  StoreBatch batch;
  DecodedCache<Saga> sagas(&instance_records::DecodeSaga, 10);
  ASSERT_TRUE(FoldInstanceFact(store_.get(), batch, sagas, *typed));
  ASSERT_TRUE(store_->Write(batch));
  EXPECT_FALSE(decider_.Compact());  // most of the overlay is unapplied: kept as it is
  EXPECT_FALSE(decider_.Compact(/*force=*/true));  // drops the 5 applied facts, keeps 6
  ExpectFailure(Decide(RehydrateCii("r9", "c1", "res-1", "res-10")), 409, "conflict");  // busy
}

TEST_F(InstanceDeciderTest, ALargeOverlayIsRebuiltFromItsUnappliedFactsOnceMostAreApplied) {
  for (int i = 0; i < 210; ++i) {  // over a thousand facts
    Existing("c" + std::to_string(i), "res-" + std::to_string(i));
  }
  Start(RehydrateCii("r", "c0", "res-0", "res-new"));
  const size_t before = decider_.OverlaySize();
  ProjectionApplies(acked_.size() - 1);  // all but the operation_started
  EXPECT_FALSE(decider_.Compact());      // the operation_started stays
  EXPECT_LT(decider_.OverlaySize(), before / 100);
  ExpectFailure(Decide(RehydrateCii("r2", "c0", "res-0", "res-new-2")), 409, "conflict");  // busy
  const InstanceDecision other = Decide(RehydrateCii("r3", "c1", "res-1", "res-new-1"));
  EXPECT_EQ(other.kind, Kind::kStarted) << other.fact.error << " " << other.fact.reason;
}

TEST_F(InstanceDeciderTest, CompactByGivesUpAtItsDeadlineWhenTheProjectionIsBehind) {
  Existing("c1", "res-1");
  EXPECT_FALSE(decider_.CompactBy(std::chrono::steady_clock::now(), [] { return true; }));
  applied_.Publish(InstanceProjection::kName, kTopic, 0, next_offset_);
  EXPECT_TRUE(decider_.CompactBy(std::chrono::steady_clock::now(), [] { return true; }));
}

// ---- placement and policy outcomes ------------------------------------------------------------

PlacementCandidate Candidate(const std::string& name, HealthStatus health = HealthStatus::kReady,
                             int64_t live = 0) {
  PlacementCandidate c;
  c.provider.id = "id-" + name;
  c.provider.spec.name = name;
  c.provider.spec.service_type = "vm";
  c.provider.spec.metadata = "{}";
  c.health = health;
  c.live_instances = live;
  return c;
}

const std::string kIntent = R"({"service_type":"vm"})";

std::string ChosenName(const PlacementDecision& d) {
  return d.chosen ? d.chosen->provider.spec.name : "<none>";
}

TEST(InstancePlacementTest, WithoutAPolicyManagerTheBuiltInPolicyChoosesTheLeastLoaded) {
  const std::vector<PlacementCandidate> cs = {Candidate("a", HealthStatus::kReady, 3),
                                              Candidate("b", HealthStatus::kReady, 1)};
  PlacementDecision d = DecidePlacement(kIntent, nullptr, cs);
  ASSERT_FALSE(d.failure);
  EXPECT_EQ(ChosenName(d), "b");
  EXPECT_EQ(d.policy, "builtin");
  EXPECT_EQ(d.spec, kIntent);
}

TEST(InstancePlacementTest, PolicyVerdictsMapToHttpStatuses) {
  const std::vector<PlacementCandidate> cs = {Candidate("a")};
  struct Case {
    Result<PolicyDecision> verdict;
    int status;
    const char* reason;
  };
  PolicyDecision rejected;
  rejected.verdict = PolicyDecision::Verdict::kRejected;
  rejected.detail = "quota exceeded";
  PolicyDecision conflict;
  conflict.verdict = PolicyDecision::Verdict::kConflict;
  const std::vector<Case> cases = {
      {rejected, 406, "policy_rejected"},
      {conflict, 409, "policy_conflict"},
      {MakeError(ErrorCode::kUnavailable, "answered 500"), 503, "policy_unavailable"},
      {MakeError(ErrorCode::kTimeout, "no answer within 5s"), 503, "policy_unavailable"},
  };
  for (const auto& c : cases) {
    PlacementDecision d = DecidePlacement(kIntent, &c.verdict, cs);
    ASSERT_TRUE(d.failure);
    EXPECT_EQ(d.failure->http_status, c.status);
    EXPECT_EQ(d.failure->reason, c.reason);
  }
}

TEST(InstancePlacementTest, ThePolicyManagersSpecAndChoiceAreHonouredOnlyIfReady) {
  const std::vector<PlacementCandidate> cs = {Candidate("a"),
                                              Candidate("b", HealthStatus::kUnavailable)};
  PolicyDecision approved;
  approved.spec = R"({"service_type":"vm","memory":"4GB"})";
  approved.selected_provider = "a";
  Result<PolicyDecision> verdict = approved;
  PlacementDecision d = DecidePlacement(kIntent, &verdict, cs);
  ASSERT_FALSE(d.failure);
  EXPECT_EQ(ChosenName(d), "a");
  EXPECT_EQ(d.spec, approved.spec);
  EXPECT_EQ(d.policy, "policy_manager");

  approved.selected_provider = "b";
  verdict = approved;
  PlacementDecision not_ready = DecidePlacement(kIntent, &verdict, cs);
  ASSERT_TRUE(not_ready.failure);
  EXPECT_EQ(not_ready.failure->http_status, 503);
  EXPECT_EQ(not_ready.failure->reason, "no_ready_provider");
}

TEST(InstancePlacementTest, NoMatchingProviderIs422AndABadSpecIs400) {
  const std::vector<PlacementCandidate> cs = {Candidate("a")};
  PlacementDecision none = DecidePlacement(R"({"service_type":"db"})", nullptr, cs);
  ASSERT_TRUE(none.failure);
  EXPECT_EQ(none.failure->http_status, 422);
  EXPECT_EQ(none.failure->reason, "no_provider");
  PlacementDecision bad = DecidePlacement("[]", nullptr, cs);
  ASSERT_TRUE(bad.failure);
  EXPECT_EQ(bad.failure->http_status, 400);
  EXPECT_EQ(bad.failure->reason, "invalid_spec");
  PlacementDecision down =
      DecidePlacement(kIntent, nullptr, {Candidate("a", HealthStatus::kUnhealthy)});
  ASSERT_TRUE(down.failure);
  EXPECT_EQ(down.failure->http_status, 503);
}

TEST(InstancePlacementTest, ANamedProviderMustExistAndBeReady) {
  Provider p;
  p.spec.name = "a";
  EXPECT_EQ(CheckNamedProvider("a", std::nullopt, HealthStatus::kPending)->http_status, 422);
  auto not_ready = CheckNamedProvider("a", p, HealthStatus::kUnavailable);
  ASSERT_TRUE(not_ready);
  EXPECT_EQ(not_ready->http_status, 503);
  EXPECT_EQ(not_ready->reason, "provider_not_ready");
  EXPECT_FALSE(CheckNamedProvider("a", p, HealthStatus::kReady));
}

}  // namespace
}  // namespace dcm
