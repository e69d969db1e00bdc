// AuditProjection: the audit index (SPEC §3.4). Every event on every event topic, as stored,
// indexed by entity and by time, so auditors can list what happened without knowing Kafka, and
// time travel (`as_of`) can fold one entity's events again.
//
// Keys (ts = the event's `time` in unix ms, 13 digits; pos = <topic>/<partition 6>/<offset 12>;
// an entity id is escaped so that it never contains '/': '%' -> %25, '/' -> %2F):
//   au/s/<entity>/<ts>/<pos> -> the CloudEvent JSON as stored, when entity == the event's subject
//                               "@<subject>", when entity == the Kafka key (the instance topics
//                               are keyed by the operation's root: the catalog item instance)
//   au/e/<ts>/<pos>          -> the subject (escaped): the global time order, for GET /events
//   au/i/<topic>/<partition>/<event id> -> "" : indexed; a later copy on the same partition is a
//                               duplicate (the mock re-appends retried batches) and is skipped
//   au/p/<entity>            -> "" : the subjects seen on the providers topic (GET
//   /providers?as_of)
//
// Probe retention (SPEC §7, HEALTH_EVENTS_RETENTION): events on the probes topic
// (<prefix>health-probes) expire. They are indexed under the same au/s/ and au/e/ keys (every
// reader sees them as before), but their duplicates are judged by a time-first key instead of
// au/i/, so that old ones go with one range delete:
//   au/t/<ts>/<partition>/<event id> -> "" : indexed probe (ts = its time: a copy has the same)
//   au/w                             -> <ts 13>: probes older than this were swept (live only)
// Every `sweep_interval` the live index deletes the probe entries older than now − window: it
// walks au/e/ from au/w up to the cutoff (one seek; entries of other topics are kept), deletes
// each probe's au/e/ and au/s/ keys, drops au/t/ below the cutoff with one DeleteRange and moves
// au/w. A probe older than au/w that arrives later (a runner far behind) is not indexed. The
// sweep runs on the runner's thread after a commit (AfterCommit), so it never races Apply.
// Rebuilds do not sweep: `dcm projections verify` compares only what is younger than its cutoff
// (AuditKeyExpires). Old probes on other topics (dcm.health before the upgrade) are kept.
//
// Determinism: every key derives from the event and its position, and duplicates are judged per
// partition, in offset order, so any interleaving of topics and partitions folds to the same
// bytes (SPEC §5.4).
// Thread-safety: Apply may run on several runner threads at once (one per topic): it reads only
// the au/i/ keys of its own partition.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "projections/projection.h"
#include "src/common/clock.h"
#include "src/common/metrics.h"

namespace dcm {

// Which events of the audit index expire, and (live only) when they are swept.
struct AuditRetention {
  std::string probes_topic;             // its events expire; empty: none do
  std::chrono::milliseconds window{0};  // HEALTH_EVENTS_RETENTION; 0: never swept (rebuilds)
  const Clock* clock = nullptr;         // null: never swept
  // Between sweeps; 0 = window / 10, clamped to 1 s .. 60 s.
  std::chrono::milliseconds sweep_interval{0};
  // au/e/ entries one sweep batch covers (then it writes and goes on): ~2 deletes of ~90 B each.
  int sweep_chunk = 20000;
};

// One event the live index committed, for watchers (SPEC §9, src/http/watch_hub.h).
struct IndexedEvent;
using IndexedFeed = std::function<void(std::vector<IndexedEvent>)>;
// Asked after each commit that indexed events, with the newest time among them: whether the
// feed wants them. When it does not (nobody watches), they are neither copied nor sent.
using IndexedGate = std::function<bool(int64_t newest_ms)>;

class AuditProjection final : public Projection {
 public:
  static constexpr char kName[] = "audit";
  static constexpr char kPrefix[] = "au/";

  // `providers_topic`: the topic whose subjects are listed for GET /providers?as_of.
  AuditProjection(Store* store, std::string providers_topic, Metrics* metrics,
                  AuditRetention retention = {});

