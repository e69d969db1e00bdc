#include "src/auth/token_verifier.h"

#include <jwt.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "src/auth/json_util.h"
#include "src/auth/jws.h"

namespace dcm::auth {
namespace {

// A kid-less token is tried against at most this many keys (see the header).
constexpr size_t kMaxKidlessCandidates = 4;

struct JwtFree {
  void operator()(jwt_t* jwt) const { jwt_free(jwt); }
  void operator()(char* text) const { std::free(text); }  // libjwt's strings are malloc'd
};

using Candidates = std::vector<const VerificationKey*>;

tl::unexpected<AuthFailure> KeysNotLoaded(const KeySnapshot& snapshot) {
  // Why they are missing (an internal address, a TLS error) is logged by the key source, not
  // told to an unauthenticated caller.
  std::string reason = "signing keys not loaded";
  if (!snapshot.unavailable.empty()) reason += " (the issuer could not be reached)";
  return Fail(AuthFailureKind::kKeysUnavailable, std::move(reason));
}

bool Fits(const VerificationKey& key, const JoseHeader& header) {
  return key.type == header.key_type && (key.alg.empty() || key.alg == header.alg);
}

tl::expected<Candidates, AuthFailure> SelectByKid(const KeySnapshot& snapshot,
                                                  const JoseHeader& header) {
  bool known = false;
  for (const VerificationKey& key : snapshot.keys) {
    if (key.kid != *header.kid) continue;
    if (Fits(key, header)) return Candidates{&key};
    known = true;
  }
  const std::string kid = Printable(*header.kid);
  if (!known) return Fail(AuthFailureKind::kUnknownKey, "unknown signing key id '" + kid + "'");
  return Fail(AuthFailureKind::kAlgorithm, "key '" + kid + "' cannot verify " + header.alg +
                                               " (it needs an " + KeyTypeName(header.key_type) +
                                               " key)");
}

tl::expected<Candidates, AuthFailure> SelectKeys(const KeySnapshot& snapshot,
                                                 const JoseHeader& header) {
  if (snapshot.keys.empty()) return KeysNotLoaded(snapshot);
  if (header.kid) return SelectByKid(snapshot, header);
  Candidates out;
  for (const VerificationKey& key : snapshot.keys) {
    if (Fits(key, header)) out.push_back(&key);
  }
  if (out.empty()) return Fail(AuthFailureKind::kUnknownKey, "no signing key for " + header.alg);
  if (out.size() > kMaxKidlessCandidates) {
    return Fail(AuthFailureKind::kMalformed, "token has no 'kid' and " +
                                                 std::to_string(out.size()) +
                                                 " keys could have signed it: a 'kid' is required");
  }
  return out;
}

// A failure that a refresh of the keys may cure.
bool RefreshMayHelp(const AuthFailure& failure, const JoseHeader& header) {
  return failure.kind == AuthFailureKind::kKeysUnavailable ||
         (failure.kind == AuthFailureKind::kUnknownKey && header.kid.has_value());
}

bool ValidClaimPath(std::string_view path) {
  return !path.empty() && !path.starts_with('.') && !path.ends_with('.') &&
         path.find("..") == std::string_view::npos;
}

}  // namespace

Result<std::unique_ptr<TokenVerifier>> TokenVerifier::Create(TokenVerifierOptions options,
                                                             std::shared_ptr<KeySource> keys) {
  if (!keys) return MakeError(ErrorCode::kInvalidArgument, "TokenVerifier needs a key source");
  if (!ValidClaimPath(options.roles_claim)) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "AUTH_ROLES_CLAIM '" + options.roles_claim +
                         "' is not a claim name or dotted path (like realm_access.roles)");
  }
  if (options.leeway_ms < 0 || options.cache_ttl_ms < 0 || options.max_token_bytes == 0) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "token leeway and cache ttl must not be negative, the size limit not 0");
  }
  return std::unique_ptr<TokenVerifier>(new TokenVerifier(std::move(options), std::move(keys)));
}

TokenVerifier::TokenVerifier(TokenVerifierOptions options, std::shared_ptr<KeySource> keys)
    : options_(std::move(options)),
      rules_{options_.issuer, options_.audience, options_.roles_claim, options_.admin_subject},
      keys_(std::move(keys)),
      cache_(options_.cache_capacity) {}

