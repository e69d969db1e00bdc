// The one dialer and the TLS client context. See dialer.h and tls_client.h for the contracts.
#include "src/http/dialer.h"

#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <exception>
#include <mutex>
#include <utility>
#include <vector>

namespace dcm::http {
namespace {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = asio::ip::tcp;
using SysError = boost::system::error_code;

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);
// Reasons named in a kBlocked message; the rest are counted.
constexpr size_t kMaxReasons = 3;

IpAddress FromAsio(const asio::ip::address& address) {
  if (address.is_v4()) return IpAddress::V4(address.to_v4().to_uint());
  const auto bytes = address.to_v6().to_bytes();
  std::array<uint8_t, 16> out;
  std::copy(bytes.begin(), bytes.end(), out.begin());
  return IpAddress::V6(out);
}

asio::ip::address ToAsio(const IpAddress& address) {
  const auto& b = address.bytes();
  if (address.is_v4())
    return asio::ip::address_v4(asio::ip::address_v4::bytes_type{b[0], b[1], b[2], b[3]});
  asio::ip::address_v6::bytes_type bytes;
  std::copy(b.begin(), b.end(), bytes.begin());
  return asio::ip::address_v6(bytes);
}

void SetPhase(const dialer::DialWatch& watch, const char* phase) {
  if (watch.phase != nullptr) *watch.phase = phase;
}

void SetResolver(const dialer::DialWatch& watch, tcp::resolver* resolver) {
  if (watch.resolver != nullptr) *watch.resolver = resolver;
}

bool Cancelled(const dialer::DialWatch& watch) {
  return watch.cancelled != nullptr && *watch.cancelled;
}

std::string BlockedMessage(const std::string& host, bool literal,
                           const std::vector<std::string>& reasons) {
  if (literal) return reasons.front();
  std::string out = host + " resolves only to refused addresses: ";
  for (size_t i = 0; i < reasons.size() && i < kMaxReasons; ++i) {
    out += (i == 0 ? "" : "; ") + reasons[i];
  }
  if (reasons.size() > kMaxReasons) {
    out += "; and " + std::to_string(reasons.size() - kMaxReasons) + " more";
  }
  return out;
}

}  // namespace

namespace dialer {

std::string HostPort(const std::string& host, uint16_t port) {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

bool IsIpLiteral(const std::string& host) { return IpAddress::Parse(host).has_value(); }

asio::awaitable<DialResult> Dial(tcp::socket* socket, std::string host, uint16_t port,
                                 const OutboundPolicy* policy, DialWatch watch) {
  std::vector<tcp::endpoint> candidates;
  const std::optional<IpAddress> literal = IpAddress::Parse(host);
  if (literal) {  // no resolver for IP literals: it would only add a thread hop
    candidates.emplace_back(ToAsio(*literal), port);
  } else {
    SetPhase(watch, "resolving");
    tcp::resolver resolver(co_await asio::this_coro::executor);
    SetResolver(watch, &resolver);
    auto [ec, results] = co_await resolver.async_resolve(host, std::to_string(port),
                                                         tcp::resolver::numeric_service, kTuple);
    SetResolver(watch, nullptr);
    if (Cancelled(watch)) co_return DialResult{DialFailure::kConnect, "cancelled"};
    if (ec) co_return DialResult{DialFailure::kDns, "cannot resolve " + host + ": " + ec.message()};
    for (const auto& entry : results) candidates.push_back(entry.endpoint());
    if (candidates.empty()) {
      co_return DialResult{DialFailure::kDns, "cannot resolve " + host + ": no address"};
    }
  }
  // Judge every address; connect only to the ones judged (this very list goes to async_connect).
  std::vector<tcp::endpoint> allowed;
  std::vector<std::string> refusals;
  for (const tcp::endpoint& endpoint : candidates) {
    std::string reason = policy != nullptr ? policy->Check(FromAsio(endpoint.address())) : "";
    if (reason.empty()) {
      allowed.push_back(endpoint);
    } else if (std::find(refusals.begin(), refusals.end(), reason) == refusals.end()) {
      refusals.push_back(std::move(reason));
    }
  }
  if (allowed.empty()) {
    co_return DialResult{DialFailure::kBlocked,
                         BlockedMessage(host, literal.has_value(), refusals)};
  }
  SetPhase(watch, "connecting");
  auto [ec, connected] = co_await asio::async_connect(*socket, allowed, kTuple);
  (void)connected;
  if (ec) {
    co_return DialResult{DialFailure::kConnect,
                         "connect to " + HostPort(host, port) + ": " + ec.message()};
  }
  co_return DialResult{};
}

bool PrepareTls(SSL* ssl, const std::string& host, bool verify) {
  const bool is_ip = IsIpLiteral(host);
  // SNI carries host names only (RFC 6066), never IP literals.
  if (!is_ip && SSL_set_tlsext_host_name(ssl, host.c_str()) != 1) return false;
  if (!verify) return true;
  // OpenSSL checks the name during chain verification (the same X509_check_host /
  // X509_check_ip_asc as Asio's host_name_verification), and reports a mismatch as its own
  // verify error.
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  const int ok = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str())
                       : X509_VERIFY_PARAM_set1_host(param, host.c_str(), host.size());
  return ok == 1;
}

std::string TlsHandshakeError(SSL* ssl, const SysError& ec, const std::string& host_port) {
  const std::string prefix = "TLS handshake with " + host_port + " failed: ";
  const long verify = SSL_get_verify_result(ssl);
  if (verify != X509_V_OK) {
    return prefix + "certificate verify failed (" + X509_verify_cert_error_string(verify) + ")";
  }
  return prefix + ec.message();
}

}  // namespace dialer

