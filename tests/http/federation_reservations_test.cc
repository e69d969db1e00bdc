// The peer API's reservations and contracts (SPEC §10) through the router, auth disabled: the
// bus decides each request synchronously with the real FederationDecider and folds the outcome
// into the `federation` projection's state, as the worker and the runner do over Kafka.
#include <gtest/gtest.h>

#include <set>

#include "handlers_fixture.h"
#include "projections/federation_capacity.h"
#include "src/http/federation_handlers.h"
#include "src/http/federation_params.h"
#include "src/http/federation_render.h"

namespace dcm::http {
namespace {

class DecidingBus final : public CommandBus {
 public:
  DecidingBus(Store* store, FederationPolicy policy, FlavorCapacity capacity)
      : store_(store), decider_(store, std::move(policy)), capacity_(std::move(capacity)) {}

  void Submit(const CloudEvent& request, Done done) override {
    ++submitted;
    auto decoded = DecodeFederationRequest(request);
    ASSERT_TRUE(decoded) << decoded.error().message;
    StoreBatch batch;
    auto outcome = decider_.Decide(*decoded, ++seq_, capacity_, batch);
    ASSERT_TRUE(outcome && *outcome);
    FederationState projection(store_, FederationProjection::kPrefix);
    ASSERT_TRUE(projection.Apply(**outcome, batch));
    ASSERT_TRUE(store_->Write(batch));
    done(EncodeFederationOutcome(**outcome));
  }
  void Record(const CloudEvent&) override {}

  int submitted = 0;

 private:
  Store* store_;
  FederationDecider decider_;
  FlavorCapacity capacity_;
  int64_t seq_ = 0;
};

class FederationReservationsTest : public HandlersTest {
 protected:
  void SetUp() override {
    HandlersTest::SetUp();
    instances_ = std::make_unique<InstanceView>(store_.get());
    reservations_ = std::make_unique<FederationView>(store_.get());
    holds_ = std::make_unique<FederationHolds>(store_.get(), instances_.get());
    federation_.flavors =
        FlavorOptions{"b", {"container"}, FederationPrice{}, std::chrono::seconds(30)};
    federation_.registry = view_.get();
    federation_.health = health_view_.get();
    federation_.instances = instances_.get();
    federation_.clock = &clock_;
    federation_.holds = holds_.get();
    federation_.reservations = reservations_.get();
    federation_.source = "dcm/federation-api/test";
    FederationPolicy policy{"b", 60000, 600000};
    bus_fed_ = std::make_unique<DecidingBus>(
        store_.get(), policy,
        FlavorCapacityFrom({view_.get(), health_view_.get(), instances_.get(), federation_.flavors},
                           FederationState(store_.get(), FederationDecider::kRoot), &clock_));
    federation_.requests = bus_fed_.get();
    ApiContext api = Api();
    api.federation = &federation_;
    router_ = MakeRouter(api, ops_, AccessContext{});
    const std::string body =
        R"({"name":"ctr","endpoint":"http://ctr.example.com/api","service_type":"container",)"
        R"("metadata":{"resources":{"max_instances":2}}})";
    auto r = Call("POST", "/api/v1alpha1/providers", body);
    ASSERT_EQ(r.status, 201) << r.body;
    Probe(Parse(r).Str("id"), {ProbeFailure::kNone});
    flavor_ = FlavorId("b", "container", "");
  }

  HttpResponse As(const std::string& enclave, const std::string& method, const std::string& target,
                  const std::string& body = "") {
    return Call(method, target, body, {{"content-type", "application/json"}, {"fed-via", enclave}});
  }
  HttpResponse Reserve(const std::string& enclave, const std::string& id) {
    return As(enclave, "POST", "/federation/v1alpha1/reservations",
              R"({"reservation_id":")" + id + R"(","flavor_id":")" + flavor_ +
                  R"(","spec":{"image":"nginx"},"ttl":"30s"})");
  }
  std::string Available() {
    auto r = Call("GET", "/federation/v1alpha1/flavors");
    const size_t at = r.body.find("\"instances_available\":");
    return at == std::string::npos ? r.body : r.body.substr(at + 22, 1);
  }

  std::unique_ptr<InstanceView> instances_;
  std::unique_ptr<FederationView> reservations_;
  std::unique_ptr<FederationHolds> holds_;
  std::unique_ptr<DecidingBus> bus_fed_;
  FederationContext federation_;
  std::string flavor_;
};

