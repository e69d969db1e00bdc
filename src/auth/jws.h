// The unverified parts of a JWS compact token (RFC 7515 §7.1), read BEFORE any signature check
// so the algorithm and key are chosen by us, never by the token: `alg` must be RS256 or ES256
// (refusing `none` and HMAC defeats the algorithm-confusion attack, where a public key is used
// as an HMAC secret). Internal to dcm_auth. Pure functions, thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "src/auth/auth_failure.h"
#include "src/auth/jwks.h"

namespace dcm::auth {

struct JoseHeader {
  std::string alg;                   // "RS256" or "ES256"
  KeyType key_type = KeyType::kRsa;  // the key type `alg` needs
  std::optional<std::string> kid;    // absent: the verifier tries every key of key_type
};

struct JwsParts {
  JoseHeader header;
  std::string payload;  // the decoded payload (JSON text, not yet verified)
};

// Splits and decodes `token`: three base64url segments, a JSON-object header with an accepted
// `alg`, an optional string `kid` and no `crit`, a payload that decodes, and a signature of a
// plausible size for `alg`. kMalformed / kAlgorithm failures say which part is wrong.
tl::expected<JwsParts, AuthFailure> ParseJws(std::string_view token);

}  // namespace dcm::auth
