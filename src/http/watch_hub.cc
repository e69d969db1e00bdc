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

std::string AuditEntryKey(const AuditEntry& e) {
  return fmt::format("{:013}/{}/{:06}/{:012}", e.time_ms, e.topic, e.partition, e.offset);
}

void AppendSse(std::string* out, std::string_view id, std::string_view event,
               std::string_view data) {
  if (!id.empty()) out->append("id: ").append(id).append("\n");
  out->append("event: ").append(event).append("\n");
  while (true) {  // a line break inside the data starts another data: line
    const size_t nl = data.find('\n');
    std::string_view line = data.substr(0, nl);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    out->append("data: ").append(line).append("\n");
    if (nl == std::string_view::npos) break;
    data.remove_prefix(nl + 1);
  }
  out->append("\n");
}

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
      "Live event watches that fell half a buffer behind and went back to reading the index", "");
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
    for (auto& w : watchers) w->stream->Close();
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

void WatchHub::Indexed(std::vector<IndexedEvent> entries) {
  {
    std::lock_guard lock(mu_);
    if (inbox_.empty()) {
      inbox_ = std::move(entries);
    } else {
      for (auto& e : entries) inbox_.push_back(std::move(e));
    }
  }
  cv_.notify_one();
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
    cv_.wait_for(lock, options_.tick);
  }
}

void WatchHub::Poll() {
  std::unique_lock lock(mu_);
  Round(lock);
}

void WatchHub::Round(std::unique_lock<std::mutex>& lock) {
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
  TakeIndexed(std::move(batch));
  Release(now_ms);
  for (auto& w : fresh_events) {
    if (w->floor.empty() || w->floor >= released_) {
      w->cursor = std::max(w->floor, released_);
      w->floor = w->cursor;  // nothing before "now" (or its resume point) is the reader's
      w->live = true;
    } else {
      w->cursor = w->floor;
    }
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
      if (!w->synced && !w->dead) Sync(list, *w);
    }
  }
  Prune();
  lock.lock();
}

void WatchHub::TakeIndexed(std::vector<IndexedEvent> batch) {
  for (auto& e : batch) {
    newest_ms_ = std::max(newest_ms_, e.entry.time_ms);
    std::string key = AuditEntryKey(e.entry);
    if (key >= released_) {
      pending_.emplace(std::move(key), std::move(e));
      continue;
    }
    // Late: indexed after the watermark passed its time. Sent now, out of order, to each
    // watcher it concerns that will not read it from the index.
    if (late_) late_->Inc();
    for (auto& w : event_watchers_) {
      if (w->dead || key <= w->floor || !w->Matches(e)) continue;
      if (!w->live && key > w->cursor) continue;  // its catch-up scan will read it
      if (w->scanned.count(key) > 0) continue;    // its catch-up scan sent it
      Send(*w, e, EncodePageToken(w->cursor));
      FellBehind(*w);  // the key is below its cursor: the scan goes on after it
    }
  }
}

void WatchHub::Release(int64_t now_ms) {
  const int64_t settle = options_.settle.count();
  const int64_t lag = sources_.audit_lag ? sources_.audit_lag() : 0;
  int64_t w = now_ms - settle;
  if (lag > 0) w = std::min(w, newest_ms_ - settle);
  if (w <= watermark_ms_) return;
  watermark_ms_ = w;
  std::string release = WatermarkKey(w);
  auto end = pending_.lower_bound(release);
  for (auto it = pending_.begin(); it != end; ++it) {
    const std::string id = EncodePageToken(it->first);
    for (auto& ew : event_watchers_) {
      if (ew->live && !ew->dead && it->first > ew->cursor && ew->Matches(it->second)) {
        Send(*ew, it->second, id);
        if (FellBehind(*ew)) ew->cursor = it->first;  // the rest comes from the index
      }
    }
  }
  pending_.erase(pending_.begin(), end);
  released_ = std::move(release);
  for (auto& ew : event_watchers_) {
    if (!ew->live) continue;
    ew->cursor = std::max(ew->cursor, released_);
    if (!ew->scanned.empty()) {
      ew->scanned.erase(ew->scanned.begin(),
                        ew->scanned.lower_bound(WatermarkKey(w - kScannedMemoryMs)));
    }
    // A bounded watch ends once the watermark passed its `until`.
    if (ew->query.until_ms > 0 && w > ew->query.until_ms) ew->stream->Close();
  }
}

// A live watcher with half a buffer waiting for its reader reads the index from where it is
// instead (catching up), so a burst or a slow reader never fills its buffer.
bool WatchHub::FellBehind(EventWatcher& w) {
  if (!w.live || w.dead || w.stream->buffered() <= options_.buffer_bytes / 2) return false;
  w.live = false;
  if (behind_) behind_->Inc();
  return true;
}

// Catching up (and a list's snapshot) goes on only while the reader keeps up (at most half a
// buffer waits for it): a slow one catches up at its own pace, and one blocked for
// `stall_timeout` is cut off.
bool WatchHub::Blocked(ResponseStream& stream, int64_t& stalled_since_ms) {
  if (stream.buffered() <= options_.buffer_bytes / 2) {
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
      auto event = DecodeCloudEvent(entry.json);
      AppendSse(&out, id, event ? std::string_view(event->type) : "", entry.json);
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
      if (!w->stream->Write(out)) w->dead = true;
      if (sent_) sent_->Inc();
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
