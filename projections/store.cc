#include "projections/store.h"

#include <fmt/format.h>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/memtablerep.h>
#include <rocksdb/sst_file_writer.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <thread>

namespace dcm {
namespace {

// Every RocksDB failure is the store's (kStorage: disk full, I/O error, a corrupt file), never
// an event's: a runner retries it and never dead-letters the event it was applying.
Error FromRocksDb(const rocksdb::Status& status) {
  const ErrorCode code = status.IsNotFound() ? ErrorCode::kNotFound : ErrorCode::kStorage;
  return Error{code, "rocksdb: " + status.ToString(), {}};
}

Result<uint64_t> StatvfsFreeBytes(const std::string& path) {
  struct statvfs fs {};
  if (statvfs(path.c_str(), &fs) != 0) {
    return MakeError(ErrorCode::kStorage,
                     fmt::format("cannot read the free space of {}: {}", path, strerror(errno)));
  }
  return static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
}

int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

constexpr std::string_view kOffsetPrefix = "__offset/";

}  // namespace

StoreBatch::StoreBatch() : batch_(std::make_unique<rocksdb::WriteBatch>()) {}
StoreBatch::~StoreBatch() = default;
StoreBatch::StoreBatch(StoreBatch&&) noexcept = default;
StoreBatch& StoreBatch::operator=(StoreBatch&&) noexcept = default;

void StoreBatch::Track(std::string_view key, std::optional<std::string> value) {
  auto it = pending_.find(key);
  if (it == pending_.end()) {
    pending_.emplace(std::string(key), std::move(value));
  } else {
    it->second = std::move(value);
  }
}

void StoreBatch::Put(std::string_view key, std::string_view value) {
  Track(key, std::string(value));
}

void StoreBatch::PutUnread(std::string_view key, std::string_view value) {
  batch_->Put(rocksdb::Slice(key.data(), key.size()), rocksdb::Slice(value.data(), value.size()))
      .PermitUncheckedError();  // in-memory append; cannot fail below RocksDB's 4 GiB limit
}

void StoreBatch::Delete(std::string_view key) { Track(key, std::nullopt); }

void StoreBatch::DeleteRange(std::string_view begin, std::string_view end) {
  batch_
      ->DeleteRange(rocksdb::Slice(begin.data(), begin.size()),
                    rocksdb::Slice(end.data(), end.size()))
      .PermitUncheckedError();  // in-memory append, like PutUnread
}

size_t StoreBatch::Count() const { return batch_->Count() + pending_.size(); }

void StoreBatch::Clear() {
  batch_->Clear();
  pending_.clear();
}

Store::~Store() {
  if (db_) db_->Close().PermitUncheckedError();  // best effort: the WAL makes state durable
  db_.reset();
}

Result<std::unique_ptr<Store>> Store::Open(const std::string& path, StoreOptions options) {
  std::unique_ptr<Store> store(new Store());
  store->path_ = path;
  store->guard_ = options;
  if (!store->guard_.free_bytes) store->guard_.free_bytes = StatvfsFreeBytes;
  rocksdb::Options opts;
  opts.create_if_missing = true;
  opts.IncreaseParallelism(2);
  rocksdb::BlockBasedTableOptions table;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  opts.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  if (options.in_memory) {
    store->env_.reset(rocksdb::NewMemEnv(rocksdb::Env::Default()));
    opts.env = store->env_.get();
  }
  if (!options.bulk_load) {
    // A whole-key bloom filter over each memtable: a Get for an absent key (a new name, id or
    // request id: most reads on the write path) skips the skiplist walk, which Debian's
    // assertion-enabled RocksDB makes the registrar's largest cost (BENCHMARKS.md, issue #16).
    opts.memtable_whole_key_filtering = true;
    opts.memtable_prefix_bloom_size_ratio = 0.02;
  }
  if (options.bulk_load) {
    opts.PrepareForBulkLoad();
    opts.memtable_factory.reset(new rocksdb::VectorRepFactory());
    opts.allow_concurrent_memtable_write = false;
    // 32 MiB × 10 folds as fast as 64 × 6 or 8 × 40 (the flush's sort is bound by cache misses
    // either way) and bounds memtable memory at 320 MiB while flushes run.
    opts.write_buffer_size = 32 << 20;
    opts.max_write_buffer_number = 10;
    // Level-0 files live only until FinishBulkLoad compacts them into level 1: compress once,
    // there, not in every flush (snappy took ~4% of a rebuild's CPU).
    opts.compression_per_level = {rocksdb::kNoCompression, rocksdb::kSnappyCompression};
    store->bulk_load_ = true;
    // A rebuild indexes every read-back key (a million event ids for the audit index): growing
    // the table by rehashing cost more than these 16 MiB of buckets.
    store->bulk_index_.reserve(1 << 21);
  }
  rocksdb::DB* db = nullptr;
  auto status = rocksdb::DB::Open(opts, path, &db);
  if (!status.ok()) return tl::unexpected(FromRocksDb(status));
  store->db_.reset(db);
  if (store->bulk_load_) {
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
    it->SeekToFirst();
    if (it->Valid()) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "a bulk load needs an empty directory, and " + path + " is not");
    }
  }
  return store;
}