TEST_F(FederationReservationsTest, HoldsTakeCapacityAtOnceAndTheThirdIsRefused) {
  EXPECT_EQ(Available(), "2");
  auto r = Reserve("a", "r1");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_NE(r.body.find(R"("reservation_id":"r1","flavor_id":")" + flavor_ +
                        R"(","consumer":"a","state":"held","expires_at":)"),
            std::string::npos)
      << r.body;
  EXPECT_EQ(Available(), "1");
  EXPECT_EQ(Reserve("a", "r2").status, 201);
  EXPECT_EQ(Available(), "0");
  r = Reserve("a", "r3");
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_NE(r.body.find(R"("reason":"no_capacity")"), std::string::npos) << r.body;
}

TEST_F(FederationReservationsTest, TheSameReservationAgainGetsTheSameHoldMarkedRepeat) {
  ASSERT_EQ(Reserve("a", "r1").status, 201);
  auto r = Reserve("a", "r1");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find(R"("repeat":true)"), std::string::npos) << r.body;
  EXPECT_EQ(Available(), "1");
}

TEST_F(FederationReservationsTest, ConfirmSignsAContractWithDeterministicIds) {
  ASSERT_EQ(Reserve("a", "r1").status, 201);
  auto r = As("a", "POST", "/federation/v1alpha1/reservations/r1:confirm");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_NE(r.body.find(R"("contract_id":")" + ContractIdFor("b", "r1") +
                        R"(","remote_instance_id":")" + RemoteInstanceIdFor("b", "r1")),
            std::string::npos)
      << r.body;
  EXPECT_EQ(As("a", "POST", "/federation/v1alpha1/reservations/r1:confirm").status, 200);
  EXPECT_EQ(Available(), "1") << "the contract holds its slot";
  r = As("a", "GET", "/federation/v1alpha1/contracts");
  EXPECT_NE(r.body.find(ContractIdFor("b", "r1")), std::string::npos) << r.body;
  const std::string contract = "/federation/v1alpha1/contracts/" + ContractIdFor("b", "r1");
  EXPECT_EQ(As("a", "POST", contract + ":renew").status, 200);
  r = As("a", "DELETE", contract);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find(R"("state":"terminated")"), std::string::npos) << r.body;
  EXPECT_EQ(Available(), "2");
  EXPECT_EQ(As("a", "GET", "/federation/v1alpha1/contracts").body, R"({"contracts":[]})");
}

TEST_F(FederationReservationsTest, ReleaseFreesTheHold) {
  ASSERT_EQ(Reserve("a", "r1").status, 201);
  auto r = As("a", "DELETE", "/federation/v1alpha1/reservations/r1");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Available(), "2");
  EXPECT_EQ(As("a", "POST", "/federation/v1alpha1/reservations/r1:confirm").status, 410);
}

TEST_F(FederationReservationsTest, AnotherEnclavesCallIsRefusedWithoutAnEvent) {
  ASSERT_EQ(Reserve("a", "r1").status, 201);
  const int before = bus_fed_->submitted;
  EXPECT_EQ(As("c", "POST", "/federation/v1alpha1/reservations/r1:confirm").status, 403);
  EXPECT_EQ(As("c", "DELETE", "/federation/v1alpha1/reservations/r1").status, 403);
  EXPECT_EQ(Reserve("c", "r1").status, 409);
  EXPECT_EQ(As("c", "GET", "/federation/v1alpha1/contracts?consumer=a").status, 403);
  EXPECT_EQ(As("a", "POST", "/federation/v1alpha1/reservations/nope:confirm").status, 404);
  EXPECT_EQ(bus_fed_->submitted, before);
}

TEST_F(FederationReservationsTest, BadCallsAre4xxWithoutAnEvent) {
  EXPECT_EQ(Call("POST", "/federation/v1alpha1/reservations",
                 R"({"reservation_id":"r1","flavor_id":")" + flavor_ + R"("})")
                .status,
            400)
      << "no Fed-Via with authentication off";
  EXPECT_EQ(As("a", "POST", "/federation/v1alpha1/reservations", R"({"flavor_id":"x"})").status,
            400);
  EXPECT_EQ(As("a", "POST", "/federation/v1alpha1/reservations",
               R"({"reservation_id":"r/1","flavor_id":")" + flavor_ + R"("})")
                .status,
            400);
  EXPECT_EQ(As("a", "POST", "/federation/v1alpha1/reservations",
               R"({"reservation_id":"r1","flavor_id":")" + flavor_ + R"(","ttl":"forever"})")
                .status,
            400);
  EXPECT_EQ(
      As("a", "POST", "/federation/v1alpha1/reservations",
         R"({"reservation_id":"r1","flavor_id":")" + flavor_ + R"(","spec":{"service_type":"vm"}})")
          .status,
      400);
  auto r = As("a", "POST", "/federation/v1alpha1/reservations",
              R"({"reservation_id":"r1","flavor_id":"unknown"})");
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body.find(R"("reason":"unknown_flavor")"), std::string::npos) << r.body;
  EXPECT_EQ(bus_fed_->submitted, 0);
}

