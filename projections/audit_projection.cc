#include "projections/audit_projection.h"

#include <fmt/format.h>

#include <charconv>

#include "projections/page_token.h"
#include "src/common/log.h"
#include "src/common/time_format.h"

namespace dcm {
namespace {

constexpr std::string_view kEntityPrefix = "au/s/";
constexpr std::string_view kTimePrefix = "au/e/";
constexpr std::string_view kSeenPrefix = "au/i/";
constexpr std::string_view kProviderPrefix = "au/p/";
constexpr std::string_view kProbeSeenPrefix = "au/t/";
constexpr std::string_view kSweptKey = "au/w";
// The largest time a 13-digit key holds (year 2286); later or unparsable times are clamped.
constexpr int64_t kMaxTimeMs = 9999999999999;

// "<ts 13>/<topic>/<partition 6>/<offset 12>": the part of a key after the entity or time prefix.
std::string Position(int64_t time_ms, const EventPosition& p) {
  return fmt::format("{:013}/{}/{:06}/{:012}", time_ms, p.topic, p.partition, p.offset);
}

// Parses the Position() suffix of a key back into `entry` (json left alone).
bool ParsePosition(std::string_view suffix, AuditEntry& entry) {
  // From the right: offset (12), '/', partition (6), '/', topic, '/', ts (13).
  if (suffix.size() < 13 + 1 + 1 + 1 + 6 + 1 + 12) return false;
  auto number = [](std::string_view digits, auto& out) {
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), out);
    return ec == std::errc() && end == digits.data() + digits.size();
  };
  const size_t offset_at = suffix.size() - 12;
  const size_t partition_at = offset_at - 1 - 6;
  if (suffix[offset_at - 1] != '/' || suffix[partition_at - 1] != '/' || suffix[13] != '/') {
    return false;
  }
  entry.topic = std::string(suffix.substr(14, partition_at - 1 - 14));
  return number(suffix.substr(0, 13), entry.time_ms) &&
         number(suffix.substr(partition_at, 6), entry.partition) &&
         number(suffix.substr(offset_at, 12), entry.offset);
}

// TypeMatches on a stored event: a substring check first, the decoder only for candidates.
bool StoredTypeMatches(std::string_view json, std::string_view pattern) {
  if (pattern.empty()) return true;
  const std::string_view literal =
      pattern.ends_with('*') ? pattern.substr(0, pattern.size() - 1) : pattern;
  if (json.find(literal) == std::string_view::npos) return false;
  auto event = DecodeCloudEvent(json);
  return event && TypeMatches(pattern, event->type);
}

}  // namespace

