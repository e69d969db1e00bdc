#include "src/http/watch_hub.h"

#include <fmt/format.h>
#include <strings.h>

#include <algorithm>
#include <set>

#include "events/cloud_event.h"
#include "projections/page_token.h"
#include "src/common/log.h"
#include "src/http/problem.h"

namespace dcm::http {
namespace {

constexpr const char* kKindNames[kWatchKinds + 1] = {"providers", "catalog_item_instances",
                                                     "cleanup_queue", "events"};
constexpr int kEventsGauge = kWatchKinds;
// Catch-up pages per watcher per round (100 entries each), so one long catch-up never holds the
// others' releases back.
constexpr int kCatchUpPages = 8;
// Keys a catching-up watcher scanned are remembered this long past the watermark, so a late
// entry the scan already sent is not sent again.
constexpr int64_t kScannedMemoryMs = 10000;

// Everything with a time at or before `ms` sorts below this key.
std::string WatermarkKey(int64_t ms) { return fmt::format("{:013}/\xff", ms); }

bool AttrsMatch(const std::vector<std::pair<std::string, std::string>>& filters,
                const WatchItem& item) {
  for (const auto& [name, wanted] : filters) {
    auto it = std::find_if(item.attrs.begin(), item.attrs.end(),
                           [&](const auto& a) { return a.first == name; });
    if (it == item.attrs.end() || it->second.size() != wanted.size() ||
        strncasecmp(it->second.data(), wanted.data(), wanted.size()) != 0) {
      return false;
    }
  }
  return true;
}

}  // namespace

struct WatchHub::EventWatcher {
  AuditQuery query;
  std::shared_ptr<ResponseStream> stream;
  std::string floor;   // entries at or below it are the reader's already (its resume point)
  std::string cursor;  // scanned (catching up) or released (live) up to here
  bool live = false;
  bool dead = false;
  int64_t stalled_since_ms = 0;   // catching up, its reader blocked since then
  std::set<std::string> scanned;  // catch-up keys near the watermark (see kScannedMemoryMs)

  bool Matches(const IndexedEvent& e) const {
    if (!query.subject.empty() && e.subject != query.subject) return false;
    if (!query.type.empty() && !TypeMatches(query.type, e.type)) return false;
    if (e.entry.time_ms < query.since_ms) return false;
    return query.until_ms == 0 || e.entry.time_ms <= query.until_ms;
  }
};

struct WatchHub::ListWatcher {
  ListWatchRequest request;
  std::shared_ptr<ResponseStream> stream;
  bool dead = false;
  bool synced = false;           // SYNCED sent: every change goes out
  std::string sync_cursor;       // until then: the snapshot went out up to this id
  int64_t stalled_since_ms = 0;  // syncing, its reader blocked since then

  // Whether the reader has `id` in its view: after SYNCED everything, before it what the
  // snapshot sent (the rest goes out as ADDED, as it is then, when the snapshot reaches it).
  bool Sent(const std::string& id) const { return synced || id <= sync_cursor; }
};

struct WatchHub::ListState {
  std::map<std::string, WatchItem> items;
  bool loaded = false;
  bool dirty = false;
  int64_t next_relist_ms = 0;
  std::vector<std::unique_ptr<ListWatcher>> watchers;
};

WatchHub::WatchHub(WatchOptions options, WatchSources sources, Metrics* metrics)
    : options_(options), sources_(std::move(sources)) {
  for (int k = 0; k < kWatchKinds; ++k) lists_.push_back(std::make_unique<ListState>());
  if (metrics == nullptr) return;
  for (int k = 0; k <= kWatchKinds; ++k) {
    gauges_[k] = &metrics->GetGauge("dcm_watch_streams", "Open watch streams (SPEC §9), by kind",
                                    fmt::format("kind=\"{}\"", kKindNames[k]));
  }
  sent_ = &metrics->GetCounter("dcm_watch_events_sent_total",
                               "SSE messages written to watch streams", "");
  cut_off_ = &metrics->GetCounter(
      "dcm_watch_cut_off_total",
      "Watch streams ended because their reader stopped reading (or fell a whole buffer behind)",
      "");
  behind_ = &metrics->GetCounter(
      "dcm_watch_fell_behind_total",
      "Live event watches that fell further behind than the hub keeps and went back to reading "
      "the index",
      "");
  late_ = &metrics->GetCounter(
      "dcm_watch_late_events_total",
      "Events indexed after the watch watermark passed their time (sent out of order)", "");
  refused_ = &metrics->GetCounter("dcm_watch_refused_total",
                                  "Watch requests refused at the stream cap", "");
}

WatchHub::~WatchHub() { Stop(); }

void WatchHub::Start() {
  std::lock_guard lock(mu_);
  if (stopped_ || thread_.joinable()) return;
  thread_ = std::thread([this] { Run(); });
}

void WatchHub::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  auto close_all = [](auto& watchers) {
    for (auto& w : watchers) {
      w->stream->SetOnDrained(nullptr);
      w->stream->Close();
    }
    watchers.clear();
  };
  close_all(event_watchers_);
  close_all(new_events_);
  close_all(new_lists_);
  for (auto& l : lists_) close_all(l->watchers);
  streams_ = 0;
}

