#include "src/http/federation_relay.h"

#include <algorithm>
#include <future>

#include "src/common/log.h"
#include "src/http/placement_clients.h"

namespace dcm::http {
namespace {

// The peer API call `method` `target` is, for the metric.
const char* CallName(const std::string& method, const std::string& target) {
  if (target.starts_with("/flavors")) return "discover";
  if (target.ends_with(":confirm")) return "confirm";
  if (target.ends_with(":renew")) return "renew";
  if (target.starts_with("/contracts/")) return "terminate";
  return method == "DELETE" ? "release" : "reserve";
}

}  // namespace

FederationRelay::FederationRelay(FederationRelayOptions options, const HttpFederationApi* api,
                                 Metrics* metrics, const Clock* clock)
    : options_(std::move(options)), api_(api), metrics_(metrics), clock_(clock) {}

void FederationRelay::Start() { pool_.Start(options_.threads, "fed-relay"); }

void FederationRelay::Stop() { pool_.Stop(); }

bool FederationRelay::Run(std::function<void()> work) {
  if (in_flight_.fetch_add(1) >= options_.max_in_flight) {
    in_flight_.fetch_sub(1);
    return false;
  }
  pool_.Submit([this, work = std::move(work)] {
    work();
    in_flight_.fetch_sub(1);
  });
  return true;
}

bool FederationRelay::FirstArrival(const std::string& request_id) {
  if (request_id.empty()) return true;
  const int64_t now = clock_->NowMillis();
  std::lock_guard lock(seen_mu_);
  while (!seen_order_.empty() && (seen_order_.front().first + options_.seen_for.count() <= now ||
                                  seen_order_.size() >= options_.max_seen)) {
    seen_.erase(seen_order_.front().second);
    seen_order_.pop_front();
  }
  if (!seen_.insert(request_id).second) return false;
  seen_order_.emplace_back(now, request_id);
  return true;
}

std::chrono::milliseconds FederationRelay::ForwardDeadline(const FedHop& in) const {
  const int hops = std::max(1, in.hop_limit);
  return std::max(std::chrono::milliseconds(100), options_.discovery_timeout * (hops - 1) / hops);
}

void FederationRelay::Count(const char* call, const std::string& peer, const char* outcome) {
  metrics_
      ->GetCounter(
          "dcm_federation_forwarded_total",
          "Calls this enclave forwarded to a peer (supernode), by call and outcome.",
          std::string("call=\"") + call + "\",peer=\"" + peer + "\",outcome=\"" + outcome + "\"")
      .Inc();
}

std::vector<std::pair<std::string, std::string>> FederationRelay::Ask(const std::string& query,
                                                                      const FedHop& in) {
  const FedHop out = ForwardedHop(in, options_.enclave_id);
  const auto deadline = ForwardDeadline(in);
  std::vector<std::pair<std::string, std::future<Result<HttpResponse>>>> asked;
  for (const std::string& peer : api_->Peers()) {
    if (Visited(in, peer) || peer == options_.enclave_id || !api_->Ready(peer)) continue;
    asked.emplace_back(peer, std::async(std::launch::async, [this, peer, query, out, deadline] {
                         return api_->Call(peer, "GET", "/flavors?" + query, "", out, deadline);
                       }));
  }
  std::vector<std::pair<std::string, std::string>> answers;
  for (auto& [peer, future] : asked) {
    auto response = future.get();
    const bool ok = response && response->status == 200;
    Count("discover", peer, ok ? "ok" : "failed");
    if (!ok) {
      Logger("federation-relay")
          ->warn(
              "msg=\"peer skipped in forwarded discovery\" peer={} request_id={} error=\"{}\"",
              peer, in.request_id,
              response ? "answered " + std::to_string(response->status) : response.error().message);
      continue;
    }
    answers.emplace_back(peer, std::move(response->body));
  }
  return answers;
}

std::vector<std::string> FederationRelay::Discover(const std::string& query, const FedHop& in) {
  std::vector<std::string> flavors;
  for (const auto& [peer, body] : Ask(query, in)) {
    auto readvertised = ReadvertiseFlavors(options_.enclave_id, body);
    if (!readvertised) continue;
    flavors.insert(flavors.end(), std::make_move_iterator(readvertised->begin()),
                   std::make_move_iterator(readvertised->end()));
  }
  return flavors;
}

std::optional<ForwardRoute> FederationRelay::RouteFor(const std::string& flavor_id,
                                                      const FedHop& in) {
  std::optional<ForwardRoute> best;
  for (const auto& [peer, body] : Ask("flavor_id=" + PercentEncode(flavor_id), in)) {
    auto offers = ParseOffers(peer, body);
    if (!offers) continue;
    for (const PeerOffer& o : *offers) {
      if (o.flavor_id != flavor_id) continue;
      ForwardRoute route{o.peer, o.owner, o.hops};
      if (!best || std::tie(route.hops, route.peer) < std::tie(best->hops, best->peer)) {
        best = std::move(route);
      }
    }
  }
  return best;
}

Result<HttpResponse> FederationRelay::Forward(const std::string& peer, const std::string& method,
                                              const std::string& target, const std::string& body,
                                              const FedHop& in) {
  auto response = api_->Call(peer, method, target, body, ForwardedHop(in, options_.enclave_id),
                             options_.call_timeout);
  const char* outcome = !response                ? "failed"
                        : response->status < 300 ? "ok"
                        : response->status < 500 ? "refused"
                                                 : "failed";
  Count(CallName(method, target), peer, outcome);
  Logger("federation-relay")
      ->info("msg=\"forwarded\" method={} target={} peer={} via={} status={}", method, target, peer,
             in.via.empty() ? "" : in.via.back(),
             response ? std::to_string(response->status) : response.error().message);
  return response;
}

}  // namespace dcm::http
