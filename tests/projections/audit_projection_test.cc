// AuditProjection and AuditView: every event indexed once, as stored, by subject, by Kafka key
// and by time; filters and pages; a fold order that does not change the bytes. And PastState:
// the state at a past time folded from the index (SPEC §3.4).
#include "projections/audit_projection.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "events/health_events.h"
#include "events/provider_events.h"
#include "projections/time_travel.h"
#include "src/common/time_format.h"

namespace dcm {
namespace {

constexpr int64_t kT0 = 1767225600000;  // 2026-01-01T00:00:00Z
const Topics kTopics;                   // dcm.providers, dcm.health, dcm.instances, dcm.status

std::unique_ptr<Store> OpenInMemory(const std::string& path) {
  auto store = Store::Open(path, StoreOptions{.bulk_load = false, .in_memory = true});
  EXPECT_TRUE(store.has_value());
  return store ? std::move(*store) : nullptr;
}

CloudEvent Event(const std::string& id, const std::string& type, const std::string& subject,
                 int64_t time_ms) {
  CloudEvent e;
  e.id = id;
  e.source = "test";
  e.type = type;
  e.subject = subject;
  e.time = FormatRfc3339Millis(time_ms);
  e.data = R"({"n":")" + id + R"("})";
  return e;
}

struct Logged {
  CloudEvent event;
  std::string topic = {};
  int32_t partition = 0;
  int64_t offset = 0;
  std::string key = {};  // empty: the subject
};

class Audit {
 public:
  explicit Audit(const std::string& path)
      : store_(OpenInMemory(path)),
        projection_(store_.get(), "dcm.providers", nullptr),
        view_(store_.get()) {}

  void Apply(const std::vector<Logged>& log) {
    StoreBatch batch;
    for (const auto& l : log) {
      const std::string json = EncodeCloudEvent(l.event);
      const EventPosition at{
          l.topic, l.partition, l.offset, 0, l.key.empty() ? l.event.subject : l.key, json};
      ASSERT_TRUE(projection_.Apply(l.event, at, batch));
    }
    ASSERT_TRUE(store_->Write(batch));
  }
  std::vector<std::string> Ids(const AuditPage& page) const {
    std::vector<std::string> ids;
    for (const auto& e : page.entries) ids.push_back(DecodeCloudEvent(e.json)->id);
    return ids;
  }
  std::string Digest() const { return *store_->Digest(AuditProjection::kPrefix); }