AuthResult TokenVerifier::Verify(std::string_view token, int64_t now_ms) {
  if (token.empty()) return Fail(AuthFailureKind::kMalformed, "no token");
  if (token.size() > options_.max_token_bytes) {
    return Fail(AuthFailureKind::kMalformed,
                "token is larger than " + std::to_string(options_.max_token_bytes) + " bytes");
  }
  const TokenCache::Key key = TokenCache::KeyOf(token);
  if (auto hit = cache_.Lookup(key, keys_->Generation(), now_ms)) {
    auto valid = CheckTimes(hit->exp_ms, hit->nbf_ms, options_.leeway_ms, now_ms);
    if (!valid) return tl::unexpected(valid.error());
    return std::move(hit->principal);
  }
  return VerifyUncached(token, key, now_ms);
}

AuthResult TokenVerifier::VerifyUncached(std::string_view token, const TokenCache::Key& key,
                                         int64_t now_ms) {
  auto parts = ParseJws(token);
  if (!parts) return tl::unexpected(parts.error());
  // Refuse what the claims alone refuse before paying for a signature check. Only the claims
  // libjwt verified (below) can accept.
  auto unverified = ReadClaims(parts->payload, rules_);
  if (!unverified) return tl::unexpected(unverified.error());
  auto valid = CheckTimes(unverified->exp_ms, unverified->nbf_ms, options_.leeway_ms, now_ms);
  if (!valid) return tl::unexpected(valid.error());

  uint64_t generation = 0;
  auto claims = CheckSignature(token, *parts, now_ms, &generation);
  if (!claims) return tl::unexpected(claims.error());
  valid = CheckTimes(claims->exp_ms, claims->nbf_ms, options_.leeway_ms, now_ms);
  if (!valid) return tl::unexpected(valid.error());

  Principal principal{Principal::Via::kToken, std::move(claims->subject), claims->roles};
  const int64_t drop_at = std::min(SaturatingAdd(claims->exp_ms, options_.leeway_ms),
                                   SaturatingAdd(now_ms, options_.cache_ttl_ms));
  cache_.Insert(key, CachedToken{principal, claims->exp_ms, claims->nbf_ms, drop_at, generation},
                now_ms);
  return principal;
}

tl::expected<TokenClaims, AuthFailure> TokenVerifier::CheckSignature(std::string_view token,
                                                                     const JwsParts& parts,
                                                                     int64_t now_ms,
                                                                     uint64_t* generation) {
  std::shared_ptr<const KeySnapshot> snapshot = keys_->Keys();
  auto candidates = SelectKeys(*snapshot, parts.header);
  if (!candidates && RefreshMayHelp(candidates.error(), parts.header) &&
      keys_->RefreshForUnknownKey(snapshot->generation, now_ms)) {
    snapshot = keys_->Keys();
    candidates = SelectKeys(*snapshot, parts.header);
  }
  if (!candidates) return tl::unexpected(candidates.error());
  *generation = snapshot->generation;

  const std::string terminated(token);  // libjwt wants a C string
  for (const VerificationKey* key : *candidates) {
    signature_checks_.fetch_add(1, std::memory_order_relaxed);
    jwt_t* raw = nullptr;
    const int rc = jwt_decode(&raw, terminated.c_str(),
                              reinterpret_cast<const unsigned char*>(key->pem.data()),
                              static_cast<int>(key->pem.size()));
    std::unique_ptr<jwt_t, JwtFree> jwt(raw);
    if (rc != 0 || !jwt) continue;
    // Belt and braces: libjwt must have verified with the algorithm we chose.
    const char* verified_alg = jwt_alg_str(jwt_get_alg(jwt.get()));
    if (verified_alg == nullptr || parts.header.alg != verified_alg) {
      return Fail(AuthFailureKind::kAlgorithm, "verified alg differs from the token header's");
    }
    std::unique_ptr<char, JwtFree> grants(jwt_get_grants_json(jwt.get(), nullptr));
    if (!grants) return Fail(AuthFailureKind::kMalformed, "token claims unreadable");
    return ReadClaims(grants.get(), rules_);
  }
  return Fail(AuthFailureKind::kSignature, "invalid signature");
}

TokenVerifierStats TokenVerifier::stats() const {
  return {signature_checks_.load(std::memory_order_relaxed), cache_.hits(), cache_.size()};
}

}  // namespace dcm::auth
