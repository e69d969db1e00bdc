// TokenCache: tokens the TokenVerifier has verified, so a client that sends the same token on
// every request pays one signature check, not one per request (SPEC §6; the benchmark target is
// a token-authenticated GET at >= 0.8x the throughput of an unauthenticated one).
//
// Keyed by the SHA-256 of the token (32 bytes per entry whatever the token's size, and no
// collision can make one token pass for another). An entry holds the principal, the token's
// exp/nbf (checked again on every hit by the verifier), the key generation it was verified
// under, and a drop time: min(exp + leeway, insertion + ttl). A lookup under another
// generation, or at/after the drop time, erases the entry and misses.
//
// Bounded: 16 shards of capacity/16 entries. Inserting into a full shard first sweeps it of
// dead entries (old generation or past their drop time), then, if still full, evicts the entry
// with the earliest drop time: O(shard size), paid only on a miss, which also paid a signature
// check (far more expensive).
//
// Thread-safety: all methods, from any thread. One mutex per shard, held for a hash lookup and
// a copy of the principal.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "src/common/principal.h"

namespace dcm::auth {

struct CachedToken {
  Principal principal;
  int64_t exp_ms = 0;
  int64_t nbf_ms = 0;
  int64_t drop_at_ms = 0;
  uint64_t generation = 0;
};

class TokenCache {
 public:
  using Key = std::array<unsigned char, 32>;

  // capacity 0 disables the cache.
  explicit TokenCache(size_t capacity);

  // SHA-256 of `token` (a thread-local OpenSSL digest context).
  static Key KeyOf(std::string_view token);

  std::optional<CachedToken> Lookup(const Key& key, uint64_t generation, int64_t now_ms);
  void Insert(const Key& key, CachedToken entry, int64_t now_ms);

  size_t size() const;
  uint64_t hits() const;

 private:
  static constexpr size_t kShards = 16;
  struct KeyHash {
    size_t operator()(const Key& key) const {
      size_t h;
      std::memcpy(&h, key.data(), sizeof h);
      return h;
    }
  };
  struct alignas(64) Shard {
    mutable std::mutex mu;
    std::unordered_map<Key, CachedToken, KeyHash> entries;  // guarded by mu
    uint64_t hits = 0;                                      // guarded by mu
  };
  Shard& ShardOf(const Key& key) { return shards_[key[31] % kShards]; }
  void MakeRoom(Shard& shard, uint64_t generation, int64_t now_ms);

  const size_t per_shard_;
  std::array<Shard, kShards> shards_;
};

}  // namespace dcm::auth
