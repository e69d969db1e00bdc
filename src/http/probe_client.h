// ProbeClient: the Boost.Beast/Asio HealthChecker (src/common/health_check.h). Sends
// `GET <url>` for tens of thousands of providers from a few threads, keeps one connection alive
// per provider, and enforces one deadline per probe. Beast stays in probe_client.cc (its own
// library, dcm_probe_client: a Beast translation unit costs ~20 s to compile).
//
// Per probe (on the worker thread that owns the key):
//
//   Check ──post──> idle connection for key with the same scheme/host/port? ──yes──> reuse
//                              │ no                                        (dead → fresh)
//                   dial (src/http/dialer.h: resolve unless an IP literal, judge every
//                   address with the outbound policy, connect to the judged ones)
//                              → [TLS slot → handshake]
//                              │
//                   write GET → read response ──ok, keep-alive──> back to the idle pool
//                              │      └── reused connection failed before any response byte:
//                              │          once more on a fresh connection, same deadline
//                   done(ProbeResponse)  ◀── or the deadline timer, whichever comes first
//
// Results: failure = kDns (resolve failed), kBlocked (the outbound policy refused every address
// of the host: no socket was opened; error = the policy's reason, e.g. "127.0.0.1 is in
// 127.0.0.0/8 (loopback), refused by the outbound policy"), kConnect (refused, reset,
// unreachable, closed before a response; also a malformed URL, with error "invalid URL: ..."),
// kTls (any TLS handshake failure: untrusted certificate, host name mismatch, protocol; error
// "TLS handshake with h:p failed: certificate verify failed (hostname mismatch)"; also a TLS
// alert instead of a response, such as a TLS 1.3 server refusing our client certificate after
// the handshake), kTimeout
// (deadline), kBadBody (body over max_body_bytes); otherwise kNone with http_status and body:
// classifying 200 vs other statuses and the JSON is the caller's job. Redirects are never
// followed: a 3xx is just a status (an http_status failure for the prober). latency_us runs from
// the Check call, so it includes a wait for a TLS handshake slot (that wait is charged to the
// deadline as well).
//
// Deadline: one per probe, counted from the Check call. When it passes, `done` runs at once with
// kTimeout ("no response in 2000 ms (connecting)", naming the phase); the connection is closed
// just after, in small batches, so a burst of expiries is reported on time. A getaddrinfo in
// progress cannot be cancelled: it finishes in the background on Asio's resolver thread.
//
// Idle connections are not watched: one the server closed is noticed at the key's next probe
// (a non-blocking peek, then the retry above) and holds its descriptor until then; Forget
// releases it at once.
//
// Threading: `threads` workers, each with its own io_context. A key always maps to the same
// worker (hash), so its connection, pool entry and probes need no locks. Check and Forget are
// thread-safe and never block; `done` runs on a worker thread, and may call Check/Forget.
//
// Stop (and the destructor): probes still pending are abandoned: their `done` is destroyed
// WITHOUT being called, before Stop returns (a probe cut short by our own shutdown says nothing
// about the provider, so reporting it as a failure would record a false health event). No
// `done` runs after Stop returns, and a Check after Stop drops its `done` the same way. Stop
// must not be called from a `done` callback (it joins the workers).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "src/common/health_check.h"
#include "src/common/outbound_policy.h"
#include "src/common/result.h"
#include "src/http/tls_client.h"

namespace dcm::http {

struct ProbeClientOptions {
  // Worker threads, each with its own io_context (one per core measured faster than a shared
  // pool, HTTP-NOTES). One thread handles a 10k-endpoint round (tests/bench/probe_client_bench).
  int threads = 1;
  // TLS handshakes in progress at once, over all workers (split evenly between them). 10k
  // handshakes at once made every client collapse (HTTP-NOTES); the rest wait for a slot, and
  // the wait counts toward the probe's deadline.
  size_t max_tls_handshakes = 512;
  // Judges every address a probe would connect to (src/common/outbound_policy.h); null = every
  // address is allowed (tests). `dcm serve` always passes one.
  std::shared_ptr<const OutboundPolicy> outbound;
  // TLS toward https endpoints (tls_client.h: CA file or the system store, verification unless
  // the explicit insecure opt-in, an optional client certificate for SPs that require mTLS),
  // built once and shared, e.g. with the SP API client. Null = TlsClientContext::Default().
  std::shared_ptr<const TlsClientContext> tls;
  // A response body larger than this (by Content-Length, or while reading chunks) fails the
  // probe with ProbeFailure::kBadBody.
  size_t max_body_bytes = 64 * 1024;
  // Kept-alive idle connections, over all workers. 0 = derived from the soft RLIMIT_NOFILE:
  // reserve = min(1024, nofile / 4) descriptors for the rest of the process (RocksDB, Kafka,
  // the HTTP server, logs), and half of what remains for idle connections, leaving the other
  // half for probes in flight on fresh connections: (nofile - reserve) / 2. nofile = 20000 →
  // 9488; 1024 → 384; 65536 → 32256. Beyond the cap a connection is closed when its probe
  // returns it (the kept set stays stable, which suits probing every key in turn; LRU
  // eviction would instead evict exactly the connection needed next).
  size_t max_idle_connections = 0;
  // Close connections with SO_LINGER 0 (a reset) rather than a FIN, so this side keeps no
  // TIME_WAIT socket: after a deadline, Forget, beyond the idle cap, an unusable response,
  // `Connection: close`, Stop. Measured (probe_client_bench, 10k fresh connections per round
  // to one loopback port): with FIN, 9–14k sockets sat in TIME_WAIT and connect's port search
  // cost up to 2x CPU per probe; with the reset, none. Servers see a reset on an idle or
  // finished connection, which health endpoints tolerate.
  bool reset_on_close = true;
  std::string user_agent = "dcm-prober";
};

class ProbeClient final : public HealthChecker {
 public:
  // kInvalidArgument for bad options (threads outside 1..256, a zero limit); kInternal if the
  // default TLS context (system store) cannot be set up. Starts the worker threads.
  static Result<std::unique_ptr<ProbeClient>> Create(ProbeClientOptions options);

  ProbeClient(const ProbeClient&) = delete;
  ProbeClient& operator=(const ProbeClient&) = delete;
  ~ProbeClient() override;  // Stop()

  // See HealthChecker::Check. `done` runs exactly once unless Stop intervenes (above).
  void Check(ProbeRequest request, Done done) override;
  // Closes the idle connection for `key`, and makes a probe of `key` in flight close its
  // connection instead of keeping it.
  void Forget(const std::string& key) override;
  // Abandons pending probes (their `done` is not called), closes every connection and joins
  // the workers. Idempotent; any thread except a worker (a `done` callback).
  void Stop();

  // For metrics: probes between Check and done; kept-alive idle connections.
  size_t InFlight() const;
  size_t IdleConnections() const;

 private:
  struct Impl;
  explicit ProbeClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dcm::http
