#include "src/cli/trust_boundary.h"

#include "src/common/log.h"
#include "src/http/client.h"

namespace dcm::cli {
namespace {

// The OIDC issuer is operator-configured: trusted by the outbound policy, verified by TLS.
auth::HttpFetch IssuerFetch(std::shared_ptr<const http::TlsClientContext> tls) {
  return [tls = std::move(tls)](const std::string& url) -> Result<std::string> {
    auto response =
        http::Fetch("GET", url, "", std::chrono::seconds(5), http::HttpClientOptions{nullptr, tls});
    if (!response) return tl::unexpected(response.error());
    if (response->status != 200) {
      return MakeError(ErrorCode::kUnavailable,
                       "GET " + url + " answered " + std::to_string(response->status));
    }
    return std::move(response->body);
  };
}

}  // namespace

TrustBoundary::~TrustBoundary() {
  if (oidc_keys_) oidc_keys_->StopRefreshThread();
}

Result<std::unique_ptr<TrustBoundary>> TrustBoundary::Create(const Config& config,
                                                             const Clock* clock) {
  std::unique_ptr<TrustBoundary> t(new TrustBoundary());
  OutboundPolicy::Options outbound;
  outbound.allow_loopback = config.dev;
  outbound.allow_cidrs = config.outbound.allow_cidrs;
  outbound.deny_cidrs = config.outbound.deny_cidrs;
  ASSIGN_OR_RETURN(auto policy, OutboundPolicy::Create(outbound));
  t->outbound_ = std::make_shared<const OutboundPolicy>(std::move(policy));
  ASSIGN_OR_RETURN(t->sp_tls_,
                   http::TlsClientContext::Create(http::TlsClientOptions{
                       config.health.ca_file, config.health.insecure_skip_verify,
                       config.outbound.sp_client_cert_file, config.outbound.sp_client_key_file}));
  if (config.AuthConfigured()) RETURN_IF_ERROR(t->CreateAuthenticator(config, clock));
  return t;
}

Status TrustBoundary::CreateAuthenticator(const Config& config, const Clock* clock) {
  const AuthConfig& a = config.auth;
  auto logger = Logger("auth");
  std::shared_ptr<auth::KeySource> keys;
  if (!a.jwks_file.empty()) {
    ASSIGN_OR_RETURN(jwks_file_, auth::JwksFile::Load(a.jwks_file));
    for (const auto& warning : jwks_file_->warnings()) {
      logger->warn("msg=\"JWKS key skipped\" file={} reason=\"{}\"", a.jwks_file, warning);
    }
    keys = jwks_file_;
    auth_mode_ = "jwt (jwks file)";
  } else if (!a.issuer_url.empty()) {
    std::shared_ptr<const http::TlsClientContext> tls;
    if (!a.issuer_ca_file.empty()) {
      ASSIGN_OR_RETURN(tls, http::TlsClientContext::Create({a.issuer_ca_file, false, "", ""}));
    }
    auth::OidcKeysOptions options;
    options.issuer = a.issuer_url;
    options.refresh_interval_ms = a.refresh_interval.count();
    options.min_refresh_interval_ms = a.min_refresh_interval.count();
    ASSIGN_OR_RETURN(oidc_keys_, auth::OidcKeys::Create(options, IssuerFetch(std::move(tls))));
    if (auto started = oidc_keys_->Start(clock->NowMillis()); !started) {
      logger->warn(
          "msg=\"issuer keys not loaded; tokens get 401 until they are\" issuer={} "
          "error=\"{}\"",
          a.issuer_url, started.error().message);
    }
    oidc_keys_->StartRefreshThread(*clock);
    keys = oidc_keys_;
    auth_mode_ = "jwt (oidc issuer)";
  }
  if (keys) {
    auth::TokenVerifierOptions options;
    options.issuer = a.issuer_url;
    options.audience = a.audience;
    options.roles_claim = a.roles_claim;
    options.admin_subject = a.admin_subject;
    ASSIGN_OR_RETURN(verifier_, auth::TokenVerifier::Create(options, keys));
  }
  auth::CertRoles cert_roles;
  if (!config.tls.client_ca_file.empty()) {
    ASSIGN_OR_RETURN(cert_roles, auth::ParseCertRoles(a.cert_roles));
    auth_mode_ = keys ? auth_mode_ + " + client certificates" : "client certificates";
  }
  authenticator_ = std::make_unique<auth::CallerAuthenticator>(
      verifier_.get(), std::move(cert_roles), a.admin_subject, clock);
  return OkStatus();
}

Status TrustBoundary::Reload() {
  if (!jwks_file_) return OkStatus();
  return jwks_file_->Reload();
}

}  // namespace dcm::cli
