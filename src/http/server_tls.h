// The TLS material of HttpServer (server.h): loading a certificate, key and client CA into a
// context with our TLS policy, classifying failed handshakes for the metrics, and the identity
// of a verified client certificate. Internal to dcm_http_server; OpenSSL through Asio's ssl.
//
// Thread-safety: a loaded TlsContext is immutable and shared by the connections accepted with it.
#pragma once

#include <openssl/ssl.h>

#include <array>
#include <boost/asio/ssl.hpp>
#include <boost/system/error_code.hpp>
#include <memory>
#include <string>

#include "src/common/result.h"
#include "src/http/server.h"

namespace dcm::http::server_detail {

// One loaded certificate/key/client-CA set. Each connection holds the one it was accepted with
// by shared_ptr, so ReloadTls never pulls a context from under a live connection.
struct TlsContext {
  explicit TlsContext(boost::asio::ssl::context c) : ctx(std::move(c)) {}
  boost::asio::ssl::context ctx;
  bool verify_clients = false;
  double not_after = 0;     // Unix seconds, the leaf certificate's notAfter
  std::string description;  // subject, serial, expiry: for the log
};

// Loads the server's certificate chain, key and optional client CA into a new context with
// the TLS policy of server.h. Never throws.
Result<std::shared_ptr<TlsContext>> LoadTlsContext(const ServerOptions& o);

// Why a handshake failed: the label of dcm_http_tls_handshake_failures_total (server.h).
enum class HandshakeFailure {
  kTimeout,
  kClosed,
  kNotTls,
  kVersion,
  kClientCert,
  kPeerAlert,
  kProtocol,
  kCount
};
constexpr std::array<const char*, static_cast<size_t>(HandshakeFailure::kCount)>
    kHandshakeFailureNames = {"timeout",     "closed",     "not_tls", "version",
                              "client_cert", "peer_alert", "protocol"};

HandshakeFailure ClassifyHandshake(const boost::system::error_code& ec);

// The identity of a verified client certificate: first SAN URI, else first SAN DNS name, else
// the subject's first CN (server.h). "" when there is no verified certificate.
std::string PeerSubject(SSL* ssl);

}  // namespace dcm::http::server_detail
