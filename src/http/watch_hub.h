// WatchHub: the live side of the API (SPEC §9): Server-Sent Event streams of the audit index
// (`GET /events?watch=true`) and of the lists (`GET /providers|/catalog-item-instances|
// /cleanup-queue?watch=true`), fed by the projections as they commit, on one thread.
//
// Events, in the order of GET /events (time, then log position), with resume tokens:
//
//   AuditProjection ── Indexed(batch) ──▶ inbox ──▶ pending (sorted by index key)
//     (only while an events watcher exists: else the feed stops (WantsIndexed), and the first
//      watcher to join reads the entries not released yet from the index: Refill)
//                                                     │ released up to the watermark W,
//                                                     │ rendered once, kept until every live
//                                                     ▼ watcher passed it
//     watchers: catching up (scan the index from the cursor up to the release, page by page)
//               ──▶ live (pumped from the released entries after its cursor)
//     both only while the reader keeps up: at most half a buffer waits for it, and the hub goes
//     on as soon as the connection took the bytes.
//
//   W = now − settle while the audit runner has no lag, else the newest indexed time − settle;
//   it never goes back. An entry is released once W passes its time, so entries that the index
//   commits out of time order (several partitions and topics) still go out in index order. An
//   entry indexed below W (later than `settle`) is "late": it is sent at once, out of order,
//   and counted (dcm_watch_late_events_total); no watcher misses it.
//   Each message's `id:` is the index key it was sent at (hex, as a page token): resuming with
//   Last-Event-ID scans the index after it, on any instance (the keys derive from the log).
//   A late entry goes at once to a watcher that passed its place (with its cursor as the id, so
//   a resume never skips anything); a live one behind it gets it in order.
//
// Lists, as Kubernetes watches do: the current list (ADDED each, in id order and only as fast as
// the reader reads; then SYNCED), then ADDED / MODIFIED / DELETED with the full object (while
// the snapshot goes out, changes to what it already sent). The hub keeps the last rendering of each
// list that has watchers, and when a projection that feeds it commits (AppliedOffsets observer)
// re-lists it, at most every `list_interval`, and sends the difference. The cost of a re-list grows
// with the list (see docs/operations.md "Watches").
//
// Bounds: at most `max_streams` streams (then 503); each stream buffers at most `buffer_bytes`
// for its reader. Released entries kept for live watchers behind are bounded by `retain_bytes`:
// past it the live watcher furthest behind reads the index instead (catching up). A reader
// blocked for `stall_timeout` is cut off (it reconnects with Last-Event-ID). A list watcher is cut
// off when a change would pass its bound (it reconnects and gets the snapshot again). So a reader
// that does not read never slows the others or grows the memory: memory for streams is bounded
// by max_streams × buffer_bytes + retain_bytes. Metrics: dcm_watch_streams{kind},
// dcm_watch_events_sent_total, dcm_watch_fell_behind_total, dcm_watch_cut_off_total,
// dcm_watch_late_events_total, dcm_watch_refused_total.
//
// Thread-safety: Watch*, Indexed and Changed from any thread; Start/Stop from one.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "projections/audit_projection.h"
#include "src/common/clock.h"
#include "src/common/metrics.h"
#include "src/common/result.h"
#include "src/http/http_types.h"
#include "src/http/response_stream.h"

namespace dcm::http {

enum class WatchKind { kProviders, kCatalogItemInstances, kCleanupQueue };
inline constexpr int kWatchKinds = 3;

// One object of a watched list: its id, its JSON as the list renders it, and the values its
// filters look at (e.g. {"health_status", "Ready"}).
struct WatchItem {
  std::string id;
  std::string json;
  std::vector<std::pair<std::string, std::string>> attrs;
};
using WatchLister = std::function<Result<std::vector<WatchItem>>()>;

struct WatchOptions {
  size_t max_streams = 2048;
  size_t buffer_bytes = 128 * 1024;
  std::chrono::milliseconds settle{250};
  std::chrono::milliseconds stall_timeout{10000};  // a reader blocked this long is cut off
  size_t retain_bytes = 32 << 20;  // released entries kept for live watchers behind (all of them)
  std::chrono::milliseconds list_interval{100};
  std::chrono::milliseconds tick{50};  // the hub's wake-up when nothing happens
};

// What the hub reads: the audit index, the audit runner's lag, and a lister per list kind.
struct WatchSources {
  const AuditView* audit = nullptr;
  std::function<int64_t()> audit_lag;  // null: treated as 0
  WatchLister listers[kWatchKinds];    // null: that kind answers 404
  const Clock* clock = nullptr;
};

// The filters of one events watch (as GET /events), and where it starts.
struct EventWatchRequest {
  AuditQuery query;    // subject, type, since_ms, until_ms (page fields unused)
  std::string resume;  // Last-Event-ID (a token); empty: from since, or from now
};
// The filters of one list watch: attribute name -> wanted value (all must match).
struct ListWatchRequest {
  WatchKind kind = WatchKind::kProviders;
  std::vector<std::pair<std::string, std::string>> filters;
};

class WatchHub {
 public:
  WatchHub(WatchOptions options, WatchSources sources, Metrics* metrics);
  ~WatchHub();