  std::unique_ptr<Store> store_;
  AuditProjection projection_;
  AuditView view_;
};

TEST(AuditProjectionTest, IndexesEachEventAsStoredBySubjectInTimeOrder) {
  Audit a("/mem/audit-order");
  a.Apply({{Event("e2", "dcm.x.b", "s1", kT0 + 20), "dcm.t", 0, 1},
           {Event("e1", "dcm.x.a", "s1", kT0 + 10), "dcm.t", 0, 0},
           {Event("e3", "dcm.x.a", "s2", kT0 + 15), "dcm.t", 1, 0}});
  auto page = a.view_.Events(AuditQuery{.subject = "s1"});
  ASSERT_TRUE(page);
  EXPECT_EQ(a.Ids(*page), (std::vector<std::string>{"e1", "e2"}));
  EXPECT_EQ(page->entries[0].json, EncodeCloudEvent(Event("e1", "dcm.x.a", "s1", kT0 + 10)));
  EXPECT_EQ(page->entries[0].topic, "dcm.t");
  EXPECT_EQ(page->entries[1].offset, 1);
  EXPECT_EQ(page->entries[0].time_ms, kT0 + 10);
  EXPECT_TRUE(page->next_page_token.empty());
  auto all = a.view_.Events(AuditQuery{});
  ASSERT_TRUE(all);
  EXPECT_EQ(a.Ids(*all), (std::vector<std::string>{"e1", "e3", "e2"}));
}

TEST(AuditProjectionTest, CopyOnTheSamePartitionIsSkippedButNotOnAnother) {
  Audit a("/mem/audit-dup");
  const auto e = Event("e1", "dcm.x.a", "s1", kT0);
  a.Apply({{e, "dcm.t", 0, 0}, {e, "dcm.t", 0, 7}});
  const std::string once = a.Digest();
  a.Apply({{e, "dcm.t", 0, 9}});
  EXPECT_EQ(a.Digest(), once);
  auto page = a.view_.Events(AuditQuery{.subject = "s1"});
  ASSERT_EQ(page->entries.size(), 1u);
  EXPECT_EQ(page->entries[0].offset, 0);  // the first position wins
  a.Apply({{e, "dcm.other", 0, 0}});      // another topic's event with the same id
  EXPECT_EQ(a.view_.Events(AuditQuery{.subject = "s1"})->entries.size(), 2u);
}

TEST(AuditProjectionTest, HistoryOfARootIncludesEventsKeyedByItWhoseSubjectDiffers) {
  Audit a("/mem/audit-root");
  a.Apply({{Event("e1", "dcm.instance.operation_started", "root", kT0), "dcm.instances", 0, 0},
           {Event("e2", "dcm.resource.placed", "res-1", kT0 + 1), "dcm.instances", 0, 1, "root"},
           {Event("e3", "dcm.status.vm", "res-1", kT0 + 2), "dcm.status", 0, 0}});
  auto history = a.view_.History("root", AuditQuery{});
  ASSERT_TRUE(history);
  EXPECT_EQ(a.Ids(*history), (std::vector<std::string>{"e1", "e2"}));
  // GET /events?subject= is the CloudEvents subject exactly.
  EXPECT_EQ(a.Ids(*a.view_.Events(AuditQuery{.subject = "root"})), std::vector<std::string>{"e1"});
  EXPECT_EQ(a.Ids(*a.view_.Events(AuditQuery{.subject = "res-1"})),
            (std::vector<std::string>{"e2", "e3"}));
  std::vector<std::string> folded;
  ASSERT_TRUE(a.view_.ForEachOfEntity("root", kT0, [&](const AuditEntry& e) {
    folded.push_back(DecodeCloudEvent(e.json)->id);
    return true;
  }));
  EXPECT_EQ(folded, std::vector<std::string>{"e1"});  // up to and including the time given
}

TEST(AuditProjectionTest, FiltersByExactTypeTypePrefixAndTimeRange) {
  Audit a("/mem/audit-filter");
  std::vector<Logged> log;
  for (int i = 0; i < 6; ++i) {
    log.push_back({Event("e" + std::to_string(i), i % 2 ? "dcm.provider.health_probed" : "dcm.b.x",
                         "s", kT0 + i * 1000),
                   "dcm.t", 0, i});
  }
  a.Apply(log);
  EXPECT_EQ(a.Ids(*a.view_.Events(AuditQuery{.type = "dcm.provider.health_probed"})),
            (std::vector<std::string>{"e1", "e3", "e5"}));
  EXPECT_EQ(a.Ids(*a.view_.Events(AuditQuery{.type = "dcm.b.*"})),
            (std::vector<std::string>{"e0", "e2", "e4"}));
  EXPECT_TRUE(a.view_.Events(AuditQuery{.type = "dcm.provider.health"})->entries.empty());
  EXPECT_EQ(a.Ids(*a.view_.Events(AuditQuery{.since_ms = kT0 + 2000, .until_ms = kT0 + 4000})),
            (std::vector<std::string>{"e2", "e3", "e4"}));
  EXPECT_EQ(a.Ids(*a.view_.Events(
                AuditQuery{.subject = "s", .since_ms = kT0 + 5000, .until_ms = kT0 + 9000})),
            std::vector<std::string>{"e5"});
}

TEST(AuditProjectionTest, PagesResumeAfterTheLastEventAndTheLastPageHasNoToken) {
  Audit a("/mem/audit-pages");
  std::vector<Logged> log;
  for (int i = 0; i < 5; ++i) {
    log.push_back({Event("e" + std::to_string(i), "dcm.x.a", "s", kT0 + i), "dcm.t", 0, i});
  }
  a.Apply(log);
  std::vector<std::string> seen;
  AuditQuery query{.max_page_size = 2};
  int pages = 0;
  do {
    auto page = a.view_.History("s", query);
    ASSERT_TRUE(page);
    for (auto& id : a.Ids(*page)) seen.push_back(id);
    query.page_token = page->next_page_token;
    ++pages;
  } while (!query.page_token.empty() && pages < 10);
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(seen, (std::vector<std::string>{"e0", "e1", "e2", "e3", "e4"}));
  query = AuditQuery{.max_page_size = 5};
  EXPECT_TRUE(a.view_.Events(query)->next_page_token.empty());  // exactly one full page
  EXPECT_FALSE(a.view_.Events(AuditQuery{.page_token = "zz"}));
}

TEST(AuditProjectionTest, SubjectsWithSlashesDoNotShareAnIndex) {
  Audit a("/mem/audit-escape");
  a.Apply({{Event("e1", "dcm.x.a", "a", kT0), "dcm.t", 0, 0},
           {Event("e2", "dcm.x.a", "a/0000000000001", kT0), "dcm.t", 0, 1},
           {Event("e3", "dcm.x.a", "", kT0), "dcm.t", 0, 2}});
  EXPECT_EQ(a.Ids(*a.view_.Events(AuditQuery{.subject = "a"})), std::vector<std::string>{"e1"});
  EXPECT_EQ(a.Ids(*a.view_.Events(AuditQuery{.subject = "a/0000000000001"})),
            std::vector<std::string>{"e2"});
  EXPECT_EQ(a.view_.Events(AuditQuery{})->entries.size(), 3u);
  EXPECT_EQ(EscapeAuditEntity("a/b%c"), "a%2Fb%25c");
  for (std::string id : {"a/b%c", "", "%", "%2F", "plain"}) {
    EXPECT_EQ(UnescapeAuditEntity(EscapeAuditEntity(id)), id);
  }
}

TEST(AuditProjectionTest, AnyInterleavingOfTopicsFoldsToTheSameBytes) {
  std::vector<Logged> providers, health;
  for (int i = 0; i < 20; ++i) {
    providers.push_back(
        {Event("p" + std::to_string(i), "dcm.x.a", "s" + std::to_string(i % 3), kT0 + i),
         "dcm.providers", i % 2, i / 2});
    health.push_back(
        {Event("h" + std::to_string(i), "dcm.x.b", "s" + std::to_string(i % 3), kT0 + i),
         "dcm.health", 0, i});
  }
  health.push_back(health[4]);  // a duplicate, later on its partition
  health.back().offset = 20;
  Audit one("/mem/audit-one"), two("/mem/audit-two");
  one.Apply(providers);
  one.Apply(health);
  two.Apply(health);
  two.Apply(providers);
  EXPECT_EQ(one.Digest(), two.Digest());
  std::vector<std::string> listed;
  ASSERT_TRUE(one.view_.ForEachProviderSubject([&](std::string_view s) {
    listed.emplace_back(s);
    return true;
  }));
  EXPECT_EQ(listed, (std::vector<std::string>{"s0", "s1", "s2"}));
}

// ---- time travel ----

CloudEvent Outcome(OutcomeKind kind, const std::string& id, const std::string& endpoint,
                   int64_t seq, int64_t time_ms) {
  ProviderOutcome o;
  o.kind = kind;
  o.request_id = "req-" + std::to_string(seq);
  o.seq = seq;
  o.provider.id = id;
  o.provider.spec.name = "sp-" + id;
  o.provider.spec.endpoint = endpoint;
  o.provider.spec.service_type = "vm";
  o.provider.spec.operations = {"create"};
  o.provider.create_time = FormatRfc3339Millis(kT0);
  o.provider.update_time = FormatRfc3339Millis(time_ms);
  o.provider.seq = seq;
  return EncodeProviderOutcome(o, "test", time_ms);
}

CloudEvent Probe(const std::string& id, int64_t seq, int64_t reg, bool healthy, int64_t time_ms) {
  HealthProbe p;
  p.probe_id = id + "-probe-" + std::to_string(seq);
  p.time_ms = time_ms;
  p.provider_id = id;
  p.seq = seq;
  p.registration_seq = reg;
  p.url = "http://sp/health";
  p.failure = healthy ? ProbeFailure::kNone : ProbeFailure::kTimeout;
  p.http_status = healthy ? 200 : 0;
  p.latency_us = 1500;
  p.error = healthy ? "" : "no response";
  return EncodeHealthProbe(p, "test");
}

TEST(TimeTravelTest, ProviderStateAtEachRecordedTimeIsFoldedFromItsEvents) {
  Audit a("/mem/travel-provider");
  std::vector<Logged> log = {
      {Outcome(OutcomeKind::kRegistered, "p1", "http://a/", 0, kT0 + 1000), "dcm.providers", 0, 0},
      {Probe("p1", 1, 0, true, kT0 + 2000), "dcm.health", 0, 0},
      {Outcome(OutcomeKind::kUpdated, "p1", "http://b/", 1, kT0 + 3000), "dcm.providers", 0, 1},
      {Outcome(OutcomeKind::kRegistered, "p2", "http://c/", 2, kT0 + 3500), "dcm.providers", 1, 0},
  };
  for (int i = 0; i < 3; ++i) {
    log.push_back({Probe("p1", 2 + i, 1, false, kT0 + 4000 + i), "dcm.health", 0, 1 + i});
  }
  log.push_back(
      {Outcome(OutcomeKind::kDeleted, "p1", "http://b/", 3, kT0 + 5000), "dcm.providers", 0, 2});
  a.Apply(log);
  auto at = [&](int64_t t) {
    return std::move(*PastState::OfProviders(a.view_, kTopics, {"p1"}, t));
  };

  EXPECT_FALSE(*at(kT0 + 999)->registry().Get("p1"));
  auto registered = at(kT0 + 1000);
  ASSERT_TRUE(*registered->registry().Get("p1"));
  EXPECT_EQ((*registered->registry().Get("p1"))->spec.endpoint, "http://a/");
  EXPECT_FALSE(*registered->health().Get("p1"));  // never probed yet
  auto ready = at(kT0 + 2500);
  EXPECT_EQ((*ready->health().Get("p1"))->status, HealthStatus::kReady);
  EXPECT_EQ((*at(kT0 + 3000)->registry().Get("p1"))->spec.endpoint, "http://b/");
  auto unavailable = at(kT0 + 4002);
  EXPECT_EQ((*unavailable->health().Get("p1"))->status, HealthStatus::kUnavailable);
  EXPECT_EQ(unavailable->folded(), 6);
  EXPECT_FALSE(*unavailable->registry().Get("p2"));     // only the entity asked for is folded
  EXPECT_FALSE(*at(kT0 + 5000)->registry().Get("p1"));  // deregistered
  auto everyone = PastState::OfProviders(a.view_, kTopics, {}, kT0 + 3600);
  ASSERT_TRUE(everyone);
  EXPECT_TRUE(*(*everyone)->registry().Get("p1"));
  EXPECT_TRUE(*(*everyone)->registry().Get("p2"));
}

}  // namespace
}  // namespace dcm