// A forwarder that runs inline and answers from what the test set.
class FakeForwarder final : public FederationForwarder {
 public:
  bool Run(std::function<void()> work) override {
    work();
    return true;
  }
  bool FirstArrival(const std::string& request_id) override {
    return request_id.empty() || seen.insert(request_id).second;
  }
  std::vector<std::string> Discover(const std::string& query, const FedHop& in) override {
    discoveries.push_back(query);
    hops.push_back(in);
    return peer_flavors;
  }
  std::optional<ForwardRoute> RouteFor(const std::string&, const FedHop&) override {
    ++routed;
    return route;
  }
  Result<HttpResponse> Forward(const std::string& peer, const std::string& method,
                               const std::string& target, const std::string& body,
                               const FedHop& in) override {
    forwarded.push_back(peer + " " + method + " " + target);
    forwarded_bodies.push_back(body);
    hops.push_back(in);
    HttpResponse answer;
    answer.status = 201;
    answer.body = R"({"from":"next hop"})";
    return answer;
  }

  std::set<std::string> seen;
  std::vector<std::string> peer_flavors;
  std::optional<ForwardRoute> route;
  int routed = 0;
  std::vector<std::string> discoveries, forwarded, forwarded_bodies;
  std::vector<FedHop> hops;
};

class FederationForwardingTest : public FederationReservationsTest {
 protected:
  void SetUp() override {
    FederationReservationsTest::SetUp();
    federation_.forwarder = &forwarder_;
  }
  HttpResponse ReserveRemote(const std::string& enclave, const std::string& id) {
    return As(enclave, "POST", "/federation/v1alpha1/reservations",
              R"({"reservation_id":")" + id + R"(","flavor_id":"remote-f","ttl":"30s"})");
  }
  FakeForwarder forwarder_;
};

