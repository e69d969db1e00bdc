#include "projections/registry_projection.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "src/common/time_format.h"

namespace dcm {
namespace {

constexpr int64_t kT0 = 1767225600000;  // 2026-01-01T00:00:00.000Z

std::unique_ptr<Store> OpenInMemory(const std::string& path) {
  auto store = Store::Open(path, StoreOptions{.bulk_load = false, .in_memory = true});
  EXPECT_TRUE(store.has_value()) << store.error().message;
  return store ? std::move(*store) : nullptr;
}

Provider MakeProvider(const std::string& id, const std::string& name, int64_t seq,
                      const std::string& service_type = "vm") {
  Provider p;
  p.id = id;
  p.spec.name = name;
  p.spec.endpoint = "http://" + name + ".example.com";
  p.spec.service_type = service_type;
  p.create_time = FormatRfc3339Millis(kT0);
  p.update_time = FormatRfc3339Millis(kT0 + seq * 1000);
  p.seq = seq;
  return p;
}

CloudEvent OutcomeEvent(OutcomeKind kind, int64_t seq, const Provider& provider,
                        const std::string& old_id = "") {
  ProviderOutcome o;
  o.kind = kind;
  o.request_id = "req-" + std::to_string(seq);
  o.seq = seq;
  o.provider = provider;
  o.old_id = old_id;
  return EncodeProviderOutcome(o, "dcm/registrar", kT0 + seq * 1000);
}

CloudEvent Registered(const std::string& id, const std::string& name, int64_t seq,
                      const std::string& service_type = "vm") {
  return OutcomeEvent(OutcomeKind::kRegistered, seq, MakeProvider(id, name, seq, service_type));
}
CloudEvent Updated(const std::string& id, const std::string& name, int64_t seq) {
  return OutcomeEvent(OutcomeKind::kUpdated, seq, MakeProvider(id, name, seq));
}
CloudEvent IdChanged(const std::string& old_id, const std::string& new_id, const std::string& name,
                     int64_t seq) {
  return OutcomeEvent(OutcomeKind::kIdChanged, seq, MakeProvider(new_id, name, seq), old_id);
}
CloudEvent Deleted(const std::string& id, const std::string& name, int64_t seq) {
  // A deleted outcome carries the state before the delete, with its older seq.
  return OutcomeEvent(OutcomeKind::kDeleted, seq, MakeProvider(id, name, seq - 1));
}
CloudEvent Rejected(int64_t seq, int status) {
  ProviderOutcome o;
  o.kind = OutcomeKind::kRejected;
  o.request_id = "req-" + std::to_string(seq);
  o.seq = seq;
  o.status = status;
  o.detail = "no";
  o.attempted_name = "sp-a";
  o.conflict = ConflictRef{"id-a", "sp-a"};
  return EncodeProviderOutcome(o, "dcm/registrar", kT0);
}

class Registry {
 public:
  explicit Registry(const std::string& path)
      : store_(OpenInMemory(path)),
        projection_(store_.get(), &waiters_, &metrics_),
        view_(store_.get()) {}

  // Applies `events` in one batch, commits, then runs AfterCommit (like ProjectionRunner).
  Status Apply(const std::vector<CloudEvent>& events) {
    StoreBatch batch;
    int64_t offset = 0;
    for (const auto& e : events) {
      RETURN_IF_ERROR(
          projection_.Apply(e, EventPosition{"dcm.providers", 0, offset++, kT0}, batch));
    }
    RETURN_IF_ERROR(store_->Write(batch));
    projection_.AfterCommit(events);
    return OkStatus();
  }
  void ApplyEach(const std::vector<CloudEvent>& events) {
    for (const auto& e : events) {
      auto status = Apply({e});
      EXPECT_TRUE(status.has_value()) << status.error().message;
    }
  }

