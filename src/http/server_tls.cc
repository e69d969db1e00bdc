#include "src/http/server_tls.h"

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <boost/beast/core/error.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace dcm::http::server_detail {
namespace {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;

// TLS 1.2 suites: ECDHE key exchange with AEAD only (Mozilla "intermediate" without DHE).
// TLS 1.3 keeps OpenSSL's defaults (all AEAD).
constexpr char kTls12Ciphers[] =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
// Required for session resumption when client certificates are requested.
constexpr unsigned char kSessionIdContext[] = "dcm-http";

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};

// The first (root-cause) error in this thread's OpenSSL queue; clears the queue.
std::string TakeOpenSslError() {
  const unsigned long first = ERR_get_error();
  ERR_clear_error();
  if (first == 0) return "no details from OpenSSL";
  if (const char* reason = ERR_reason_error_string(first)) return reason;
  char buf[256];
  ERR_error_string_n(first, buf, sizeof(buf));
  return buf;
}

// An encrypted key fails to load instead of OpenSSL prompting on the terminal.
int NoPassword(char*, int, int, void*) { return 0; }

tl::unexpected<Error> TlsFileError(const char* option, const std::string& path,
                                   const std::string& why) {
  return MakeError(ErrorCode::kInvalidArgument,
                   std::string("cannot load ") + option + " '" + path + "': " + why);
}

Result<std::unique_ptr<FILE, FileCloser>> OpenReadable(const char* option,
                                                       const std::string& path) {
  std::unique_ptr<FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (!f) return TlsFileError(option, path, std::strerror(errno));
  return f;
}

std::string TimeText(double unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string Describe(X509* leaf, double not_after) {
  char subject[256];
  X509_NAME_oneline(X509_get_subject_name(leaf), subject, sizeof(subject));
  std::string serial = "?";
  if (BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(leaf), nullptr)) {
    if (char* hex = BN_bn2hex(bn)) {
      serial = hex;
      OPENSSL_free(hex);
    }
    BN_free(bn);
  }
  return "subject=\"" + std::string(subject) + "\" serial=" + serial +
         " not_after=" + TimeText(not_after);
}

// An IA5String SAN entry (URI, DNS) as text, or "" if it holds anything but printable ASCII
// without spaces (no NUL tricks, no control characters in what the auth layer matches).
std::string SanText(const ASN1_IA5STRING* s) {
  if (s == nullptr) return "";
  const auto* data = ASN1_STRING_get0_data(s);
  const int length = ASN1_STRING_length(s);
  if (length <= 0) return "";
  for (int i = 0; i < length; ++i) {
    if (data[i] <= 0x20 || data[i] >= 0x7f) return "";
  }
  return std::string(reinterpret_cast<const char*>(data), static_cast<size_t>(length));
}

// Asks clients for a certificate signed by the CA in `path` (mTLS) and verifies what they send.
Status LoadClientCa(SSL_CTX* ctx, const std::string& path) {
  ASSIGN_OR_RETURN(auto ca_file, OpenReadable("tls_client_ca_file", path));
  ca_file.reset();
  STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(path.c_str());
  if (names == nullptr || SSL_CTX_load_verify_locations(ctx, path.c_str(), nullptr) != 1) {
    if (names != nullptr) sk_X509_NAME_pop_free(names, X509_NAME_free);
    return TlsFileError("tls_client_ca_file", path,
                        "no PEM CA certificate in it (" + TakeOpenSslError() + ")");
  }
  SSL_CTX_set_client_CA_list(ctx, names);  // takes ownership; tells clients which CA we want
  // No SSL_VERIFY_FAIL_IF_NO_PEER_CERT: a client without a certificate may use a token.
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  return OkStatus();
}

}  // namespace

