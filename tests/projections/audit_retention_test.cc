// Probe retention in the audit index (SPEC §7, HEALTH_EVENTS_RETENTION): the sweep drops probe
// entries older than the window and keeps transitions and every other event; a live index swept
// at any time and a fresh index of what Kafka still holds agree on everything younger than the
// cutoff `dcm projections verify` uses. In-memory stores and a FakeClock: no disk, no sleeps.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "events/health_events.h"
#include "projections/audit_projection.h"
#include "projections/health_projection.h"
#include "src/common/config.h"
#include "src/common/time_format.h"

namespace dcm {
namespace {

constexpr int64_t kT0 = 1767225600000;  // 2026-01-01T00:00:00Z
constexpr int64_t kMinute = 60000;
const Topics kTopics;  // dcm.health-probes, dcm.health, dcm.providers

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
  std::string topic;
  int32_t partition = 0;
  int64_t offset = 0;
};

// One provider probed every 10 s for 10 minutes on partition 0 of the probes topic, a transition
// every 2 minutes on dcm.health and its registration on dcm.providers.
std::vector<Logged> TenMinutesOfOneProvider() {
  std::vector<Logged> log;
  log.push_back({Event("reg", "dcm.provider.registered", "sp-1", kT0), kTopics.Providers(), 0, 0});
  for (int i = 0; i < 60; ++i) {
    log.push_back(
        {Event("p" + std::to_string(i), event_type::kHealthProbed, "sp-1", kT0 + 1 + i * 10000),
         kTopics.HealthProbes(), 0, i});
    if (i % 12 == 0) {
      log.push_back(
          {Event("c" + std::to_string(i), event_type::kHealthChanged, "sp-1", kT0 + 1 + i * 10000),
           kTopics.Health(), 0, i / 12});
    }
  }
  return log;
}

class Index {
 public:
  Index(const std::string& path, AuditRetention retention)
      : store_(Open(path)),
        projection_(store_.get(), kTopics.Providers(), nullptr, std::move(retention)),
        view_(store_.get()) {}

  static std::unique_ptr<Store> Open(const std::string& path) {
    auto store = Store::Open(path, StoreOptions{.bulk_load = false, .in_memory = true});
    EXPECT_TRUE(store.has_value());
    return std::move(*store);
  }

  void Apply(const std::vector<Logged>& log, size_t from = 0, size_t to = SIZE_MAX) {
    StoreBatch batch;
    std::vector<CloudEvent> applied;
    for (size_t i = from; i < std::min(to, log.size()); ++i) {
      const auto& l = log[i];
      const std::string json = EncodeCloudEvent(l.event);
      const EventPosition at{l.topic, l.partition, l.offset, 0, l.event.subject, json};
      ASSERT_TRUE(projection_.Apply(l.event, at, batch));
      applied.push_back(l.event);
    }
    ASSERT_TRUE(store_->Write(batch));
    projection_.AfterCommit(applied);
  }

  std::vector<std::string> HistoryIds() const {
    std::vector<std::string> ids;
    AuditQuery query;
    for (;;) {
      auto page = view_.History("sp-1", query);
      EXPECT_TRUE(page.has_value());
      for (const auto& e : page->entries) ids.push_back(DecodeCloudEvent(e.json)->id);
      if (page->next_page_token.empty()) return ids;
      query.page_token = page->next_page_token;
    }
  }
  size_t EventsListed() const {
    size_t n = 0;
    AuditQuery query;
    for (;;) {
      auto page = view_.Events(query);
      EXPECT_TRUE(page.has_value());
      n += page->entries.size();
      if (page->next_page_token.empty()) return n;
      query.page_token = page->next_page_token;
    }
  }
  size_t Keys(std::string_view prefix) const {
    size_t n = 0;
    EXPECT_TRUE(store_->Scan(prefix, "", [&](std::string_view, std::string_view) {
      ++n;
      return true;
    }));
    return n;
  }