template <class Watcher>
HttpResponse WatchHub::Admit(std::unique_ptr<Watcher> w,
                             std::vector<std::unique_ptr<Watcher>> WatchHub::*queue) {
  if (streams_.fetch_add(1) >= options_.max_streams) {
    streams_.fetch_sub(1);
    if (refused_) refused_->Inc();
    HttpResponse r = Problem(
        503, fmt::format("too many watch streams (at most {}); retry later", options_.max_streams));
    r.headers.emplace_back("Retry-After", "5");
    return r;
  }
  w->stream = std::make_shared<ResponseStream>(options_.buffer_bytes);
  // A watcher waiting for its reader (catching up, or a list's snapshot) goes on at once when
  // the connection took its bytes, not at the next tick.
  w->stream->SetOnDrained([this] {
    {
      std::lock_guard lock(mu_);
      drained_ = true;
    }
    cv_.notify_one();
  });
  if constexpr (std::is_same_v<Watcher, EventWatcher>) {
    // Fed from now on. What the index committed while nobody watched is read from it when this
    // watcher joins (Refill): every entry is either in the index by then or fed.
    std::lock_guard lock(mu_);
    feeding_ = true;
  }
  HttpResponse r;
  r.content_type = "text/event-stream; charset=utf-8";
  r.stream = w->stream;
  // Reconnect after 1 s (EventSource's default is 3 s).
  w->stream->Write("retry: 1000\n\n");
  {
    std::lock_guard lock(mu_);
    if (stopped_) {
      streams_.fetch_sub(1);
      return Problem(503, "the watch service is stopping");
    }
    (this->*queue).push_back(std::move(w));
  }
  cv_.notify_one();
  return r;
}

HttpResponse WatchHub::WatchEvents(EventWatchRequest request) {
  auto w = std::make_unique<EventWatcher>();
  if (!request.resume.empty()) {
    auto key = DecodePageToken(request.resume);
    if (!key || key->empty()) {
      return Problem(400, "Last-Event-ID is not an id this server sent",
                     {{"Last-Event-ID", "is not a watch id"}});
    }
    w->floor = *key;
  } else if (request.query.since_ms > 0) {
    w->floor = WatermarkKey(request.query.since_ms - 1);
  }
  w->query = std::move(request.query);
  return Admit(std::move(w), &WatchHub::new_events_);
}

HttpResponse WatchHub::WatchList(ListWatchRequest request) {
  if (!sources_.listers[static_cast<int>(request.kind)]) {
    return Problem(404, "this list cannot be watched here");
  }
  auto w = std::make_unique<ListWatcher>();
  w->request = std::move(request);
  return Admit(std::move(w), &WatchHub::new_lists_);
}

void WatchHub::Changed(WatchKind kind) {
  std::lock_guard lock(mu_);
  dirty_[static_cast<int>(kind)] = true;
  // No notify: the next tick (at most `tick` away) re-lists, coalescing bursts of commits.
}

void WatchHub::Run() {
  std::unique_lock lock(mu_);
  while (!stopped_) {
    Round(lock);
    cv_.wait_for(lock, options_.tick, [this] {
      return stopped_ || drained_ || !inbox_.empty() || !new_events_.empty() || !new_lists_.empty();
    });
  }
}

void WatchHub::Poll() {
  std::unique_lock lock(mu_);
  Round(lock);
}

