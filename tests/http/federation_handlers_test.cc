// Federation handlers (SPEC §10): flavours from Ready providers' metadata.resources through the
// router (auth disabled), the selector's 400s, the peer list with its health, and the open
// federation health. The fixture's registry and health projections are real (in memory).
#include "src/http/federation_handlers.h"

#include <gtest/gtest.h>

#include "handlers_fixture.h"

namespace dcm::http {
namespace {

class FederationHandlersTest : public HandlersTest {
 protected:
  void SetUp() override {
    HandlersTest::SetUp();
    instances_ = std::make_unique<InstanceView>(store_.get());
    peer_health_ = std::make_unique<HealthView>(store_.get(), HealthProjection::kPeerPrefix);
    federation_.flavors = FlavorOptions{
        "enclave-b", {"container"}, FederationPrice{0.5, "EUR", "hour"}, std::chrono::seconds(30)};
    federation_.peers = {{"enclave-a", "http://127.0.0.1:8080"}};
    federation_.registry = view_.get();
    federation_.health = health_view_.get();
    federation_.instances = instances_.get();
    federation_.peer_health = peer_health_.get();
    federation_.clock = &clock_;
    ApiContext api = Api();
    api.federation = &federation_;
    router_ = MakeRouter(api, ops_, AccessContext{});
  }

  // Registers a container provider with metadata.resources.max_instances `max` in `region`.
  std::string RegisterContainer(const std::string& name, int max, const std::string& region) {
    const std::string body = R"({"name":")" + name + R"(","endpoint":"http://)" + name +
                             R"(.example.com/api","service_type":"container","metadata":)" +
                             R"({"region_code":")" + region + R"(","resources":{"max_instances":)" +
                             std::to_string(max) + R"(,"totalCpu":8,"totalMemory":"16Gi"}}})";
    auto r = Call("POST", "/api/v1alpha1/providers", body);
    EXPECT_EQ(r.status, 201) << r.body;
    return Parse(r).Str("id");
  }

  std::unique_ptr<InstanceView> instances_;
  std::unique_ptr<HealthView> peer_health_;
  FederationContext federation_;
};

TEST_F(FederationHandlersTest, OffersReadyProvidersOfExportedTypesPerRegion) {
  const std::string a = RegisterContainer("ctr-a", 2, "eu-west-1");
  const std::string b = RegisterContainer("ctr-b", 3, "eu-west-1");
  RegisterContainer("ctr-c", 5, "us-east-1");  // never probed: Pending, not offered
  Register("vm-a", "", "vm");                  // not exported
  Probe(a, {ProbeFailure::kNone});
  Probe(b, {ProbeFailure::kNone});
  auto r = Call("GET", "/federation/v1alpha1/flavors");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body.find("ctr-a"), std::string::npos) << "no provider detail leaves: " << r.body;
  EXPECT_EQ(r.body.find(a), std::string::npos) << r.body;
  const std::string id = FlavorId("enclave-b", "container", "eu-west-1");
  EXPECT_NE(r.body.find(R"("flavor_id":")" + id +
                        R"(","owner":"enclave-b","service_type":)"
                        R"("container","region":"eu-west-1","instances_available":5,)"
                        R"("cpu_available":16,"memory_available":34359738368,)"
                        R"("price":{"amount":0.5,"currency":"EUR","period":"hour"})"),
            std::string::npos)
      << r.body;
  Probe(a, {ProbeFailure::kConnect, ProbeFailure::kConnect, ProbeFailure::kConnect});
  r = Call("GET", "/federation/v1alpha1/flavors?instances_available_min=1");
  EXPECT_NE(r.body.find(R"("instances_available":3)"), std::string::npos) << r.body;
  Probe(b, {ProbeFailure::kConnect, ProbeFailure::kConnect, ProbeFailure::kConnect});
  r = Call("GET", "/federation/v1alpha1/flavors");
  EXPECT_EQ(r.body, R"({"owner":"enclave-b","flavors":[]})");
}

TEST_F(FederationHandlersTest, ASelectorParameterThatIsUnknownOrBadIsA400) {
  EXPECT_EQ(Call("GET", "/federation/v1alpha1/flavors?instances_avail=1").status, 400);
  EXPECT_EQ(Call("GET", "/federation/v1alpha1/flavors?instances_available_min=-1").status, 400);
  EXPECT_EQ(Call("GET", "/federation/v1alpha1/flavors?memory_available_min=lots").status, 400);
  EXPECT_EQ(Call("GET", "/federation/v1alpha1/flavors?memory_available_min=4Gi").status, 200);
}

TEST_F(FederationHandlersTest, PeersListTheirHealthAsFoldedPendingUntilProbed) {
  auto r = Call("GET", "/api/v1alpha1/peers");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find(R"({"enclave_id":"enclave-b","peers":[{"id":"enclave-a","url":)"
                        R"("http://127.0.0.1:8080","health_status":"Pending")"),
            std::string::npos)
      << r.body;
  HealthProjection peers(store_.get(), nullptr, HealthProjection::kPeers);
  HealthProbe p;
  p.probe_id = "peer-probe-1";
  p.time_ms = clock_.NowMillis();
  p.provider_id = "enclave-a";
  p.seq = 1;
  p.http_status = 200;
  StoreBatch batch;
  ASSERT_TRUE(peers.Apply(EncodeHealthProbe(p, "test", kPeerHealth), EventPosition{}, batch));
  ASSERT_TRUE(store_->Write(batch));
  r = Call("GET", "/api/v1alpha1/peers");
  EXPECT_NE(r.body.find(R"("health_status":"Ready","last_probe_time":)"), std::string::npos)
      << r.body;
}

TEST_F(FederationHandlersTest, FederationHealthIsOpenAndFollowsReadiness) {
  auto r = Call("GET", "/federation/v1alpha1/health");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, R"({"status":"healthy","enclave_id":"enclave-b"})");
  federation_.ready = [] { return false; };
  EXPECT_EQ(Call("GET", "/federation/v1alpha1/health").status, 503);
}

}  // namespace
}  // namespace dcm::http
