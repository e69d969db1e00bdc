#include "src/common/federation_ports.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "src/common/json_read.h"
#include "src/common/json_writer.h"
#include "src/common/uuid.h"

namespace dcm {
namespace {

constexpr std::string_view kPeerPrefix = "peer:";

}  // namespace

std::vector<PeerOffer> RankOffers(std::vector<PeerOffer> offers, const std::string& region) {
  std::erase_if(offers, [&](const PeerOffer& o) {
    return (o.instances_available && *o.instances_available <= 0) ||
           (!region.empty() && o.region != region);
  });
  std::sort(offers.begin(), offers.end(), [](const PeerOffer& a, const PeerOffer& b) {
    return std::tie(a.price, a.hops, a.owner, a.peer, a.flavor_id) <
           std::tie(b.price, b.hops, b.owner, b.peer, b.flavor_id);
  });
  // A flavour offered on two routes (directly, and re-advertised by a forwarding peer) is held
  // once, on the shortest.
  std::set<std::pair<std::string, std::string>> seen;
  std::erase_if(offers,
                [&](const PeerOffer& o) { return !seen.emplace(o.owner, o.flavor_id).second; });
  return offers;
}

std::string ReservationIdFor(const std::string& request_id, const std::string& resource_id,
                             const std::string& peer) {
  // The operation's id (operation_requested's event id, a UUID) is the namespace.
  const std::string ns = IsUuid(request_id) ? request_id : DeterministicUuid(request_id);
  return UuidV5(ns, "reservation/" + resource_id + "/" + peer);
}

std::string PeerProviderName(const std::string& peer) { return std::string(kPeerPrefix) + peer; }

std::string PeerOfProviderName(const std::string& provider_name) {
  if (!provider_name.starts_with(kPeerPrefix)) return "";
  return provider_name.substr(kPeerPrefix.size());
}

std::string EncodeRemotePlacement(const RemotePlacement& placement) {
  JsonWriter w;
  w.BeginObject();
  w.Field("kind", "remote");
  w.Field("peer", placement.peer);
  w.Field("contract_id", placement.contract_id);
  w.EndObject();
  return w.Take();
}

std::optional<RemotePlacement> DecodeRemotePlacement(const std::string& json) {
  if (json.empty()) return std::nullopt;
  auto parsed = ParseJson(json);
  if (!parsed || !parsed->is_object()) return std::nullopt;
  const simdjson::dom::object o(*parsed);
  RemotePlacement p{StringMember(o, "peer"), StringMember(o, "contract_id")};
  if (StringMember(o, "kind") != "remote" || p.peer.empty() || p.contract_id.empty()) {
    return std::nullopt;
  }
  return p;
}

bool FederationAllowed(const std::string& spec_json) {
  auto parsed = ParseJson(spec_json);
  if (!parsed || !parsed->is_object()) return true;
  return StringMember(simdjson::dom::object(*parsed), "federation") != "never";
}

}  // namespace dcm
