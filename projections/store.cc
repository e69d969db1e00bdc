#include "projections/store.h"

#include <fmt/format.h>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/memtablerep.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>

#include <charconv>

namespace dcm {
namespace {

Error FromRocksDb(const rocksdb::Status& status) {
  const ErrorCode code = status.IsCorruption() ? ErrorCode::kCorruption
                         : status.IsNotFound() ? ErrorCode::kNotFound
                                               : ErrorCode::kUnavailable;
  return Error{code, "rocksdb: " + status.ToString(), {}};
}

constexpr std::string_view kOffsetPrefix = "__offset/";

}  // namespace

StoreBatch::StoreBatch() : batch_(std::make_unique<rocksdb::WriteBatch>()) {}
StoreBatch::~StoreBatch() = default;
StoreBatch::StoreBatch(StoreBatch&&) noexcept = default;
StoreBatch& StoreBatch::operator=(StoreBatch&&) noexcept = default;

void StoreBatch::Put(std::string_view key, std::string_view value) {
  batch_->Put(rocksdb::Slice(key.data(), key.size()), rocksdb::Slice(value.data(), value.size()))
      .PermitUncheckedError();  // in-memory append; cannot fail below RocksDB's 4 GiB limit
  pending_[std::string(key)] = std::string(value);
}

void StoreBatch::PutUnread(std::string_view key, std::string_view value) {
  batch_->Put(rocksdb::Slice(key.data(), key.size()), rocksdb::Slice(value.data(), value.size()))
      .PermitUncheckedError();
}

void StoreBatch::Delete(std::string_view key) {
  batch_->Delete(rocksdb::Slice(key.data(), key.size())).PermitUncheckedError();
  pending_[std::string(key)] = std::nullopt;
}

size_t StoreBatch::Count() const { return batch_->Count(); }

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
  if (options.bulk_load) {
    opts.PrepareForBulkLoad();
    opts.memtable_factory.reset(new rocksdb::VectorRepFactory());
    opts.allow_concurrent_memtable_write = false;
    opts.write_buffer_size = 256 << 20;
    store->bulk_load_ = true;
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

Result<std::optional<std::string>> Store::Get(std::string_view key, const StoreBatch* batch) const {
  if (batch) {
    auto it = batch->pending_.find(std::string(key));
    if (it != batch->pending_.end()) return it->second;
  }
  if (bulk_load_) {
    std::lock_guard lock(bulk_mu_);
    auto it = bulk_index_.find(std::string(key));
    return it == bulk_index_.end() ? std::optional<std::string>() : it->second;
  }
  std::string value;
  auto status = db_->Get(rocksdb::ReadOptions(), rocksdb::Slice(key.data(), key.size()), &value);
  if (status.IsNotFound()) return std::optional<std::string>();
  if (!status.ok()) return tl::unexpected(FromRocksDb(status));
  return std::optional<std::string>(std::move(value));
}

Status Store::Write(StoreBatch& batch) {
  rocksdb::WriteOptions wo;
  wo.disableWAL = bulk_load_;
  auto status = db_->Write(wo, batch.batch_.get());
  if (!status.ok()) return tl::unexpected(FromRocksDb(status));
  if (bulk_load_) {
    std::lock_guard lock(bulk_mu_);
    for (auto& [key, value] : batch.pending_) bulk_index_[key] = std::move(value);
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
  if (!it->status().ok()) return tl::unexpected(FromRocksDb(it->status()));
  return OkStatus();
}

Result<std::string> Store::Digest(std::string_view prefix) const {
  // Two independent FNV-1a style 64-bit lanes over length-prefixed keys and values.
  uint64_t a = 0xcbf29ce484222325ULL, b = 0x84222325cbf29ce4ULL;
  uint64_t count = 0;
  auto mix = [&](std::string_view bytes) {
    for (unsigned char c : std::to_string(bytes.size()) + ":") {
      a = (a ^ c) * 0x100000001b3ULL;
      b = (b ^ c) * 0x1000193ULL + (a >> 29);
    }
    for (unsigned char c : bytes) {
      a = (a ^ c) * 0x100000001b3ULL;
      b = (b ^ c) * 0x1000193ULL + (a >> 29);
    }
  };
  RETURN_IF_ERROR(Scan(prefix, "", [&](std::string_view k, std::string_view v) {
    mix(k);
    mix(v);
    ++count;
    return true;
  }));
  return fmt::format("{:016x}{:016x}-{}", a, b, count);
}

Status Store::FinishBulkLoad() {
  {
    std::lock_guard lock(bulk_mu_);
    bulk_index_.clear();
  }
  auto status = db_->Flush(rocksdb::FlushOptions());
  if (status.ok()) status = db_->CompactRange(rocksdb::CompactRangeOptions(), nullptr, nullptr);
  if (!status.ok()) return tl::unexpected(FromRocksDb(status));
  return OkStatus();
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
