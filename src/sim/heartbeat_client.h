// HeartbeatClient: the SP side of liveness by heartbeat (SPEC §8), one per provider, small
// enough for another SP to copy. It knows nothing of sp-sim: it is given the registration body,
// a list of control-plane URLs (by index) and a transport that sends one request to one of
// them, and it decides what to send next and when:
//
//   unregistered ──POST {prefix}/providers[?id=ID] 200/201──> registered: beat at once
//   registered ──PUT {prefix}/providers/{id}/heartbeat 200──> beat again after `interval`
//        │  404 (DCM forgot the id): register again at once, same name and, once known, the
//        │      same id (?id=ID), then beat there first. 409 (DCM holds it with liveness
//        │      probe), or a 404 to the first beat after registering: the same after a backoff
//        └  5xx, refused connection, timeout: the same request on the next URL at once; when
//           every URL failed in a row: wait 1, 2, 4, … s (± jitter, 20%), capped at 60 s,
//           then go on with the next URL. A beat answered 200 resets the backoff.
//   Other 4xx to a registration: rejected, given up (Step returns no next time). Other 4xx to a
//   beat (400, 401, 403): backed off like a failed round, on the same URL.
//
// The core is hermetic: no clock, no sleep, no socket. Step() sends one request through the
// transport and returns the delay until the next Step; the caller owns time (a thread, a
// timer queue, a test loop). The jitter's randomness is injected too.
//
// Thread-safety: none; one caller at a time (sp-sim's workers take a provider off a queue).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "src/common/result.h"
#include "src/http/http_types.h"

namespace dcm::sim {

// Exponential backoff with jitter: the n-th consecutive failure (0-based) waits
// min(cap, base·2ⁿ) scaled by a factor uniform in [1 - jitter, 1 + jitter], never above cap.
class Backoff {
 public:
  Backoff(std::chrono::milliseconds base, std::chrono::milliseconds cap, double jitter);
  // The nominal delay of the next failure (no jitter), for logs and tests.
  std::chrono::milliseconds Nominal() const;
  // The delay of the next failure; `uniform01` in [0, 1) picks the jitter. Counts the failure.
  std::chrono::milliseconds Next(double uniform01);
  void Reset() { failures_ = 0; }
  int failures() const { return failures_; }

 private:
  std::chrono::milliseconds base_;
  std::chrono::milliseconds cap_;
  double jitter_;
  int failures_ = 0;
};

struct HeartbeatOptions {
  std::string api_prefix = "/api/v1alpha1";
  std::chrono::milliseconds interval{5000};
  std::chrono::milliseconds backoff_base{1000};
  std::chrono::milliseconds backoff_cap{60000};
  double jitter = 0.2;
};

// What the beat says about the SP itself. kSilent sends nothing (the SP is down: DCM expires it
// after HEARTBEAT_TIMEOUT); registration still goes on.
enum class BeatHealth { kHealthy, kUnhealthy, kSilent };

// One request for the transport: to control-plane URL number `url`.
struct HeartbeatRequest {
  size_t url = 0;
  std::string method;  // POST (register), PUT (beat), DELETE (deregister)
  std::string target;  // path and query under the URL, e.g. /api/v1alpha1/providers/ID/heartbeat
  std::string body;    // JSON, or empty
};
using HeartbeatTransport = std::function<Result<http::HttpResponse>(const HeartbeatRequest&)>;

class HeartbeatClient {
 public:
  struct StepResult {
    // Until the next Step; nullopt: the registration was rejected (a 4xx), nothing more to do.
    std::optional<std::chrono::milliseconds> next;
    bool registered = false;  // this step registered (201/200) and `id()` holds the id
  };

  // `registration_body`: the JSON object of POST {prefix}/providers (with "liveness":
  // "heartbeat"). `id`: an id to register under (?id=), if already known. `uniform01` returns
  // numbers in [0, 1) for the jitter.
  HeartbeatClient(std::string registration_body, size_t url_count, HeartbeatOptions options,
                  std::function<double()> uniform01, std::optional<std::string> id = {});

  // Sends one request (a registration or a beat) through `transport` and says when to step
  // again.
  StepResult Step(const HeartbeatTransport& transport, BeatHealth health);

  // DELETE {prefix}/providers/{id}, the current URL first, then the others while they fail
  // over. OK for 204 and 404 (already gone) and when there is nothing registered.
  Status Deregister(const HeartbeatTransport& transport);

  bool registered() const { return registered_; }
  const std::optional<std::string>& id() const { return id_; }
  size_t url() const { return url_; }                            // the URL the next request goes to
  int attempts() const { return attempts_; }                     // requests sent
  uint64_t beats() const { return beats_; }                      // beats answered 200
  const std::string& last_error() const { return last_error_; }  // of the last failed request
  const Backoff& backoff() const { return backoff_; }

 private:
  StepResult Failover(const std::string& error);
  StepResult BackOff(const std::string& error);
  StepResult Register(const HeartbeatTransport& transport);
  StepResult Beat(const HeartbeatTransport& transport, BeatHealth health);

  std::string registration_body_;
  size_t url_count_;
  HeartbeatOptions options_;
  std::function<double()> uniform01_;
  std::optional<std::string> id_;
  bool registered_ = false;
  bool just_registered_ = false;  // registered, no beat answered since
  size_t url_ = 0;
  size_t failed_in_a_row_ = 0;  // failovers since the last answer; a round is url_count_ of them
  Backoff backoff_;
  int attempts_ = 0;
  uint64_t beats_ = 0;
  std::string last_error_;
};

}  // namespace dcm::sim
