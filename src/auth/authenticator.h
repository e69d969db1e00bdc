// Authenticator: the port between the HTTP edge (src/http/auth.h, the router) and the credential
// checks of SPEC §6. CallerAuthenticator is the implementation `dcm serve` wires (bearer JWTs
// through TokenVerifier, mTLS subjects through AUTH_CERT_ROLES); tests use fakes.
//
// This header and auth_failure.h form the small library dcm_auth_api (no libjwt, no OpenSSL),
// which the handlers link; the verifier itself is dcm_auth.
#pragma once

#include <string_view>

#include "src/auth/auth_failure.h"

namespace dcm::auth {

class Authenticator {
 public:
  virtual ~Authenticator() = default;
  // `bearer_token`: the token of `Authorization: Bearer <token>` ("" if none); `peer_subject`:
  // a verified mTLS client certificate's subject ("" if none). A token, when given, decides; a
  // certificate alone authenticates its subject; neither fails. Thread-safe.
  virtual AuthResult Authenticate(std::string_view bearer_token,
                                  std::string_view peer_subject) const = 0;
};

}  // namespace dcm::auth