// ---- TlsClientContext -------------------------------------------------------------------------

TlsClientContext::TlsClientContext(TlsClientOptions options, std::unique_ptr<Impl> impl)
    : options_(std::move(options)), impl_(std::move(impl)) {}

TlsClientContext::~TlsClientContext() = default;

Result<std::shared_ptr<const TlsClientContext>> TlsClientContext::Create(
    const TlsClientOptions& o) {
  auto bad = [](std::string why) { return MakeError(ErrorCode::kInvalidArgument, std::move(why)); };
  if (o.client_cert_file.empty() != o.client_key_file.empty()) {
    return bad("client_cert_file and client_key_file go together: give both or neither");
  }
  std::unique_ptr<Impl> impl;
  try {
    impl = std::make_unique<Impl>(ssl::context(ssl::context::tls_client));
  } catch (const std::exception& e) {
    return MakeError(ErrorCode::kInternal, std::string("cannot create a TLS context: ") + e.what());
  }
  ssl::context& ctx = impl->ctx;
  SSL_CTX* raw = ctx.native_handle();
  SSL_CTX_set_min_proto_version(raw, TLS1_2_VERSION);
  // Frees the ~34 KiB read/write buffers while a connection is idle: most kept-alive TLS
  // connections are idle most of the time (HTTP-NOTES: ~84 KiB per idle TLS connection).
  SSL_CTX_set_mode(raw, SSL_MODE_RELEASE_BUFFERS);
  SysError ec;
  ctx.set_verify_mode(o.insecure_skip_verify ? ssl::verify_none : ssl::verify_peer, ec);
  if (!o.ca_file.empty()) {
    ctx.load_verify_file(o.ca_file, ec);
    if (ec) return bad("cannot load ca_file '" + o.ca_file + "': " + ec.message());
  } else if (!o.insecure_skip_verify) {
    ctx.set_default_verify_paths(ec);
    if (ec) {
      return MakeError(ErrorCode::kInternal,
                       "cannot load the system CA certificates: " + ec.message());
    }
  }
  if (!o.client_cert_file.empty()) {
    ctx.use_certificate_chain_file(o.client_cert_file, ec);
    if (ec) {
      return bad("cannot load client_cert_file '" + o.client_cert_file + "': " + ec.message());
    }
    ctx.use_private_key_file(o.client_key_file, ssl::context::pem, ec);
    const bool mismatch =
        ec && ec.category() == asio::error::get_ssl_category() &&
        ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == X509_R_KEY_VALUES_MISMATCH;
    if (ec && !mismatch) {
      return bad("cannot load client_key_file '" + o.client_key_file + "': " + ec.message());
    }
    if (mismatch || SSL_CTX_check_private_key(raw) != 1) {
      return bad("client_key_file '" + o.client_key_file + "' does not match client_cert_file '" +
                 o.client_cert_file + "'");
    }
  }
  return std::shared_ptr<const TlsClientContext>(new TlsClientContext(o, std::move(impl)));
}

Result<std::shared_ptr<const TlsClientContext>> TlsClientContext::Default() {
  static const Result<std::shared_ptr<const TlsClientContext>> context = Create({});
  return context;
}

}  // namespace dcm::http