Result<std::unique_ptr<Store>> Store::OpenReadOnly(const std::string& path) {
  rocksdb::Options opts;
  opts.create_if_missing = false;
  opts.max_open_files = -1;  // pin every table file at open (see the header)
  rocksdb::BlockBasedTableOptions table;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  opts.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  rocksdb::Status status;
  // The live process may rotate its WAL or delete compacted files while we list them: retry.
  for (int attempt = 0; attempt < 5; ++attempt) {
    rocksdb::DB* db = nullptr;
    status = rocksdb::DB::OpenForReadOnly(opts, path, &db);
    if (status.ok()) {
      std::unique_ptr<Store> store(new Store());
      store->db_.reset(db);
      return store;
    }
    if (!status.IsIOError() && !status.IsPathNotFound() && !status.IsNotFound()) break;
  }
  return tl::unexpected(FromRocksDb(status));
}

Result<std::optional<std::string>> Store::Get(std::string_view key, const StoreBatch* batch) const {
  if (batch) {
    auto it = batch->pending_.find(key);
    if (it != batch->pending_.end()) return it->second;
  }
  if (bulk_load_) {
    std::shared_lock lock(bulk_mu_);
    auto it = bulk_index_.find(key);
    return it == bulk_index_.end() ? std::optional<std::string>() : it->second;
  }
  std::string value;
  auto status = db_->Get(rocksdb::ReadOptions(), rocksdb::Slice(key.data(), key.size()), &value);
  if (status.IsNotFound()) return std::optional<std::string>();
  if (!status.ok()) return tl::unexpected(Failed(status));
  return std::optional<std::string>(std::move(value));
}

Status Store::Write(StoreBatch& batch) {
  rocksdb::WriteOptions wo;
  // No WAL in bulk mode (FinishBulkLoad flushes) nor in memory (the store dies with its Env).
  wo.disableWAL = bulk_load_ || env_ != nullptr;
  rocksdb::WriteBatch& writes = *batch.batch_;
  if (!bulk_load_) {
    // The tracked writes join the untracked ones here, once per key whatever the batch did to
    // it before. Tracked and untracked keys are disjoint (store.h), so the order does not matter.
    for (const auto& [key, value] : batch.pending_) {
      const rocksdb::Slice k(key.data(), key.size());
      (value ? writes.Put(k, rocksdb::Slice(value->data(), value->size())) : writes.Delete(k))
          .PermitUncheckedError();
    }
  }
  if (writes.Count() > 0) {
    RETURN_IF_ERROR(CheckWritable());
    auto status = db_->Write(wo, &writes);
    if (!status.ok()) {
      Error error = Failed(status);
      SetWriteProblem(error.message);
      return tl::unexpected(std::move(error));
    }
    if (has_write_problem_.load(std::memory_order_relaxed)) SetWriteProblem("");
  }
  if (bulk_load_) {
    // Tracked writes stay in the read index until FinishBulkLoad writes the last value of each
    // key once (a rebuild overwrites the same health record ~80 times). Moves the nodes of new
    // keys (no copy, no allocation); keys already indexed take the new value.
    std::lock_guard lock(bulk_mu_);
    bulk_index_.merge(batch.pending_);
    for (auto& [key, value] : batch.pending_) bulk_index_.find(key)->second = std::move(value);
  }
  batch.Clear();
  return OkStatus();
}

Status Store::Scan(std::string_view prefix, std::string_view start_after,
                   const std::function<bool(std::string_view, std::string_view)>& fn) const {
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  const std::string start = std::string(prefix) + std::string(start_after);
  for (it->Seek(start); it->Valid(); it->Next()) {
    const auto key = it->key();
    const std::string_view k(key.data(), key.size());
    if (!k.starts_with(prefix)) break;
    if (!start_after.empty() && k == start) continue;
    const auto value = it->value();
    if (!fn(k, std::string_view(value.data(), value.size()))) break;
  }
  if (!it->status().ok()) return tl::unexpected(Failed(it->status()));
  return OkStatus();
}

Error Store::Failed(const rocksdb::Status& status) const {
  Error error = FromRocksDb(status);
  if (status.IsCorruption()) {
    std::lock_guard lock(problem_mu_);
    if (corruption_.empty()) corruption_ = "corrupt: " + error.message;
  }
  return error;
}