  std::string Digest(const std::string& prefix = "reg/") const {
    auto d = store_->Digest(prefix);
    EXPECT_TRUE(d.has_value());
    return d ? *d : "";
  }
  std::optional<Provider> Get(const std::string& id) const {
    auto p = view_.Get(id);
    EXPECT_TRUE(p.has_value()) << p.error().message;
    return p ? *p : std::nullopt;
  }
  std::vector<std::string> Ids(const ProviderFilter& filter = {}) const {
    std::vector<std::string> ids;
    std::string token;
    do {
      auto page = view_.List(filter, token, 100);
      EXPECT_TRUE(page.has_value());
      if (!page) break;
      for (const auto& p : page->providers) ids.push_back(p.id);
      token = page->next_page_token;
    } while (!token.empty());
    return ids;
  }

  std::unique_ptr<Store> store_;
  OutcomeWaiters waiters_;
  Metrics metrics_;
  RegistryProjection projection_;
  RegistryView view_;
};

TEST(RegistryProjectionTest, FoldsOutcomesInOrderIntoTheRegistry) {
  Registry r("/mem/reg");
  r.ApplyEach({Registered("id-a", "sp-a", 1), Registered("id-b", "sp-b", 2),
               Updated("id-a", "sp-a2", 3), IdChanged("id-b", "id-c", "sp-b", 4),
               Registered("id-d", "sp-d", 5), Deleted("id-a", "sp-a2", 6), Rejected(7, 409)});
  EXPECT_EQ(r.Get("id-a"), std::nullopt);
  EXPECT_EQ(r.Get("id-b"), std::nullopt);
  auto c = r.Get("id-c");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(*c, MakeProvider("id-c", "sp-b", 4));
  EXPECT_EQ(r.Get("id-d"), MakeProvider("id-d", "sp-d", 5));
  EXPECT_EQ(r.Ids(), (std::vector<std::string>{"id-c", "id-d"}));
}

TEST(RegistryProjectionTest, ProviderTakesTheOutcomeSeq) {
  Registry r("/mem/reg");
  Provider p = MakeProvider("id-a", "sp-a", 1);
  ProviderOutcome o;
  o.kind = OutcomeKind::kRegistered;
  o.request_id = "req-9";
  o.seq = 9;
  o.provider = p;  // provider.seq 1, outcome seq 9: the outcome's wins
  ASSERT_TRUE(r.Apply({EncodeProviderOutcome(o, "s", kT0)}));
  EXPECT_EQ(r.Get("id-a")->seq, 9);
}

TEST(RegistryProjectionTest, ApplyingTheSameOutcomeTwiceIsANoOp) {
  Registry r("/mem/reg");
  const auto events = std::vector<CloudEvent>{
      Registered("id-a", "sp-a", 1), Updated("id-a", "sp-a", 2),
      IdChanged("id-a", "id-b", "sp-a", 3), Deleted("id-b", "sp-a", 4), Rejected(5, 409)};
  for (const auto& e : events) {
    ASSERT_TRUE(r.Apply({e}));
    const std::string once = r.Digest();
    ASSERT_TRUE(r.Apply({e}));  // a redelivery in a later batch
    EXPECT_EQ(r.Digest(), once) << e.type;
    ASSERT_TRUE(r.Apply({e, e}));  // and twice within one batch
    EXPECT_EQ(r.Digest(), once) << e.type;
  }
}

TEST(RegistryProjectionTest, OlderOutcomeDoesNotOverwriteANewerOne) {
  Registry r("/mem/reg");
  r.ApplyEach({Updated("id-a", "sp-new", 5), Registered("id-a", "sp-old", 1)});
  EXPECT_EQ(r.Get("id-a")->spec.name, "sp-new");
}

TEST(RegistryProjectionTest, IdChangeAndLaterUpdateGiveTheSameStateInEitherOrder) {
  // id_changed is keyed by the old id and the update by the new one, so they travel on
  // different partitions and may be applied in either order.
  Registry in_order("/mem/a");
  Registry swapped("/mem/b");
  const CloudEvent registered = Registered("id-a", "sp-a", 1);
  const CloudEvent changed = IdChanged("id-a", "id-b", "sp-a", 2);
  const CloudEvent updated = Updated("id-b", "sp-renamed", 3);
  in_order.ApplyEach({registered, changed, updated});
  swapped.ApplyEach({registered, updated, changed});
  EXPECT_EQ(in_order.Digest(), swapped.Digest());
  EXPECT_EQ(in_order.Get("id-a"), std::nullopt);
  EXPECT_EQ(swapped.Get("id-a"), std::nullopt);
  ASSERT_TRUE(swapped.Get("id-b").has_value());
  EXPECT_EQ(swapped.Get("id-b")->spec.name, "sp-renamed");
  EXPECT_EQ(swapped.Get("id-b")->seq, 3);
  // The same in one batch.
  Registry one_batch("/mem/c");
  ASSERT_TRUE(one_batch.Apply({updated, registered, changed}));
  EXPECT_EQ(one_batch.Digest(), in_order.Digest());
}

TEST(RegistryProjectionTest, DeleteTombstonePreventsResurrectionByAnOlderEvent) {
  Registry r("/mem/reg");
  r.ApplyEach(
      {Deleted("id-a", "sp-a", 5), Registered("id-a", "sp-a", 1), Updated("id-a", "sp-a", 4)});
  EXPECT_EQ(r.Get("id-a"), std::nullopt);
  EXPECT_TRUE(r.Ids().empty());
  // A newer registration of the same id (after the delete) brings it back.
  ASSERT_TRUE(r.Apply({Registered("id-a", "sp-a", 6)}));
  ASSERT_TRUE(r.Get("id-a").has_value());
  EXPECT_EQ(r.Get("id-a")->seq, 6);
}

TEST(RegistryProjectionTest, IdChangeTombstonesTheOldId) {
  Registry r("/mem/reg");
  r.ApplyEach({IdChanged("id-a", "id-b", "sp-a", 2), Registered("id-a", "sp-a", 1)});
  EXPECT_EQ(r.Get("id-a"), std::nullopt);
  EXPECT_TRUE(r.Get("id-b").has_value());
}

TEST(RegistryProjectionTest, RejectedOutcomeChangesNoProviderButIsRecorded) {
  Registry r("/mem/reg");
  ASSERT_TRUE(r.Apply({Registered("id-a", "sp-a", 1)}));
  const std::string providers = r.Digest("reg/p/");
  RegistryView view(r.store_.get());
  EXPECT_FALSE(*view.HasOutcome("req-2"));
  ASSERT_TRUE(r.Apply({Rejected(2, 409)}));
  EXPECT_EQ(r.Digest("reg/p/"), providers);
  EXPECT_TRUE(*view.HasOutcome("req-2"));
  EXPECT_TRUE(*view.HasOutcome("req-1"));
  EXPECT_FALSE(*view.HasOutcome("req-3"));
}

TEST(RegistryProjectionTest, AfterCommitCompletesWaitersForTheRequestIds) {
  Registry r("/mem/reg");
  std::vector<std::string> completed;
  for (const char* id : {"req-1", "req-2", "req-99"}) {
    r.waiters_.Expect(id, kT0 + 10000, [&completed, id](Result<CloudEvent> e) {
      ASSERT_TRUE(e.has_value());
      EXPECT_EQ(e->id, OutcomeEventId(id));
      completed.push_back(id);
    });
  }
  ASSERT_TRUE(r.Apply({Registered("id-a", "sp-a", 1), Rejected(2, 404)}));
  EXPECT_EQ(completed, (std::vector<std::string>{"req-1", "req-2"}));
  EXPECT_EQ(r.waiters_.Pending(), 1u);  // req-99 still waits
  // A redelivered outcome does not call a completed waiter again.
  ASSERT_TRUE(r.Apply({Registered("id-a", "sp-a", 1)}));
  EXPECT_EQ(completed.size(), 2u);
}

TEST(RegistryProjectionTest, AWaiterLearnsWhereItsOutcomeIsWhoeverFoldedIt) {
  Registry r("/mem/reg-positions");
  std::map<std::string, OutcomePosition> at;
  for (const char* id : {"req-1", "req-2", "req-3"}) {
    r.waiters_.ExpectPositioned(id, kT0 + 10000,
                                [&at, id](Result<CloudEvent> e, OutcomePosition p) {
                                  ASSERT_TRUE(e.has_value());
                                  at[id] = p;
                                });
  }
  {
    // The registrar folds the outcome of req-3 at offset 7 ahead of the runner.
    const auto lock = r.projection_.LockBatch();
    StoreBatch batch;
    ASSERT_TRUE(r.projection_.ApplyOwn(Registered("id-c", "sp-c", 3),
                                       EventPosition{"dcm.providers", 0, 7}, batch));
    ASSERT_TRUE(r.store_->Write(batch));
    r.projection_.Committed({{0, 7}}, {Registered("id-c", "sp-c", 3)});
  }
  ASSERT_TRUE(r.Apply({Registered("id-a", "sp-a", 1), Rejected(2, 404)}));  // offsets 0 and 1
  ASSERT_EQ(at.size(), 3u);
  EXPECT_EQ(at["req-1"].partition, 0);
  EXPECT_EQ(at["req-1"].offset, 0);
  EXPECT_EQ(at["req-2"].offset, 1);
  EXPECT_EQ(at["req-3"].partition, 0);
  EXPECT_EQ(at["req-3"].offset, 7);
}

// The registrar folds its own acknowledged outcomes ahead of the runner (ApplyOwn); the runner
// then skips them at their positions. State, waiters and listeners end as with the runner alone.
TEST(RegistryProjectionTest, OutcomesTheRegistrarAppliedAheadAreSkippedByTheRunner) {
  const std::vector<CloudEvent> events = {
      Registered("id-a", "sp-a", 1), Registered("id-b", "sp-b", 2), Updated("id-a", "sp-a", 3)};
  Registry plain("/mem/plain");
  ASSERT_TRUE(plain.Apply(events));

  Registry ahead("/mem/ahead");
  std::vector<std::string> completed;
  std::vector<std::string> heard;
  ahead.projection_.AddChangeListener([&](const std::vector<ProviderChange>& changes) {
    for (const auto& c : changes) heard.push_back(c.id);
  });
  for (const char* id : {"req-2", "req-3"}) {
    ahead.waiters_.Expect(id, kT0 + 10000,
                          [&completed, id](Result<CloudEvent>) { completed.push_back(id); });
  }
  {
    const auto lock = ahead.projection_.LockBatch();
    StoreBatch batch;
    ASSERT_TRUE(ahead.projection_.ApplyOwn(events[1], EventPosition{"dcm.providers", 0, 1}, batch));
    ASSERT_TRUE(ahead.store_->Write(batch));
    ahead.projection_.Committed({{0, 1}}, {events[1]});
  }
  EXPECT_EQ(completed, (std::vector<std::string>{"req-2"}));  // answered before the runner
  EXPECT_EQ(heard, (std::vector<std::string>{"id-b"}));
  ASSERT_TRUE(ahead.Apply(events));  // the runner: offsets 0, 1 (skipped), 2
  EXPECT_EQ(ahead.Digest(), plain.Digest());
  EXPECT_EQ(completed, (std::vector<std::string>{"req-2", "req-3"}));
  EXPECT_EQ(heard, (std::vector<std::string>{"id-b", "id-a", "id-a"}));
  // The mark is used once: the same outcome seen again at that position is folded (a no-op).
  ASSERT_TRUE(ahead.Apply({events[1]}));
  EXPECT_EQ(ahead.Digest(), plain.Digest());
}

// The runner asks before decoding (AppliedAlready): an outcome is applied already only once the
// registrar's batch holding it is written (Committed), and only once; older marks are dropped.
TEST(RegistryProjectionTest, AnOutcomeIsAppliedAlreadyOnceTheRegistrarCommittedItAndOnlyOnce) {
  Registry r("/mem/applied-already");
  const EventPosition at_1{"dcm.providers", 0, 1};
  const EventPosition at_2{"dcm.providers", 0, 2};
  {
    const auto lock = r.projection_.LockBatch();
    StoreBatch batch;
    ASSERT_TRUE(r.projection_.ApplyOwn(Registered("id-a", "sp-a", 1), at_1, batch));
    ASSERT_TRUE(r.projection_.ApplyOwn(Registered("id-b", "sp-b", 2), at_2, batch));
    EXPECT_FALSE(r.projection_.AppliedAlready(at_1));  // staged, not written yet
    ASSERT_TRUE(r.store_->Write(batch));
    r.projection_.Committed({{0, 1}, {0, 2}},
                            {Registered("id-a", "sp-a", 1), Registered("id-b", "sp-b", 2)});
  }
  EXPECT_FALSE(r.projection_.AppliedAlready(EventPosition{"dcm.providers", 1, 1}));
  EXPECT_TRUE(r.projection_.AppliedAlready(at_2));
  EXPECT_FALSE(r.projection_.AppliedAlready(at_2));  // used once
  EXPECT_FALSE(r.projection_.AppliedAlready(at_1));  // passed: the runner is beyond it
}

// A registrar batch that was not written (Abandoned) leaves nothing behind: the runner then
// applies the outcome and completes its waiter as if the registrar had not staged it.
TEST(RegistryProjectionTest, AnAbandonedRegistrarBatchLeavesTheRunnerToAnswerItsWaiters) {
  const std::vector<CloudEvent> events = {Registered("id-a", "sp-a", 1),
                                          Registered("id-b", "sp-b", 2)};
  Registry r("/mem/abandoned");
  std::vector<std::string> completed, heard;
  r.projection_.AddChangeListener([&](const std::vector<ProviderChange>& changes) {
    for (const auto& c : changes) heard.push_back(c.id);
  });
  for (const char* id : {"req-1", "req-2"}) {
    r.waiters_.Expect(id, kT0 + 10000,
                      [&completed, id](Result<CloudEvent>) { completed.push_back(id); });
  }
  {
    const auto lock = r.projection_.LockBatch();
    StoreBatch batch;
    ASSERT_TRUE(r.projection_.ApplyOwn(events[1], EventPosition{"dcm.providers", 0, 1}, batch));
    r.projection_.Abandoned();  // the write failed
  }
  EXPECT_TRUE(completed.empty());
  ASSERT_TRUE(r.Apply(events));
  EXPECT_EQ(completed, (std::vector<std::string>{"req-1", "req-2"}));
  EXPECT_EQ(heard, (std::vector<std::string>{"id-a", "id-b"}));
}

// A runner batch that was not written (disk full) leaves nothing behind either: the registrar's
// next batch completes its own waiter (before, the runner's stale entry made AfterCommit skip it
// and the caller waited forever: StoreFaultFlowTest hung under ASan).
TEST(RegistryProjectionTest, ARunnerBatchThatWasNotWrittenLeavesTheRegistrarsWaitersWhole) {
  Registry r("/mem/runner-abandoned");
  std::vector<std::string> completed;
  r.waiters_.Expect("req-2", kT0 + 10000,
                    [&completed](Result<CloudEvent>) { completed.push_back("req-2"); });
  {
    const auto lock = r.projection_.LockBatch();
    StoreBatch failed;
    ASSERT_TRUE(r.projection_.Apply(Registered("id-a", "sp-a", 1),
                                    EventPosition{"dcm.providers", 0, 0}, failed));
    r.projection_.Abandoned();  // the runner's write failed
  }
  const auto lock = r.projection_.LockBatch();
  StoreBatch batch;
  const CloudEvent own = Registered("id-b", "sp-b", 2);
  ASSERT_TRUE(r.projection_.ApplyOwn(own, EventPosition{"dcm.providers", 0, 1}, batch));
  ASSERT_TRUE(r.store_->Write(batch));
  r.projection_.Committed({{0, 1}}, {own});
  EXPECT_EQ(completed, (std::vector<std::string>{"req-2"}));
}

// SPEC §8: listeners learn how a provider went, so an expiry or a deletion takes its resources.
TEST(RegistryProjectionTest, AnExpiryRemovesTheProviderAndListenersHearWhichRemovalItWas) {
  Registry r("/mem/expired");
  std::vector<ProviderChange> heard;
  r.projection_.AddChangeListener([&](const std::vector<ProviderChange>& changes) {
    heard.insert(heard.end(), changes.begin(), changes.end());
  });
  ASSERT_TRUE(r.Apply({Registered("id-a", "sp-a", 1), Registered("id-b", "sp-b", 2),
                       OutcomeEvent(OutcomeKind::kExpired, 3, MakeProvider("id-a", "sp-a", 1)),
                       Deleted("id-b", "sp-b", 4), IdChanged("id-x", "id-y", "sp-x", 5)}));
  EXPECT_FALSE(*r.view_.Get("id-a"));
  ASSERT_EQ(heard.size(), 6u);
  EXPECT_EQ(heard[2].id, "id-a");
  EXPECT_FALSE(heard[2].provider.has_value());
  EXPECT_EQ(heard[2].removed_by, event_type::kExpired);
  EXPECT_EQ(heard[2].request_id, "req-3");
  EXPECT_EQ(heard[2].removed_at_ms, kT0 + 3000);
  EXPECT_EQ(heard[3].removed_by, event_type::kDeleted);
  EXPECT_EQ(heard[4].removed_by, event_type::kIdChanged);
  EXPECT_TRUE(heard[1].removed_by.empty());
}

TEST(RegistryProjectionTest, CountsAppliedEventsByType) {
  Registry r("/mem/reg");
  r.ApplyEach({Registered("id-a", "sp-a", 1), Registered("id-b", "sp-b", 2)});
  EXPECT_NE(r.metrics_.RenderPrometheus().find(
                "dcm_events_applied_total{projection=\"registry\",type=\"dcm.provider."
                "registered\"} 2"),
            std::string::npos)
      << r.metrics_.RenderPrometheus();
}

TEST(RegistryProjectionTest, MalformedEventsAreCorruption) {
  Registry r("/mem/reg");
  std::vector<CloudEvent> bad;
  CloudEvent wrong_type = Registered("id-a", "sp-a", 1);
  wrong_type.type = "dcm.provider.registration_requested";
  bad.push_back(wrong_type);
  CloudEvent not_json = Registered("id-a", "sp-a", 1);
  not_json.data = "{broken";
  bad.push_back(not_json);
  CloudEvent no_provider = Registered("id-a", "sp-a", 1);
  no_provider.data = R"({"request_id":"r","seq":1})";
  bad.push_back(no_provider);
  CloudEvent no_request_id = Registered("id-a", "sp-a", 1);
  no_request_id.data = R"({"seq":1,"provider":{"id":"id-a","name":"sp-a","endpoint":"http://h",)"
                       R"("service_type":"vm"}})";
  bad.push_back(no_request_id);
  CloudEvent too_new = Registered("id-a", "sp-a", 1);
  too_new.schema_version = kProviderEventSchemaVersion + 1;
  bad.push_back(too_new);
  for (const auto& e : bad) {
    StoreBatch batch;
    auto status = r.projection_.Apply(e, EventPosition{"dcm.providers", 0, 0, kT0}, batch);
    ASSERT_FALSE(status.has_value()) << e.data;
    EXPECT_EQ(status.error().code, ErrorCode::kCorruption) << e.data;
    EXPECT_EQ(batch.Count(), 0u) << "a poison event must stage nothing";
  }
  EXPECT_EQ(r.Get("id-a"), std::nullopt);
}

TEST(RegistryProjectionTest, NameIsTheProjectionsOffsetNamespace) {
  Registry r("/mem/reg");
  EXPECT_EQ(r.projection_.Name(), "registry");
}

ProviderFilter ByType(const std::string& type) {
  ProviderFilter f;
  f.service_type = type;
  return f;
}

ProviderFilter Accepting(std::function<bool(const Provider&)> accept) {
  ProviderFilter f;
  f.accept = std::move(accept);
  return f;
}

class RegistryViewListTest : public testing::Test {
 protected:
  void SetUp() override {
    std::vector<CloudEvent> events;
    for (int i = 1; i <= 7; ++i) {
      const std::string n = std::to_string(i);
      events.push_back(Registered("id-" + n, "sp-" + n, i, i % 2 ? "vm" : "database"));
    }
    ASSERT_TRUE(registry_.Apply(events));
  }
  Registry registry_{"/mem/list"};
};

TEST_F(RegistryViewListTest, PaginatesWithOpaqueTokens) {
  std::vector<std::string> seen;
  std::vector<size_t> page_sizes;
  std::string token;
  do {
    auto page = registry_.view_.List({}, token, 3);
    ASSERT_TRUE(page.has_value()) << page.error().message;
    page_sizes.push_back(page->providers.size());
    for (const auto& p : page->providers) seen.push_back(p.id);
    token = page->next_page_token;
    EXPECT_EQ(token.find("id-"), std::string::npos) << "token should be opaque: " << token;
  } while (!token.empty());
  EXPECT_EQ(page_sizes, (std::vector<size_t>{3, 3, 1}));
  EXPECT_EQ(seen,
            (std::vector<std::string>{"id-1", "id-2", "id-3", "id-4", "id-5", "id-6", "id-7"}));
}

TEST_F(RegistryViewListTest, FullLastPageHasNoToken) {
  auto first = registry_.view_.List({}, "", 7);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->providers.size(), 7u);
  EXPECT_EQ(first->next_page_token, "");
  auto large = registry_.view_.List({}, "", 100);
  ASSERT_TRUE(large.has_value());
  EXPECT_EQ(large->providers.size(), 7u);
  EXPECT_EQ(large->next_page_token, "");
}

TEST_F(RegistryViewListTest, TokenSurvivesDeletionOfTheLastReturnedProvider) {
  auto first = registry_.view_.List({}, "", 2);
  ASSERT_TRUE(first.has_value());
  ASSERT_FALSE(first->next_page_token.empty());
  ASSERT_TRUE(registry_.Apply({Deleted("id-2", "sp-2", 20)}));
  auto second = registry_.view_.List({}, first->next_page_token, 2);
  ASSERT_TRUE(second.has_value());
  ASSERT_EQ(second->providers.size(), 2u);
  EXPECT_EQ(second->providers[0].id, "id-3");
}

TEST_F(RegistryViewListTest, RejectsBadTokens) {
  for (const char* token : {"zz", "abc", "not a token", "-1"}) {
    auto page = registry_.view_.List({}, token, 3);
    ASSERT_FALSE(page.has_value()) << token;
    EXPECT_EQ(page.error().code, ErrorCode::kInvalidArgument) << token;
    ASSERT_EQ(page.error().fields.size(), 1u);
    EXPECT_EQ(page.error().fields[0].field, "page_token");
  }
}

TEST_F(RegistryViewListTest, FiltersByServiceTypeAcrossPages) {
  const ProviderFilter vm = ByType("vm");
  std::vector<std::string> seen;
  std::string token;
  int pages = 0;
  do {
    auto page = registry_.view_.List(vm, token, 2);
    ASSERT_TRUE(page.has_value());
    for (const auto& p : page->providers) {
      EXPECT_EQ(p.spec.service_type, "vm");
      seen.push_back(p.id);
    }
    token = page->next_page_token;
    ++pages;
  } while (!token.empty());
  EXPECT_EQ(seen, (std::vector<std::string>{"id-1", "id-3", "id-5", "id-7"}));
  EXPECT_EQ(pages, 2);
  EXPECT_EQ(registry_.Ids(ByType("database")), (std::vector<std::string>{"id-2", "id-4", "id-6"}));
  EXPECT_TRUE(registry_.Ids(ByType("storage")).empty());
}

TEST_F(RegistryViewListTest, FiltersByTheCallersPredicate) {
  EXPECT_EQ(registry_.Ids(Accepting([](const Provider& p) { return p.seq > 5; })),
            (std::vector<std::string>{"id-6", "id-7"}));
  EXPECT_TRUE(registry_.Ids(Accepting([](const Provider&) { return false; })).empty());
}

TEST(RegistryProjectionTest, ListenerHearsEffectiveChangesAfterCommit) {
  Registry r("/mem/listener");
  std::vector<ProviderChange> heard;
  r.projection_.AddChangeListener([&](const std::vector<ProviderChange>& changes) {
    heard.insert(heard.end(), changes.begin(), changes.end());
  });
  ASSERT_TRUE(r.Apply({Registered("id-1", "sp-1", 1, "vm")}));
  ASSERT_EQ(heard.size(), 1u);
  EXPECT_EQ(heard[0].id, "id-1");
  ASSERT_TRUE(heard[0].provider.has_value());
  EXPECT_EQ(heard[0].provider->seq, 1);
  // A duplicate changes nothing, so nobody hears it.
  ASSERT_TRUE(r.Apply({Registered("id-1", "sp-1", 1, "vm")}));
  EXPECT_EQ(heard.size(), 1u);
}

}  // namespace
}  // namespace dcm
