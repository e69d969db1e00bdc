#include "projections/provider_decider.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "src/common/clock.h"
#include "src/common/time_format.h"
#include "src/common/uuid.h"

namespace dcm {
namespace {

ProviderSpec Spec(const std::string& name, const std::string& endpoint = "") {
  ProviderSpec spec;
  spec.name = name;
  spec.endpoint = endpoint.empty() ? "http://" + name + ".example.com/api" : endpoint;
  spec.service_type = "vm";
  spec.operations = {"create", "delete"};
  return spec;
}

ProviderRequest Register(const std::string& request_id, const std::string& name,
                         const std::string& id = "", const std::string& endpoint = "") {
  ProviderRequest r;
  r.kind = RequestKind::kRegister;
  r.request_id = request_id;
  r.id = id;
  r.spec = Spec(name, endpoint);
  return r;
}

ProviderRequest Update(const std::string& request_id, const std::string& id,
                       const std::string& name, const std::string& endpoint = "") {
  ProviderRequest r = Register(request_id, name, id, endpoint);
  r.kind = RequestKind::kUpdate;
  return r;
}

ProviderRequest ChangeId(const std::string& request_id, const std::string& id,
                         const std::string& new_id) {
  ProviderRequest r;
  r.kind = RequestKind::kChangeId;
  r.request_id = request_id;
  r.id = id;
  r.new_id = new_id;
  return r;
}

ProviderRequest Delete(const std::string& request_id, const std::string& id) {
  ProviderRequest r;
  r.kind = RequestKind::kDelete;
  r.request_id = request_id;
  r.id = id;
  return r;
}

// The prober's garbage collection of `id`, about the registration with seq `registration_seq`.
ProviderRequest Expire(const std::string& request_id, const std::string& id,
                       int64_t registration_seq) {
  ProviderRequest r;
  r.kind = RequestKind::kExpire;
  r.request_id = request_id;
  r.id = id;
  r.registration_seq = registration_seq;
  r.last_heartbeat_time = "2026-01-01T00:00:00.000Z";
  r.gc_after_ms = 20000;
  r.actor = "dcm/prober";
  return r;
}

std::unique_ptr<Store> OpenInMemory(const std::string& path) {
  auto store = Store::Open(path, StoreOptions{.bulk_load = false, .in_memory = true});
  EXPECT_TRUE(store.has_value()) << store.error().message;
  return store ? std::move(*store) : nullptr;
}

// Decides requests one at a time, committing each like the registrar does, at the request's
// offset (seq) and timestamp (a FakeClock that advances 1 s per request).
class ProviderDeciderTest : public testing::Test {
 protected:
  void SetUp() override {
    store_ = OpenInMemory("/mem/decider");
    ASSERT_TRUE(store_);
    decider_ = std::make_unique<ProviderDecider>(store_.get());
  }

  ProviderOutcome Decide(const ProviderRequest& request, const DecisionInputs& inputs = {}) {
    const int64_t seq = next_seq_++;
    auto outcome = decider_->Decide(request, seq, clock_.NowMillis(), batch_, inputs);
    EXPECT_TRUE(outcome.has_value()) << outcome.error().message;
    EXPECT_TRUE(store_->Write(batch_));
    clock_.Advance(std::chrono::seconds(1));
    return outcome ? *outcome : ProviderOutcome{};
  }

  // The decider's indexes (keys documented in provider_decider.h).
  std::optional<std::string> IdOfName(const std::string& name) {
    auto v = store_->Get("dec/name/" + name);
    EXPECT_TRUE(v.has_value());
    return v ? *v : std::nullopt;
  }
  bool HasId(const std::string& id) {
    auto v = store_->Get("dec/id/" + id);
    EXPECT_TRUE(v.has_value());
    return v && v->has_value();
  }
  std::string Digest(const std::string& prefix) {
    auto d = store_->Digest(prefix);
    EXPECT_TRUE(d.has_value());
    return d ? *d : "";
  }

