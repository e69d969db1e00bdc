// HttpFederationApi: the peer API of other enclaves (SPEC §10, /federation/v1alpha1) behind the
// FederationApi port (src/common/federation_ports.h), for the instance saga's peer placements.
//
//   Discover   GET    {peer}/federation/v1alpha1/flavors?service_type=   every Ready peer at once
//   Reserve    POST   {peer}/federation/v1alpha1/reservations {reservation_id, ...}
//   Confirm    POST   {peer}/federation/v1alpha1/reservations/{id}:confirm
//   Release    DELETE {peer}/federation/v1alpha1/reservations/{id}
//   Renew      POST   {peer}/federation/v1alpha1/contracts/{id}:renew
//   Terminate  DELETE {peer}/federation/v1alpha1/contracts/{id}
//
// Every call carries `Fed-Via: <this enclave>` (the peer's caller when authentication is off;
// with mTLS, the certificate says the same) and `Fed-Hop-Limit`; a discovery also carries a
// `Fed-Request-Id` of its own for each peer (a forwarding peer answers a repeated one empty). Peers
// are operator-configured: no outbound policy, TLS verified with the SP client certificate
// presented (as the peer prober). Every HTTP answer is a PeerAnswer (the saga decides what 409/410
// mean); transport failures are errors (kUnavailable, kTimeout); a 2xx whose body lacks what the
// call returns (a hold's expires_at; a contract's contract_id, remote_instance_id and expires_at)
// is kUnavailable: the saga never records a fact its own decoder would reject.
//
// Thread-safety: stateless apart from its configuration; any number of threads at once (each
// call opens its own connection: a placement makes a handful).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "src/common/federation_config.h"
#include "src/common/federation_ports.h"
#include "src/http/client.h"
#include "src/http/federation_forwarding.h"

namespace dcm::http {

class HttpFederationApi : public FederationApi {
 public:
  // `ready`: whether a peer is Ready now (the peer-health projection); Discover asks those only.
  HttpFederationApi(std::string enclave_id, const std::vector<PeerConfig>& peers,
                    std::function<bool(const std::string& peer)> ready,
                    std::chrono::milliseconds timeout, HttpClientOptions options = {});

  std::vector<PeerOffer> Discover(const std::string& service_type,
                                  std::chrono::milliseconds deadline) override;
  Result<PeerAnswer> Reserve(const std::string& peer, const std::string& reservation_id,
                             const std::string& flavor_id, const std::string& spec_json,
                             std::chrono::milliseconds ttl) override;
  Result<PeerAnswer> Confirm(const std::string& peer, const std::string& reservation_id) override;
  Result<PeerAnswer> Release(const std::string& peer, const std::string& reservation_id) override;
  Result<PeerAnswer> Renew(const std::string& peer, const std::string& contract_id) override;
  Result<PeerAnswer> Terminate(const std::string& peer, const std::string& contract_id) override;

  // One call to `peer` carrying `hop` (FedHopHeaders): what a forwarding enclave sends on
  // (src/http/federation_relay.h). kNotFound for a peer not in FEDERATION_PEERS.
  Result<HttpResponse> Call(const std::string& peer, const std::string& method,
                            const std::string& target, const std::string& body, const FedHop& hop,
                            std::chrono::milliseconds timeout) const;
  bool Ready(const std::string& peer) const { return ready_(peer); }
  // The configured peers, in id order.
  std::vector<std::string> Peers() const;

 private:
  // A call of this enclave's own (Fed-Via: this enclave, the default hop limit).
  Result<HttpResponse> Call(const std::string& peer, const std::string& method,
                            const std::string& target, const std::string& body,
                            std::chrono::milliseconds timeout) const;
  // What a 2xx must carry: nothing, a lease's end (a hold), or a contract (confirm, renew).
  enum class Wants { kNothing, kLease, kContract };
  Result<PeerAnswer> Answer(const std::string& peer, const std::string& method,
                            const std::string& target, const std::string& body, Wants wants) const;
  std::vector<PeerOffer> Offers(const std::string& peer, const std::string& service_type,
                                const std::string& request_id,
                                std::chrono::milliseconds deadline) const;

  std::string enclave_id_;
  std::map<std::string, std::string> urls_;  // peer id -> base URL
  std::function<bool(const std::string&)> ready_;
  std::chrono::milliseconds timeout_;
  HttpClientOptions options_;
};

// The offers in a GET /flavors body (`peer` asked). Skips flavours that lack an id or owner;
// kInvalidArgument when the body is not {"flavors": [...]}.
Result<std::vector<PeerOffer>> ParseOffers(const std::string& peer, const std::string& body);

}  // namespace dcm::http
