// HttpClient: a small synchronous HTTP/1.1 (and HTTPS) client for one origin, with one
// keep-alive connection. Used by the placement clients (SP instance API, Policy Manager),
// sp-sim registration, the CLI, tests and load tools. Beast stays in client.cc.
//
// Lifecycle: construct with a base URL; each Request connects on demand and reuses the
// connection while the server keeps it alive. A request on a reused connection that fails
// before any response byte (the server closed it while idle) is retried once on a new one
// (over TLS as well).
//
// Connecting goes through the one dialer (src/http/dialer.h): the host is resolved once (not
// at all for an IP literal), every address is judged by options.outbound, and only the
// addresses that passed are connected to. https: TLS 1.2+, verified like the probes (peer chain,
// host name or IP SAN, SNI for names; tls_client.h), with the optional client certificate.
// Redirects are never followed: a 3xx is returned like any other response.
//
// Every Request is bounded by its timeout as a whole (resolve, connect, TLS handshake, write,
// read, and the one retry). Errors:
//   kUnavailable  "<what>: cannot resolve h: ...", "<what>: connect to h:p: Connection
//                 refused", "<what>: TLS handshake with h:p failed: certificate verify failed
//                 (unable to get local issuer certificate)", reset, bad response; and a refusal
//                 by the outbound policy, whose message STARTS with "blocked: " followed by the
//                 policy's reason and then "(<what>)": "blocked: 127.0.0.1 is in 127.0.0.0/8
//                 (loopback), refused by the outbound policy (POST http://127.0.0.1:80/x)"
//                 (no socket was opened)
//   kTimeout      the deadline passed ("<what>: TLS handshake timed out")
//   kInvalidArgument  a bad base URL
//   kInternal     the default TLS context cannot be built (system CA store), library failures
// where <what> is "METHOD scheme://host:port/target".
//
// Thread-safety: not thread-safe; use one client per thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "src/common/outbound_policy.h"
#include "src/common/result.h"
#include "src/http/http_types.h"
#include "src/http/tls_client.h"

namespace dcm::http {

struct HttpClientOptions {
  // Judges every address the client would connect to (src/common/outbound_policy.h). Null = no
  // filtering: for operator-configured endpoints (Policy Manager, OIDC issuer), tools and tests.
  // Endpoints that came from a registration (SPs) must get the serve's policy.
  std::shared_ptr<const OutboundPolicy> outbound;
  // TLS settings for https URLs, built once and shared (tls_client.h). Null = the process-wide
  // TlsClientContext::Default() (system trust store, verified, no client certificate).
  std::shared_ptr<const TlsClientContext> tls;
  // Sent with every request (e.g. {"Authorization", "Bearer <token>"} for a client of DCM's
  // own API: sp-sim, `dcm events --server`).
  std::vector<std::pair<std::string, std::string>> headers = {};
  // A response body larger than this fails the request (kUnavailable): it is never buffered.
  uint64_t max_response_bytes = 64u << 20;
};

class HttpClient {
 public:
  // `base_url`: "http://host:port" or "https://host:port", optionally followed by a path
  // prefix, which is prepended to every request target ("http://h:8080/api/v1alpha1" +
  // "/providers").
  explicit HttpClient(std::string base_url, HttpClientOptions options = {});
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // `target` is a path and optional query starting with '/', or a query alone ("?id=x") or ""
  // to address the base URL itself ("http://h/api/vm" + "?id=x"). The body and its Content-Type are
  // sent when the body is not empty or the method is POST, PUT or PATCH. The response's
  // headers carry lower-cased names; content_type is its Content-Type (empty if none).
  Result<HttpResponse> Request(const std::string& method, const std::string& target,
                               const std::string& body = "",
                               const std::string& content_type = "application/json",
                               std::chrono::milliseconds timeout = std::chrono::seconds(10));

  // Drops the kept-alive connection, if any.
  void Close();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One request to an absolute http:// or https:// URL on a fresh connection (JSON content type).
Result<HttpResponse> Fetch(const std::string& method, const std::string& url,
                           const std::string& body = "",
                           std::chrono::milliseconds timeout = std::chrono::seconds(10),
                           HttpClientOptions options = {});

}  // namespace dcm::http
