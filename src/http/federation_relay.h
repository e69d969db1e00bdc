// FederationRelay: the HTTP transport of supernode forwarding (the FederationForwarder port of
// src/http/federation_forwarding.h) over HttpFederationApi (the peers' URLs, TLS and client
// certificate). Its own pool of threads makes the blocking calls, so the server's threads never
// wait on a peer.
//
//   Discover  every Ready peer not on the path, at once, within the forward deadline
//   RouteFor  the same with flavor_id=: the answer with the fewest hops, then the smallest peer id
//   Forward   one call as it came, with the next hop's headers; the peer's answer as it gave it
//
// The forward deadline shrinks with the hops left, so an inner enclave answers before the outer
// one stops waiting: deadline = discovery_timeout * (hop_limit - 1) / hop_limit (2 s and 3 hops:
// 1.33 s at the first forward, 1 s at the second).
//
// Thread-safety: every method may be called from any thread; Stop joins the pool (forwards not
// started yet are dropped, their callers answered by nobody: only at shutdown).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_set>

#include "src/common/clock.h"
#include "src/common/metrics.h"
#include "src/common/task_pool.h"
#include "src/http/federation_client.h"
#include "src/http/federation_forwarding.h"

namespace dcm::http {

struct FederationRelayOptions {
  std::string enclave_id;
  std::chrono::milliseconds discovery_timeout{2000};  // FEDERATION_DISCOVERY_TIMEOUT
  std::chrono::milliseconds call_timeout{5000};       // a forwarded reservation or contract call
  int threads = 8;
  int max_in_flight = 64;                     // forwards running or queued; more answer 503
  std::chrono::milliseconds seen_for{60000};  // how long a discovery's request id is remembered
  size_t max_seen = 10000;
};

class FederationRelay final : public FederationForwarder {
 public:
  FederationRelay(FederationRelayOptions options, const HttpFederationApi* api, Metrics* metrics,
                  const Clock* clock);
  ~FederationRelay() override { Stop(); }

  void Start();
  void Stop();

  bool Run(std::function<void()> work) override;
  bool FirstArrival(const std::string& request_id) override;
  std::vector<std::string> Discover(const std::string& query, const FedHop& in) override;
  std::optional<ForwardRoute> RouteFor(const std::string& flavor_id, const FedHop& in) override;
  Result<HttpResponse> Forward(const std::string& peer, const std::string& method,
                               const std::string& target, const std::string& body,
                               const FedHop& in) override;

 private:
  // Every Ready peer not on `in`'s path, asked GET /flavors?`query` at once: (peer, body) of the
  // 200 answers within the forward deadline.
  std::vector<std::pair<std::string, std::string>> Ask(const std::string& query, const FedHop& in);
  std::chrono::milliseconds ForwardDeadline(const FedHop& in) const;
  void Count(const char* call, const std::string& peer, const char* outcome);

  FederationRelayOptions options_;
  const HttpFederationApi* api_;
  Metrics* metrics_;
  const Clock* clock_;
  TaskPool pool_;
  std::atomic<int> in_flight_{0};
  std::mutex seen_mu_;
  std::deque<std::pair<int64_t, std::string>> seen_order_;  // (arrival ms, id), oldest first
  std::unordered_set<std::string> seen_;
};

}  // namespace dcm::http