  // Start runs Poll every `tick` (and at once on news) on the hub's thread. Stop closes every
  // stream; later watch requests answer 503.
  void Start();
  void Stop();
  // One round now: take what was indexed and the new watchers, release, catch up, re-list.
  // Hub thread only (tests call it without Start).
  void Poll();

  // A streamed 200 (text/event-stream), or a problem: 400 (bad resume token), 404 (kind not
  // served), 503 (at max_streams, or stopped).
  HttpResponse WatchEvents(EventWatchRequest request);
  HttpResponse WatchList(ListWatchRequest request);

  // The audit index committed these entries (AuditProjection's feed; the runner's thread).
  void Indexed(std::vector<IndexedEvent> entries);
  // AuditProjection's gate, after a commit that indexed entries up to `newest_ms`: whether the
  // hub wants them (Indexed). It does while an events watcher exists (or one was asked for), and
  // before the first release; else the entries are not copied, and the next events watcher
  // reads the ones not released yet from the index when it joins (Refill).
  bool WantsIndexed(int64_t newest_ms);
  // A projection that feeds `kind` committed (AppliedOffsets observer).
  void Changed(WatchKind kind);

  size_t streams() const { return streams_.load(); }

 private:
  struct EventWatcher;
  struct ListWatcher;
  struct ListState;
  void Run();
  // One round on the hub thread: take the inbox, admit, release, catch up, re-list.
  void Round(std::unique_lock<std::mutex>& lock);
  void TakeIndexed(std::vector<IndexedEvent> batch);
  bool Refill();
  void Release(int64_t now_ms);
  void CatchUp(EventWatcher& w);
  struct Pending {
    IndexedEvent event;  // its json dropped once rendered
    std::string sse;     // the SSE message, rendered once released
  };
  void Retain(std::map<std::string, Pending>::iterator it);
  void Pump(EventWatcher& w);
  void Trim();
  void ForgetScanned(EventWatcher& w);
  bool Blocked(ResponseStream& stream, int64_t& stalled_since_ms);
  bool Blocked(EventWatcher& w);
  void Sync(ListState& list, ListWatcher& w);
  void Relist(int kind, int64_t now_ms);
  void Send(EventWatcher& w, const IndexedEvent& e, const std::string& id);
  void Prune();
  // Gives `w` a stream under the cap and queues it for the hub thread: the 200 to answer with,
  // or the 503.
  template <class Watcher>
  HttpResponse Admit(std::unique_ptr<Watcher> w,
                     std::vector<std::unique_ptr<Watcher>> WatchHub::*queue);

  WatchOptions options_;
  WatchSources sources_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;                                   // under mu_
  std::vector<IndexedEvent> inbox_;                        // under mu_
  std::vector<std::unique_ptr<EventWatcher>> new_events_;  // under mu_
  std::vector<std::unique_ptr<ListWatcher>> new_lists_;    // under mu_
  bool dirty_[kWatchKinds] = {};                           // under mu_
  bool drained_ = false;  // under mu_: a waiting watcher's reader took its bytes
  // Written under mu_, read by WantsIndexed without it: whether the audit feed sends entries.
  std::atomic<bool> feeding_{true};
  std::atomic<int64_t> unfed_newest_ms_{0};  // the newest time indexed and not fed
  std::atomic<size_t> streams_{0};
  std::thread thread_;
  // Hub thread only.
  // By index key (<ts>/<pos>): entries not released yet, and released ones that a live watcher
  // has not passed yet (`retained_bytes_` of them, at most `retain_bytes` or so).
  std::map<std::string, Pending> pending_;
  size_t retained_bytes_ = 0;
  std::string released_;  // entries below it may go out
  // Whether pending_ holds every indexed entry after released_: not once the feed stopped (no
  // events watcher), until Refill read them from the index for the next one.
  bool complete_ = true;
  int64_t watermark_ms_ = 0;
  int64_t newest_ms_ = 0;  // the newest time indexed
  std::vector<std::unique_ptr<EventWatcher>> event_watchers_;
  std::vector<std::unique_ptr<ListState>> lists_;
  Gauge* gauges_[kWatchKinds + 1] = {};
  Counter* sent_ = nullptr;
  Counter* cut_off_ = nullptr;
  Counter* behind_ = nullptr;
  Counter* late_ = nullptr;
  Counter* refused_ = nullptr;
};

// The index key of an entry (<ts 13>/<topic>/<partition 6>/<offset 12>), as AuditView's page
// tokens hold it.
std::string AuditEntryKey(const AuditEntry& entry);
// The top-level `type` of a CloudEvent as the index stores it (a string without escapes, as
// CloudEvents types are; "" if none), without decoding the event.
std::string_view StoredEventType(std::string_view json);
// One SSE message: `id:` (when not empty), `event:`, and `data:` lines (one per line of `data`).
void AppendSse(std::string* out, std::string_view id, std::string_view event,
               std::string_view data);

}  // namespace dcm::http