  std::unique_ptr<Store> store_;
  AuditProjection projection_;
  AuditView view_;
};

AuditRetention Live(const Clock* clock, int64_t window_ms = 2 * kMinute) {
  return AuditRetention{.probes_topic = kTopics.HealthProbes(),
                        .window = std::chrono::milliseconds(window_ms),
                        .clock = clock,
                        .sweep_interval = std::chrono::seconds(10),
                        .sweep_chunk = 7};
}

AuditRetention Rebuild() { return AuditRetention{.probes_topic = kTopics.HealthProbes()}; }

int Count(const std::vector<std::string>& ids, char kind) {
  int n = 0;
  for (const auto& id : ids) n += id[0] == kind;
  return n;
}

TEST(AuditRetentionTest, TheSweepDropsProbesOlderThanTheWindowAndKeepsEveryOtherEvent) {
  FakeClock clock(kT0 + 10 * kMinute);
  Index live("/mem/retention-sweep", Live(&clock));
  live.Apply(TenMinutesOfOneProvider());  // AfterCommit sweeps: cutoff = T0 + 8 min
  const auto ids = live.HistoryIds();
  EXPECT_EQ(Count(ids, 'p'), 12);  // probes 48..59: T0 + 8 min + 1 ms onwards
  EXPECT_EQ(ids[1], "c0");         // transitions older than the window stay
  EXPECT_EQ(Count(ids, 'c'), 5);
  EXPECT_EQ(ids[0], "reg");
  EXPECT_EQ(live.EventsListed(), 1u + 5u + 12u);
  EXPECT_EQ(live.Keys("au/t/"), 12u);  // the seen keys of the swept probes went with them
  EXPECT_EQ(*live.store_->Get("au/w"), std::optional<std::string>("1767226080000"));
}

TEST(AuditRetentionTest, AnIndexStopsGrowingOnceProbesOlderThanTheWindowAreSwept) {
  FakeClock clock(kT0);
  Index live("/mem/retention-level", Live(&clock, kMinute));
  std::vector<size_t> sizes;
  for (int minute = 0; minute < 6; ++minute) {
    std::vector<Logged> log;
    for (int i = 0; i < 6; ++i) {
      const int n = minute * 6 + i;
      log.push_back(
          {Event("p" + std::to_string(n), event_type::kHealthProbed, "sp-1", kT0 + n * 10000),
           kTopics.HealthProbes(), 0, n});
    }
    clock.Set(kT0 + (minute + 1) * kMinute);
    live.Apply(log);
    sizes.push_back(live.Keys("au/"));
  }
  // Minute 1 on, the index holds one window of probes (6 entries × 3 keys, + au/w).
  EXPECT_EQ(sizes[1], sizes[5]);
  EXPECT_EQ(sizes[5], 6u * 3u + 1u);
}

TEST(AuditRetentionTest, ALiveSweptIndexAndARebuildOfTheRetainedSuffixAgreeAfterTheCutoff) {
  const auto log = TenMinutesOfOneProvider();
  FakeClock clock(kT0);
  Index live("/mem/retention-live", Live(&clock));
  for (size_t i = 0; i < log.size(); i += 5) {  // swept in steps as time goes on
    clock.Set(std::max(clock.NowMillis(), ParseRfc3339(log[i].event.time).value()));
    live.Apply(log, i, i + 5);
  }
  // Kafka still holds some suffix of the probes topic that covers the window, and the rest.
  for (int kept_from : {0, 20, 40, 47}) {
    SCOPED_TRACE(kept_from);
    Index rebuilt("/mem/retention-rebuilt-" + std::to_string(kept_from), Rebuild());
    std::vector<Logged> retained;
    for (const auto& l : log) {
      if (l.topic != kTopics.HealthProbes() || l.offset >= kept_from) retained.push_back(l);
    }
    rebuilt.Apply(retained);
    const int64_t cutoff = clock.NowMillis() - 2 * kMinute + 12000;  // verify's margin
    auto skip = [&](std::string_view key, std::string_view) {
      return AuditKeyExpires(key, kTopics.HealthProbes(), cutoff);
    };
    EXPECT_EQ(*live.store_->Digest("au/", skip), *rebuilt.store_->Digest("au/", skip));
    EXPECT_FALSE(Store::FirstDifference(*live.store_, *rebuilt.store_, "au/", skip)->has_value());
    EXPECT_NE(*live.store_->Digest("au/"), *rebuilt.store_->Digest("au/"));
  }
}

TEST(AuditRetentionTest, AProbeOlderThanTheLastSweepIsNotIndexedAndACopyIsIndexedOnce) {
  FakeClock clock(kT0 + 10 * kMinute);
  Index live("/mem/retention-late", Live(&clock));
  auto log = TenMinutesOfOneProvider();
  live.Apply(log);
  const size_t before = live.Keys("au/");
  Logged late{Event("late", event_type::kHealthProbed, "sp-1", kT0 + kMinute),
              kTopics.HealthProbes(), 1, 0};
  Logged copy = log.back();  // probe 59, re-appended by a retried batch
  copy.offset = 1000;
  live.Apply({late, copy});
  EXPECT_EQ(live.Keys("au/"), before);
}

TEST(AuditRetentionTest, ProbesOnOtherTopicsAreKeptForeverLikeTheOldDcmHealthProbes) {
  FakeClock clock(kT0 + 10 * kMinute);
  Index live("/mem/retention-old-topic", Live(&clock));
  live.Apply({{Event("v2probe", event_type::kHealthProbed, "sp-1", kT0), kTopics.Health(), 0, 0}});
  ASSERT_TRUE(live.projection_.SweepExpiredProbes(kT0 + 60 * kMinute));
  EXPECT_EQ(live.HistoryIds(), std::vector<std::string>{"v2probe"});
  EXPECT_FALSE(AuditKeyExpires("au/e/1767225600000/dcm.health/000000/000000000000",
                               kTopics.HealthProbes(), kT0 + 1));
}

TEST(AuditRetentionTest, AfterCommitSweepsOnlyWhenASweepIsDueAndNeverInARebuild) {
  FakeClock clock(kT0 + 10 * kMinute);
  Index live("/mem/retention-due", Live(&clock));
  live.Apply(TenMinutesOfOneProvider());
  const size_t after_first = live.Keys("au/t/");
  clock.Advance(std::chrono::seconds(5));  // the next sweep is due 10 s after the first
  live.Apply({{Event("x", "dcm.provider.updated", "sp-1", kT0), kTopics.Providers(), 0, 1}});
  EXPECT_EQ(live.Keys("au/t/"), after_first);
  clock.Advance(std::chrono::seconds(5));
  live.Apply({{Event("y", "dcm.provider.updated", "sp-1", kT0), kTopics.Providers(), 0, 2}});
  EXPECT_EQ(live.Keys("au/t/"), after_first - 1);  // probe 48 (T0 + 8 min) is now past

  Index rebuilt("/mem/retention-no-sweep", Rebuild());
  rebuilt.Apply(TenMinutesOfOneProvider());
  EXPECT_EQ(rebuilt.Keys("au/t/"), 60u);
}

TEST(AuditRetentionTest, KeysOfProbesExpireByTheirTimeAndTheSweepMarkAlways) {
  const std::string probes = kTopics.HealthProbes();
  const std::string at = "1767225600000/" + probes + "/000003/000000000042";
  EXPECT_TRUE(AuditKeyExpires("au/e/" + at, probes, kT0 + 1));
  EXPECT_FALSE(AuditKeyExpires("au/e/" + at, probes, kT0));
  EXPECT_TRUE(AuditKeyExpires("au/s/sp%2F1/" + at, probes, kT0 + 1));
  EXPECT_TRUE(AuditKeyExpires("au/t/1767225600000/000003/some-id", probes, kT0 + 1));
  EXPECT_FALSE(AuditKeyExpires("au/t/1767225600000/000003/some-id", probes, kT0));
  EXPECT_TRUE(AuditKeyExpires("au/w", probes, 0 + 1));
  EXPECT_FALSE(AuditKeyExpires("au/i/" + probes + "/3/id", probes, kT0 + 1));
  EXPECT_FALSE(AuditKeyExpires("au/p/sp-1", probes, kT0 + 1));
  EXPECT_FALSE(AuditKeyExpires("au/e/garbage", probes, kT0 + 1));  // bad input: compared
}

TEST(AuditRetentionTest, AHealthRecordExpiresWithItsLatestProbe) {
  HealthRecord r;
  r.provider_id = "sp-1";
  r.last_probe_time_ms = kT0;
  const std::string json = EncodeHealthRecord(r);
  EXPECT_TRUE(HealthRecordExpires("hl/sp-1", json, kT0 + 1));
  EXPECT_FALSE(HealthRecordExpires("hl/sp-1", json, kT0));
  EXPECT_FALSE(HealthRecordExpires("hl/sp-1", "not json", kT0 + 1));
}

}  // namespace
}  // namespace dcm
