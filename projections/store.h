// Store: the RocksDB database that holds every projection of one `dcm serve` instance, each under
// its own key prefix ("reg/", "dec/", ...), plus the consumed offsets of each projection
// ("__offset/<projection>/<topic>/<partition>" = next offset to read). A projection writes its
// state changes and its offsets in ONE StoreBatch, so a restart resumes exactly where the state
// is: exactly-once effect without a distributed transaction (../shared/KAFKA-NOTES.md).
//
// The only module that includes RocksDB. Thread-safety: Store is safe for concurrent use
// (RocksDB is); a StoreBatch belongs to one thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "src/common/result.h"

namespace rocksdb {
class DB;
class Status;
class Env;
class WriteBatch;
}  // namespace rocksdb

namespace dcm {

// Hash of std::string keys that also looks up string_views without building a string.
struct StoreKeyHash {
  using is_transparent = void;
  size_t operator()(std::string_view key) const { return std::hash<std::string_view>{}(key); }
};
using StoreKeyMap =
    std::unordered_map<std::string, std::optional<std::string>, StoreKeyHash, std::equal_to<>>;

// A set of writes applied atomically by Store::Write. Reads through Store::Get(key, &batch)
// see the batch's own pending writes, so a fold can apply several events to one key per batch.
// Put and Delete are tracked (kept per key: the last one wins); PutUnread is not. A key is
// written one way or the other, never both: Write adds the tracked writes after the untracked
// ones.
class StoreBatch {
 public:
  StoreBatch();
  ~StoreBatch();
  StoreBatch(StoreBatch&&) noexcept;
  StoreBatch& operator=(StoreBatch&&) noexcept;

  void Put(std::string_view key, std::string_view value);
  // A write the fold never reads back (an append-only index entry): cheaper, because Get does not
  // see it through this batch, nor through a bulk-load store's read index. Store::Get still finds
  // it once written in live mode.
  void PutUnread(std::string_view key, std::string_view value);
  void Delete(std::string_view key);
  // Deletes every key in [begin, end) when written: one range tombstone, however many keys (the
  // audit index's expired probe entries). Like PutUnread, Get does not see it through this batch;
  // not for bulk-load stores.
  void DeleteRange(std::string_view begin, std::string_view end);
  size_t Count() const;
  void Clear();

 private:
  friend class Store;
  void Track(std::string_view key, std::optional<std::string> value);
  std::unique_ptr<rocksdb::WriteBatch> batch_;
  StoreKeyMap pending_;
};

// The first key under a prefix where two stores differ (Store::FirstDifference). A value that is
// absent on one side means the key exists only on the other.
struct KeyDifference {
  std::string key;
  std::optional<std::string> left;
  std::optional<std::string> right;
};

struct StoreOptions {
  // Rebuild into a fresh, empty directory (../shared/KAFKA-NOTES.md measured ~4x faster):
  // vector memtable, WAL off, compaction deferred to FinishBulkLoad. Tracked writes (Put,
  // Delete) do not go to RocksDB until FinishBulkLoad: they stay in an in-memory index that
  // serves Get, and FinishBulkLoad writes the last value of each key once, as one sorted table
  // file. Only untracked writes (PutUnread) go through the memtables. So, until FinishBulkLoad,
  // Scan and Digest do not see tracked keys. The index costs memory about the size of the
  // tracked state; a fold that rewrites a record per event (health) writes it once instead.
  bool bulk_load = false;
  // Keep everything in memory (RocksDB's MemEnv): hermetic unit tests.
  bool in_memory = false;
  // Writes are refused (kStorage) while the filesystem that holds the store has fewer free bytes
  // than this; 0 turns the check off. RocksDB must never meet a full disk itself: Debian's
  // RocksDB build aborts in its recovery from a failed WAL append (docs/operations.md).
  uint64_t min_free_bytes = 0;
  // How long a free-space reading is reused (a statvfs per write would cost ~1 us each).
  std::chrono::milliseconds free_space_check_interval{100};
  // The free bytes of the filesystem holding `path` (default: statvfs). A test seam.
  std::function<Result<uint64_t>(const std::string& path)> free_bytes = {};
};

class Store {
 public:
  static Result<std::unique_ptr<Store>> Open(const std::string& path, StoreOptions options = {});
  // Opens an existing store for reading only (RocksDB's read-only mode): it takes no lock, so it
  // works while `dcm serve` holds the directory, and it sees a consistent snapshot as of the
  // open (later writes of the live process are not seen). Every table file is opened at once, so
  // a compaction of the live process that deletes them cannot pull them away mid-read. Write
  // fails on such a store.
  static Result<std::unique_ptr<Store>> OpenReadOnly(const std::string& path);
  ~Store();