  std::string Name() const override { return kName; }
  Status Apply(const CloudEvent& event, const EventPosition& position, StoreBatch& batch) override;
  // Sweeps expired probes when a sweep is due (see the header comment).
  void AfterCommit(const std::vector<CloudEvent>& applied) override;
  void Abandoned() override {
    batch_feed_.clear();
    applied_in_batch_ = 0;
  }
  // After each commit, `feed` gets the events the batch indexed, in apply order (not called for
  // duplicates or expired probes), if `gate` (null: always) wants them then. Set before the
  // runner starts; live index only. The events are copied only then, after the commit, from
  // what Apply was given: `position`'s views must stay valid until AfterCommit, and `applied`
  // must hold the events of the batch's successful Applys in order (ProjectionRunner does both).
  void SetFeed(IndexedFeed feed, IndexedGate gate = nullptr) {
    feed_ = std::move(feed);
    gate_ = std::move(gate);
  }
  // Deletes the probe entries older than now_ms − window and moves au/w. Runner thread only
  // (tests call it directly). Returns the probes deleted.
  Result<int64_t> SweepExpiredProbes(int64_t now_ms);

 private:
  // An event indexed in this batch, copied for the feed only after the commit, if wanted.
  struct FeedRef {
    std::string_view topic;   // the runner's message (valid until AfterCommit)
    std::string_view stored;  // the runner's message, or `encoded` when it had no value
    std::string encoded;
    int32_t partition = 0;
    int64_t offset = 0;
    int64_t time_ms = 0;
    size_t applied = 0;  // its event's index in AfterCommit's `applied`
  };
  Status Index(const CloudEvent& event, const EventPosition& position, StoreBatch& batch);
  Status ApplyProbe(const CloudEvent& event, const EventPosition& position, int64_t time_ms,
                    StoreBatch& batch);
  void Feed(const EventPosition& position, int64_t time_ms, std::string_view stored,
            std::string encoded);
  void DeliverFeed(const std::vector<CloudEvent>& applied);
  void Sweep();
  Result<int64_t> SweptUntil();

  Store* store_;
  std::string providers_topic_;
  AuditRetention retention_;
  int64_t swept_until_ = -1;  // au/w; -1: not read yet
  int64_t next_sweep_ms_ = 0;
  Counter* indexed_ = nullptr;
  Counter* duplicates_ = nullptr;
  Counter* expired_ = nullptr;
  IndexedFeed feed_;
  IndexedGate gate_;
  std::vector<FeedRef> batch_feed_;
  size_t applied_in_batch_ = 0;  // successful Applys since the last commit
};

// Whether `key` of the audit index is a probe entry (or au/w) that expires before `cutoff_ms`:
// what `dcm projections verify` leaves out on both sides.
bool AuditKeyExpires(std::string_view key, std::string_view probes_topic, int64_t cutoff_ms);

// One indexed event: where it was, and the CloudEvent JSON as stored.
struct AuditEntry {
  std::string topic;
  int32_t partition = 0;
  int64_t offset = 0;
  int64_t time_ms = 0;
  std::string json;
};

struct IndexedEvent {
  AuditEntry entry;
  std::string subject;
  std::string type;
};

struct AuditQuery {
  std::string subject = {};     // exact CloudEvents subject; empty = any
  std::string type = {};        // exact type, or a prefix ending in '*'; empty = any
  int64_t since_ms = 0;         // inclusive
  int64_t until_ms = 0;         // inclusive; 0 = no bound
  std::string page_token = {};  // opaque, from a previous page
  int max_page_size = 100;
};

struct AuditPage {
  std::vector<AuditEntry> entries;
  std::string next_page_token;  // empty on the last page
};

// Read-only queries over the audit index. Thread-safe (reads the Store only).
class AuditView {
 public:
  // Keys scanned per page at most before a partial page is returned with a token: a filter that
  // matches rarely still answers in bounded time.
  static constexpr int kMaxScannedPerPage = 20000;

  explicit AuditView(const Store* store) : store_(store) {}

  // GET /events: by subject (the entity index) or else in time order, filtered.
  Result<AuditPage> Events(const AuditQuery& query) const;
  // What happened to one entity: events whose subject or Kafka key is `entity`, in time order
  // (ties in log order), up to `until_ms` (0 = all). `query.subject` is ignored.
  Result<AuditPage> History(std::string_view entity, const AuditQuery& query) const;
  // Calls fn for each event of `entity` with time <= until_ms (0 = all), in order, until fn
  // returns false. For folds (`as_of`).
  Status ForEachOfEntity(std::string_view entity, int64_t until_ms,
                         const std::function<bool(const AuditEntry&)>& fn) const;
  // Subjects seen on the providers topic (unescaped), in key order, until fn is false.
  Status ForEachProviderSubject(const std::function<bool(std::string_view)>& fn) const;

 private:
  const Store* store_;
};

// The escaped form of an entity id in keys ('%' -> %25, '/' -> %2F), and back.
std::string EscapeAuditEntity(std::string_view id);
std::string UnescapeAuditEntity(std::string_view escaped);

}  // namespace dcm
