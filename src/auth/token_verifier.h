// TokenVerifier: turns `Authorization: Bearer <JWT>` into a Principal (SPEC §6). The HTTP layer
// calls Verify on every request that carries a token, and answers 401 with the failure's reason
// (auth_failure.h) when it fails.
//
// A token is accepted when, in this order:
//   1. it is at most max_token_bytes, and a JWS compact token: header.payload.signature;
//   2. its header (decoded by us, before any signature check) has alg RS256 or ES256: `none`
//      and HS256/384/512 are refused by name, so a public key can never be used as an HMAC
//      secret; a `crit` header is refused; jku/x5u/jwk headers are ignored (keys only ever
//      come from the KeySource);
//   3. its claims pass the cheap checks below, read from the still unverified payload (so an
//      expired or foreign token costs no signature check);
//   4. a key is found: with a `kid`, the key with that kid, which must be of the type the alg
//      needs (RSA for RS256, EC P-256 for ES256) and whose own `alg`, if any, must match; an
//      unknown kid asks the KeySource for one (rate-limited) refresh and looks again. Without
//      a `kid`, every key of the needed type is tried, if there are at most 4 (more: refused,
//      "a 'kid' is required": a forged kid-less token must not cost 100 signature checks);
//   5. libjwt verifies the signature with that key's PEM, and reports the same alg;
//   6. the claims, read again from what libjwt verified (jwt_get_grants_json), pass:
//      exp required and now < exp + leeway; nbf, if present, now >= nbf - leeway; iss equals
//      `issuer` when configured; aud (string or array) contains `audience` when configured;
//      sub a non-empty string of at most 256 bytes without control characters.
// Roles: the names in the array at `roles_claim` (a dotted path: "realm_access.roles" walks
// into objects) and, always, in Keycloak's realm_access.roles, mapped by RoleFromName (other
// names ignored); the sub equal to `admin_subject` also gets kRoleAdmin.
//
// Cache: a verified token is remembered (token_cache.h) by its SHA-256 until min(exp + leeway,
// verification + cache_ttl), and only while the KeySource's generation is the one it was
// verified under (a key rotation or removal empties it in effect). A hit hashes the token, takes
// one shard mutex, re-checks exp and nbf against `now_ms` and copies the principal: no JSON and
// no signature check. The SHA-256 is most of its cost (~0.4 us for a 1 KiB token with SHA-NI;
// tests/bench/auth_bench).
//
// Thread-safety: Verify and stats are safe from any number of threads at once. The KeySource
// must be thread-safe (all of ours are).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "src/auth/auth_failure.h"
#include "src/auth/claims.h"
#include "src/auth/key_source.h"
#include "src/auth/token_cache.h"
#include "src/common/result.h"

namespace dcm::auth {

struct JwsParts;

struct TokenVerifierOptions {
  // AUTH_ISSUER_URL: tokens' `iss` must equal it exactly; "" = not checked (a JWKS file
  // without an issuer).
  std::string issuer{};
  // AUTH_JWT_AUDIENCE: tokens' `aud` must contain it; "" = not checked.
  std::string audience{};
  // AUTH_ROLES_CLAIM: dotted path to the roles array. "roles" is the DCM convention.
  std::string roles_claim = "roles";
  // DCM_ADMIN_SUBJECT: this `sub` is always admin (bootstrap before roles are set up).
  std::string admin_subject{};
  // Clock skew tolerated on exp and nbf, in ms. 60 s: SPEC §6.
  int64_t leeway_ms = 60 * 1000;
  // Longer tokens are refused unread. 16 KiB: far above real JWTs (1-2 KiB with many roles),
  // below typical header limits.
  size_t max_token_bytes = 16 * 1024;
  // Verified tokens remembered; 0 disables the cache. 10,000 entries of ~200 bytes: 2 MB.
  size_t cache_capacity = 10000;
  // Longest time a verified token is remembered, in ms, however long its exp is. 5 min bounds
  // how long a token keeps working after its key left the set without a refresh noticing.
  int64_t cache_ttl_ms = 5 * 60 * 1000;
};

struct TokenVerifierStats {
  uint64_t signature_checks = 0;  // libjwt verifications run (cache misses that got that far)
  uint64_t cache_hits = 0;
  size_t cache_entries = 0;
};

class TokenVerifier {
 public:
  // kInvalidArgument for a null key source, an empty roles_claim or one with an empty path
  // step ("a..b"), a negative leeway or ttl, or a zero max_token_bytes.
  static Result<std::unique_ptr<TokenVerifier>> Create(TokenVerifierOptions options,
                                                       std::shared_ptr<KeySource> keys);

  // The principal (via kToken, the `sub`, its roles) of `token` (the text after "Bearer "), at
  // `now_ms` (Unix ms, from the caller's Clock), or why it is refused. Never throws, never
  // crashes on any input.
  AuthResult Verify(std::string_view token, int64_t now_ms);

  TokenVerifierStats stats() const;
  const TokenVerifierOptions& options() const { return options_; }

 private:
  TokenVerifier(TokenVerifierOptions options, std::shared_ptr<KeySource> keys);

  AuthResult VerifyUncached(std::string_view token, const TokenCache::Key& key, int64_t now_ms);
  tl::expected<TokenClaims, AuthFailure> CheckSignature(std::string_view token,
                                                        const JwsParts& parts, int64_t now_ms,
                                                        uint64_t* generation);

  const TokenVerifierOptions options_;
  const ClaimRules rules_;
  const std::shared_ptr<KeySource> keys_;
  TokenCache cache_;
  std::atomic<uint64_t> signature_checks_{0};
};

}  // namespace dcm::auth
