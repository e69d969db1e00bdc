// WatchHub (SPEC §9): events go out in the order of GET /events once the settle time passed,
// late ones at once and never twice, resumes read the index after their id, filters apply,
// a reader that falls a buffer behind is cut off, the stream cap answers 503, and list watches
// send the snapshot, SYNCED, then ADDED/MODIFIED/DELETED. And ResponseStream's bound and wake.
// Hermetic: an in-memory store, a fake clock, and Poll instead of the hub's thread.
#include "src/http/watch_hub.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "projections/page_token.h"
#include "src/common/time_format.h"

namespace dcm::http {
namespace {

constexpr int64_t kT0 = 1767225600000;  // 2026-01-01T00:00:00Z

struct Message {
  std::string id, event, data;
};

// The SSE messages written to `stream` since the last call (the `retry:` preamble skipped).
std::vector<Message> Read(ResponseStream& stream) {
  std::string bytes;
  stream.Take(&bytes);
  std::vector<Message> out;
  Message m;
  size_t at = 0;
  while (at < bytes.size()) {
    const size_t nl = bytes.find('\n', at);
    const std::string line = bytes.substr(at, nl - at);
    at = nl + 1;
    if (line.empty()) {
      if (!m.event.empty()) out.push_back(m);
      m = {};
    } else if (line.rfind("id: ", 0) == 0) {
      m.id = line.substr(4);
    } else if (line.rfind("event: ", 0) == 0) {
      m.event = line.substr(7);
    } else if (line.rfind("data: ", 0) == 0) {
      m.data += line.substr(6);
    }
  }
  return out;
}

std::vector<std::string> Subjects(const std::vector<Message>& msgs) {
  std::vector<std::string> out;
  for (const auto& m : msgs) out.push_back(DecodeCloudEvent(m.data)->subject);
  return out;
}

class WatchHubTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = Store::Open("/mem/watch-" + std::to_string(reinterpret_cast<uintptr_t>(this)),
                             StoreOptions{.bulk_load = false, .in_memory = true});
    ASSERT_TRUE(store.has_value());
    store_ = std::move(*store);
    audit_ = std::make_unique<AuditProjection>(store_.get(), "dcm.providers", nullptr);
    view_ = std::make_unique<AuditView>(store_.get());
    clock_.Set(kT0 + 1000);
    Make(WatchOptions{});
  }

  void Make(WatchOptions options) {
    WatchSources sources;
    sources.audit = view_.get();
    sources.audit_lag = [this] { return lag_; };
    sources.listers[0] = [this]() -> Result<std::vector<WatchItem>> { return items_; };
    sources.clock = &clock_;
    hub_ = std::make_unique<WatchHub>(options, std::move(sources), &metrics_);
    audit_->SetFeed([this](std::vector<IndexedEvent> e) { hub_->Indexed(std::move(e)); },
                    [this](int64_t newest_ms) { return hub_->WantsIndexed(newest_ms); });
  }

  // Indexes one event (subject, type, time) at the next offset of partition `partition`.
  void Index(const std::string& subject, int64_t time_ms, const std::string& type = "dcm.x.a",
             int32_t partition = 0) {
    CloudEvent e;
    e.id = "e" + std::to_string(next_offset_);
    e.source = "test";
    e.type = type;
    e.subject = subject;
    e.time = FormatRfc3339Millis(time_ms);
    e.data = "{}";
    const std::string json = EncodeCloudEvent(e);
    StoreBatch batch;
    const EventPosition at{"dcm.t", partition, next_offset_++, 0, subject, json};
    ASSERT_TRUE(audit_->Apply(e, at, batch));
    ASSERT_TRUE(store_->Write(batch));
    audit_->AfterCommit({e});
  }

  std::shared_ptr<ResponseStream> Watch(EventWatchRequest request) {
    HttpResponse r = hub_->WatchEvents(std::move(request));
    EXPECT_EQ(r.status, 200) << r.body;
    return r.stream;
  }

  std::unique_ptr<Store> store_;
  std::unique_ptr<AuditProjection> audit_;
  std::unique_ptr<AuditView> view_;
  FakeClock clock_;
  Metrics metrics_;
  int64_t lag_ = 0;
  int64_t next_offset_ = 0;
  std::vector<WatchItem> items_;
  std::unique_ptr<WatchHub> hub_;
};