TEST_F(FederationForwardingTest, ASupernodeListsItsPeersFlavoursAfterItsOwn) {
  forwarder_.peer_flavors = {R"({"flavor_id":"remote-f","owner":"c","hops":2})"};
  auto r = Call("GET", "/federation/v1alpha1/flavors?service_type=container", "",
                {{"fed-via", "a"}, {"fed-request-id", "d1"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find(R"("hops":1,"path":["b"]},{"flavor_id":"remote-f","owner":"c","hops":2})"),
            std::string::npos)
      << r.body;
  EXPECT_EQ(forwarder_.discoveries, std::vector<std::string>{"service_type=container"});
  EXPECT_EQ(forwarder_.hops.at(0), (FedHop{"d1", kDefaultFedHopLimit, {"a"}}));
}

TEST_F(FederationForwardingTest, ARepeatedDiscoveryIsAnsweredEmptyAndNotForwarded) {
  auto headers = std::map<std::string, std::string>{{"fed-via", "a"}, {"fed-request-id", "d1"}};
  ASSERT_EQ(Call("GET", "/federation/v1alpha1/flavors", "", headers).status, 200);
  auto r = Call("GET", "/federation/v1alpha1/flavors", "", headers);
  EXPECT_EQ(r.body, R"({"owner":"b","flavors":[]})");
  EXPECT_EQ(forwarder_.discoveries.size(), 1u);
}

TEST_F(FederationForwardingTest, AtHopLimitOneOnlyItsOwnFlavoursAreListed) {
  auto r =
      Call("GET", "/federation/v1alpha1/flavors", "", {{"fed-via", "a"}, {"fed-hop-limit", "1"}});
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.body.find(flavor_), std::string::npos) << r.body;
  EXPECT_TRUE(forwarder_.discoveries.empty());
}

TEST_F(FederationForwardingTest, AReservationForAPeersFlavourIsDecidedAsRelayedThenSentOnAsItCame) {
  forwarder_.route = ForwardRoute{"c", "c", 1};
  auto r = ReserveRemote("a", "r1");
  EXPECT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(r.body, R"({"from":"next hop"})") << "the next hop's answer, as it gave it";
  EXPECT_EQ(forwarder_.forwarded, std::vector<std::string>{"c POST /reservations"});
  EXPECT_NE(forwarder_.forwarded_bodies.at(0).find(R"("reservation_id":"r1")"), std::string::npos);
  auto relayed = reservations_->Reservation("r1");
  ASSERT_TRUE(relayed && *relayed);
  EXPECT_EQ((*relayed)->state, reservation_state::kRelayed);
  EXPECT_EQ((*relayed)->next_hop, "c");
  EXPECT_EQ((*relayed)->consumer, "a");
  EXPECT_EQ(Available(), "2") << "a relay takes no local capacity";
  EXPECT_EQ(bus_fed_->submitted, 1);

  // A retry goes the same way without a new route or decision.
  forwarder_.route = ForwardRoute{"d", "d", 1};
  EXPECT_EQ(ReserveRemote("a", "r1").status, 201);
  EXPECT_EQ(forwarder_.forwarded.back(), "c POST /reservations");
  EXPECT_EQ(forwarder_.routed, 1);
  EXPECT_EQ(bus_fed_->submitted, 1);
}

TEST_F(FederationForwardingTest, TheConsumersLaterCallsGoToTheSameNextHopAndOnlyTheirs) {
  forwarder_.route = ForwardRoute{"s2", "c", 2};
  ASSERT_EQ(ReserveRemote("a", "r1").status, 201);
  const std::string contract = ContractIdFor("c", "r1");
  EXPECT_EQ(As("a", "POST", "/federation/v1alpha1/reservations/r1:confirm").status, 201);
  EXPECT_EQ(As("a", "POST", "/federation/v1alpha1/contracts/" + contract + ":renew").status, 201);
  EXPECT_EQ(As("a", "DELETE", "/federation/v1alpha1/contracts/" + contract).status, 201);
  EXPECT_EQ(forwarder_.forwarded,
            (std::vector<std::string>{"s2 POST /reservations", "s2 POST /reservations/r1:confirm",
                                      "s2 POST /contracts/" + contract + ":renew",
                                      "s2 DELETE /contracts/" + contract}));
  const size_t before = forwarder_.forwarded.size();
  EXPECT_EQ(As("x", "POST", "/federation/v1alpha1/reservations/r1:confirm").status, 403);
  EXPECT_EQ(As("x", "POST", "/federation/v1alpha1/contracts/" + contract + ":renew").status, 403);
  EXPECT_EQ(ReserveRemote("x", "r1").status, 409);
  EXPECT_EQ(forwarder_.forwarded.size(), before);
}

TEST_F(FederationForwardingTest, AFlavourNoPeerOffersIsUnknownWithoutAnEvent) {
  auto r = ReserveRemote("a", "r1");
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_NE(r.body.find(R"("reason":"unknown_flavor")"), std::string::npos) << r.body;
  EXPECT_EQ(forwarder_.routed, 1);
  EXPECT_EQ(bus_fed_->submitted, 0);
  EXPECT_TRUE(forwarder_.forwarded.empty());
}

TEST(WithServiceTypeTest, AddsTheFlavoursTypeOrChecksIt) {
  EXPECT_EQ(*WithServiceType("{}", "container"), R"({"service_type":"container"})");
  EXPECT_EQ(*WithServiceType(R"({"a":1})", "container"), R"({"service_type":"container","a":1})");
  EXPECT_EQ(*WithServiceType(R"({"service_type":"container"})", "container"),
            R"({"service_type":"container"})");
  EXPECT_FALSE(WithServiceType(R"({"service_type":"vm"})", "container"));
}

TEST(RenderFederationAnswerTest, ARelayedOutcomeAnswersItsNextHopOwnerAndContract) {
  ReservationRelayed relayed;
  relayed.reservation_id = "r1";
  relayed.flavor_id = "fl-1";
  relayed.consumer = "a";
  relayed.next_hop = "c";
  relayed.owner = "o";
  relayed.contract_id = "k1";
  HttpResponse first = RenderFederationAnswer(relayed);
  EXPECT_EQ(first.status, 201);
  EXPECT_EQ(first.body,
            R"({"reservation_id":"r1","flavor_id":"fl-1","consumer":"a","state":"relayed",)"
            R"("next_hop":"c","owner":"o","contract_id":"k1","repeat":false})");
  relayed.repeat = true;
  HttpResponse again = RenderFederationAnswer(relayed);
  EXPECT_EQ(again.status, 200);
  EXPECT_NE(again.body.find(R"("repeat":true)"), std::string::npos) << again.body;
}

}  // namespace
}  // namespace dcm::http