std::string EscapeAuditEntity(std::string_view id) {
  if (id.empty()) return "%";  // never the escape of a non-empty id
  std::string out;
  out.reserve(id.size());
  for (char c : id) {
    if (c == '%') {
      out += "%25";
    } else if (c == '/') {
      out += "%2F";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string UnescapeAuditEntity(std::string_view escaped) {
  if (escaped == "%") return "";
  std::string out;
  out.reserve(escaped.size());
  for (size_t i = 0; i < escaped.size(); ++i) {
    if (escaped[i] == '%' && escaped.substr(i, 3) == "%25") {
      out.push_back('%');
      i += 2;
    } else if (escaped[i] == '%' && escaped.substr(i, 3) == "%2F") {
      out.push_back('/');
      i += 2;
    } else {
      out.push_back(escaped[i]);
    }
  }
  return out;
}

AuditProjection::AuditProjection(Store* store, std::string providers_topic, Metrics* metrics,
                                 AuditRetention retention)
    : store_(store), providers_topic_(std::move(providers_topic)), retention_(retention) {
  if (retention_.sweep_interval.count() <= 0) {
    retention_.sweep_interval = std::clamp<std::chrono::milliseconds>(
        retention_.window / 10, std::chrono::seconds(1), std::chrono::seconds(60));
  }
  if (metrics) {
    expired_ = &metrics->GetCounter("dcm_audit_probes_expired_total",
                                    "Probe events dropped from the audit index by the "
                                    "HEALTH_EVENTS_RETENTION sweep",
                                    "");
    indexed_ = &metrics->GetCounter("dcm_audit_events_indexed_total",
                                    "Events added to the audit index", "");
    duplicates_ = &metrics->GetCounter("dcm_audit_duplicates_total",
                                       "Events skipped by the audit index as copies of one "
                                       "already indexed from the same partition",
                                       "");
  }
}

Status AuditProjection::Apply(const CloudEvent& event, const EventPosition& position,
                              StoreBatch& batch) {
  Status status = Index(event, position, batch);
  if (status) ++applied_in_batch_;  // the runner puts it in AfterCommit's `applied`
  return status;
}

Status AuditProjection::Index(const CloudEvent& event, const EventPosition& position,
                              StoreBatch& batch) {
  if (!retention_.probes_topic.empty() && position.topic == retention_.probes_topic) {
    int64_t time_ms = ParseRfc3339(event.time).value_or(position.timestamp_ms);
    return ApplyProbe(event, position, std::clamp<int64_t>(time_ms, 0, kMaxTimeMs), batch);
  }
  const std::string seen =
      fmt::format("{}{}/{}/{}", kSeenPrefix, position.topic, position.partition, event.id);
  ASSIGN_OR_RETURN(auto indexed, store_->Get(seen, &batch));
  if (indexed) {
    if (duplicates_) duplicates_->Inc();
    return OkStatus();
  }
  batch.Put(seen, "");
  int64_t time_ms = ParseRfc3339(event.time).value_or(position.timestamp_ms);
  time_ms = std::clamp<int64_t>(time_ms, 0, kMaxTimeMs);
  const std::string at = Position(time_ms, position);
  const std::string subject = EscapeAuditEntity(event.subject);
  std::string encoded = position.value.empty() ? EncodeCloudEvent(event) : std::string();
  const std::string_view stored = position.value.empty() ? encoded : position.value;
  batch.PutUnread(fmt::format("{}{}/{}", kEntityPrefix, subject, at), stored);
  batch.PutUnread(fmt::format("{}{}", kTimePrefix, at), subject);
  if (!position.key.empty() && position.key != event.subject) {
    batch.PutUnread(fmt::format("{}{}/{}", kEntityPrefix, EscapeAuditEntity(position.key), at),
                    "@" + subject);
  }
  if (position.topic == providers_topic_) {
    batch.PutUnread(fmt::format("{}{}", kProviderPrefix, subject), "");
  }
  Feed(position, time_ms, position.value, std::move(encoded));
  if (indexed_) indexed_->Inc();
  return OkStatus();
}

// A probe: indexed under au/s/ and au/e/ like any event (no Kafka-key pointer: the probes topic
// is keyed by the subject, the provider id), judged a duplicate by its time-first au/t/ key.
Status AuditProjection::ApplyProbe(const CloudEvent& event, const EventPosition& position,
                                   int64_t time_ms, StoreBatch& batch) {
  ASSIGN_OR_RETURN(const int64_t swept_until, SweptUntil());
  if (time_ms < swept_until) {  // already past the sweep: it would never be swept again
    if (expired_) expired_->Inc();
    return OkStatus();
  }
  const std::string seen =
      fmt::format("{}{:013}/{:06}/{}", kProbeSeenPrefix, time_ms, position.partition, event.id);
  ASSIGN_OR_RETURN(auto indexed, store_->Get(seen, &batch));
  if (indexed) {
    if (duplicates_) duplicates_->Inc();
    return OkStatus();
  }
  batch.Put(seen, "");
  const std::string at = Position(time_ms, position);
  const std::string subject = EscapeAuditEntity(event.subject);
  std::string encoded = position.value.empty() ? EncodeCloudEvent(event) : std::string();
  const std::string_view stored = position.value.empty() ? encoded : position.value;
  batch.PutUnread(fmt::format("{}{}/{}", kEntityPrefix, subject, at), stored);
  batch.PutUnread(fmt::format("{}{}", kTimePrefix, at), subject);
  Feed(position, time_ms, position.value, std::move(encoded));
  if (indexed_) indexed_->Inc();
  return OkStatus();
}

// Remembers where the event is (views into the runner's message): it is copied for the feed
// only after the commit, and only if the feed wants it then (DeliverFeed).
void AuditProjection::Feed(const EventPosition& position, int64_t time_ms, std::string_view stored,
                           std::string encoded) {
  if (!feed_) return;
  batch_feed_.push_back(FeedRef{.topic = position.topic,
                                .stored = stored,
                                .encoded = std::move(encoded),
                                .partition = position.partition,
                                .offset = position.offset,
                                .time_ms = time_ms,
                                .applied = applied_in_batch_});
}

// Asks the gate after the commit, so that an event is either sent or already in the index when
// the gate said no (the hub then reads the index: see WatchHub::Refill).
void AuditProjection::DeliverFeed(const std::vector<CloudEvent>& applied) {
  if (batch_feed_.empty()) return;
  int64_t newest_ms = 0;
  for (const FeedRef& ref : batch_feed_) newest_ms = std::max(newest_ms, ref.time_ms);
  if (gate_ && !gate_(newest_ms)) return;
  std::vector<IndexedEvent> events;
  events.reserve(batch_feed_.size());
  for (FeedRef& ref : batch_feed_) {
    if (ref.applied >= applied.size()) {
      Logger("audit")->error("msg=\"audit feed: an indexed event is missing from the commit\"");
      continue;
    }
    const CloudEvent& event = applied[ref.applied];
    std::string json = ref.encoded.empty() ? std::string(ref.stored) : std::move(ref.encoded);
    events.push_back(IndexedEvent{
        AuditEntry{std::string(ref.topic), ref.partition, ref.offset, ref.time_ms, std::move(json)},
        event.subject, event.type});
  }
  feed_(std::move(events));
}

Result<int64_t> AuditProjection::SweptUntil() {
  if (swept_until_ >= 0) return swept_until_;
  ASSIGN_OR_RETURN(auto stored, store_->Get(kSweptKey));
  int64_t value = 0;
  if (stored) std::from_chars(stored->data(), stored->data() + stored->size(), value);
  swept_until_ = value;
  return swept_until_;
}

void AuditProjection::AfterCommit(const std::vector<CloudEvent>& applied) {
  if (feed_) DeliverFeed(applied);
  batch_feed_.clear();
  applied_in_batch_ = 0;
  Sweep();
}

void AuditProjection::Sweep() {
  if (retention_.clock == nullptr || retention_.window.count() <= 0) return;
  const int64_t now_ms = retention_.clock->NowMillis();
  if (now_ms < next_sweep_ms_) return;
  next_sweep_ms_ = now_ms + retention_.sweep_interval.count();
  if (auto swept = SweepExpiredProbes(now_ms); !swept) {
    // The index keeps the entries until a later sweep succeeds; nothing is lost.
    next_sweep_ms_ = now_ms + 1000;
    Logger("audit")->warn("msg=\"probe retention sweep failed\" error=\"{}\"",
                          swept.error().message);
  }
}

Result<int64_t> AuditProjection::SweepExpiredProbes(int64_t now_ms) {
  const int64_t cutoff = std::max<int64_t>(0, now_ms - retention_.window.count());
  ASSIGN_OR_RETURN(int64_t from, SweptUntil());
  int64_t deleted = 0;
  while (from < cutoff) {
    StoreBatch batch;
    int scanned = 0;
    int64_t reached = cutoff;  // where the next chunk starts (its entries not all seen yet)
    RETURN_IF_ERROR(store_->Scan(kTimePrefix, fmt::format("{:013}", from),
                                 [&](std::string_view key, std::string_view subject) {
                                   const std::string_view suffix = key.substr(kTimePrefix.size());
                                   AuditEntry entry;
                                   if (!ParsePosition(suffix, entry)) return true;
                                   if (entry.time_ms >= cutoff) return false;
                                   // A chunk ends between milliseconds (the next starts at one).
                                   if (++scanned > retention_.sweep_chunk && entry.time_ms > from) {
                                     reached = entry.time_ms;
                                     return false;
                                   }
                                   if (entry.topic != retention_.probes_topic) return true;
                                   batch.Delete(key);
                                   batch.Delete(
                                       fmt::format("{}{}/{}", kEntityPrefix, subject, suffix));
                                   ++deleted;
                                   return true;
                                 }));
    batch.DeleteRange(kProbeSeenPrefix, fmt::format("{}{:013}", kProbeSeenPrefix, reached));
    batch.Put(kSweptKey, fmt::format("{:013}", reached));
    RETURN_IF_ERROR(store_->Write(batch));
    swept_until_ = from = reached;
  }
  if (expired_) expired_->Inc(static_cast<uint64_t>(deleted));
  return deleted;
}

bool AuditKeyExpires(std::string_view key, std::string_view probes_topic, int64_t cutoff_ms) {
  if (key == kSweptKey) return true;  // the live sweep's bookkeeping
  if (key.starts_with(kProbeSeenPrefix)) {
    int64_t ts = 0;
    const auto digits = key.substr(kProbeSeenPrefix.size(), 13);
    std::from_chars(digits.data(), digits.data() + digits.size(), ts);
    return ts < cutoff_ms;
  }
  std::string_view position;
  if (key.starts_with(kTimePrefix)) {
    position = key.substr(kTimePrefix.size());
  } else if (key.starts_with(kEntityPrefix)) {
    // au/s/<escaped entity>/<position>: an escaped entity holds no '/'.
    const std::string_view rest = key.substr(kEntityPrefix.size());
    const size_t slash = rest.find('/');
    if (slash == std::string_view::npos) return false;
    position = rest.substr(slash + 1);
  } else {
    return false;
  }
  AuditEntry entry;
  return ParsePosition(position, entry) && entry.topic == probes_topic && entry.time_ms < cutoff_ms;
}

namespace {

// Scans `prefix` from `since_ms` (or after the page token) in key order. `resolve` turns a key
// suffix and value into an entry (false: skip it). Stops at `until_ms`, at a full page (one
// more match proves there is a next page), or after kMaxScannedPerPage keys.
Result<AuditPage> ScanPage(
    const Store* store, const std::string& prefix, const AuditQuery& query,
    const std::function<Result<bool>(std::string_view, std::string_view, AuditEntry&)>& resolve) {
  AuditPage page;
  std::string start_after;
  if (!query.page_token.empty()) {
    ASSIGN_OR_RETURN(start_after, DecodePageToken(query.page_token));
  } else if (query.since_ms > 0) {
    // Keys sort by time first; start just before the first key of `since_ms`.
    start_after = fmt::format("{:013}", query.since_ms - 1) + "/\xff";
  }
  const size_t limit = static_cast<size_t>(std::clamp(query.max_page_size, 1, 100));
  int scanned = 0;
  std::string last_returned;
  Status status = OkStatus();
  RETURN_IF_ERROR(store->Scan(prefix, start_after, [&](std::string_view key, std::string_view v) {
    const std::string_view suffix = key.substr(prefix.size());
    if (++scanned > AuditView::kMaxScannedPerPage) {
      // A partial page: the next one resumes here.
      page.next_page_token = EncodePageToken(last_returned.empty() ? start_after : last_returned);
      return false;
    }
    AuditEntry entry;
    if (!ParsePosition(suffix, entry)) return true;  // not ours: skip
    if (query.until_ms > 0 && entry.time_ms > query.until_ms) return false;
    auto keep = resolve(suffix, v, entry);
    if (!keep) {
      status = tl::unexpected(keep.error());
      return false;
    }
    if (!*keep || !StoredTypeMatches(entry.json, query.type)) {
      last_returned = std::string(suffix);  // resume after what was already judged
      return true;
    }
    if (page.entries.size() == limit) {
      page.next_page_token = EncodePageToken(last_returned);
      return false;
    }
    last_returned = std::string(suffix);
    page.entries.push_back(std::move(entry));
    return true;
  }));
  RETURN_IF_ERROR(status);
  return page;
}

// The JSON of the event a pointer ("@<escaped subject>") designates.
Result<std::string> Dereference(const Store* store, std::string_view pointer,
                                std::string_view suffix) {
  const std::string key = fmt::format("{}{}/{}", kEntityPrefix, pointer.substr(1), suffix);
  ASSIGN_OR_RETURN(auto json, store->Get(key));
  if (!json) return MakeError(ErrorCode::kInternal, "audit index: dangling entry for " + key);
  return std::move(*json);
}

}  // namespace

Result<AuditPage> AuditView::Events(const AuditQuery& query) const {
  if (!query.subject.empty()) {
    const std::string prefix =
        fmt::format("{}{}/", kEntityPrefix, EscapeAuditEntity(query.subject));
    return ScanPage(store_, prefix, query,
                    [](std::string_view, std::string_view v, AuditEntry& e) -> Result<bool> {
                      if (v.starts_with('@')) return false;  // keyed by it, not its subject
                      e.json = std::string(v);
                      return true;
                    });
  }
  return ScanPage(
      store_, std::string(kTimePrefix), query,
      [this](std::string_view suffix, std::string_view subject, AuditEntry& e) -> Result<bool> {
        const std::string key = fmt::format("{}{}/{}", kEntityPrefix, subject, suffix);
        ASSIGN_OR_RETURN(auto json, store_->Get(key));
        if (!json) {
          // The probe retention sweep deletes both entries in one write, after this scan's
          // iterator was made: the time entry is gone too, so skip it. Else it is damage.
          ASSIGN_OR_RETURN(auto still, store_->Get(fmt::format("{}{}", kTimePrefix, suffix)));
          if (!still) return false;
          return MakeError(ErrorCode::kInternal, "audit index: dangling entry " + key);
        }
        e.json = std::move(*json);
        return true;
      });
}

Result<AuditPage> AuditView::History(std::string_view entity, const AuditQuery& query) const {
  const std::string prefix = fmt::format("{}{}/", kEntityPrefix, EscapeAuditEntity(entity));
  return ScanPage(
      store_, prefix, query,
      [this](std::string_view suffix, std::string_view v, AuditEntry& e) -> Result<bool> {
        if (v.starts_with('@')) {
          ASSIGN_OR_RETURN(e.json, Dereference(store_, v, suffix));
        } else {
          e.json = std::string(v);
        }
        return true;
      });
}

Status AuditView::ForEachOfEntity(std::string_view entity, int64_t until_ms,
                                  const std::function<bool(const AuditEntry&)>& fn) const {
  const std::string prefix = fmt::format("{}{}/", kEntityPrefix, EscapeAuditEntity(entity));
  Status status = OkStatus();
  RETURN_IF_ERROR(store_->Scan(prefix, "", [&](std::string_view key, std::string_view v) {
    const std::string_view suffix = key.substr(prefix.size());
    AuditEntry entry;
    if (!ParsePosition(suffix, entry)) return true;
    if (until_ms > 0 && entry.time_ms > until_ms) return false;
    if (v.starts_with('@')) {
      auto json = Dereference(store_, v, suffix);
      if (!json) {
        status = tl::unexpected(json.error());
        return false;
      }
      entry.json = std::move(*json);
    } else {
      entry.json = std::string(v);
    }
    return fn(entry);
  }));
  return status;
}

Status AuditView::ForEachProviderSubject(const std::function<bool(std::string_view)>& fn) const {
  return store_->Scan(kProviderPrefix, "", [&](std::string_view key, std::string_view) {
    return fn(UnescapeAuditEntity(key.substr(kProviderPrefix.size())));
  });
}

}  // namespace dcm