TEST_F(WatchHubTest, EventsGoOutInIndexOrderOnceTheSettleTimePassed) {
  auto s = Watch({});
  hub_->Poll();
  Index("b", kT0 + 1020);
  Index("a", kT0 + 1010);  // committed later, earlier in time: goes out first
  clock_.Set(kT0 + 1100);
  hub_->Poll();
  EXPECT_TRUE(Read(*s).empty()) << "released before the settle time passed";
  clock_.Set(kT0 + 1300);
  hub_->Poll();
  const auto msgs = Read(*s);
  EXPECT_EQ(Subjects(msgs), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(msgs[0].event, "dcm.x.a");
  EXPECT_LT(*DecodePageToken(msgs[0].id), *DecodePageToken(msgs[1].id));
}

TEST_F(WatchHubTest, WhileTheIndexLagsTheWatermarkFollowsWhatWasIndexed) {
  auto s = Watch({});
  hub_->Poll();
  lag_ = 500;
  Index("old", kT0 + 1100);
  clock_.Set(kT0 + 5000);
  hub_->Poll();
  EXPECT_TRUE(Read(*s).empty()) << "an event the lagging index may still precede went out";
  Index("newer", kT0 + 1400);
  hub_->Poll();
  EXPECT_EQ(Subjects(Read(*s)), (std::vector<std::string>{"old"}));
}

TEST_F(WatchHubTest, ALateEventGoesOutAtOnceAndAResumeAfterItNeverRepeatsIt) {
  auto s = Watch({});
  hub_->Poll();
  Index("on-time", kT0 + 1000);
  clock_.Set(kT0 + 2000);
  hub_->Poll();
  ASSERT_EQ(Read(*s).size(), 1u);
  Index("late", kT0 + 1200);  // below the watermark (kT0 + 1750) when indexed
  hub_->Poll();
  const auto late = Read(*s);
  ASSERT_EQ(Subjects(late), (std::vector<std::string>{"late"}));
  EXPECT_EQ(metrics_.GetCounter("dcm_watch_late_events_total", "").Value(), 1);
  // Resuming after the late event's id sends nothing already sent.
  auto resumed = Watch({.query = {}, .resume = late[0].id});
  hub_->Poll();
  EXPECT_TRUE(Read(*resumed).empty());
}

TEST_F(WatchHubTest, ResumingAfterAnIdSendsTheRestFromTheIndexThenLive) {
  Index("a", kT0 + 100);
  Index("b", kT0 + 200);
  Index("c", kT0 + 300);
  auto first = Watch({.query = {.since_ms = kT0}, .resume = ""});
  hub_->Poll();
  const auto all = Read(*first);
  ASSERT_EQ(Subjects(all), (std::vector<std::string>{"a", "b", "c"}));
  auto resumed = Watch({.query = {.since_ms = kT0}, .resume = all[0].id});
  hub_->Poll();
  EXPECT_EQ(Subjects(Read(*resumed)), (std::vector<std::string>{"b", "c"}));
  Index("d", kT0 + 1100);
  clock_.Set(kT0 + 2000);
  hub_->Poll();
  EXPECT_EQ(Subjects(Read(*resumed)), (std::vector<std::string>{"d"}));
  EXPECT_EQ(Subjects(Read(*first)), (std::vector<std::string>{"d"}));
}

TEST_F(WatchHubTest, WithoutSinceOrResumeAWatchStartsAtNow) {
  Index("before", kT0 + 100);
  auto s = Watch({});
  hub_->Poll();
  Index("after", kT0 + 1100);
  clock_.Set(kT0 + 2000);
  hub_->Poll();
  EXPECT_EQ(Subjects(Read(*s)), (std::vector<std::string>{"after"}));
}

TEST_F(WatchHubTest, SubjectAndTypeFiltersApplyToTheIndexAndToLiveEvents) {
  Index("p1", kT0 + 100, "dcm.provider.registered");
  Index("p2", kT0 + 200, "dcm.provider.registered");
  Index("p1", kT0 + 300, "dcm.health.x");
  auto s =
      Watch({.query = {.subject = "p1", .type = "dcm.provider.*", .since_ms = kT0}, .resume = ""});
  hub_->Poll();
  Index("p1", kT0 + 1100, "dcm.provider.updated");
  Index("p2", kT0 + 1100, "dcm.provider.updated");
  clock_.Set(kT0 + 2000);
  hub_->Poll();
  const auto msgs = Read(*s);
  ASSERT_EQ(msgs.size(), 2u);
  EXPECT_EQ(msgs[0].event, "dcm.provider.registered");
  EXPECT_EQ(msgs[1].event, "dcm.provider.updated");
  EXPECT_EQ(Subjects(msgs), (std::vector<std::string>{"p1", "p1"}));
}

TEST_F(WatchHubTest, AReaderThatFallsABufferBehindIsCutOffAndTheOthersGetEverything) {
  Make(WatchOptions{.buffer_bytes = 4096});
  auto stalled = Watch({});
  auto reader = Watch({});
  hub_->Poll();
  size_t got = 0;
  for (int i = 0; i < 40; ++i) {
    Index("s" + std::to_string(i), kT0 + 1000 + i);
    clock_.Set(kT0 + 1300 + i);
    hub_->Poll();
    got += Read(*reader).size();
  }
  EXPECT_EQ(got, 40u);
  EXPECT_EQ(stalled->state(), ResponseStream::State::kOverflow);
  EXPECT_EQ(stalled->buffered(), 0u) << "a cut-off stream keeps its bytes";
  EXPECT_EQ(hub_->streams(), 1u);
  EXPECT_EQ(metrics_.GetCounter("dcm_watch_cut_off_total", "").Value(), 1);
}

TEST_F(WatchHubTest, ACatchingUpReaderThatReadsNothingForTheStallTimeoutIsCutOff) {
  Make(WatchOptions{.buffer_bytes = 4096, .stall_timeout = std::chrono::seconds(10)});
  for (int i = 0; i < 100; ++i) Index("old" + std::to_string(i), kT0 + i);
  auto stalled = Watch({.query = {.since_ms = kT0}, .resume = ""});
  hub_->Poll();  // fills half its buffer, then waits for the reader
  EXPECT_EQ(stalled->state(), ResponseStream::State::kOpen);
  clock_.Advance(std::chrono::seconds(9));
  hub_->Poll();
  EXPECT_EQ(stalled->state(), ResponseStream::State::kOpen);
  clock_.Advance(std::chrono::seconds(2));
  hub_->Poll();
  EXPECT_EQ(stalled->state(), ResponseStream::State::kOverflow);
  hub_->Poll();
  EXPECT_EQ(hub_->streams(), 0u);
  EXPECT_EQ(metrics_.GetCounter("dcm_watch_cut_off_total", "").Value(), 1);
}

// A burst of 200 events (~50 KiB) at readers whose streams buffer 4 KiB and read between
// rounds: everything arrives, in index order, once.
TEST_F(WatchHubTest, ALiveReaderHitByABurstBiggerThanItsBufferGetsItAllInOrder) {
  Make(WatchOptions{.buffer_bytes = 4096});
  auto reader = Watch({});
  hub_->Poll();
  for (int i = 0; i < 200; ++i) Index("b" + std::to_string(1000 + i), kT0 + 1001 + i);
  clock_.Set(kT0 + 1500);
  std::vector<Message> got;
  for (int round = 0; round < 100 && got.size() < 200; ++round) {
    hub_->Poll();  // releases the burst: as much as the buffer takes per round
    for (auto& m : Read(*reader)) got.push_back(m);
  }
  ASSERT_EQ(got.size(), 200u);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(DecodeCloudEvent(got[i].data)->subject, "b" + std::to_string(1000 + i));
    if (i > 0) {
      EXPECT_LT(*DecodePageToken(got[i - 1].id), *DecodePageToken(got[i].id));
    }
  }
  EXPECT_EQ(reader->state(), ResponseStream::State::kOpen);
  EXPECT_EQ(metrics_.GetCounter("dcm_watch_fell_behind_total", "").Value(), 0);
  // Caught up: the next event comes with the next release.
  Index("after", kT0 + 1600);
  clock_.Set(kT0 + 1900);
  hub_->Poll();
  EXPECT_EQ(Subjects(Read(*reader)), (std::vector<std::string>{"after"}));
}

