// Supernode forwarding (SPEC §10 "Supernodes"): an enclave with FEDERATION_FORWARD re-advertises
// its peers' flavours, forwards holds under the same reservation id and relays confirm, renew and
// terminate. This header holds the pure parts the handlers use (a call's path: Fed-Request-Id,
// Fed-Hop-Limit, Fed-Via; re-advertising a peer's flavours) and the port the handlers forward
// through (FederationForwarder; its HTTP transport is src/http/federation_relay.h).
//
//   A ──GET /flavors (Fed-Request-Id r, Hop-Limit 3, Via a)──▶ S ──(r, 2, "a,s")──▶ B
//     ◀── S's own flavours + B's, re-advertised: hops + 1, path ["s", "b"] ──────────┘
//
// Loops end three ways: a call whose Fed-Hop-Limit is 1 is not forwarded (each forward lowers
// it by one); an enclave never forwards to one already in Fed-Via; and a forwarding enclave
// answers a discovery whose Fed-Request-Id it has seen (within a minute) with no flavours.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "src/common/result.h"
#include "src/http/http_types.h"

namespace dcm::http {

// The hop limit a call starts with (SPEC §10: default 3) and the largest one accepted.
inline constexpr int kDefaultFedHopLimit = 3;
inline constexpr int kMaxFedHopLimit = 16;

// What a call says of its path.
struct FedHop {
  std::string request_id;               // Fed-Request-Id: "" when the caller sent none
  int hop_limit = kDefaultFedHopLimit;  // enclaves it may still reach, this one included
  std::vector<std::string> via;         // Fed-Via: every enclave it passed through, the caller last
  bool operator==(const FedHop&) const = default;
};

// 400 (kInvalidArgument naming the header) for a Fed-Hop-Limit outside 1..16, a Fed-Request-Id
// that is not 1-128 of [A-Za-z0-9._:-], or a Fed-Via that is not up to 16 enclave ids.
Result<FedHop> ParseFedHop(const HttpRequest& request);

// The path a forward of `in` by enclave `self` carries: the same request id, one hop fewer, and
// `self` appended to the visited set.
FedHop ForwardedHop(const FedHop& in, const std::string& self);

// The header values of `hop`: {"Fed-Request-Id", ...} (when set), "Fed-Hop-Limit", "Fed-Via".
std::vector<std::pair<std::string, std::string>> FedHopHeaders(const FedHop& hop);

bool Visited(const FedHop& hop, const std::string& enclave);

// The flavours of a peer's GET /flavors answer `body`, as `self` re-advertises them: each object
// as it came, with `hops` one more (1 when absent) and `path` = [self, ...its path] (its path
// being [owner] when absent). Flavours without a `flavor_id` or `owner` are dropped;
// kInvalidArgument when `body` is not {"flavors": [...]}.
Result<std::vector<std::string>> ReadvertiseFlavors(const std::string& self,
                                                    const std::string& body);

// Where a forwarding enclave sends a reservation: the peer whose answer had the flavour in the
// fewest hops (then the smallest peer id), and the flavour's owner.
struct ForwardRoute {
  std::string peer;
  std::string owner;
  int hops = 1;
  bool operator==(const ForwardRoute&) const = default;
};

// The port the handlers forward through. Discover, RouteFor and Forward block for at most the
// forward deadline; handlers call them inside Run, off the server's threads.
class FederationForwarder {
 public:
  virtual ~FederationForwarder() = default;
  // Runs `work` on a forwarding thread; false (and `work` dropped) when too many forwards are in
  // flight already: the handler answers 503.
  virtual bool Run(std::function<void()> work) = 0;
  // Whether discovery `request_id` arrives here for the first time; "" always does.
  virtual bool FirstArrival(const std::string& request_id) = 0;
  // GET /flavors?`query` of every Ready peer not in `in`'s visited set, at once, forwarded with
  // ForwardedHop(in); their flavours re-advertised (ReadvertiseFlavors). A peer that fails or is
  // late is skipped.
  virtual std::vector<std::string> Discover(const std::string& query, const FedHop& in) = 0;
  // The route to `flavor_id` (a discovery with flavor_id=), or nullopt when no peer offers it.
  virtual std::optional<ForwardRoute> RouteFor(const std::string& flavor_id, const FedHop& in) = 0;
  // The call as it came, sent on to `peer` with ForwardedHop(in); its answer as the peer gave it.
  virtual Result<HttpResponse> Forward(const std::string& peer, const std::string& method,
                                       const std::string& target, const std::string& body,
                                       const FedHop& in) = 0;
};

}  // namespace dcm::http
