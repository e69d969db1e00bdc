// The port between the instance saga's peer placement (consumers/saga_runner.h, SPEC §10 "the
// consumer side") and the peer API of other enclaves (src/http/federation_client.h; tests use
// fakes), and the pure rules around it: which offers are worth a hold, in what order, and the
// ids a placement uses, so that a resumed saga asks the same questions and gets the same
// answers.
//
//   Discover(service_type) ──▶ RankOffers ──▶ for each: Reserve(id) ─▶ Confirm(id) ─▶ contract
//                                               409/404/410: the next offer
//
// Every call blocks the calling worker thread for at most its timeout.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "src/common/result.h"

namespace dcm {

// One flavour a peer offered (GET /federation/v1alpha1/flavors).
struct PeerOffer {
  std::string peer;  // the peer enclave asked
  std::string flavor_id;
  std::string owner;  // the enclave that hosts it
  std::string region;
  double price = 0;                            // price.amount
  int hops = 1;                                // enclaves between here and the owner, plus one
  std::optional<int64_t> instances_available;  // nullopt: unlimited
  bool operator==(const PeerOffer&) const = default;
};

// A peer's answer to a reservation or contract call: its status, and what the body said.
struct PeerAnswer {
  int http_status = 0;
  std::string reason;  // a refusal's problem+json `reason` (no_capacity, expired, ...)
  std::string detail;  // a refusal's `detail`, sanitized and bounded
  std::string contract_id;
  std::string remote_instance_id;
  int64_t expires_at_ms = 0;  // the hold's or the contract's
};

class FederationApi {
 public:
  virtual ~FederationApi() = default;
  // The offers of `service_type` from every Ready peer, asked in parallel; a peer that fails,
  // answers garbage or has not answered within `deadline` is skipped (and logged).
  virtual std::vector<PeerOffer> Discover(const std::string& service_type,
                                          std::chrono::milliseconds deadline) = 0;
  // POST /reservations {reservation_id, flavor_id, spec, ttl}.
  virtual Result<PeerAnswer> Reserve(const std::string& peer, const std::string& reservation_id,
                                     const std::string& flavor_id, const std::string& spec_json,
                                     std::chrono::milliseconds ttl) = 0;
  // POST /reservations/{id}:confirm.
  virtual Result<PeerAnswer> Confirm(const std::string& peer,
                                     const std::string& reservation_id) = 0;
  // DELETE /reservations/{id}.
  virtual Result<PeerAnswer> Release(const std::string& peer,
                                     const std::string& reservation_id) = 0;
  // POST /contracts/{id}:renew.
  virtual Result<PeerAnswer> Renew(const std::string& peer, const std::string& contract_id) = 0;
  // DELETE /contracts/{id}.
  virtual Result<PeerAnswer> Terminate(const std::string& peer, const std::string& contract_id) = 0;
};

// The offers worth a hold, best first: some instance available (or unlimited), and in the
// spec's region when it names one; then by price, hops, owner, peer and flavour id; a flavour
// offered on several routes (an owner's own, and re-advertised by forwarding peers) only on its
// best. Deterministic for the same offers.
std::vector<PeerOffer> RankOffers(std::vector<PeerOffer> offers, const std::string& region);

// The reservation id a placement uses with `peer`: UUIDv5 of the operation, the resource and the
// peer, so a resumed saga repeats the same request (and the peer answers it the same way).
std::string ReservationIdFor(const std::string& request_id, const std::string& resource_id,
                             const std::string& peer);

// The provider name of a resource placed on `peer` ("peer:<enclave>"), and back ("" when
// `provider_name` does not name a peer).
std::string PeerProviderName(const std::string& peer);
std::string PeerOfProviderName(const std::string& provider_name);

// The `placement` of a resource on a peer: {"kind":"remote","peer":...,"contract_id":...}.
struct RemotePlacement {
  std::string peer;
  std::string contract_id;
  bool operator==(const RemotePlacement&) const = default;
};
std::string EncodeRemotePlacement(const RemotePlacement& placement);
// nullopt: empty, not an object, not of kind "remote", or without a peer or contract id.
std::optional<RemotePlacement> DecodeRemotePlacement(const std::string& json);

// spec.federation (SPEC §10): "allow" (the default) or "never"; anything else is "allow".
bool FederationAllowed(const std::string& spec_json);

}  // namespace dcm