TEST_F(WatchHubTest, ALiveReaderFurtherBehindThanTheHubKeepsReadsTheRestFromTheIndex) {
  Make(WatchOptions{.buffer_bytes = 4096, .retain_bytes = 8192});
  auto reader = Watch({});
  auto fast = Watch({});
  hub_->Poll();
  for (int i = 0; i < 200; ++i) Index("b" + std::to_string(1000 + i), kT0 + 1001 + i);
  clock_.Set(kT0 + 1500);
  std::vector<Message> got;
  for (int round = 0; round < 200 && got.size() < 200; ++round) {
    hub_->Poll();
    for (auto& m : Read(*reader)) got.push_back(m);
    Read(*fast);
  }
  ASSERT_EQ(got.size(), 200u);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(DecodeCloudEvent(got[i].data)->subject, "b" + std::to_string(1000 + i));
  }
  EXPECT_GE(metrics_.GetCounter("dcm_watch_fell_behind_total", "").Value(), 1);
  Index("after", kT0 + 1600);
  clock_.Set(kT0 + 1900);
  for (int round = 0; round < 3; ++round) hub_->Poll();
  EXPECT_EQ(Subjects(Read(*reader)), (std::vector<std::string>{"after"}));
}

TEST_F(WatchHubTest, AResumeBeforeTheFirstReleaseReadsTheIndexFirst) {
  // A restart: the index holds what the previous process indexed, the runner still lags, and a
  // client resumes after the first entry before this process released anything.
  Index("a", kT0 + 100);
  Index("b", kT0 + 200);
  Index("c", kT0 + 300);
  Make(WatchOptions{});
  lag_ = 500;
  const std::string after_a = AuditEntryKey({"dcm.t", 0, 0, kT0 + 100, ""});
  auto s = Watch({.query = {}, .resume = EncodePageToken(after_a)});
  auto now = Watch({});
  hub_->Poll();
  EXPECT_TRUE(Read(*s).empty()) << "nothing is released yet";
  Index("d", kT0 + 900);  // newest indexed: the watermark follows it
  clock_.Set(kT0 + 2000);
  hub_->Poll();
  hub_->Poll();
  EXPECT_EQ(Subjects(Read(*s)), (std::vector<std::string>{"b", "c"}));
  lag_ = 0;
  hub_->Poll();
  EXPECT_EQ(Subjects(Read(*s)), (std::vector<std::string>{"d"}));
  EXPECT_EQ(Subjects(Read(*now)), (std::vector<std::string>{"d"}))
      << "a watch from now gets what came after it joined, not the index before it";
}

