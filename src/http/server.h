// HttpServer: the HTTP/1.1 server under DCM's admin/query API and under `dcm sp-sim`.
// Boost.Beast + Asio C++20 coroutines, kept behind this pimpl so only the server's own files
// (server_core.h, server_connection.cc, server.cc) include Beast (see docs/http.md and
// ../shared/HTTP-NOTES.md for why Beast and how it is configured).
//
// Requests reach a `Handler` as plain data (src/http/http_types.h). The handler calls `respond`
// exactly once, at once or later from any thread; the connection waits for it, bounded by
// `handler_timeout` (then 503). Malformed or oversized requests never reach the handler: they
// get a problem+json 400/413/431 from the server itself.
//
// TLS (SPEC §6): with `tls_cert_file` + `tls_key_file` every listener serves HTTPS only, and
// with `tls_client_ca_file` it also accepts client certificates (mTLS), whose identity reaches
// the handler as `HttpRequest::peer_subject`. `ReloadTls` swaps the certificate material for new
// connections (SIGHUP). Plain servers pay nothing for this: the connection code is a template
// over the stream type, chosen once per accepted connection.
//
// Lifecycle:
//
//   Create() ──> running (threads started, no listener)
//                  │ Listen(host:port, handler)   (any number of times, one handler each)
//                  │ CloseListener(port)          (refuse new connections, drop existing ones)
//                  ▼
//                Stop() / ~HttpServer ──> stopped (threads joined, all sockets closed)
//
// Threading: `threads` worker threads, each running its own io_context. Every listener has one
// acceptor per worker (SO_REUSEPORT when threads > 1), and a connection lives on the worker
// that accepted it, so no strands or locks are needed on the request path.
//
// Thread-safety: Listen, CloseListener, ReloadTls and Stop may be called from any thread,
// concurrently. Stop must not be called from a handler (it joins the worker threads).
// CloseListener called from a handler of this same server with threads > 1 completes
// asynchronously on the other workers. A Respond may be called from any thread, also after the
// server stopped or the connection died (it is then ignored).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "src/common/metrics.h"
#include "src/common/result.h"
#include "src/http/http_types.h"

namespace dcm::http {

// Descriptors a server may hold beyond max_connections: connections being refused with a 503
// (each for at most 500 ms; beyond these a refused connection is closed without a word).
inline constexpr size_t kRefusalSlots = 256;

struct ServerOptions {
  // Worker threads, each with its own io_context (one per core measured 40–80% faster than a
  // shared pool). 1 is enough for tests and sp-sim.
  int threads = 1;
  // Request line + headers, bytes. Larger → 431. 16 KiB fits any sane client (nginx: 8 KiB).
  size_t max_header_bytes = 16 * 1024;
  // Decoded request body, bytes (Content-Length or chunked). Larger → 413. Provider metadata is
  // capped at 64 KiB (SPEC §3.1), so 1 MiB leaves ample room.
  size_t max_body_bytes = 1 << 20;
  // Deadline for a whole request (headers and body) once its first byte arrived; also for the
  // first request on a new connection. Slow senders (slowloris) are closed at this deadline.
  std::chrono::milliseconds read_timeout{10000};
  // How long a keep-alive connection may sit idle between requests before it is closed.
  std::chrono::milliseconds idle_timeout{60000};
  // How long the connection waits for the handler's respond; then 503. Above DCM's longest
  // synchronous wait (read-your-writes on a Kafka round trip) with margin.
  std::chrono::milliseconds handler_timeout{30000};
  // A streamed response (HttpResponse::stream, SPEC §9) that sent nothing for this long sends an
  // SSE comment line (": keep-alive"), so proxies keep it open and a vanished peer is noticed.
  std::chrono::milliseconds stream_keepalive{15000};
  // Open connections over all listeners (SPEC §7). A connection accepted beyond it is answered
  // 503 (problem+json, `Retry-After: 1`, `Connection: close`) at once, without reading its
  // request, and closed; over TLS it is closed without an answer (a handshake would spend the CPU
  // the cap protects). 0 = no cap (sp-sim: DCM's prober keeps a connection per provider).
  size_t max_connections = 0;
  // Open connections from one client IP address (an IPv4-mapped IPv6 address counts as its IPv4
  // address); beyond it the same 503. 0 = no cap.
  size_t max_connections_per_client = 0;
  // When set: counter dcm_http_requests_total{code} and histogram
  // dcm_http_request_duration_seconds (with TLS also the TLS metrics listed at Create); gauge
  // dcm_http_connections_open, counter dcm_http_connections_refused_total{reason} (`total`: at
  // max_connections, `client`: at max_connections_per_client), counter
  // dcm_http_accept_errors_total (accept failed: out of descriptors, EMFILE/ENFILE, or another
  // error; the acceptor pauses 50 ms and goes on). Must outlive the server.
  Metrics* metrics = nullptr;
  // The `Server` response header.
  std::string server_name = "dcm";

