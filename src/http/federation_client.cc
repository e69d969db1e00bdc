#include "src/http/federation_client.h"

#include <future>

#include "src/common/json_read.h"
#include "src/common/json_writer.h"
#include "src/common/log.h"
#include "src/common/reply_summary.h"
#include "src/common/time_format.h"
#include "src/common/uuid.h"
#include "src/http/placement_clients.h"

namespace dcm::http {
namespace {

constexpr char kApi[] = "/federation/v1alpha1";
constexpr size_t kMaxDetailBytes = 256;

int64_t TimeMember(simdjson::dom::object o, std::string_view key) {
  auto millis = ParseRfc3339(StringMember(o, key));
  return millis ? *millis : 0;
}

}  // namespace

Result<std::vector<PeerOffer>> ParseOffers(const std::string& peer, const std::string& body) {
  auto parsed = ParseJson(body);
  simdjson::dom::array flavors;
  if (!parsed || !parsed->is_object() ||
      simdjson::dom::object(*parsed).at_key("flavors").get(flavors)) {
    return MakeError(ErrorCode::kInvalidArgument, "not a flavour list ({\"flavors\": [...]})");
  }
  std::vector<PeerOffer> out;
  for (auto item : flavors) {
    simdjson::dom::object f;
    if (item.get(f)) continue;
    PeerOffer offer;
    offer.peer = peer;
    offer.flavor_id = StringMember(f, "flavor_id");
    offer.owner = StringMember(f, "owner");
    offer.region = StringMember(f, "region");
    if (offer.flavor_id.empty() || offer.owner.empty()) continue;
    int64_t available = 0;
    if (!f.at_key("instances_available").get(available)) offer.instances_available = available;
    double amount = 0;
    simdjson::dom::object price;
    if (!f.at_key("price").get(price) && !price.at_key("amount").get(amount)) offer.price = amount;
    int64_t hops = 1;
    if (!f.at_key("hops").get(hops) && hops > 0 && hops < 100) offer.hops = static_cast<int>(hops);
    out.push_back(std::move(offer));
  }
  return out;
}

HttpFederationApi::HttpFederationApi(std::string enclave_id, const std::vector<PeerConfig>& peers,
                                     std::function<bool(const std::string&)> ready,
                                     std::chrono::milliseconds timeout, HttpClientOptions options)
    : enclave_id_(std::move(enclave_id)),
      ready_(std::move(ready)),
      timeout_(timeout),
      options_(std::move(options)) {
  for (const PeerConfig& p : peers) urls_[p.id] = p.url;
  options_.max_response_bytes = 4u << 20;
}

std::vector<std::string> HttpFederationApi::Peers() const {
  std::vector<std::string> out;
  for (const auto& [peer, url] : urls_) out.push_back(peer);
  return out;
}

Result<HttpResponse> HttpFederationApi::Call(const std::string& peer, const std::string& method,
                                             const std::string& target, const std::string& body,
                                             const FedHop& hop,
                                             std::chrono::milliseconds timeout) const {
  auto url = urls_.find(peer);
  if (url == urls_.end()) {
    return MakeError(ErrorCode::kNotFound, "peer '" + peer + "' is not in FEDERATION_PEERS");
  }
  HttpClientOptions options = options_;
  for (auto& header : FedHopHeaders(hop)) options.headers.push_back(std::move(header));
  return Fetch(method, url->second + kApi + target, body, timeout, options);
}

Result<HttpResponse> HttpFederationApi::Call(const std::string& peer, const std::string& method,
                                             const std::string& target, const std::string& body,
                                             std::chrono::milliseconds timeout) const {
  FedHop own;
  own.via = {enclave_id_};
  return Call(peer, method, target, body, own, timeout);
}

Result<PeerAnswer> HttpFederationApi::Answer(const std::string& peer, const std::string& method,
                                             const std::string& target, const std::string& body,
                                             Wants wants) const {
  ASSIGN_OR_RETURN(HttpResponse response, Call(peer, method, target, body, timeout_));
  PeerAnswer answer;
  answer.http_status = response.status;
  auto parsed = ParseJson(response.body);
  const bool object = parsed && parsed->is_object();
  if (response.status >= 200 && response.status < 300) {
    if (object) {
      const simdjson::dom::object o(*parsed);
      answer.contract_id = StringMember(o, "contract_id");
      answer.remote_instance_id = StringMember(o, "remote_instance_id");
      answer.expires_at_ms = TimeMember(o, "expires_at");
    }
    const bool lacks = wants == Wants::kContract
                           ? answer.contract_id.empty() || answer.remote_instance_id.empty() ||
                                 answer.expires_at_ms == 0
                           : wants == Wants::kLease && answer.expires_at_ms == 0;
    if (lacks) {
      return MakeError(ErrorCode::kUnavailable,
                       "peer '" + peer + "' answered " + std::to_string(response.status) +
                           (wants == Wants::kContract
                                ? " without a contract_id, remote_instance_id and expires_at"
                                : " without an expires_at"));
    }
    return answer;
  }
  if (object)
    answer.reason = SanitizeText(StringMember(simdjson::dom::object(*parsed), "reason"), 64);
  answer.detail =
      SanitizeText(ReplyExplanation(response.content_type, response.body), kMaxDetailBytes);
  return answer;
}

std::vector<PeerOffer> HttpFederationApi::Offers(const std::string& peer,
                                                 const std::string& service_type,
                                                 const std::string& request_id,
                                                 std::chrono::milliseconds deadline) const {
  auto logger = Logger("federation-client");
  FedHop hop;
  hop.request_id = request_id;
  hop.via = {enclave_id_};
  auto response =
      Call(peer, "GET", "/flavors?service_type=" + PercentEncode(service_type), "", hop, deadline);
  if (!response || response->status != 200) {
    logger->warn(
        "msg=\"peer skipped in discovery\" peer={} error=\"{}\"", peer,
        response ? "answered " + std::to_string(response->status) : response.error().message);
    return {};
  }
  auto offers = ParseOffers(peer, response->body);
  if (!offers) {
    logger->warn("msg=\"peer skipped in discovery\" peer={} error=\"{}\"", peer,
                 offers.error().message);
    return {};
  }
  return std::move(*offers);
}

std::vector<PeerOffer> HttpFederationApi::Discover(const std::string& service_type,
                                                   std::chrono::milliseconds deadline) {
  // Each peer gets its own request id: two routes to one enclave (direct, and through a
  // forwarding peer) are two requests there, each answered, and the shorter path wins.
  const std::string discovery = NewUuidV4();
  std::vector<std::future<std::vector<PeerOffer>>> asked;
  for (const auto& [peer, url] : urls_) {
    if (!ready_(peer)) continue;
    // Each call is bounded by `deadline` as a whole: every future is ready by then.
    asked.push_back(std::async(std::launch::async,
                               [this, peer, service_type, id = UuidV5(discovery, peer), deadline] {
                                 return Offers(peer, service_type, id, deadline);
                               }));
  }
  std::vector<PeerOffer> out;
  for (auto& f : asked) {
    auto offers = f.get();
    out.insert(out.end(), std::make_move_iterator(offers.begin()),
               std::make_move_iterator(offers.end()));
  }
  return out;
}

Result<PeerAnswer> HttpFederationApi::Reserve(const std::string& peer,
                                              const std::string& reservation_id,
                                              const std::string& flavor_id,
                                              const std::string& spec_json,
                                              std::chrono::milliseconds ttl) {
  JsonWriter w;
  w.BeginObject();
  w.Field("reservation_id", reservation_id);
  w.Field("flavor_id", flavor_id);
  w.Key("spec");
  w.Raw(spec_json.empty() ? "{}" : spec_json);
  w.Field("ttl", std::to_string(std::max<int64_t>(1, ttl.count() / 1000)) + "s");
  w.EndObject();
  return Answer(peer, "POST", "/reservations", w.Take(), Wants::kLease);
}

Result<PeerAnswer> HttpFederationApi::Confirm(const std::string& peer,
                                              const std::string& reservation_id) {
  return Answer(peer, "POST", "/reservations/" + PercentEncode(reservation_id) + ":confirm", "",
                Wants::kContract);
}

Result<PeerAnswer> HttpFederationApi::Release(const std::string& peer,
                                              const std::string& reservation_id) {
  return Answer(peer, "DELETE", "/reservations/" + PercentEncode(reservation_id), "",
                Wants::kNothing);
}

Result<PeerAnswer> HttpFederationApi::Renew(const std::string& peer,
                                            const std::string& contract_id) {
  return Answer(peer, "POST", "/contracts/" + PercentEncode(contract_id) + ":renew", "",
                Wants::kContract);
}

Result<PeerAnswer> HttpFederationApi::Terminate(const std::string& peer,
                                                const std::string& contract_id) {
  return Answer(peer, "DELETE", "/contracts/" + PercentEncode(contract_id), "", Wants::kNothing);
}

}  // namespace dcm::http