// Nobody watches: the audit feed stops (nothing is copied for the hub), and the next watcher from
// now still gets what the index committed meanwhile and the hub had not released yet.
TEST_F(WatchHubTest, WhileNobodyWatchesTheFeedStopsAndANewWatcherMissesNothingUnreleased) {
  hub_->Poll();  // the first release (kT0 + 750), nobody watches
  EXPECT_FALSE(hub_->WantsIndexed(kT0 + 800));
  Index("released", kT0 + 700);      // before the watch's start: not its business
  Index("not-released", kT0 + 900);  // in the index only
  auto s = Watch({});
  EXPECT_TRUE(hub_->WantsIndexed(kT0 + 800)) << "a watcher asked: the feed is on again";
  hub_->Poll();
  Index("after", kT0 + 1200);  // fed
  clock_.Set(kT0 + 2000);
  hub_->Poll();
  EXPECT_EQ(Subjects(Read(*s)), (std::vector<std::string>{"not-released", "after"}));
  s->Detach();
  hub_->Poll();
  EXPECT_FALSE(hub_->WantsIndexed(kT0 + 2000)) << "the last watcher left: the feed stops";
}

TEST_F(WatchHubTest, AResumeAfterTheFeedStoppedReadsTheIndexAndThenWhatWasNotReleased) {
  hub_->Poll();  // released to kT0 + 750; the feed stops
  Index("a", kT0 + 600);
  Index("b", kT0 + 800);
  lag_ = 1;  // the watermark follows what was indexed, though the hub was not fed it
  Index("c", kT0 + 1500);
  auto first = Watch({.query = {.since_ms = kT0}, .resume = ""});
  clock_.Set(kT0 + 5000);
  hub_->Poll();
  hub_->Poll();
  const auto got = Read(*first);
  EXPECT_EQ(Subjects(got), (std::vector<std::string>{"a", "b"})) << "c is not released yet";
  lag_ = 0;
  hub_->Poll();
  EXPECT_EQ(Subjects(Read(*first)), (std::vector<std::string>{"c"}));
  auto resumed = Watch({.query = {}, .resume = got[0].id});
  hub_->Poll();
  EXPECT_EQ(Subjects(Read(*resumed)), (std::vector<std::string>{"b", "c"}));
}

TEST_F(WatchHubTest, TheStreamCapAnswers503AndAClosedStreamFreesItsSlot) {
  Make(WatchOptions{.max_streams = 1});
  auto s = Watch({});
  const HttpResponse refused = hub_->WatchEvents({});
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(refused.stream, nullptr);
  s->Detach();  // the client left
  hub_->Poll();
  EXPECT_EQ(hub_->WatchEvents({}).status, 200);
}

