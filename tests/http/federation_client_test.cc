// Contract test of HttpFederationApi (src/http/federation_client.h, SPEC §10 peer API) against a
// fake peer served by our own HttpServer on loopback: what each call sends (method, target,
// body, Fed-Via), how answers become PeerAnswers (a 2xx's contract, a refusal's reason), and
// discovery: Ready peers only, in parallel, a slow or failing peer skipped within the deadline.
#include "src/http/federation_client.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "src/common/json_read.h"
#include "src/http/server.h"

namespace dcm::http {
namespace {

using namespace std::chrono_literals;

// A peer that answers every request with `answer(request)` (or never, when it returns nullopt).
class FakePeer {
 public:
  using Answer = std::function<std::optional<HttpResponse>(const HttpRequest&)>;
  explicit FakePeer(Answer answer) : answer_(std::move(answer)) {
    ServerOptions options;
    options.handler_timeout = 30s;
    server_ = std::move(*HttpServer::Create(options));
    port_ = *server_->Listen("127.0.0.1:0", [this](HttpRequest req, Respond respond) {
      std::optional<HttpResponse> response;
      {
        std::lock_guard lock(mu_);
        requests_.push_back(req);
        response = answer_(req);
      }
      if (response) {
        respond(*response);
      } else {
        std::lock_guard lock(mu_);
        held_.push_back(std::move(respond));
      }
    });
  }
  ~FakePeer() {
    server_->Stop();
    held_.clear();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<HttpRequest> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }

 private:
  mutable std::mutex mu_;
  Answer answer_;
  std::vector<HttpRequest> requests_;
  std::vector<Respond> held_;
  std::unique_ptr<HttpServer> server_;
  uint16_t port_ = 0;
};

HttpResponse Json(int status, std::string body) {
  return HttpResponse{status, "application/json", std::move(body), {}};
}

constexpr char kFlavors[] =
    R"({"owner":"b","flavors":[{"flavor_id":"f1","owner":"b","service_type":"container",)"
    R"("region":"eu","instances_available":2,"price":{"amount":0.5,"currency":"EUR",)"
    R"("period":"hour"},"expires_at":"2026-01-01T00:00:30.000Z"},{"owner":"b"}]})";
constexpr char kContract[] =
    R"({"reservation_id":"r1","flavor_id":"f1","consumer":"a","state":"signed",)"
    R"("contract_id":"c1","remote_instance_id":"i1","expires_at":"2026-01-01T00:10:00.000Z",)"
    R"("repeat":false})";

HttpFederationApi Api(
    const std::vector<PeerConfig>& peers,
    std::function<bool(const std::string&)> ready = [](auto&) { return true; }) {
  return HttpFederationApi("a", peers, std::move(ready), 5s);
}

TEST(ParseOffersTest, ReadsEachFlavourAndSkipsOnesWithoutIds) {
  auto offers = ParseOffers("b", kFlavors);
  ASSERT_TRUE(offers) << offers.error().message;
  ASSERT_EQ(offers->size(), 1u);
  const PeerOffer& o = offers->front();
  EXPECT_EQ(o.peer, "b");
  EXPECT_EQ(o.flavor_id, "f1");
  EXPECT_EQ(o.owner, "b");
  EXPECT_EQ(o.region, "eu");
  EXPECT_EQ(o.price, 0.5);
  EXPECT_EQ(o.hops, 1);
  EXPECT_EQ(o.instances_available, 2);
  EXPECT_FALSE(ParseOffers("b", "[]"));
  EXPECT_FALSE(ParseOffers("b", "not json"));
}

TEST(HttpFederationApiTest, ReserveSendsTheHoldAndConfirmReadsTheContract) {
  FakePeer peer([](const HttpRequest& r) {
    return Json(r.path == "/federation/v1alpha1/reservations" ? 201 : 200,
                r.path.ends_with(":confirm")
                    ? kContract
                    : R"({"state":"held","expires_at":"2026-01-01T00:00:30.000Z"})");
  });
  auto api = Api({{"b", peer.url()}});
  auto held = api.Reserve("b", "r1", "f1", R"({"image":"nginx"})", 30s);
  ASSERT_TRUE(held) << held.error().message;
  EXPECT_EQ(held->http_status, 201);
  EXPECT_EQ(held->expires_at_ms, 1767225630000);
  auto signed_ = api.Confirm("b", "r1");
  ASSERT_TRUE(signed_) << signed_.error().message;
  EXPECT_EQ(signed_->contract_id, "c1");
  EXPECT_EQ(signed_->remote_instance_id, "i1");
  EXPECT_EQ(signed_->expires_at_ms, 1767226200000);

  const auto requests = peer.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].method, "POST");
  EXPECT_EQ(requests[0].body,
            R"({"reservation_id":"r1","flavor_id":"f1","spec":{"image":"nginx"},"ttl":"30s"})");
  EXPECT_EQ(*requests[0].Header("fed-via"), "a");
  EXPECT_EQ(*requests[0].Header("fed-hop-limit"), "3");
  EXPECT_EQ(requests[1].target, "/federation/v1alpha1/reservations/r1:confirm");
}