Status Store::CheckWritable() {
  if (guard_.min_free_bytes == 0 || env_) return OkStatus();
  const int64_t now = SteadyNowNs();
  if (now >= next_free_check_ns_.load(std::memory_order_relaxed)) {
    next_free_check_ns_.store(
        now + std::chrono::nanoseconds(guard_.free_space_check_interval).count(),
        std::memory_order_relaxed);
    auto free = guard_.free_bytes(path_);
    low_on_space_ = !free || *free < guard_.min_free_bytes;
    if (low_on_space_) {
      SetWriteProblem(free ? fmt::format("disk full: {} MiB free under {}, below the reserve of {} "
                                         "MiB (--min-free-disk-mb): writes are refused",
                                         *free >> 20, path_, guard_.min_free_bytes >> 20)
                           : free.error().message);
    }
  }
  if (!low_on_space_.load(std::memory_order_relaxed)) return OkStatus();
  std::lock_guard lock(problem_mu_);
  return MakeError(ErrorCode::kStorage, write_problem_);
}

void Store::SetWriteProblem(const std::string& problem) {
  std::lock_guard lock(problem_mu_);
  write_problem_ = problem;
  has_write_problem_ = !problem.empty();
}

std::optional<std::string> Store::Problem() const {
  std::lock_guard lock(problem_mu_);
  if (!corruption_.empty()) return corruption_;
  if (!write_problem_.empty()) return write_problem_;
  return std::nullopt;
}

Result<std::string> Store::Digest(std::string_view prefix, const KeyFilter& skip) const {
  // Two independent FNV-1a style 64-bit lanes over length-prefixed keys and values.
  uint64_t a = 0xcbf29ce484222325ULL, b = 0x84222325cbf29ce4ULL;
  uint64_t count = 0;
  auto mix_bytes = [&](std::string_view bytes) {
    for (unsigned char c : bytes) {
      a = (a ^ c) * 0x100000001b3ULL;
      b = (b ^ c) * 0x1000193ULL + (a >> 29);
    }
  };
  auto mix = [&](std::string_view bytes) {
    char length[24];  // "<decimal size>:" without a std::string per key and value
    char* end = std::to_chars(length, length + sizeof(length) - 1, bytes.size()).ptr;
    *end++ = ':';
    mix_bytes(std::string_view(length, static_cast<size_t>(end - length)));
    mix_bytes(bytes);
  };
  RETURN_IF_ERROR(Scan(prefix, "", [&](std::string_view k, std::string_view v) {
    if (skip && skip(k, v)) return true;
    mix(k);
    mix(v);
    ++count;
    return true;
  }));
  return fmt::format("{:016x}{:016x}-{}", a, b, count);
}

Status Store::FinishBulkLoad() { return FinishBulk(/*compact=*/true); }

Status Store::FinishBulkLoadWithoutCompaction() { return FinishBulk(/*compact=*/false); }

namespace {

// Writes the live values of a bulk store's read index as one sorted table file at `file` (false
// when there is none). Every key in it is new to RocksDB: the directory started empty and tracked
// keys never go through the memtables in bulk mode. Deleted keys were never written: skipped.
Result<bool> WriteIndexFile(const StoreKeyMap& index, const rocksdb::Options& options,
                            const std::string& file) {
  std::vector<const StoreKeyMap::value_type*> live;
  live.reserve(index.size());
  for (const auto& entry : index) {
    if (entry.second) live.push_back(&entry);
  }
  if (live.empty()) return false;
  std::sort(live.begin(), live.end(),
            [](const auto* a, const auto* b) { return a->first < b->first; });
  rocksdb::SstFileWriter writer(rocksdb::EnvOptions(options), options);
  auto status = writer.Open(file);
  for (size_t i = 0; status.ok() && i < live.size(); ++i) {
    const auto& [key, value] = *live[i];
    status = writer.Put(rocksdb::Slice(key.data(), key.size()),
                        rocksdb::Slice(value->data(), value->size()));
  }
  if (status.ok()) status = writer.Finish();
  if (!status.ok()) return tl::unexpected(FromRocksDb(status));
  return true;
}

}  // namespace

