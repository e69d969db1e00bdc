// TrustBoundary: the parts of SPEC §6 that `dcm serve` builds from its Config before anything
// else starts: the outbound policy and TLS client context for every connection to an SP, and the
// authenticator of the HTTP API (JWKS file or OIDC issuer keys, the token verifier, certificate
// roles). A bad setting is a startup error naming it.
#pragma once

#include <memory>
#include <string>

#include "src/auth/caller_authenticator.h"
#include "src/auth/jwks_file.h"
#include "src/auth/oidc_keys.h"
#include "src/auth/token_verifier.h"
#include "src/common/clock.h"
#include "src/common/config.h"
#include "src/common/outbound_policy.h"
#include "src/http/tls_client.h"

namespace dcm::cli {

class TrustBoundary {
 public:
  static Result<std::unique_ptr<TrustBoundary>> Create(const Config& config, const Clock* clock);
  ~TrustBoundary();

  // Every connection to an address that came from a registration (probes, SP calls).
  const std::shared_ptr<const OutboundPolicy>& outbound() const { return outbound_; }
  // TLS toward SPs (HEALTH_CHECK_CA_FILE, the insecure opt-in, SP_CLIENT_CERT_FILE), also used
  // for the Policy Manager (operator-configured: not filtered by the outbound policy).
  const std::shared_ptr<const http::TlsClientContext>& sp_tls() const { return sp_tls_; }
  // Null: authentication disabled (--dev without auth settings, or AUTH_DISABLED=true).
  const auth::Authenticator* authenticator() const { return authenticator_.get(); }
  // For /admin/info and the start log: "disabled", "jwt (jwks file)", "jwt (oidc issuer)", with
  // "+ client certificates" when mTLS authenticates too.
  const std::string& auth_mode() const { return auth_mode_; }
  const auth::TokenVerifier* verifier() const { return verifier_.get(); }

  // SIGHUP: re-reads the JWKS file (the old keys stay on an error, which is returned).
  Status Reload();

 private:
  TrustBoundary() = default;
  Status CreateAuthenticator(const Config& config, const Clock* clock);

  std::shared_ptr<const OutboundPolicy> outbound_;
  std::shared_ptr<const http::TlsClientContext> sp_tls_;
  std::shared_ptr<auth::JwksFile> jwks_file_;
  std::shared_ptr<auth::OidcKeys> oidc_keys_;
  std::unique_ptr<auth::TokenVerifier> verifier_;
  std::unique_ptr<auth::CallerAuthenticator> authenticator_;
  std::string auth_mode_ = "disabled";
};

}  // namespace dcm::cli