TEST_F(WatchHubTest, AResumeIdThisServerNeverSentIs400) {
  EXPECT_EQ(hub_->WatchEvents({.query = {}, .resume = "zz"}).status, 400);
  EXPECT_EQ(hub_->WatchEvents({.query = {}, .resume = "%%"}).status, 400);
}

TEST_F(WatchHubTest, AListWatchSendsTheSnapshotSyncedThenAddedModifiedDeleted) {
  items_ = {{"p1", R"({"id":"p1","h":"Ready"})", {{"health_status", "Ready"}}},
            {"p2", R"({"id":"p2","h":"Ready"})", {{"health_status", "Ready"}}}};
  auto all = hub_->WatchList({WatchKind::kProviders, {}}).stream;
  auto ready = hub_->WatchList({WatchKind::kProviders, {{"health_status", "ready"}}}).stream;
  hub_->Poll();
  auto msgs = Read(*all);
  ASSERT_EQ(msgs.size(), 3u);
  EXPECT_EQ(msgs[0].event, "ADDED");
  EXPECT_EQ(msgs[2].event, "SYNCED");
  EXPECT_EQ(Read(*ready).size(), 3u);
  items_[0] = {"p1", R"({"id":"p1","h":"Unavailable"})", {{"health_status", "Unavailable"}}};
  items_.erase(items_.begin() + 1);
  items_.push_back({"p3", R"({"id":"p3","h":"Ready"})", {{"health_status", "Ready"}}});
  hub_->Changed(WatchKind::kProviders);
  clock_.Set(kT0 + 5000);
  hub_->Poll();
  msgs = Read(*all);
  ASSERT_EQ(msgs.size(), 3u);
  EXPECT_EQ(msgs[0].event, "MODIFIED");
  EXPECT_EQ(msgs[0].data, R"({"id":"p1","h":"Unavailable"})");
  EXPECT_EQ(msgs[1].event, "DELETED");
  EXPECT_EQ(msgs[1].data, R"({"id":"p2","h":"Ready"})");
  EXPECT_EQ(msgs[2].event, "ADDED");
  // Filtered: p1 left the filter (DELETED), p2 went, p3 came.
  msgs = Read(*ready);
  ASSERT_EQ(msgs.size(), 3u);
  EXPECT_EQ(msgs[0].event, "DELETED");
  EXPECT_EQ(msgs[1].event, "DELETED");
  EXPECT_EQ(msgs[2].event, "ADDED");
}

TEST_F(WatchHubTest, AListSnapshotBiggerThanTheBufferGoesOutAsTheReaderReads) {
  Make(WatchOptions{.buffer_bytes = 4096});
  const std::string pad(200, 'x');
  for (int i = 0; i < 100; ++i) {
    const std::string id = "p" + std::to_string(100 + i);
    items_.push_back({id, R"({"id":")" + id + R"(","pad":")" + pad + R"("})", {}});
  }
  auto w = hub_->WatchList({WatchKind::kProviders, {}}).stream;
  hub_->Poll();
  auto first = Read(*w);
  EXPECT_LT(first.size(), 100u) << "the snapshot waits for the reader";
  EXPECT_EQ(w->state(), ResponseStream::State::kOpen);
  // While it syncs, p100 (already sent) changes and p199 (not yet) goes away.
  items_[0].json = R"({"id":"p100","v":2})";
  items_.pop_back();
  hub_->Changed(WatchKind::kProviders);
  clock_.Set(kT0 + 5000);
  std::vector<Message> all = first;
  for (int round = 0; round < 50 && (all.empty() || all.back().event != "SYNCED"); ++round) {
    hub_->Poll();
    for (auto& m : Read(*w)) all.push_back(m);
  }
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all.back().event, "SYNCED");
  int added = 0, modified = 0;
  for (const auto& m : all) {
    added += m.event == "ADDED";
    modified += m.event == "MODIFIED";
    EXPECT_EQ(m.data.find("p199"), std::string::npos) << "a deleted item not yet sent is skipped";
  }
  EXPECT_EQ(added, 99);
  EXPECT_EQ(modified, 1);
}