Status Store::FinishBulk(bool compact) {
  auto status = db_->Flush(rocksdb::FlushOptions());
  if (!status.ok()) return tl::unexpected(FromRocksDb(status));
  // The read index becomes a table file on a second thread while RocksDB compacts what the
  // memtables held (one core each; the compaction is single-threaded), then it is ingested: no
  // memtable, no second sort. Freeing the index is done there too.
  StoreKeyMap index;
  {
    std::lock_guard lock(bulk_mu_);
    index.swap(bulk_index_);
    bulk_load_ = false;  // from here on, reads go to RocksDB
  }
  const std::string file = db_->GetName() + "/bulk-index.sst";
  Result<bool> written = false;
  std::thread writer([&] {
    written = WriteIndexFile(index, db_->GetOptions(), file);
    StoreKeyMap().swap(index);
  });
  if (compact) status = db_->CompactRange(rocksdb::CompactRangeOptions(), nullptr, nullptr);
  writer.join();
  if (!status.ok()) return tl::unexpected(FromRocksDb(status));
  if (!written) return tl::unexpected(written.error());
  if (*written) {
    // Its keys overlap the compacted level, so it lands in level 0: one more file for reads to
    // check (with its bloom filter) until the live store's own compactions merge it.
    rocksdb::IngestExternalFileOptions ingest;
    ingest.move_files = true;
    status = db_->IngestExternalFile({file}, ingest);
    if (!status.ok()) return tl::unexpected(FromRocksDb(status));
  }
  return OkStatus();
}

Result<std::optional<KeyDifference>> Store::FirstDifference(const Store& left, const Store& right,
                                                            std::string_view prefix,
                                                            const KeyFilter& skip) {
  const rocksdb::Slice start(prefix.data(), prefix.size());
  std::unique_ptr<rocksdb::Iterator> a(left.db_->NewIterator(rocksdb::ReadOptions()));
  std::unique_ptr<rocksdb::Iterator> b(right.db_->NewIterator(rocksdb::ReadOptions()));
  auto in_prefix = [&](const rocksdb::Iterator& it) {
    return it.Valid() && it.key().starts_with(start);
  };
  auto text = [](const rocksdb::Slice& s) { return std::string(s.data(), s.size()); };
  auto pass_skipped = [&](rocksdb::Iterator& it) {
    while (skip && in_prefix(it) &&
           skip(std::string_view(it.key().data(), it.key().size()),
                std::string_view(it.value().data(), it.value().size()))) {
      it.Next();
    }
  };
  for (a->Seek(start), b->Seek(start);; a->Next(), b->Next()) {
    pass_skipped(*a);
    pass_skipped(*b);
    const bool has_a = in_prefix(*a), has_b = in_prefix(*b);
    if (!has_a && !has_b) break;
    const int order = !has_a ? 1 : !has_b ? -1 : a->key().compare(b->key());
    if (order < 0) return KeyDifference{text(a->key()), text(a->value()), std::nullopt};
    if (order > 0) return KeyDifference{text(b->key()), std::nullopt, text(b->value())};
    if (a->value() != b->value()) {
      return KeyDifference{text(a->key()), text(a->value()), text(b->value())};
    }
  }
  if (!a->status().ok()) return tl::unexpected(FromRocksDb(a->status()));
  if (!b->status().ok()) return tl::unexpected(FromRocksDb(b->status()));
  return std::optional<KeyDifference>();
}

Result<std::vector<std::string>> Store::TopLevelPrefixes() const {
  std::vector<std::string> prefixes;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  for (it->SeekToFirst(); it->Valid();) {
    const std::string key = it->key().ToString();
    const auto slash = key.find('/');
    if (slash == std::string::npos) {
      prefixes.push_back(key);
      it->Next();
      continue;
    }
    std::string segment = key.substr(0, slash + 1);
    prefixes.push_back(segment);
    segment.back() = '/' + 1;  // the first key after every key that starts with the segment
    it->Seek(segment);
  }
  if (!it->status().ok()) return tl::unexpected(FromRocksDb(it->status()));
  return prefixes;
}

std::string Store::OffsetKey(std::string_view projection, std::string_view topic,
                             int32_t partition) {
  return fmt::format("{}{}/{}/{:06}", kOffsetPrefix, projection, topic, partition);
}

void Store::PutOffset(StoreBatch& batch, std::string_view projection, std::string_view topic,
                      int32_t partition, int64_t next_offset) const {
  batch.Put(OffsetKey(projection, topic, partition), std::to_string(next_offset));
}

Result<std::map<int32_t, int64_t>> Store::LoadOffsets(std::string_view projection,
                                                      std::string_view topic) const {
  std::map<int32_t, int64_t> offsets;
  const std::string prefix = fmt::format("{}{}/{}/", kOffsetPrefix, projection, topic);
  bool corrupt = false;
  RETURN_IF_ERROR(Scan(prefix, "", [&](std::string_view k, std::string_view v) {
    int32_t partition = 0;
    int64_t offset = 0;
    const auto p = k.substr(prefix.size());
    if (std::from_chars(p.data(), p.data() + p.size(), partition).ec != std::errc() ||
        std::from_chars(v.data(), v.data() + v.size(), offset).ec != std::errc()) {
      corrupt = true;
      return false;
    }
    offsets[partition] = offset;
    return true;
  }));
  if (corrupt) return MakeError(ErrorCode::kCorruption, "unreadable stored offset under " + prefix);
  return offsets;
}

}  // namespace dcm
