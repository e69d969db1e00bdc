#include "src/auth/caller_authenticator.h"

namespace dcm::auth {

AuthResult CallerAuthenticator::Authenticate(std::string_view bearer_token,
                                             std::string_view peer_subject) const {
  if (!bearer_token.empty()) {
    if (!verifier_) {
      return Fail(AuthFailureKind::kMalformed,
                  "bearer tokens are not accepted here: authenticate with a client certificate");
    }
    return verifier_->Verify(bearer_token, clock_->NowMillis());
  }
  if (!peer_subject.empty()) {
    return CertificatePrincipal(peer_subject, cert_roles_, admin_subject_);
  }
  return Fail(AuthFailureKind::kMalformed, verifier_
                                               ? "no token: send Authorization: Bearer <token>"
                                               : "no credentials: present a client certificate");
}

}  // namespace dcm::auth