TEST_F(WatchHubTest, AListWatchIsSyncedOnlyOnceItsListCouldBeRead) {
  int calls = 0;
  WatchSources sources;
  sources.audit = view_.get();
  sources.listers[0] = [&calls]() -> Result<std::vector<WatchItem>> {
    if (++calls == 1) return MakeError(ErrorCode::kUnavailable, "store busy");
    return std::vector<WatchItem>{{"p1", R"({"id":"p1"})", {}}};
  };
  sources.clock = &clock_;
  WatchHub hub({}, std::move(sources), nullptr);
  auto w = hub.WatchList({WatchKind::kProviders, {}}).stream;
  hub.Poll();
  EXPECT_TRUE(Read(*w).empty()) << "no SYNCED over a list that failed to load";
  clock_.Advance(std::chrono::seconds(1));
  hub.Poll();
  const auto msgs = Read(*w);
  ASSERT_EQ(msgs.size(), 2u);
  EXPECT_EQ(msgs[0].event, "ADDED");
  EXPECT_EQ(msgs[1].event, "SYNCED");
}

TEST_F(WatchHubTest, AListNobodyWatchesIsNotListed) {
  int listed = 0;
  WatchSources sources;
  sources.audit = view_.get();
  sources.listers[0] = [&listed]() -> Result<std::vector<WatchItem>> {
    ++listed;
    return std::vector<WatchItem>{};
  };
  sources.clock = &clock_;
  WatchHub hub({}, std::move(sources), nullptr);
  hub.Changed(WatchKind::kProviders);
  hub.Poll();
  EXPECT_EQ(listed, 0);
  EXPECT_EQ(hub.WatchList({WatchKind::kCleanupQueue, {}}).status, 404);
}

TEST(StoredEventTypeTest, ReadsTheTopLevelTypeWhateverTheKeyOrderAndSpacing) {
  EXPECT_EQ(StoredEventType(R"({"specversion":"1.0","type":"dcm.a","data":{"type":"x"}})"),
            "dcm.a");
  EXPECT_EQ(StoredEventType(R"({"data":{"type":"x"},"id":"type","type" : "dcm.b"})"), "dcm.b");
  EXPECT_EQ(StoredEventType(R"({"source":"a\"type\":\"no","type":"dcm.c"})"), "dcm.c");
  EXPECT_EQ(StoredEventType(R"({"data":[{"type":"x"}]})"), "");
  EXPECT_EQ(StoredEventType("not json"), "");
}

TEST(ResponseStreamTest, TheProducerWaitingForADrainIsToldOnceTheConnectionTookBytes) {
  ResponseStream s(100);
  int drained = 0;
  s.SetOnDrained([&] { ++drained; });
  std::string out;
  ASSERT_TRUE(s.Write("abc"));
  s.Take(&out);
  EXPECT_EQ(drained, 0) << "nobody waited";
  ASSERT_TRUE(s.Write("def"));
  s.WaitForDrain();
  s.Take(&out);
  EXPECT_EQ(drained, 1);
  s.Take(&out);
  EXPECT_EQ(drained, 1) << "once per wait, and only when bytes moved";
  s.SetOnDrained(nullptr);
  ASSERT_TRUE(s.Write("ghi"));
  s.WaitForDrain();
  s.Take(&out);
  EXPECT_EQ(drained, 1);
}

TEST(ResponseStreamTest, AWriteThatPassesTheBoundCutsTheStreamOffAndFreesItsBytes) {
  ResponseStream s(10);
  EXPECT_TRUE(s.Write("12345"));
  EXPECT_FALSE(s.Write("123456"));
  EXPECT_EQ(s.state(), ResponseStream::State::kOverflow);
  EXPECT_EQ(s.buffered(), 0u);
  EXPECT_FALSE(s.Write("1"));
}

TEST(ResponseStreamTest, TheWakeFiresOncePerEmptyToNonEmptyAndOnClose) {
  ResponseStream s(100);
  int wakes = 0;
  s.SetWake([&wakes] { ++wakes; });
  std::string out;
  EXPECT_EQ(s.Take(&out), ResponseStream::State::kOpen);  // empty: arms the wake
  s.Write("a");
  s.Write("b");
  EXPECT_EQ(wakes, 1);
  EXPECT_EQ(s.Take(&out), ResponseStream::State::kOpen);
  EXPECT_EQ(out, "ab");
  s.Take(&out);  // empty again: armed
  s.Close();
  EXPECT_EQ(wakes, 2);
  EXPECT_EQ(s.Take(&out), ResponseStream::State::kClosed);
}

TEST(ResponseStreamTest, AfterTheConnectionLeftWritesAreRefused) {
  ResponseStream s(100);
  s.Write("a");
  s.Detach();
  EXPECT_FALSE(s.Write("b"));
  EXPECT_EQ(s.state(), ResponseStream::State::kDetached);
}

}  // namespace
}  // namespace dcm::http