  // ---- TLS ----
  // PEM server certificate (leaf first; intermediates may follow in the same file) and its PEM
  // private key (unencrypted). Both or neither. With both, EVERY listener of this server serves
  // HTTPS only: no plain-HTTP fallback (a plain request fails the handshake and gets no
  // answer). The handshake must complete within `read_timeout`; then the first request has
  // `read_timeout` as on plain connections. Policy: TLS 1.2 minimum; TLS 1.2 only with ECDHE +
  // AEAD ciphers (AES-GCM, ChaCha20-Poly1305), TLS 1.3 with OpenSSL's defaults; server cipher
  // preference; renegotiation and compression off; session resumption on (per context, so a
  // ReloadTls also ends resumption of older sessions).
  std::string tls_cert_file;
  std::string tls_key_file;
  // Optional, needs the two above (mTLS). PEM CA certificate(s) that client certificates must
  // chain to. Clients are asked for a certificate but need not send one: a client without one
  // is served with an empty `peer_subject` (the auth layer then wants a bearer token); a
  // certificate that does not verify (unknown CA, expired, not for client auth) fails the
  // handshake. A verified certificate sets `HttpRequest::peer_subject` on every request of that
  // connection to, in this order:
  //   1. the first SAN URI (e.g. "spiffe://dcm.example/ns/ops/sa/admin"), else
  //   2. the first SAN DNS name, else
  //   3. the subject's first CN.
  // Names with control characters, spaces or non-ASCII bytes (CN: control characters) are
  // skipped, as if absent.
  std::string tls_client_ca_file;
};

class HttpServer {
 public:
  // Validates `options` (kInvalidArgument) and starts the worker threads. With TLS it loads the
  // certificate, key and client CA first: kInvalidArgument naming the file if one is unreadable
  // or not PEM, if the key does not match the certificate, or if only one of cert/key is set.
  //
  // Metrics with TLS (when `metrics` is set): counter
  // dcm_http_tls_handshake_failures_total{reason} with reason one of `timeout` (no handshake
  // within read_timeout), `closed` (the client went away mid-handshake), `not_tls` (plain HTTP
  // or other non-TLS bytes), `version` (below TLS 1.2), `client_cert` (a client certificate
  // that did not verify), `peer_alert` (the client aborted, typically: it does not trust our
  // certificate), `protocol` (anything else, e.g. no shared cipher); gauge
  // dcm_http_tls_cert_not_after_seconds (Unix time the serving certificate expires).
  static Result<std::unique_ptr<HttpServer>> Create(ServerOptions options);

  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  ~HttpServer();  // Stop()

  // Binds `host_port` ("127.0.0.1:8080", "[::1]:0", "0.0.0.0:8080", "localhost:0", ":8080" for
  // all interfaces) with SO_REUSEADDR and serves it with `handler`. Port 0 picks an ephemeral
  // port. Returns the bound port. kUnavailable if the address cannot be bound, kInvalidArgument
  // if it does not parse, kUnavailable after Stop().
  Result<uint16_t> Listen(const std::string& host_port, Handler handler);

  // Stops accepting on `port` and closes its sockets, so new connections are refused, and
  // closes the connections accepted on it. Returns once done (see thread-safety above). Unknown
  // ports are ignored. The port may be bound again with Listen.
  void CloseListener(uint16_t port);

  // Re-reads tls_cert_file, tls_key_file and tls_client_ca_file (the same paths) into a new TLS
  // context, with Create's checks. OK: connections accepted from now on use the new material;
  // established connections keep the context they started with. Error (kInvalidArgument):
  // nothing changes, the previous material stays in use. OK and a no-op on a server without
  // TLS. Any thread, concurrently with accepts and with itself (meant for SIGHUP).
  Status ReloadTls();

  // Closes every listener and connection and joins the threads. Idempotent.
  void Stop();

 private:
  struct Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dcm::http