Result<std::shared_ptr<TlsContext>> LoadTlsContext(const ServerOptions& o) {
  ERR_clear_error();
  std::shared_ptr<TlsContext> tls;
  try {
    tls = std::make_shared<TlsContext>(ssl::context(ssl::context::tls_server));
  } catch (const std::exception& e) {
    return MakeError(ErrorCode::kInternal, std::string("cannot create a TLS context: ") + e.what());
  }
  SSL_CTX* ctx = tls->ctx.native_handle();
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(
      ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  // Frees the per-connection read/write buffers while idle (~84 KiB per idle TLS connection).
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
  if (SSL_CTX_set_cipher_list(ctx, kTls12Ciphers) != 1) {
    return MakeError(ErrorCode::kInternal, "no TLS 1.2 cipher available: " + TakeOpenSslError());
  }
  SSL_CTX_set_session_id_context(ctx, kSessionIdContext, sizeof(kSessionIdContext) - 1);
  SSL_CTX_set_default_passwd_cb(ctx, NoPassword);

  ASSIGN_OR_RETURN(auto cert_file, OpenReadable("tls_cert_file", o.tls_cert_file));
  cert_file.reset();
  if (SSL_CTX_use_certificate_chain_file(ctx, o.tls_cert_file.c_str()) != 1) {
    return TlsFileError("tls_cert_file", o.tls_cert_file,
                        "not a PEM certificate chain (" + TakeOpenSslError() + ")");
  }
  ASSIGN_OR_RETURN(auto key_file, OpenReadable("tls_key_file", o.tls_key_file));
  std::unique_ptr<EVP_PKEY, PkeyFree> key(
      PEM_read_PrivateKey(key_file.get(), nullptr, NoPassword, nullptr));
  if (!key) {
    return TlsFileError("tls_key_file", o.tls_key_file,
                        "not an unencrypted PEM private key (" + TakeOpenSslError() + ")");
  }
  X509* leaf = SSL_CTX_get0_certificate(ctx);
  if (leaf == nullptr || EVP_PKEY_eq(X509_get0_pubkey(leaf), key.get()) != 1 ||
      SSL_CTX_use_PrivateKey(ctx, key.get()) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
    ERR_clear_error();
    return MakeError(ErrorCode::kInvalidArgument,
                     "tls_key_file '" + o.tls_key_file +
                         "' does not match the certificate in tls_cert_file '" + o.tls_cert_file +
                         "'");
  }
  if (!o.tls_client_ca_file.empty()) {
    RETURN_IF_ERROR(LoadClientCa(ctx, o.tls_client_ca_file));
    tls->verify_clients = true;
  }
  std::tm tm{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(leaf), &tm) == 1) {
    tls->not_after = static_cast<double>(timegm(&tm));
  }
  tls->description = Describe(leaf, tls->not_after);
  ERR_clear_error();
  return tls;
}

HandshakeFailure ClassifyHandshake(const boost::system::error_code& ec) {
  if (ec == boost::beast::error::timeout) return HandshakeFailure::kTimeout;
  if (ec.category() != boost::asio::error::get_ssl_category()) return HandshakeFailure::kClosed;
  const auto code = static_cast<unsigned long>(static_cast<unsigned int>(ec.value()));
  if (ERR_GET_LIB(code) != ERR_LIB_SSL) return HandshakeFailure::kProtocol;
  const int reason = ERR_GET_REASON(code);
  switch (reason) {
    case SSL_R_HTTP_REQUEST:
    case SSL_R_HTTPS_PROXY_REQUEST:
    case SSL_R_WRONG_VERSION_NUMBER:
      return HandshakeFailure::kNotTls;
    case SSL_R_UNSUPPORTED_PROTOCOL:
    case SSL_R_VERSION_TOO_LOW:
    case SSL_R_NO_PROTOCOLS_AVAILABLE:
      return HandshakeFailure::kVersion;
    case SSL_R_CERTIFICATE_VERIFY_FAILED:
      return HandshakeFailure::kClientCert;
    default:
      break;
  }
  // Alerts the peer sent come back as SSL_AD_REASON_OFFSET + the alert number.
  if (reason >= SSL_AD_REASON_OFFSET && reason < SSL_AD_REASON_OFFSET + 256) {
    return HandshakeFailure::kPeerAlert;
  }
  return HandshakeFailure::kProtocol;
}

std::string PeerSubject(SSL* ssl) {
  X509* cert = SSL_get0_peer_certificate(ssl);
  if (cert == nullptr || SSL_get_verify_result(ssl) != X509_V_OK) return "";
  std::string uri;
  std::string dns;
  auto* names =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (names != nullptr) {
    for (int i = 0; i < sk_GENERAL_NAME_num(names) && uri.empty(); ++i) {
      const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, i);
      if (name->type == GEN_URI) uri = SanText(name->d.uniformResourceIdentifier);
      if (name->type == GEN_DNS && dns.empty()) dns = SanText(name->d.dNSName);
    }
    GENERAL_NAMES_free(names);
  }
  if (!uri.empty()) return uri;
  if (!dns.empty()) return dns;
  const X509_NAME* subject = X509_get_subject_name(cert);
  const int index = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (index < 0) return "";
  unsigned char* utf8 = nullptr;
  const int length =
      ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, index)));
  if (length <= 0) return "";
  std::string cn(reinterpret_cast<const char*>(utf8), static_cast<size_t>(length));
  OPENSSL_free(utf8);
  for (const char ch : cn) {
    const auto u = static_cast<unsigned char>(ch);
    if (u < 0x20 || u == 0x7f) return "";
  }
  return cn;
}

}  // namespace dcm::http::server_detail
