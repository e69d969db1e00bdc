// CallerAuthenticator: the Authenticator `dcm serve` runs (SPEC §6). A bearer token is verified
// by the TokenVerifier (signature, claims, roles, cache); without one, a verified mTLS client
// certificate's subject is the caller, with the roles AUTH_CERT_ROLES gives it (none if it is
// not listed: every call but /healthz and /readyz then answers 403). DCM_ADMIN_SUBJECT applies
// to both.
#pragma once

#include <string>

#include "src/auth/authenticator.h"
#include "src/auth/cert_roles.h"
#include "src/auth/token_verifier.h"
#include "src/common/clock.h"

namespace dcm::auth {

class CallerAuthenticator final : public Authenticator {
 public:
  // `verifier` may be null (client certificates only); it and `clock` must outlive this.
  CallerAuthenticator(TokenVerifier* verifier, CertRoles cert_roles, std::string admin_subject,
                      const Clock* clock)
      : verifier_(verifier),
        cert_roles_(std::move(cert_roles)),
        admin_subject_(std::move(admin_subject)),
        clock_(clock) {}

  AuthResult Authenticate(std::string_view bearer_token,
                          std::string_view peer_subject) const override;

 private:
  TokenVerifier* verifier_;
  CertRoles cert_roles_;
  std::string admin_subject_;
  const Clock* clock_;
};

}  // namespace dcm::auth
