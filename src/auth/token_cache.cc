#include "src/auth/token_cache.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

namespace dcm::auth {
namespace {

struct CtxFree {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};

const EVP_MD* Sha256() {
  static const EVP_MD* md = EVP_MD_fetch(nullptr, "SHA2-256", nullptr);
  return md;
}

}  // namespace

TokenCache::TokenCache(size_t capacity)
    : per_shard_(capacity == 0 ? 0 : std::max<size_t>(1, capacity / kShards)) {}

TokenCache::Key TokenCache::KeyOf(std::string_view token) {
  // A context per thread, reused: EVP_MD_CTX_new per call costs as much as hashing a token.
  thread_local std::unique_ptr<EVP_MD_CTX, CtxFree> ctx(EVP_MD_CTX_new());
  Key key{};
  unsigned int size = 0;
  if (!ctx || Sha256() == nullptr || !EVP_DigestInit_ex2(ctx.get(), Sha256(), nullptr) ||
      !EVP_DigestUpdate(ctx.get(), token.data(), token.size()) ||
      !EVP_DigestFinal_ex(ctx.get(), key.data(), &size) || size != key.size()) {
    std::abort();  // OpenSSL without SHA-256: a broken installation, not an input problem
  }
  return key;
}

std::optional<CachedToken> TokenCache::Lookup(const Key& key, uint64_t generation, int64_t now_ms) {
  if (per_shard_ == 0) return std::nullopt;
  Shard& shard = ShardOf(key);
  std::lock_guard lock(shard.mu);
  auto it = shard.entries.find(key);
  if (it == shard.entries.end()) return std::nullopt;
  if (it->second.generation != generation || now_ms >= it->second.drop_at_ms) {
    shard.entries.erase(it);
    return std::nullopt;
  }
  ++shard.hits;
  return it->second;
}

void TokenCache::Insert(const Key& key, CachedToken entry, int64_t now_ms) {
  if (per_shard_ == 0) return;
  Shard& shard = ShardOf(key);
  std::lock_guard lock(shard.mu);
  if (shard.entries.size() >= per_shard_ && !shard.entries.contains(key)) {
    MakeRoom(shard, entry.generation, now_ms);
  }
  shard.entries.insert_or_assign(key, std::move(entry));
}

void TokenCache::MakeRoom(Shard& shard, uint64_t generation, int64_t now_ms) {
  std::erase_if(shard.entries, [&](const auto& item) {
    return item.second.generation != generation || now_ms >= item.second.drop_at_ms;
  });
  if (shard.entries.size() < per_shard_) return;
  auto earliest = std::min_element(
      shard.entries.begin(), shard.entries.end(),
      [](const auto& a, const auto& b) { return a.second.drop_at_ms < b.second.drop_at_ms; });
  shard.entries.erase(earliest);
}

size_t TokenCache::size() const {
  size_t total = 0;
  for (const Shard& shard : shards_) {
    std::lock_guard lock(shard.mu);
    total += shard.entries.size();
  }
  return total;
}

uint64_t TokenCache::hits() const {
  uint64_t total = 0;
  for (const Shard& shard : shards_) {
    std::lock_guard lock(shard.mu);
    total += shard.hits;
  }
  return total;
}

}  // namespace dcm::auth
