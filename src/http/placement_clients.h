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
//       406 / 409 kRejected / kConflict; detail = the problem+json `detail` (else `title`, else
//                 the raw body, at most 1 KiB)
//       anything else, a 200 whose body is not the contract's shape, a transport failure
//                 → kUnavailable naming what happened; no answer within the timeout → kTimeout
//
// Transport: http only (an https URL is kUnavailable "https ... are not supported yet").
// Connections are kept alive in a small per-thread cache keyed by origin (scheme, host,
// port), bounded to kMaxCachedOrigins per thread (least recently used goes first), shared by
// every client object on that thread. A connection the server closed while idle is reopened
// once (HttpClient's rule); a failed request drops its connection.
//
// Errors: kUnavailable (refused, reset, DNS, https, bad response), kTimeout (the whole request
// exceeded the timeout), kInvalidArgument (an endpoint or evaluation URL that does not parse, or
// a spec that is not valid JSON: bugs upstream, since both were validated on the way in).
//
// Thread-safety: both classes are stateless apart from their configuration and may be used
// from any number of threads at once (each thread uses its own connections).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "src/common/placement_ports.h"
#include "src/common/result.h"

namespace dcm::http {

inline constexpr size_t kMaxCachedOrigins = 16;

class HttpServiceProviderApi : public ServiceProviderApi {
 public:
  // `timeout` bounds each call as a whole (connect, write, read).
  explicit HttpServiceProviderApi(std::chrono::milliseconds timeout);

  Result<SpReply> CreateInstance(const std::string& endpoint, const std::string& instance_id,
                                 const std::string& spec_json) override;
  Result<SpReply> DeleteInstance(const std::string& endpoint,
                                 const std::string& instance_id) override;

 private:
  std::chrono::milliseconds timeout_;
};

class HttpPolicyEngine : public PolicyEngine {
 public:
  // `evaluation_url`: the full URL to POST to. A URL that does not parse or is not http makes
  // every Evaluate fail (kInvalidArgument / kUnavailable) with the reason.
  HttpPolicyEngine(std::string evaluation_url, std::chrono::milliseconds timeout);

  Result<PolicyDecision> Evaluate(const std::string& spec_json) override;

 private:
  std::string url_;
  std::chrono::milliseconds timeout_;
};

// `text` percent-encoded outside the unreserved characters [A-Za-z0-9._~-] (RFC 3986).
std::string PercentEncode(const std::string& text);

}  // namespace dcm::http