void WatchHub::Round(std::unique_lock<std::mutex>& lock) {
  drained_ = false;
  std::vector<IndexedEvent> batch;
  batch.swap(inbox_);
  auto fresh_events = std::move(new_events_);
  new_events_.clear();
  auto fresh_lists = std::move(new_lists_);
  new_lists_.clear();
  bool dirty[kWatchKinds];
  std::copy(std::begin(dirty_), std::end(dirty_), dirty);
  std::fill(std::begin(dirty_), std::end(dirty_), false);
  lock.unlock();

  const int64_t now_ms = sources_.clock->NowMillis();
  newest_ms_ = std::max(newest_ms_, unfed_newest_ms_.load());
  TakeIndexed(std::move(batch));
  Release(now_ms);
  if (!fresh_events.empty() && !complete_ && !Refill()) {
    // Without the entries it was not fed, a watch could miss some: the clients reconnect (with
    // their Last-Event-ID, if any) and the next round tries again.
    for (auto& w : fresh_events) w->stream->Close();
  }
  for (auto& w : fresh_events) {
    // "Now" is the release; before the first one (a restart while the index lags), the clock
    // less the settle time, read from the index like a resume.
    if (w->floor.empty()) {
      w->floor = watermark_ms_ > 0 ? released_ : WatermarkKey(now_ms - options_.settle.count());
    }
    w->cursor = w->floor;
    // Live at once only from the release on; anything earlier is read from the index first.
    w->live = watermark_ms_ > 0 && w->floor >= released_;
    event_watchers_.push_back(std::move(w));
  }
  for (auto& w : event_watchers_) {
    if (!w->live && !w->dead) CatchUp(*w);
  }
  for (int k = 0; k < kWatchKinds; ++k) {
    ListState& list = *lists_[k];
    list.dirty = list.dirty || dirty[k];
    bool joining = false;
    for (auto& w : fresh_lists) {
      if (!w || static_cast<int>(w->request.kind) != k) continue;
      list.watchers.push_back(std::move(w));
      joining = true;
    }
    const bool due = list.dirty && !list.watchers.empty() && now_ms >= list.next_relist_ms;
    if (joining || due) Relist(k, now_ms);
    for (auto& w : list.watchers) {
      if (list.loaded && !w->synced && !w->dead) Sync(list, *w);
    }
  }
  Prune();
  lock.lock();
  if (watermark_ms_ > 0 && event_watchers_.empty() && new_events_.empty() && feeding_) {
    // Nobody to feed: the audit runner stops copying entries for the hub until a watcher asks.
    feeding_ = false;
    complete_ = false;
  }
}

void WatchHub::TakeIndexed(std::vector<IndexedEvent> batch) {
  for (auto& e : batch) {
    newest_ms_ = std::max(newest_ms_, e.entry.time_ms);
    std::string key = AuditEntryKey(e.entry);
    if (key >= released_) {
      pending_.emplace(std::move(key), Pending{std::move(e), {}});
      continue;
    }
    // Late: indexed after the watermark passed its time. A watcher that passed its place gets
    // it now, out of order; a live one behind it gets it in order from the retained entries; a
    // catching-up one before it reads it from the index.
    if (late_) late_->Inc();
    bool retain = false;
    for (auto& w : event_watchers_) {
      if (w->dead || key <= w->floor || !w->Matches(e)) continue;
      if (key > w->cursor) {
        retain = retain || w->live;
        continue;
      }
      if (w->scanned.count(key) > 0) continue;  // its catch-up scan sent it
      Send(*w, e, EncodePageToken(w->cursor));
    }
    if (retain) Retain(pending_.emplace(std::move(key), Pending{std::move(e), {}}).first);
  }
}

// A released entry, rendered once for every watcher; its bytes count against kRetainBytes.
void WatchHub::Retain(std::map<std::string, Pending>::iterator it) {
  if (!it->second.sse.empty()) return;
  const IndexedEvent& e = it->second.event;
  AppendSse(&it->second.sse, EncodePageToken(it->first), e.type, e.entry.json);
  std::string().swap(it->second.event.entry.json);
  retained_bytes_ += it->first.size() + it->second.sse.size();
}

void WatchHub::Release(int64_t now_ms) {
  const int64_t settle = options_.settle.count();
  const int64_t lag = sources_.audit_lag ? sources_.audit_lag() : 0;
  int64_t w = now_ms - settle;
  if (lag > 0) w = std::min(w, newest_ms_ - settle);
  const bool any_live = std::any_of(event_watchers_.begin(), event_watchers_.end(),
                                    [](const auto& ew) { return ew->live && !ew->dead; });
  if (w > watermark_ms_) {
    watermark_ms_ = w;
    std::string release = WatermarkKey(w);
    auto end = pending_.lower_bound(release);
    if (!any_live) {  // nobody to render them for
      pending_.erase(pending_.begin(), end);
      retained_bytes_ = 0;
    }
    for (auto it = pending_.lower_bound(released_); it != end; ++it) Retain(it);
    released_ = std::move(release);
  }
  for (auto& ew : event_watchers_) {
    if (ew->live && !ew->dead) Pump(*ew);
  }
  Trim();
}

