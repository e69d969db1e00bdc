// INTERNAL (Asio): include only from src/http/*.cc. The one dialer of SPEC §6 "Outbound policy",
// and the per-connection TLS steps, shared by ProbeClient (async, probe_client.cc) and
// HttpClient (sync over a private io_context, client.cc): one implementation, two callers.
//
//   Dial(socket, host, port, policy)
//     host a strict IP literal (IpAddress::Parse)? ── yes ──▶ that one address, no resolver
//        │ no
//     resolve (getaddrinfo, once) ── error ──▶ kDns "cannot resolve h: ..."
//        │
//     judge EVERY address with the policy (null policy: all pass); drop the refused ones
//        │ none left ──▶ kBlocked with the policy's reasons; no socket is ever opened
//     connect to the addresses that passed, in resolver order, and only to them (the checked
//     list itself goes to async_connect: no second resolution, no DNS rebinding window)
//        │ all failed ──▶ kConnect "connect to h:p: <last error>"
//     kNone: `socket` is connected
//
// Interrupting (a deadline): set *DialWatch::cancelled, close the socket, and cancel() the
// resolver published in DialWatch::resolver while one runs (getaddrinfo itself finishes in the
// background on Asio's resolver thread).
#pragma once

#include <openssl/ssl.h>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/system/error_code.hpp>
#include <cstdint>
#include <string>

#include "src/common/outbound_policy.h"
#include "src/http/tls_client.h"

namespace dcm::http {

struct TlsClientContext::Impl {
  explicit Impl(boost::asio::ssl::context c) : ctx(std::move(c)) {}
  // Mutable through a const TlsClientContext: OpenSSL's SSL_CTX is safe to create connections
  // from on any number of threads once configured, and it is never reconfigured.
  mutable boost::asio::ssl::context ctx;
};

namespace dialer {

using tcp = boost::asio::ip::tcp;

enum class DialFailure { kNone, kDns, kBlocked, kConnect };

struct DialResult {
  DialFailure failure = DialFailure::kNone;
  // kDns: "cannot resolve h: <reason>"; kBlocked: the policy's reason(s); kConnect: "connect to
  // h:p: <reason>". Empty for kNone.
  std::string error;
};

// What a caller may use to observe and interrupt a dial. All optional; they outlive the dial.
struct DialWatch {
  const char** phase = nullptr;        // set to "resolving", then "connecting"
  tcp::resolver** resolver = nullptr;  // points at the resolver while a resolve is pending
  // Read once the resolver answered: when true (the caller's deadline passed meanwhile), the
  // dial ends there (kConnect "cancelled") instead of opening a socket nobody waits for.
  const bool* cancelled = nullptr;
};

// See the header comment. `socket` (and the watch targets) must outlive the returned awaitable;
// `policy` null = no filtering (operator-configured endpoints). Never throws for network
// errors (allocation failures propagate as exceptions, like any Asio operation).
boost::asio::awaitable<DialResult> Dial(tcp::socket* socket, std::string host, uint16_t port,
                                        const OutboundPolicy* policy, DialWatch watch);

// "h:p", "[v6]:p".
std::string HostPort(const std::string& host, uint16_t port);

// True when `host` is a strict IP literal (what the TLS steps and the dialer treat as one).
bool IsIpLiteral(const std::string& host);

// Sets up one TLS connection: SNI for names (never for IP literals) and, when `verify`, the
// name (or IP, for a literal) that the peer certificate must carry. False if OpenSSL refused.
bool PrepareTls(SSL* ssl, const std::string& host, bool verify);

// "TLS handshake with h:p failed: certificate verify failed (unable to get local issuer
// certificate)", preferring OpenSSL's verify result ("hostname mismatch", ...) to the generic
// error; else "TLS handshake with h:p failed: <ec's message>".
std::string TlsHandshakeError(SSL* ssl, const boost::system::error_code& ec,
                              const std::string& host_port);

}  // namespace dialer
}  // namespace dcm::http
