// KeySource: where the TokenVerifier gets the issuer's signing keys (SPEC §6). Two
// implementations: JwksFile (AUTH_JWKS_FILE, reloaded on SIGHUP) and OidcKeys (the jwks_uri of
// AUTH_ISSUER_URL's discovery document, refreshed periodically and on an unknown `kid`).
//
// A source publishes immutable KeySnapshots. Each snapshot whose keys differ from the previous
// one gets the next generation number; the verifier's cache drops entries verified under an
// older generation, so a removed key stops verifying at once.
//
// Thread-safety: every method is safe to call from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "src/auth/jwks.h"

namespace dcm::auth {

struct KeySnapshot {
  uint64_t generation = 0;
  std::vector<VerificationKey> keys;
  // Why `keys` is empty ("issuer unreachable: ..."); "" when keys were loaded.
  std::string unavailable;
};

class KeySource {
 public:
  virtual ~KeySource() = default;

  // The current keys; never null. Cheap (a shared_ptr copy under a mutex).
  virtual std::shared_ptr<const KeySnapshot> Keys() const = 0;

  // The generation of Keys(): one atomic load, for the verifier's cache-hit path.
  virtual uint64_t Generation() const = 0;

  // The verifier met a token whose `kid` is not in the snapshot of `seen_generation`. The
  // source may refresh its keys now (blocking the caller; rate-limited). True when the keys
  // changed since `seen_generation` (the caller looks the kid up again). The default: keys only
  // change on an explicit reload, so false.
  virtual bool RefreshForUnknownKey(uint64_t /*seen_generation*/, int64_t /*now_ms*/) {
    return false;
  }
};

// The publishing half shared by the implementations: holds the current snapshot and bumps the
// generation when a new key list differs from the current one.
class KeySetHolder {
 public:
  KeySetHolder();

  std::shared_ptr<const KeySnapshot> Current() const;
  uint64_t Generation() const { return generation_.load(std::memory_order_acquire); }

  // Publishes `keys`; true when they differ from the current keys (a new generation).
  bool Publish(std::vector<VerificationKey> keys);
  // Records why there are no keys, when there are none (a source that has keys keeps them).
  void MarkUnavailable(std::string why);

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const KeySnapshot> current_;  // guarded by mu_
  std::atomic<uint64_t> generation_{0};
};

}  // namespace dcm::auth