// Sends a live watcher the released entries after its cursor, in order, while its reader keeps
// up; then it waits (for the connection to take its bytes, or the next round).
void WatchHub::Pump(EventWatcher& w) {
  if (Blocked(w)) return;
  auto it = pending_.upper_bound(w.cursor);
  for (; it != pending_.end() && it->first < released_; ++it) {
    if (!w.Matches(it->second.event)) continue;
    if (!w.stream->Write(it->second.sse)) {
      w.dead = true;
      return;
    }
    if (sent_) sent_->Inc();
    if (Blocked(w)) {
      w.cursor = it->first;
      return;
    }
  }
  w.cursor = std::max(w.cursor, released_);
  ForgetScanned(w);
  // A bounded watch ends once the watermark passed its `until`.
  if (w.query.until_ms > 0 && watermark_ms_ > w.query.until_ms) w.stream->Close();
}

// Drops the released entries every live watcher passed. Past `retain_bytes` the live watchers
// furthest behind read the index from their cursors instead (catching up), so the entries kept
// for slow readers stay bounded. One pass over the entries, whatever the number of watchers.
void WatchHub::Trim() {
  std::vector<EventWatcher*> behind;
  for (auto& w : event_watchers_) {
    if (w->live && !w->dead && w->cursor < released_) behind.push_back(w.get());
  }
  std::sort(behind.begin(), behind.end(),
            [](const EventWatcher* a, const EventWatcher* b) { return a->cursor < b->cursor; });
  auto size = [](const auto& it) { return it->first.size() + it->second.sse.size(); };
  // Bytes kept while behind[i] is live: those of the entries after its cursor.
  size_t passed = 0;
  size_t kept_from = 0;
  auto it = pending_.begin();
  for (; kept_from < behind.size(); ++kept_from) {
    for (; it != pending_.end() && it->first < released_ && it->first <= behind[kept_from]->cursor;
         ++it) {
      passed += size(it);
    }
    if (retained_bytes_ - passed <= options_.retain_bytes) break;
    behind[kept_from]->live = false;
    if (behind_) behind_->Inc();
  }
  const std::string& keep_after = kept_from < behind.size() ? behind[kept_from]->cursor : released_;
  for (auto e = pending_.begin();
       e != pending_.end() && e->first < released_ && e->first <= keep_after;) {
    retained_bytes_ -= size(e);
    e = pending_.erase(e);
  }
}

void WatchHub::ForgetScanned(EventWatcher& w) {
  if (w.scanned.empty()) return;
  w.scanned.erase(w.scanned.begin(),
                  w.scanned.lower_bound(WatermarkKey(watermark_ms_ - kScannedMemoryMs)));
}

// Catching up (and a list's snapshot) goes on only while the reader keeps up (at most half a
// buffer waits for it): a slow one catches up at its own pace, and one blocked for
// `stall_timeout` is cut off.
bool WatchHub::Blocked(ResponseStream& stream, int64_t& stalled_since_ms) {
  if (!stream.WaitForDrainIfAbove(options_.buffer_bytes / 2)) {
    stalled_since_ms = 0;
    return false;
  }
  const int64_t now_ms = sources_.clock->NowMillis();
  if (stalled_since_ms == 0) stalled_since_ms = now_ms;
  if (now_ms - stalled_since_ms >= options_.stall_timeout.count()) stream.CutOff();
  return true;
}

bool WatchHub::Blocked(EventWatcher& w) { return Blocked(*w.stream, w.stalled_since_ms); }

// The snapshot of a joining list watcher, in id order, as far as its reader keeps up; SYNCED
// once it is all out.
void WatchHub::Sync(ListState& list, ListWatcher& w) {
  for (auto it = list.items.upper_bound(w.sync_cursor); it != list.items.end(); ++it) {
    if (Blocked(*w.stream, w.stalled_since_ms)) return;
    if (AttrsMatch(w.request.filters, it->second)) {
      std::string out;
      AppendSse(&out, "", "ADDED", it->second.json);
      if (!w.stream->Write(out)) {
        w.dead = true;
        return;
      }
      if (sent_) sent_->Inc();
    }
    w.sync_cursor = it->first;
  }
  w.synced = true;
  std::string out;
  AppendSse(&out, "", "SYNCED", "{}");
  w.dead = !w.stream->Write(out);
}

