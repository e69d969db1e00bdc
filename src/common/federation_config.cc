#include "src/common/federation_config.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>

#include "src/common/config.h"
#include "src/common/url.h"

namespace dcm {
namespace {

tl::unexpected<Error> Invalid(std::string message) {
  return MakeError(ErrorCode::kInvalidArgument, std::move(message));
}

bool AllLetters(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(),
                                      [](unsigned char c) { return std::isalpha(c) != 0; });
}

Result<PeerConfig> ParsePeer(const std::string& item, std::string_view self_id) {
  const std::string where = "FEDERATION_PEERS item '" + item + "': ";
  const size_t eq = item.find('=');
  if (eq == std::string::npos) return Invalid(where + "expected id=url");
  PeerConfig peer{item.substr(0, eq), item.substr(eq + 1)};
  if (!IsDnsLabel(peer.id)) {
    return Invalid(where + "the id must be a DNS label (1-63 of a-z, 0-9, '-')");
  }
  if (peer.id == self_id) return Invalid(where + "names this enclave itself");
  while (!peer.url.empty() && peer.url.back() == '/') peer.url.pop_back();
  auto url = ParseHttpUrl(peer.url);
  if (!url) return Invalid(where + url.error().message);
  if (url->target.find('?') != std::string::npos) return Invalid(where + "the url has a query");
  return peer;
}

}  // namespace

bool IsDnsLabel(std::string_view id) {
  if (id.empty() || id.size() > 63 || id.front() == '-' || id.back() == '-') return false;
  return std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

Result<std::vector<PeerConfig>> ParseFederationPeers(std::string_view text,
                                                     std::string_view self_id) {
  std::vector<PeerConfig> peers;
  std::set<std::string> ids;
  for (const std::string& item : SplitList(std::string(text))) {
    ASSIGN_OR_RETURN(PeerConfig peer, ParsePeer(item, self_id));
    if (!ids.insert(peer.id).second) {
      return Invalid("FEDERATION_PEERS names peer '" + peer.id + "' twice");
    }
    peers.push_back(std::move(peer));
  }
  return peers;
}

Result<FederationPrice> ParseFederationPrice(std::string_view text) {
  const std::string where = "FEDERATION_PRICE '" + std::string(text) + "': ";
  FederationPrice price;
  const size_t space = text.find(' ');
  const std::string_view amount = text.substr(0, space);
  // from_chars for double is exact and locale-free (libstdc++ 11+).
  auto [end, ec] = std::from_chars(amount.data(), amount.data() + amount.size(), price.amount);
  if (ec != std::errc() || end != amount.data() + amount.size() || !(price.amount >= 0) ||
      price.amount > 1e12) {
    return Invalid(where + "the amount must be a decimal number 0..1e12");
  }
  if (space == std::string_view::npos) return price;
  const std::string_view unit = text.substr(space + 1);
  const size_t slash = unit.find('/');
  if (slash == std::string_view::npos || !AllLetters(unit.substr(0, slash)) ||
      !AllLetters(unit.substr(slash + 1))) {
    return Invalid(where + "expected '<amount> <currency>/<period>', e.g. '0.05 EUR/hour'");
  }
  price.currency = std::string(unit.substr(0, slash));
  price.period = std::string(unit.substr(slash + 1));
  return price;
}

std::string ResolveEnclaveId(std::string_view configured) {
  if (!configured.empty()) return std::string(configured);
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) return "local";
  std::string id;
  for (const char* p = host; *p != '\0' && *p != '.' && id.size() < 63; ++p) {
    const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(*p)));
    id += (std::isalnum(static_cast<unsigned char>(c)) != 0) ? c : '-';
  }
  while (!id.empty() && id.back() == '-') id.pop_back();
  while (!id.empty() && id.front() == '-') id.erase(id.begin());
  return id.empty() ? "local" : id;
}

Status ValidateFederationConfig(const FederationConfig& f,
                                const std::vector<std::string>& service_types) {
  if (!f.enclave_id.empty() && !IsDnsLabel(f.enclave_id)) {
    return Invalid("--enclave-id must be a DNS label (1-63 of a-z, 0-9, '-'), got '" +
                   f.enclave_id + "'");
  }
  for (const std::string& type : f.export_service_types) {
    if (std::find(service_types.begin(), service_types.end(), type) == service_types.end()) {
      return Invalid("FEDERATION_EXPORT_SERVICE_TYPES: '" + type + "' is not one of SERVICE_TYPES");
    }
  }
  if (f.flavor_ttl < std::chrono::seconds(1)) {
    return Invalid("FEDERATION_FLAVOR_TTL must be at least 1s");
  }
  if (f.contract_ttl < std::chrono::seconds(1)) {
    return Invalid("FEDERATION_CONTRACT_TTL must be at least 1s");
  }
  if (f.hold_ttl < std::chrono::seconds(1) || f.hold_ttl > std::chrono::hours(24)) {
    return Invalid("FEDERATION_HOLD_TTL must be from 1s to 24h (what a peer accepts)");
  }
  if (f.discovery_timeout < std::chrono::milliseconds(100)) {
    return Invalid("FEDERATION_DISCOVERY_TIMEOUT must be at least 100ms");
  }
  if (f.forward && f.peers.empty()) {
    return Invalid(
        "FEDERATION_FORWARD needs FEDERATION_PEERS: the peers whose flavours it forwards");
  }
  return OkStatus();
}

}  // namespace dcm
