// Federation settings (SPEC §10): who this enclave is, which enclaves it peers with, and what it
// offers them. Plain data like Config (config.h), parsed and checked here so `dcm serve` refuses
// to start on a bad peer list instead of probing garbage.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/result.h"

namespace dcm {

// One operator-configured peer enclave (FEDERATION_PEERS item `id=url`). Trusted by the outbound
// policy (SPEC §6: operator-configured addresses are not filtered); TLS is still verified.
struct PeerConfig {
  std::string id;   // the peer's enclave id (a DNS label)
  std::string url;  // its API base, http(s)://host:port, no trailing '/'

  bool operator==(const PeerConfig&) const = default;
};

// A flavour's price (FLUIDOS's price{amount,currency,period}): FEDERATION_PRICE
// "<amount> <currency>/<period>", e.g. "0.05 EUR/hour".
struct FederationPrice {
  double amount = 0;
  std::string currency = "EUR";
  std::string period = "hour";

  bool operator==(const FederationPrice&) const = default;
};

struct FederationConfig {
  // This enclave's id (--enclave-id, DCM_ENCLAVE_ID): the `owner` of its flavours and the name
  // peers know it by. Empty at parse time means "the host name" (ResolveEnclaveId), so a
  // single-host dev setup needs no setting; enclaves that peer must set distinct ids.
  std::string enclave_id;
  // FEDERATION_PEERS=id=url,...: probed with the provider health fold (dcm.peer.health_*).
  std::vector<PeerConfig> peers;
  // FEDERATION_EXPORT_SERVICE_TYPES: what this enclave offers peers (a flavour per type and
  // region of its Ready providers). Default none: nothing leaves an enclave unless asked.
  std::vector<std::string> export_service_types;
  // FEDERATION_PRICE: the price on every flavour ("0 EUR/hour" by default: free among friends).
  FederationPrice price;
  // A flavour listed now is an offer valid until now + this (`expires_at`,
  // FEDERATION_FLAVOR_TTL). 30 s: longer than a discovery round, shorter than capacity drifts.
  std::chrono::milliseconds flavor_ttl{30000};
  // A contract's lease (FEDERATION_CONTRACT_TTL): the consumer renews it, else the provider
  // enclave expires it and deletes the instance. 10 min: a few renewals' worth of a peer outage.
  std::chrono::milliseconds contract_ttl{10 * 60 * 1000};
  // The consumer side: how long a placement asks the Ready peers for flavours
  // (FEDERATION_DISCOVERY_TIMEOUT; a peer that has not answered by then is skipped), and the hold
  // it asks a peer for (FEDERATION_HOLD_TTL; the confirm follows at once, so a hold outlives only
  // a consumer that stalls or crashes).
  std::chrono::milliseconds discovery_timeout{2000};
  std::chrono::milliseconds hold_ttl{30000};
  // FEDERATION_FORWARD: a supernode. Re-advertises its peers' flavours and forwards the calls for
  // them (src/http/federation_forwarding.h). Needs peers.
  bool forward = false;
  // FEDERATION_REPATRIATE: the contract renewer brings an instance placed on a peer home (a
  // rehydration with prefer_local) once a local Ready provider can take it; checked every 30 s
  // per instance (consumers/contract_renewer.h).
  bool repatriate = false;
};

// An enclave id: a DNS label (1-63 of a-z, 0-9, '-', not starting or ending with '-').
bool IsDnsLabel(std::string_view id);

// FEDERATION_PEERS: comma-separated `id=url`. Each id is a DNS label (1-63, lowercase letters,
// digits, '-'), not `self_id` and not repeated; each url an absolute http(s) URL without query
// (a trailing '/' is dropped). The error names the item and FEDERATION_PEERS.
Result<std::vector<PeerConfig>> ParseFederationPeers(std::string_view text,
                                                     std::string_view self_id);

// FEDERATION_PRICE: "<amount> <currency>/<period>" (amount a non-negative decimal; currency and
// period letters only), or just "<amount>" (EUR per hour).
Result<FederationPrice> ParseFederationPrice(std::string_view text);

// The enclave id to use: `configured` if set, else the host name (lower-cased, cut to a DNS
// label), else "local".
std::string ResolveEnclaveId(std::string_view configured);

// Checks the enclave id (a DNS label; empty: not resolved yet, see ResolveEnclaveId) and that every
// exported type is one of `service_types`.
Status ValidateFederationConfig(const FederationConfig& federation,
                                const std::vector<std::string>& service_types);

}  // namespace dcm
