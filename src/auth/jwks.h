// JWKS (RFC 7517 §5): the public keys an issuer signs tokens with, turned into the PEM public
// keys libjwt verifies with (SPEC §6). Read from AUTH_JWKS_FILE (JwksFile) or from the issuer's
// `jwks_uri` (OidcKeys); the TokenVerifier picks one by `kid`.
//
// Accepted keys: `kty: RSA` (`n`, `e`; 2048..8192 bits) and `kty: EC` with `crv: P-256` (`x`,
// `y`, 32 bytes each, a point on the curve). A key is skipped, with one warning naming it, when
// its `use` is not "sig", its `key_ops` lack "verify", its `alg` is not RS256/ES256 or does not
// fit its type, its type or curve is another, its material is bad, or its (kid, type) repeats an
// earlier key. Pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/result.h"

namespace dcm::auth {

enum class KeyType {
  kRsa,     // verifies RS256
  kEcP256,  // verifies ES256
};

// "RSA" or "EC P-256", for messages.
const char* KeyTypeName(KeyType type);

struct VerificationKey {
  std::string kid;  // the JWK's `kid`; "" when it has none
  std::string alg;  // the JWK's `alg` ("RS256" or "ES256"); "" when it has none
  KeyType type = KeyType::kRsa;
  std::string pem;  // SubjectPublicKeyInfo, "-----BEGIN PUBLIC KEY-----": what libjwt takes
  bool operator==(const VerificationKey&) const = default;
};

struct Jwks {
  std::vector<VerificationKey> keys;  // in document order
  std::vector<std::string> warnings;  // one per skipped key: "key #2 (kid 'x'): <why>"
};

// A JWKS larger than this is refused (a real one is a few KiB).
inline constexpr size_t kMaxJwksBytes = 1024 * 1024;
// A JWKS with more keys than this is refused (issuers publish a handful: current and next).
inline constexpr size_t kMaxJwksKeys = 100;
// Longest `kid` kept; a key with a longer one is skipped.
inline constexpr size_t kMaxKidBytes = 256;

// The usable keys of `json`. kInvalidArgument, with a message saying why, when it is too large,
// not JSON, not an object with a `keys` array, has more than kMaxJwksKeys keys, or has no usable
// key (the message then lists the warnings).
Result<Jwks> ParseJwks(std::string_view json);

}  // namespace dcm::auth