  void ExpectConflict(const ProviderOutcome& o, const std::string& holder_id,
                      const std::string& holder_name) {
    EXPECT_EQ(o.kind, OutcomeKind::kRejected);
    EXPECT_EQ(o.status, 409);
    ASSERT_TRUE(o.conflict.has_value());
    EXPECT_EQ(o.conflict->id, holder_id);
    EXPECT_EQ(o.conflict->name, holder_name);
    EXPECT_FALSE(o.detail.empty());
  }

  FakeClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<ProviderDecider> decider_;
  StoreBatch batch_;
  int64_t next_seq_ = 0;
};

TEST_F(ProviderDeciderTest, RegistersNewNameWithAGeneratedUuid) {
  const int64_t now = clock_.NowMillis();
  const ProviderOutcome o = Decide(Register("req-1", "sp-a"));
  EXPECT_EQ(o.kind, OutcomeKind::kRegistered);
  EXPECT_EQ(o.request_id, "req-1");
  EXPECT_EQ(o.seq, 0);
  EXPECT_TRUE(IsUuid(o.provider.id)) << o.provider.id;
  EXPECT_EQ(o.provider.spec, Spec("sp-a"));
  EXPECT_EQ(o.provider.create_time, FormatRfc3339Millis(now));
  EXPECT_EQ(o.provider.update_time, FormatRfc3339Millis(now));
  EXPECT_EQ(o.provider.seq, 0);
  EXPECT_EQ(IdOfName("sp-a"), o.provider.id);
  EXPECT_TRUE(HasId(o.provider.id));
}

TEST_F(ProviderDeciderTest, GeneratedIdIsDeterministicPerRequestId) {
  const ProviderOutcome first = Decide(Register("req-1", "sp-a"));
  auto other_store = OpenInMemory("/mem/other");
  ASSERT_TRUE(other_store);
  ProviderDecider other(other_store.get());
  StoreBatch batch;
  auto again = other.Decide(Register("req-1", "sp-a"), 0, clock_.NowMillis(), batch);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->provider.id, first.provider.id);
  auto different = other.Decide(Register("req-2", "sp-b"), 1, clock_.NowMillis(), batch);
  ASSERT_TRUE(different.has_value());
  EXPECT_NE(different->provider.id, first.provider.id);
}

TEST_F(ProviderDeciderTest, RegistersNewNameWithTheGivenId) {
  const ProviderOutcome o = Decide(Register("req-1", "sp-a", "sp-a-id"));
  EXPECT_EQ(o.kind, OutcomeKind::kRegistered);
  EXPECT_EQ(o.provider.id, "sp-a-id");
  EXPECT_EQ(IdOfName("sp-a"), "sp-a-id");
}

TEST_F(ProviderDeciderTest, SameNameWithoutIdIsAnUpdateOfTheSameId) {
  const ProviderOutcome first = Decide(Register("req-1", "sp-a"));
  const ProviderOutcome second = Decide(Register("req-2", "sp-a", "", "http://moved.example.com"));
  EXPECT_EQ(second.kind, OutcomeKind::kUpdated);
  EXPECT_EQ(second.provider.id, first.provider.id);
  EXPECT_EQ(second.provider.spec.endpoint, "http://moved.example.com");
  EXPECT_EQ(second.provider.create_time, first.provider.create_time);
  EXPECT_NE(second.provider.update_time, first.provider.update_time);
  EXPECT_EQ(second.provider.seq, 1);
}

TEST_F(ProviderDeciderTest, SameNameWithTheSameIdIsAnUpdate) {
  Decide(Register("req-1", "sp-a", "id-a"));
  const ProviderOutcome o = Decide(Register("req-2", "sp-a", "id-a"));
  EXPECT_EQ(o.kind, OutcomeKind::kUpdated);
  EXPECT_EQ(o.provider.id, "id-a");
}

TEST_F(ProviderDeciderTest, RejectsTakenNameWithDifferentId) {
  const ProviderOutcome holder = Decide(Register("req-1", "sp-a"));
  const std::string before = Digest("dec/id/") + Digest("dec/name/");
  const ProviderOutcome o = Decide(Register("req-2", "sp-a", "other-id"));
  ExpectConflict(o, holder.provider.id, "sp-a");
  EXPECT_EQ(o.request_kind, RequestKind::kRegister);
  EXPECT_EQ(o.attempted_name, "sp-a");
  EXPECT_EQ(o.attempted_id, "other-id");
  EXPECT_FALSE(HasId("other-id"));
  EXPECT_EQ(Digest("dec/id/") + Digest("dec/name/"), before);
}

TEST_F(ProviderDeciderTest, RejectsNewNameWithTakenId) {
  Decide(Register("req-1", "sp-a", "id-a"));
  const ProviderOutcome o = Decide(Register("req-2", "sp-b", "id-a"));
  ExpectConflict(o, "id-a", "sp-a");
  EXPECT_NE(o.detail.find("sp-a"), std::string::npos) << o.detail;
  EXPECT_EQ(IdOfName("sp-b"), std::nullopt);
  EXPECT_EQ(IdOfName("sp-a"), "id-a");
}

TEST_F(ProviderDeciderTest, UpdateRenamesToAFreeNameAndFreesTheOldOne) {
  Decide(Register("req-1", "sp-a", "id-a"));
  const ProviderOutcome o = Decide(Update("req-2", "id-a", "sp-renamed"));
  EXPECT_EQ(o.kind, OutcomeKind::kUpdated);
  EXPECT_EQ(o.provider.id, "id-a");
  EXPECT_EQ(o.provider.spec.name, "sp-renamed");
  EXPECT_EQ(IdOfName("sp-renamed"), "id-a");
  EXPECT_EQ(IdOfName("sp-a"), std::nullopt);
  // The freed name can be registered by someone else.
  const ProviderOutcome reuse = Decide(Register("req-3", "sp-a"));
  EXPECT_EQ(reuse.kind, OutcomeKind::kRegistered);
  EXPECT_NE(reuse.provider.id, "id-a");
}

TEST_F(ProviderDeciderTest, UpdateKeepingTheNameIsAnUpdate) {
  Decide(Register("req-1", "sp-a", "id-a"));
  const ProviderOutcome o = Decide(Update("req-2", "id-a", "sp-a", "http://new.example.com"));
  EXPECT_EQ(o.kind, OutcomeKind::kUpdated);
  EXPECT_EQ(o.provider.spec.endpoint, "http://new.example.com");
  EXPECT_EQ(IdOfName("sp-a"), "id-a");
}

TEST_F(ProviderDeciderTest, RejectsRenameToATakenName) {
  Decide(Register("req-1", "sp-a", "id-a"));
  Decide(Register("req-2", "sp-b", "id-b"));
  const ProviderOutcome o = Decide(Update("req-3", "id-a", "sp-b"));
  ExpectConflict(o, "id-b", "sp-b");
  EXPECT_EQ(o.request_kind, RequestKind::kUpdate);
  EXPECT_EQ(IdOfName("sp-a"), "id-a");
  EXPECT_EQ(IdOfName("sp-b"), "id-b");
}

TEST_F(ProviderDeciderTest, UpdateOfUnknownIdIsNotFound) {
  const ProviderOutcome o = Decide(Update("req-1", "ghost", "sp-a"));
  EXPECT_EQ(o.kind, OutcomeKind::kRejected);
  EXPECT_EQ(o.status, 404);
  EXPECT_FALSE(o.conflict.has_value());
  EXPECT_EQ(IdOfName("sp-a"), std::nullopt);
}

TEST_F(ProviderDeciderTest, ChangeIdToAFreeIdMovesTheProvider) {
  const ProviderOutcome created = Decide(Register("req-1", "sp-a", "id-a"));
  const ProviderOutcome o = Decide(ChangeId("req-2", "id-a", "id-new"));
  EXPECT_EQ(o.kind, OutcomeKind::kIdChanged);
  EXPECT_EQ(o.old_id, "id-a");
  EXPECT_EQ(o.provider.id, "id-new");
  EXPECT_EQ(o.provider.spec, created.provider.spec);
  EXPECT_EQ(o.provider.create_time, created.provider.create_time);
  EXPECT_EQ(o.provider.seq, 1);
  EXPECT_FALSE(HasId("id-a"));
  EXPECT_TRUE(HasId("id-new"));
  EXPECT_EQ(IdOfName("sp-a"), "id-new");
  // The old id is gone for good: updates to it are 404, the name re-registers onto the new id.
  EXPECT_EQ(Decide(Update("req-3", "id-a", "sp-a")).status, 404);
  const ProviderOutcome again = Decide(Register("req-4", "sp-a"));
  EXPECT_EQ(again.kind, OutcomeKind::kUpdated);
  EXPECT_EQ(again.provider.id, "id-new");
}

TEST_F(ProviderDeciderTest, RejectsChangeIdToATakenId) {
  Decide(Register("req-1", "sp-a", "id-a"));
  Decide(Register("req-2", "sp-b", "id-b"));
  const ProviderOutcome o = Decide(ChangeId("req-3", "id-a", "id-b"));
  ExpectConflict(o, "id-b", "sp-b");
  EXPECT_EQ(o.request_kind, RequestKind::kChangeId);
  EXPECT_EQ(o.attempted_id, "id-b");
  EXPECT_EQ(o.attempted_name, "sp-a");
  EXPECT_EQ(IdOfName("sp-a"), "id-a");
  EXPECT_TRUE(HasId("id-a"));
}

TEST_F(ProviderDeciderTest, ChangeIdToTheSameIdIsAnUpdate) {
  Decide(Register("req-1", "sp-a", "id-a"));
  const ProviderOutcome o = Decide(ChangeId("req-2", "id-a", "id-a"));
  EXPECT_EQ(o.kind, OutcomeKind::kUpdated);
  EXPECT_EQ(o.provider.id, "id-a");
  EXPECT_EQ(o.provider.seq, 1);
  EXPECT_EQ(IdOfName("sp-a"), "id-a");
}

TEST_F(ProviderDeciderTest, ChangeIdOfUnknownIdIsNotFound) {
  const ProviderOutcome o = Decide(ChangeId("req-1", "ghost", "id-new"));
  EXPECT_EQ(o.kind, OutcomeKind::kRejected);
  EXPECT_EQ(o.status, 404);
  EXPECT_FALSE(HasId("id-new"));
}

TEST_F(ProviderDeciderTest, DeleteFreesNameAndIdForANewRegistration) {
  const ProviderOutcome created = Decide(Register("req-1", "sp-a"));
  const ProviderOutcome deleted = Decide(Delete("req-2", created.provider.id));
  EXPECT_EQ(deleted.kind, OutcomeKind::kDeleted);
  EXPECT_EQ(deleted.provider, created.provider);  // the state before the delete
  EXPECT_EQ(deleted.seq, 1);
  EXPECT_FALSE(HasId(created.provider.id));
  EXPECT_EQ(IdOfName("sp-a"), std::nullopt);
  const ProviderOutcome recreated = Decide(Register("req-3", "sp-a"));
  EXPECT_EQ(recreated.kind, OutcomeKind::kRegistered);
  EXPECT_NE(recreated.provider.id, created.provider.id);
}

TEST_F(ProviderDeciderTest, AnExpiryRemovesTheRegistrationItNamesAndSaysWhy) {
  const ProviderOutcome created = Decide(Register("req-1", "edge-1", "edge-1"));
  const ProviderOutcome expired = Decide(Expire("req-2", "edge-1", created.seq));
  EXPECT_EQ(expired.kind, OutcomeKind::kExpired);
  EXPECT_EQ(expired.provider, created.provider);  // the state before
  EXPECT_EQ(expired.actor, "dcm/prober");
  EXPECT_EQ(expired.reason, "no heartbeat since 2026-01-01T00:00:00.000Z (PROVIDER_GC_AFTER 20s)");
  EXPECT_EQ(expired.last_heartbeat_time, "2026-01-01T00:00:00.000Z");
  EXPECT_FALSE(HasId("edge-1"));
  EXPECT_EQ(IdOfName("edge-1"), std::nullopt);
  EXPECT_EQ(Decide(Register("req-3", "edge-1")).kind, OutcomeKind::kRegistered)
      << "a later registration of the name is a new record";
}

TEST_F(ProviderDeciderTest, AnExpiryOfARegistrationReplacedSinceOrOfAnUnknownIdIsRefused) {
  const ProviderOutcome first = Decide(Register("req-1", "edge-1", "edge-1"));
  const ProviderOutcome again = Decide(Register("req-2", "edge-1", "edge-1"));  // re-registered
  const ProviderOutcome stale = Decide(Expire("req-3", "edge-1", first.seq));
  EXPECT_EQ(stale.kind, OutcomeKind::kRejected);
  EXPECT_EQ(stale.status, 409);
  EXPECT_TRUE(HasId("edge-1"));
  EXPECT_EQ(Decide(Expire("req-4", "edge-1", again.seq)).kind, OutcomeKind::kExpired);
  const ProviderOutcome twice = Decide(Expire("req-5", "edge-1", again.seq));
  EXPECT_EQ(twice.kind, OutcomeKind::kRejected);
  EXPECT_EQ(twice.status, 404);
}

TEST_F(ProviderDeciderTest, DeletedIdCanBeGivenToANewRegistration) {
  Decide(Register("req-1", "sp-a", "id-a"));
  Decide(Delete("req-2", "id-a"));
  const ProviderOutcome o = Decide(Register("req-3", "sp-a", "id-a"));
  EXPECT_EQ(o.kind, OutcomeKind::kRegistered);
  EXPECT_EQ(o.provider.id, "id-a");
}

TEST_F(ProviderDeciderTest, DeleteOfUnknownIdIsNotFound) {
  const ProviderOutcome o = Decide(Delete("req-1", "ghost"));
  EXPECT_EQ(o.kind, OutcomeKind::kRejected);
  EXPECT_EQ(o.status, 404);
  EXPECT_EQ(o.request_kind, RequestKind::kDelete);
  EXPECT_EQ(o.attempted_id, "ghost");
}

TEST_F(ProviderDeciderTest, AlreadyDecidedSeesTheUncommittedBatch) {
  StoreBatch batch;
  auto before = decider_->AlreadyDecided("req-1", batch);
  ASSERT_TRUE(before.has_value());
  EXPECT_FALSE(*before);
  ASSERT_TRUE(decider_->Decide(Register("req-1", "sp-a"), 0, clock_.NowMillis(), batch));
  auto in_batch = decider_->AlreadyDecided("req-1", batch);
  ASSERT_TRUE(in_batch.has_value());
  EXPECT_TRUE(*in_batch);
  StoreBatch other;
  EXPECT_FALSE(*decider_->AlreadyDecided("req-1", other));  // not committed yet
  ASSERT_TRUE(store_->Write(batch));
  EXPECT_TRUE(*decider_->AlreadyDecided("req-1", other));
  EXPECT_FALSE(*decider_->AlreadyDecided("req-2", other));
}

TEST_F(ProviderDeciderTest, RejectedRequestsAreAlsoMarkedDecided) {
  Decide(Delete("req-1", "ghost"));
  EXPECT_TRUE(*decider_->AlreadyDecided("req-1", batch_));
}

TEST_F(ProviderDeciderTest, DecisionsInOneBatchSeeEachOther) {
  StoreBatch batch;
  auto first = decider_->Decide(Register("req-1", "sp-a", "id-a"), 0, clock_.NowMillis(), batch);
  auto second = decider_->Decide(Register("req-2", "sp-a", "id-b"), 1, clock_.NowMillis(), batch);
  auto third = decider_->Decide(Register("req-3", "sp-b", "id-a"), 2, clock_.NowMillis(), batch);
  ASSERT_TRUE(first && second && third);
  EXPECT_EQ(first->kind, OutcomeKind::kRegistered);
  EXPECT_EQ(second->status, 409);
  EXPECT_EQ(third->status, 409);
}

TEST_F(ProviderDeciderTest, RejectInvalidIsA400WithTheFieldErrors) {
  Error error{
      ErrorCode::kInvalidArgument, "invalid provider: name is required", {{"name", "is required"}}};
  const ProviderOutcome o =
      decider_->RejectInvalid("req-1", RequestKind::kRegister, error, 7, batch_);
  EXPECT_EQ(o.kind, OutcomeKind::kRejected);
  EXPECT_EQ(o.status, 400);
  EXPECT_EQ(o.seq, 7);
  EXPECT_EQ(o.detail, error.message);
  EXPECT_EQ(o.errors, error.fields);
  EXPECT_TRUE(*decider_->AlreadyDecided("req-1", batch_));
}

// A mixed history touching every rule.
std::vector<ProviderRequest> History() {
  return {Register("r1", "sp-a"),
          Register("r2", "sp-b", "id-b"),
          Register("r3", "sp-a", "id-b"),  // 409
          Register("r4", "sp-c", "id-b"),  // 409
          Register("r5", "sp-a"),          // updated
          Update("r6", "id-b", "sp-b2"),
          Register("r7", "sp-b"),  // the freed name
          ChangeId("r8", "id-b", "id-b-new"),
          Update("r9", "id-b", "sp-x"),  // 404
          Delete("r10", "id-b-new"),
          Register("r11", "sp-b2", "id-b"),
          ChangeId("r12", "id-b", "id-b"),
          Delete("r13", "ghost"),
          Expire("r14", "id-b", 5),   // 409: registered or updated since
          Expire("r15", "id-b", 11),  // expired
          Register("r16", "sp-b2")};
}

TEST(ProviderDeciderDeterminismTest, SameRequestsGiveSameOutcomesAndState) {
  auto a = OpenInMemory("/mem/a");
  auto b = OpenInMemory("/mem/b");
  ASSERT_TRUE(a && b);
  ProviderDecider da(a.get()), db(b.get());
  StoreBatch ba, bb;
  const auto history = History();
  for (size_t i = 0; i < history.size(); ++i) {
    const int64_t seq = static_cast<int64_t>(i);
    const int64_t time = 1767225600000 + seq * 1000;
    auto oa = da.Decide(history[i], seq, time, ba);
    auto ob = db.Decide(history[i], seq, time, bb);
    ASSERT_TRUE(oa && ob);
    EXPECT_EQ(*oa, *ob) << "request " << history[i].request_id;
    ASSERT_TRUE(a->Write(ba));  // store a commits every decision, store b only at the end
  }
  ASSERT_TRUE(b->Write(bb));
  EXPECT_EQ(*a->Digest("dec/"), *b->Digest("dec/"));
  EXPECT_TRUE(a->Digest("dec/")->ends_with("-" + std::to_string(history.size() + 2 * 3)))
      << *a->Digest("dec/");  // one req key per request, id+name for 3 live providers
}

// SPEC §7 retention gaps: a registrar that takes over rebuilds its state from the outcome log,
// not from the request log. Folding the outcomes as they travel (encoded and decoded) stages the
// very keys deciding the requests staged, and a duplicated outcome changes nothing.
TEST(ProviderDeciderFoldTest, FoldingTheOutcomesGivesTheStateThatDecidingTheRequestsGave) {
  auto decided = OpenInMemory("/mem/decided");
  auto folded = OpenInMemory("/mem/folded");
  ASSERT_TRUE(decided && folded);
  ProviderDecider decider(decided.get()), follower(folded.get());
  const auto history = History();
  std::vector<ProviderOutcome> outcomes;
  for (size_t i = 0; i < history.size(); ++i) {
    StoreBatch batch;
    const int64_t seq = static_cast<int64_t>(i);
    auto outcome = decider.Decide(history[i], seq, 1767225600000 + seq * 1000, batch);
    ASSERT_TRUE(outcome);
    ASSERT_TRUE(decided->Write(batch));
    auto wire = DecodeProviderOutcome(EncodeProviderOutcome(*outcome, "dcm/registrar", 0));
    ASSERT_TRUE(wire) << wire.error().message;
    outcomes.push_back(*wire);
  }
  for (const auto& outcome : outcomes) {
    StoreBatch batch;
    auto applied = follower.Fold(outcome, batch);
    ASSERT_TRUE(applied && *applied) << outcome.request_id;
    ASSERT_TRUE(folded->Write(batch));
  }
  EXPECT_EQ(*folded->Digest("dec/"), *decided->Digest("dec/"));

  StoreBatch again;  // each outcome once more: a duplicate, or this instance's own decision
  for (const auto& outcome : outcomes) {
    auto applied = follower.Fold(outcome, again);
    ASSERT_TRUE(applied);
    EXPECT_FALSE(*applied) << outcome.request_id;
  }
  ASSERT_TRUE(folded->Write(again));
  EXPECT_EQ(*folded->Digest("dec/"), *decided->Digest("dec/"));
}

// ---- SPEC §6: ownership and live instances, decided by the registrar ----

// `r` as sent by an SP with the dcm-provider role whose token's subject is `actor`.
ProviderRequest As(const std::string& actor, ProviderRequest r, bool scoped = true) {
  r.actor = actor;
  r.owner_scoped = scoped;
  return r;
}

TEST_F(ProviderDeciderTest, ANewProviderIsOwnedByItsRegistrationsActor) {
  const ProviderOutcome o = Decide(As("sp-a", Register("req-1", "sp-a")));
  EXPECT_EQ(o.kind, OutcomeKind::kRegistered);
  EXPECT_EQ(o.provider.owner, "sp-a");
  EXPECT_EQ(o.actor, "sp-a");
  EXPECT_EQ(Decide(As("anonymous", Register("req-2", "sp-b"), false)).provider.owner, "")
      << "an anonymous registration has no owner";
}

TEST_F(ProviderDeciderTest, AnOwnerScopedRequestChangesOnlyProvidersItOwns) {
  const std::string id = Decide(As("sp-a", Register("req-1", "sp-a"))).provider.id;
  for (const ProviderRequest& r :
       {As("sp-b", Register("req-2", "sp-a")), As("sp-b", Update("req-3", id, "sp-a2")),
        As("sp-b", ChangeId("req-4", id, "mine")), As("sp-b", Delete("req-5", id))}) {
    const ProviderOutcome o = Decide(r);
    EXPECT_EQ(o.kind, OutcomeKind::kRejected) << RequestKindName(r.kind);
    EXPECT_EQ(o.status, 403) << RequestKindName(r.kind);
    EXPECT_EQ(o.actor, "sp-b");
    EXPECT_EQ(o.detail, "provider 'sp-a' (id '" + id + "') is not owned by 'sp-b'");
  }
  EXPECT_TRUE(HasId(id));
  EXPECT_EQ(IdOfName("sp-a"), id);
  EXPECT_EQ(Decide(As("sp-a", Update("req-6", id, "sp-a2"))).kind, OutcomeKind::kUpdated);
}

TEST_F(ProviderDeciderTest, UnscopedRequestsActOnAnyProviderAndKeepItsOwner) {
  const std::string id = Decide(As("sp-a", Register("req-1", "sp-a"))).provider.id;
  const ProviderOutcome updated = Decide(As("root", Update("req-2", id, "sp-a"), false));
  EXPECT_EQ(updated.kind, OutcomeKind::kUpdated);
  EXPECT_EQ(updated.provider.owner, "sp-a");
  const ProviderOutcome moved = Decide(As("root", ChangeId("req-3", id, "sp-a-2"), false));
  EXPECT_EQ(moved.provider.owner, "sp-a");
}

TEST_F(ProviderDeciderTest, AProviderWithoutAnOwnerIsChangedOnlyByUnscopedRequests) {
  const std::string id = Decide(Register("req-1", "sp-a")).provider.id;
  EXPECT_EQ(Decide(As("sp-a", Update("req-2", id, "sp-a"))).status, 403);
}

TEST_F(ProviderDeciderTest, NotFoundComesBeforeNotOwned) {
  EXPECT_EQ(Decide(As("sp-b", Delete("req-1", "missing"))).status, 404);
}

TEST_F(ProviderDeciderTest, DeletingAProviderHostingLiveInstancesNeedsForce) {
  const std::string id = Decide(Register("req-1", "sp-a")).provider.id;
  const ProviderOutcome refused = Decide(Delete("req-2", id), DecisionInputs{3});
  EXPECT_EQ(refused.kind, OutcomeKind::kRejected);
  EXPECT_EQ(refused.status, 409);
  EXPECT_EQ(refused.detail, "provider '" + id + "' hosts 3 live instances; use ?force=true");
  EXPECT_TRUE(HasId(id));
  ProviderRequest forced = Delete("req-3", id);
  forced.force = true;
  EXPECT_EQ(Decide(forced, DecisionInputs{3}).kind, OutcomeKind::kDeleted);
  EXPECT_FALSE(HasId(id));
}

}  // namespace
}  // namespace dcm