TEST(HttpFederationApiTest, A2xxWithoutWhatItPromisesIsAnErrorNeverAFact) {
  FakePeer peer([](const HttpRequest&) { return Json(201, R"({"state":"held"})"); });
  auto api = Api({{"b", peer.url()}});
  auto held = api.Reserve("b", "r1", "f1", "{}", 30s);  // a hold without its end
  ASSERT_FALSE(held);
  EXPECT_EQ(held.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(held.error().message.find("without an expires_at"), std::string::npos);
  EXPECT_FALSE(api.Renew("b", "c1"));      // a renewal without the contract's new end
  auto released = api.Release("b", "r1");  // nothing to carry
  ASSERT_TRUE(released);
  EXPECT_EQ(released->http_status, 201);
}

TEST(HttpFederationApiTest, ARefusalIsAnAnswerWithItsReasonAndAContractlessConfirmAnError) {
  int calls = 0;
  FakePeer peer([&](const HttpRequest&) {
    return ++calls == 1 ? HttpResponse{409,
                                       "application/problem+json",
                                       R"({"status":409,"detail":"full","reason":"no_capacity"})",
                                       {}}
                        : Json(201, R"({"state":"signed"})");
  });
  auto api = Api({{"b", peer.url()}});
  auto refused = api.Reserve("b", "r1", "f1", "{}", 30s);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->http_status, 409);
  EXPECT_EQ(refused->reason, "no_capacity");
  EXPECT_EQ(refused->detail, "full");
  auto confirm = api.Confirm("b", "r1");
  ASSERT_FALSE(confirm);
  EXPECT_EQ(confirm.error().code, ErrorCode::kUnavailable);
  EXPECT_FALSE(api.Terminate("nobody", "c1"));  // not a configured peer
}

TEST(HttpFederationApiTest, DiscoverAsksReadyPeersAtOnceAndSkipsSlowOrFailingOnes) {
  FakePeer good([](const HttpRequest&) { return Json(200, kFlavors); });
  FakePeer slow([](const HttpRequest&) { return std::optional<HttpResponse>(); });
  FakePeer broken([](const HttpRequest&) { return Json(500, "{}"); });
  FakePeer down([](const HttpRequest&) { return Json(200, kFlavors); });
  auto api = Api({{"b", good.url()}, {"c", slow.url()}, {"d", broken.url()}, {"e", down.url()}},
                 [](const std::string& peer) { return peer != "e"; });
  const auto begun = std::chrono::steady_clock::now();
  auto offers = api.Discover("container", 500ms);
  const auto took = std::chrono::steady_clock::now() - begun;
  ASSERT_EQ(offers.size(), 1u);
  EXPECT_EQ(offers[0].peer, "b");
  EXPECT_LT(took, 3s);  // bounded by the deadline, not by the slow peer
  EXPECT_EQ(good.requests()[0].target, "/federation/v1alpha1/flavors?service_type=container");
  EXPECT_TRUE(down.requests().empty());  // not Ready: not asked
}

}  // namespace
}  // namespace dcm::http
