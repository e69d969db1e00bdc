// The watch hub's feed from the audit index (watch_hub.h): entries as the index commits them,
// the gate that stops the feed while nobody watches, and the refill from the index when the next
// events watcher joins.
#include "events/cloud_event.h"
#include "projections/page_token.h"
#include "src/common/log.h"
#include "src/http/watch_hub.h"

namespace dcm::http {

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

bool WatchHub::WantsIndexed(int64_t newest_ms) {
  if (feeding_.load()) return true;
  int64_t seen = unfed_newest_ms_.load();
  while (newest_ms > seen && !unfed_newest_ms_.compare_exchange_weak(seen, newest_ms)) {
  }
  return false;
}

// Reads the entries after the release from the index (those indexed while the feed was stopped),
// so that pending_ again holds every entry not released yet. Entries fed as well are the same
// keys (kept once). Hub thread, with the feed on again (see Admit).
bool WatchHub::Refill() {
  AuditQuery query;
  query.page_token = EncodePageToken(released_);
  for (;;) {
    auto page = sources_.audit->Events(query);
    if (!page) {
      Logger("watch")->warn("msg=\"watch refill from the index failed\" error=\"{}\"",
                            page.error().message);
      return false;
    }
    for (AuditEntry& entry : page->entries) {
      std::string key = AuditEntryKey(entry);
      if (pending_.count(key) > 0) continue;
      newest_ms_ = std::max(newest_ms_, entry.time_ms);
      auto event = DecodeCloudEvent(entry.json);
      std::string subject = event ? event->subject : std::string();
      std::string type = event ? event->type : std::string(StoredEventType(entry.json));
      pending_.emplace(
          std::move(key),
          Pending{IndexedEvent{std::move(entry), std::move(subject), std::move(type)}, {}});
    }
    if (page->next_page_token.empty()) break;
    query.page_token = std::move(page->next_page_token);
  }
  complete_ = true;
  return true;
}

}  // namespace dcm::http
