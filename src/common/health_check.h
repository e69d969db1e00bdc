// HealthChecker: the port between the prober (consumers/prober.h, which decides what to probe
// and when) and the transport that sends `GET {endpoint}/health` (src/http/probe_client.h, the
// Beast implementation; tests use fakes). The checker reports what happened on the wire; the
// prober classifies the body (events/health_events.h) and folds the result.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace dcm {

// Why a probe failed (SPEC §3.2). kNone: the probe succeeded (200 + status healthy).
enum class ProbeFailure {
  kNone,
  kTimeout,            // no complete response within the probe timeout
  kConnect,            // refused, reset, unreachable, closed before a response
  kDns,                // the host name did not resolve
  kTls,                // handshake failed: certificate not trusted, wrong host name, protocol
  kBlocked,            // the outbound policy refused every address of the host: no connection
  kHttpStatus,         // a response other than 200
  kBadBody,            // 200 but not a JSON object with status healthy/unhealthy, or too large
  kReportedUnhealthy,  // 200 {"status":"unhealthy"}
};

// "" for kNone, else the event spelling: "timeout", "connect", "dns", "tls", "blocked",
// "http_status", "bad_body", "reported_unhealthy".
std::string_view ProbeFailureName(ProbeFailure failure);
std::optional<ProbeFailure> ParseProbeFailure(std::string_view name);

// What the transport saw for one probe.
struct ProbeResponse {
  // kNone when an HTTP response arrived (then see http_status/body); otherwise kTimeout,
  // kConnect, kDns, kTls, kBlocked (the outbound policy, src/common/outbound_policy.h), or
  // kBadBody for a body over the size limit.
  ProbeFailure failure = ProbeFailure::kNone;
  int http_status = 0;  // 0 when no response arrived
  std::string body;     // the response body (empty unless a response arrived)
  // From the moment the checker started the probe (after any queueing inside the checker) to
  // completion, in microseconds.
  int64_t latency_us = 0;
  // A short human reason when failure != kNone ("connection refused", "certificate verify
  // failed", "no response in 5000 ms"). Free text for logs and events.
  std::string error;
};

struct ProbeRequest {
  std::string key;  // the connection-pool key: the provider id
  std::string url;  // absolute http:// or https:// URL, e.g. http://10.0.0.7:8081/api/vm/health
  std::chrono::milliseconds timeout{5000};  // the whole probe: resolve, connect, TLS, request
};

class HealthChecker {
 public:
  using Done = std::function<void(ProbeResponse)>;
  virtual ~HealthChecker() = default;
  // Starts one probe; `done` runs exactly once, on a checker thread, at the latest `timeout`
  // (plus timer slack) after the call. Never blocks. Thread-safe.
  virtual void Check(ProbeRequest request, Done done) = 0;
  // Closes any kept-alive connection for `key` (the provider was removed or changed its
  // endpoint). Thread-safe.
  virtual void Forget(const std::string& key) = 0;
};

}  // namespace dcm
