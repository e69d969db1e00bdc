// The ports between the instance worker (consumers/instance_worker.h, which decides what to do)
// and the HTTP transports it drives (src/http/placement_clients.h; tests use fakes):
//   ServiceProviderApi: the SP instance API (SPEC §3.3), POST {endpoint}?id= and
//                       DELETE {endpoint}/{id}
//   PolicyEngine:       DCM's Policy Manager contract (POST .../policies:evaluateRequest)
// Both block the calling worker thread for at most their timeout.
#pragma once

#include <chrono>
#include <string>

#include "src/common/result.h"

namespace dcm {

// What an SP answered. A transport failure (refused, reset, timeout) is an Error instead:
// kUnavailable or kTimeout.
struct SpReply {
  int http_status = 0;
  // The raw body and its Content-Type, for the caller to interpret (the create's `status`).
  // Never shown to users as is: SummarizeReply (src/common/reply_summary.h) does that.
  std::string body;
  std::string content_type;
};

class ServiceProviderApi {
 public:
  virtual ~ServiceProviderApi() = default;
  // POST {endpoint}?id={instance_id} with {"spec": <spec_json>}.
  virtual Result<SpReply> CreateInstance(const std::string& endpoint,
                                         const std::string& instance_id,
                                         const std::string& spec_json) = 0;
  // DELETE {endpoint}/{instance_id}.
  virtual Result<SpReply> DeleteInstance(const std::string& endpoint,
                                         const std::string& instance_id) = 0;
};

struct PolicyDecision {
  enum class Verdict { kApproved, kRejected, kConflict };
  Verdict verdict = Verdict::kApproved;
  std::string spec;               // approved: evaluated_service_instance.spec (JSON text)
  std::string selected_provider;  // approved: may be empty (then the built-in choice applies)
  std::string status;             // approved: the Policy Manager's `status`, as given
  std::string detail;             // rejected/conflict: the Policy Manager's explanation
};

class PolicyEngine {
 public:
  virtual ~PolicyEngine() = default;
  // Evaluates {service_instance:{spec}}. 200 → kApproved, 406 → kRejected, 409 → kConflict.
  // Errors: kTimeout (no answer in time), kUnavailable (transport failure, 5xx, any other
  // status, or a 200 whose body is not the contract's shape; the message says which).
  virtual Result<PolicyDecision> Evaluate(const std::string& spec_json) = 0;
};

}  // namespace dcm