void WatchHub::CatchUp(EventWatcher& w) {
  if (watermark_ms_ <= 0) return;  // nothing released yet: no upper bound to scan to
  ForgetScanned(w);
  for (int page_no = 0; page_no < kCatchUpPages; ++page_no) {
    if (Blocked(w)) return;
    AuditQuery query = w.query;
    query.page_token = EncodePageToken(w.cursor);
    query.until_ms = query.until_ms > 0 ? std::min(query.until_ms, watermark_ms_) : watermark_ms_;
    query.max_page_size = 100;
    auto page = sources_.audit->Events(query);
    if (!page) {
      Logger("watch")->warn("msg=\"watch catch-up failed\" error=\"{}\"", page.error().message);
      return;  // tried again next round
    }
    const int64_t remember_from = watermark_ms_ - kScannedMemoryMs;
    for (const AuditEntry& entry : page->entries) {
      std::string key = AuditEntryKey(entry);
      const std::string id = EncodePageToken(key);
      std::string out;
      AppendSse(&out, id, StoredEventType(entry.json), entry.json);
      if (!w.stream->Write(out)) {
        w.dead = true;
        return;
      }
      if (sent_) sent_->Inc();
      if (entry.time_ms >= remember_from) w.scanned.insert(key);
      w.cursor = std::move(key);
      // The rest of the page waits (read again from the cursor): a page never overflows a
      // reader that keeps up.
      if (Blocked(w)) return;
    }
    if (page->next_page_token.empty()) {
      w.cursor = std::max(w.cursor, released_);
      w.live = true;
      if (w.query.until_ms > 0 && watermark_ms_ > w.query.until_ms) w.stream->Close();
      return;
    }
    auto next = DecodePageToken(page->next_page_token);
    if (next) w.cursor = std::max(w.cursor, *next);
  }
}

void WatchHub::Send(EventWatcher& w, const IndexedEvent& e, const std::string& id) {
  std::string out;
  AppendSse(&out, id, e.type, e.entry.json);
  if (!w.stream->Write(out)) {
    w.dead = true;
    return;
  }
  if (sent_) sent_->Inc();
}

void WatchHub::Relist(int kind, int64_t now_ms) {
  ListState& list = *lists_[kind];
  list.next_relist_ms = now_ms + options_.list_interval.count();
  auto fresh = sources_.listers[kind]();
  if (!fresh) {
    Logger("watch")->warn("msg=\"watch list failed\" kind={} error=\"{}\"", kKindNames[kind],
                          fresh.error().message);
    list.dirty = true;
    return;
  }
  list.dirty = false;
  std::map<std::string, WatchItem> next;
  for (auto& item : *fresh) next.emplace(item.id, std::move(item));
  auto notify = [&](const WatchItem* before, const WatchItem* after) {
    const std::string& id = before != nullptr ? before->id : after->id;
    for (auto& w : list.watchers) {
      if (w->dead || !w->Sent(id)) continue;
      const bool had = before != nullptr && AttrsMatch(w->request.filters, *before);
      const bool has = after != nullptr && AttrsMatch(w->request.filters, *after);
      std::string out;
      if (!had && has) {
        AppendSse(&out, "", "ADDED", after->json);
      } else if (had && has && before->json != after->json) {
        AppendSse(&out, "", "MODIFIED", after->json);
      } else if (had && !has) {
        AppendSse(&out, "", "DELETED", (after != nullptr ? after : before)->json);
      } else {
        continue;
      }
      if (!w->stream->Write(out)) {
        w->dead = true;
      } else if (sent_) {
        sent_->Inc();
      }
    }
  };
  if (list.loaded && !list.watchers.empty()) {
    for (const auto& [id, item] : list.items) {
      auto it = next.find(id);
      notify(&item, it == next.end() ? nullptr : &it->second);
    }
    for (const auto& [id, item] : next) {
      if (list.items.count(id) == 0) notify(nullptr, &item);
    }
  }
  list.items = std::move(next);
  list.loaded = true;
}

void WatchHub::Prune() {
  auto gone = [this](const auto& w) {
    if (!w->dead && w->stream->state() == ResponseStream::State::kOpen) return false;
    w->stream->SetOnDrained(nullptr);  // the connection may hold the stream longer than the hub
    if (w->stream->state() == ResponseStream::State::kOverflow && cut_off_) cut_off_->Inc();
    w->stream->Close();
    streams_.fetch_sub(1);
    return true;
  };
  std::erase_if(event_watchers_, gone);
  if (gauges_[kEventsGauge])
    gauges_[kEventsGauge]->Set(static_cast<int64_t>(event_watchers_.size()));
  for (int k = 0; k < kWatchKinds; ++k) {
    ListState& list = *lists_[k];
    std::erase_if(list.watchers, gone);
    if (list.watchers.empty() && list.loaded) {  // nobody watches: stop re-listing it
      list.items.clear();
      list.loaded = false;
    }
    if (gauges_[k]) gauges_[k]->Set(static_cast<int64_t>(list.watchers.size()));
  }
}

}  // namespace dcm::http
