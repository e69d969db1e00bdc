// The HTTP transports behind the placement ports (src/common/placement_ports.h):
//
//   HttpServiceProviderApi  SPEC §3.3's SP instance API
//       create  POST   {endpoint}?id={instance_id}   {"spec": <spec>}
//       delete  DELETE {endpoint}/{instance_id}
//     `endpoint` is used without trailing '/' (and without any query); the id is
//     percent-encoded outside [A-Za-z0-9._~-]. Every HTTP answer is an SpReply (the caller
//     decides what 201/409/404/5xx mean); only transport failures are errors.
//
//   HttpPolicyEngine        DCM's Policy Manager (POLICY_MANAGER_EVALUATION_URL, the full URL
//                           of POST .../api/v1alpha1/policies:evaluateRequest)
//       request   {"service_instance":{"spec":<spec>}}
//       200       {evaluated_service_instance:{spec}, selected_provider, status} → kApproved
//                 (camelCase evaluatedServiceInstance / selectedProvider accepted; no evaluated
//                 spec means the original spec; a null or absent selected_provider is "")
//       406 / 409 kRejected / kConflict; detail = the reply's explanation (ReplyExplanation,
//                 src/common/reply_summary.h: problem+json `detail`, else `title`, `message`,
//                 `error`, or a text/plain body), sanitized, at most 256 bytes; else a
//                 description ("HTTP 406 (empty body)")
//       anything else, a 200 whose body is not the contract's shape (or names a provider longer
//                 than 128 bytes or with control characters), a transport failure
//                 → kUnavailable naming what happened ("answered 500: <summary>"); no answer
//                 within the timeout → kTimeout
//
// Transport: HttpClient (client.h), http or https. HTTPS is verified like the probes (CA file or
// system store, host name or IP SAN, SNI) with the optional client certificate of the
// TlsClientContext in the options. The SP API's connections go through the outbound policy of
// its options (SP endpoints come from registrations); the Policy Manager is operator-configured
// and gets none. Redirects are never followed (a 3xx is an SpReply like any other status; for
// the Policy Manager, "answered 302").
// Connections are kept alive in a small per-thread cache keyed by origin (scheme, host, port)
// and by the client options (policy and TLS context), bounded to kMaxCachedOrigins per thread
// (least recently used goes first), shared by every client object on that thread with the same
// options. A connection the server closed while idle is reopened once (HttpClient's rule); a
// failed request drops its connection.
//
// Errors: kUnavailable (refused, reset, DNS, TLS, "blocked: <the policy's reason> (...)", bad
// response), kTimeout (the whole request exceeded the timeout), kInvalidArgument (an endpoint or
// evaluation URL that does not parse, or a spec that is not valid JSON: bugs upstream, since
// both were validated on the way in).
//
// Thread-safety: both classes are stateless apart from their configuration and may be used
// from any number of threads at once (each thread uses its own connections).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "src/common/placement_ports.h"
#include "src/common/result.h"
#include "src/http/client.h"

namespace dcm::http {

inline constexpr size_t kMaxCachedOrigins = 16;
// The largest SP reply body read: only its status and a 256-byte summary are ever used, so a
// hostile SP cannot make 32 worker threads buffer 64 MiB each.
inline constexpr uint64_t kMaxSpReplyBytes = 1u << 20;

class HttpServiceProviderApi : public ServiceProviderApi {
 public:
  // `timeout` bounds each call as a whole (connect, TLS, write, read). `options`: the outbound
  // policy and the TLS context for https endpoints (CA, insecure opt-in, the SP client
  // certificate; null = system store). `dcm serve` MUST pass its policy: SP endpoints come from
  // registrations. The default (no policy: no filtering) is for tests and tools.
  explicit HttpServiceProviderApi(std::chrono::milliseconds timeout,
                                  HttpClientOptions options = {});

  Result<SpReply> CreateInstance(const std::string& endpoint, const std::string& instance_id,
                                 const std::string& spec_json) override;
  Result<SpReply> DeleteInstance(const std::string& endpoint,
                                 const std::string& instance_id) override;

 private:
  std::chrono::milliseconds timeout_;
  HttpClientOptions options_;
};

class HttpPolicyEngine : public PolicyEngine {
 public:
  // `evaluation_url`: the full http or https URL to POST to. A URL that does not parse makes
  // every Evaluate fail (kInvalidArgument) with the reason. `options`: the TLS context for an
  // https URL (null = system store); leave `outbound` null (operator-configured endpoint).
  HttpPolicyEngine(std::string evaluation_url, std::chrono::milliseconds timeout,
                   HttpClientOptions options = {});

  Result<PolicyDecision> Evaluate(const std::string& spec_json) override;

 private:
  std::string url_;
  std::chrono::milliseconds timeout_;
  HttpClientOptions options_;
};

// `text` percent-encoded outside the unreserved characters [A-Za-z0-9._~-] (RFC 3986).
std::string PercentEncode(const std::string& text);

}  // namespace dcm::http
