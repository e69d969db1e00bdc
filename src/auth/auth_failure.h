// Why a request is not authenticated (SPEC §6 "Answers"): the TokenVerifier's failure value,
// and the pieces of the 401 answer built from it.
//
//   401 problem+json   detail: failure.reason
//   WWW-Authenticate:  BearerChallenge(&failure)
//                      = Bearer error="invalid_token", error_description="<reason>"
//   (no token at all:  BearerChallenge(nullptr) = Bearer)
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

#include "src/common/principal.h"

namespace dcm::auth {

enum class AuthFailureKind {
  kMalformed,        // not a JWS, bad base64url/JSON, too large, missing token
  kAlgorithm,        // alg none, HMAC, another alg, or a key of the wrong type for it
  kUnknownKey,       // no key with the token's kid (after at most one refresh)
  kKeysUnavailable,  // no signing keys loaded (issuer unreachable at start)
  kSignature,        // the signature does not verify
  kExpired,          // exp (+ leeway) has passed
  kNotYetValid,      // nbf (- leeway) is still ahead
  kIssuer,           // iss is not the configured issuer
  kAudience,         // aud does not contain the configured audience
  kClaims,           // sub or exp missing or malformed
};

// A stable lower-case name ("expired", "unknown_key", ...), e.g. for a metric label.
const char* AuthFailureKindName(AuthFailureKind kind);

struct AuthFailure {
  AuthFailureKind kind = AuthFailureKind::kMalformed;
  // Short and safe to show the caller: printable ASCII without '"' or '\' (values taken from
  // the token are cut and cleaned), so it fits both the problem `detail` and the quoted
  // error_description of RFC 6750 §3. Examples: "token expired", "wrong audience: token is
  // not for 'dcm'", "unknown signing key id 'k2'", "alg 'HS256' is refused: HMAC algorithms
  // are not accepted".
  std::string reason;
};

// A verified caller (Principal) or why not. [[nodiscard]] like Result<T>.
class [[nodiscard]] AuthResult : public tl::expected<Principal, AuthFailure> {
 public:
  using tl::expected<Principal, AuthFailure>::expected;
};

inline tl::unexpected<AuthFailure> Fail(AuthFailureKind kind, std::string reason) {
  return tl::unexpected<AuthFailure>(AuthFailure{kind, std::move(reason)});
}

// The token of an `Authorization` header value "Bearer <token>" (scheme case-insensitive,
// blanks around the token ignored; RFC 6750 §2.1). nullopt when the scheme is not Bearer; an
// empty view when the token is missing (Verify then answers "no token").
std::optional<std::string_view> BearerToken(std::string_view authorization);

// The `WWW-Authenticate` value for a 401: "Bearer" when no token was given (nullptr), else
// Bearer error="invalid_token", error_description="<reason>".
std::string BearerChallenge(const AuthFailure* failure);

}  // namespace dcm::auth