  // Reads `key`, seeing `batch`'s pending writes first when given.
  Result<std::optional<std::string>> Get(std::string_view key,
                                         const StoreBatch* batch = nullptr) const;
  Status Write(StoreBatch& batch);

  // OkStatus, or kStorage while the disk has less than min_free_bytes free: why a Write would
  // be refused now without trying it (StoreOptions).
  Status CheckWritable();

  // Why the store cannot be relied on now, for /readyz and logs; nullopt when it can. A corrupt
  // file (met by any read or write) is reported until the process restarts, since only
  // `dcm projections rebuild` repairs it; a refused or failed write is reported until a write
  // succeeds.
  std::optional<std::string> Problem() const;

  // Calls fn(key, value) for keys starting with `prefix`, from `start_after` (exclusive; empty
  // = from the first), in key order, until fn returns false.
  Status Scan(std::string_view prefix, std::string_view start_after,
              const std::function<bool(std::string_view, std::string_view)>& fn) const;

  // Keys left out of a digest or comparison (true: skip it).
  using KeyFilter = std::function<bool(std::string_view key, std::string_view value)>;

  // A digest of every key and value under `prefix` (hex), but those `skip` says. Two stores with
  // equal digests hold byte-identical state (SPEC §5.4).
  Result<std::string> Digest(std::string_view prefix, const KeyFilter& skip = {}) const;

  // Flushes and compacts after a bulk load, so the store is ready to serve: the memtables' data
  // is compacted into level 1 while the tracked keys are written as one sorted table file, which
  // is then ingested (into level 0). Afterwards the store reads and writes like a live one (Get
  // goes to RocksDB, writes use the WAL). Not concurrent with any other call on the store.
  Status FinishBulkLoad();
  // The same without the compaction: the data is durable and readable (in level-0 files), which
  // is enough for a store that is only digested and then deleted (`dcm projections verify`).
  Status FinishBulkLoadWithoutCompaction();

  // The first key under `prefix`, in key order, whose value differs between `left` and `right`
  // (or that only one of them holds); nullopt when both hold byte-identical state there.
  static Result<std::optional<KeyDifference>> FirstDifference(const Store& left, const Store& right,
                                                              std::string_view prefix,
                                                              const KeyFilter& skip = {});
  // The distinct first key segments (up to and including the first '/', or the whole key when
  // it has none) present in the store, in key order: "au/", "dec/", "__offset/" ... One seek per
  // segment, so it is cheap on a large store.
  Result<std::vector<std::string>> TopLevelPrefixes() const;

  static std::string OffsetKey(std::string_view projection, std::string_view topic,
                               int32_t partition);
  void PutOffset(StoreBatch& batch, std::string_view projection, std::string_view topic,
                 int32_t partition, int64_t next_offset) const;
  // partition -> next offset to consume, for every partition stored.
  Result<std::map<int32_t, int64_t>> LoadOffsets(std::string_view projection,
                                                 std::string_view topic) const;

 private:
  Store() = default;
  // Maps a failed RocksDB status to kStorage (kNotFound stays itself) and remembers a
  // corruption for Problem().
  Error Failed(const rocksdb::Status& status) const;
  void SetWriteProblem(const std::string& problem);
  Status FinishBulk(bool compact);
  Status WriteBulkIndex();             // holds bulk_mu_
  std::unique_ptr<rocksdb::Env> env_;  // only for in_memory
  std::unique_ptr<rocksdb::DB> db_;
  bool bulk_load_ = false;
  mutable std::shared_mutex bulk_mu_;  // Get shares it; Write takes it
  StoreKeyMap bulk_index_;             // bulk_load only
  // The free-space guard (StoreOptions::min_free_bytes).
  std::string path_;
  StoreOptions guard_;
  std::atomic<int64_t> next_free_check_ns_{0};
  std::atomic<bool> low_on_space_{false};
  // Problem(): set by failures, read by /readyz.
  mutable std::mutex problem_mu_;
  mutable std::string corruption_;  // sticky
  std::string write_problem_;       // until a write succeeds
  std::atomic<bool> has_write_problem_{false};
};

}  // namespace dcm
