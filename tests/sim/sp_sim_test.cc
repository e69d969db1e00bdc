// SpSim against a fake DCM (an HttpServer in the test) on loopback ports.
#include "src/sim/sp_sim.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <chrono>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "src/http/client.h"
#include "src/http/server.h"

namespace dcm::sim {
namespace {

using namespace std::chrono_literals;
using http::HttpRequest;
using http::HttpResponse;
using http::Respond;

// Polls `done` every 10 ms for up to `limit`.
bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds limit = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

// DCM's POST /api/v1alpha1/providers: answers `failures` 503s first, then `final_status` with
// id "id-<name>". Records each request body.
class FakeDcm {
 public:
  explicit FakeDcm(int failures, int final_status = 201)
      : failures_(failures), final_status_(final_status) {
    server_ = std::move(*http::HttpServer::Create({}));
    port_ = *server_->Listen("127.0.0.1:0",
                             [this](HttpRequest req, Respond respond) { respond(Handle(req)); });
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<std::string> bodies() const {
    std::lock_guard lock(mu_);
    return bodies_;
  }
  size_t requests() const { return bodies().size(); }

 private:
  HttpResponse Handle(const HttpRequest& req) {
    if (req.method != "POST" || req.path != "/api/v1alpha1/providers") {
      return HttpResponse{404, "application/json", "{}", {}};
    }
    std::lock_guard lock(mu_);
    bodies_.push_back(req.body);
    if (failures_ > 0) {
      --failures_;
      return HttpResponse{503, "application/problem+json", R"({"status":503})", {}};
    }
    simdjson::dom::parser parser;
    std::string_view name = parser.parse(req.body)["name"].get_string().value_unsafe();
    return HttpResponse{final_status_,
                        "application/json",
                        R"({"id":"id-)" + std::string(name) + R"(","status":"registered"})",
                        {}};
  }

  mutable std::mutex mu_;
  int failures_;
  int final_status_;
  std::vector<std::string> bodies_;
  std::unique_ptr<http::HttpServer> server_;
  uint16_t port_ = 0;
};

class SpSimTest : public ::testing::Test {
 protected:
  void Start(SpSimOptions options) {
    options.register_backoff_base = 5ms;
    options.register_backoff_cap = 20ms;
    options.announce = [this](const std::string& line) {
      std::lock_guard lock(mu_);
      lines_.push_back(line);
    };
    auto sim = SpSim::Start(std::move(options));
    ASSERT_TRUE(sim) << sim.error().message;
    sim_ = std::move(*sim);
  }
  SpSimOptions ServeOnly(int count = 3) {
    SpSimOptions options;
    options.count = count;
    options.register_with_dcm = false;
    return options;
  }
  std::vector<std::string> lines() {
    std::lock_guard lock(mu_);
    return lines_;
  }
  ProviderSnapshot Provider(size_t i) { return sim_->Providers().at(i); }
  Result<HttpResponse> Control(const std::string& method, const std::string& target,
                               const std::string& body = "") {
    return http::HttpClient(sim_->control_url()).Request(method, target, body);
  }
  Result<HttpResponse> Health(size_t i, std::chrono::milliseconds timeout = 5s) {
    return http::Fetch("GET", Provider(i).endpoint + "/health", "", timeout);
  }

  std::mutex mu_;
  std::vector<std::string> lines_;
  std::unique_ptr<SpSim> sim_;
};

TEST_F(SpSimTest, NamesEndpointsAndRegionsFollowTheRoundRobin) {
  SpSimOptions options = ServeOnly(4);
  options.service_types = {"vm", "container"};
  options.name_prefix = "lab";
  Start(options);
  auto providers = sim_->Providers();
  ASSERT_EQ(providers.size(), 4u);
  EXPECT_EQ(providers[0].name, "lab-vm-0");
  EXPECT_EQ(providers[1].name, "lab-container-1");
  EXPECT_EQ(providers[2].name, "lab-vm-2");
  EXPECT_EQ(providers[0].region_code, "eu-west-1");
  EXPECT_EQ(providers[1].region_code, "us-east-1");
  EXPECT_EQ(providers[0].zone, "eu-west-1a");
  EXPECT_EQ(providers[2].zone, "eu-west-1b");
  EXPECT_EQ(providers[1].endpoint,
            "http://127.0.0.1:" + std::to_string(providers[1].port) + "/api/container");
  EXPECT_NE(providers[0].port, providers[1].port);  // one listener per provider
  EXPECT_EQ(providers[0].registration, RegistrationState::kDisabled);
  ASSERT_FALSE(lines().empty());
  EXPECT_EQ(lines().front(), "sp-sim control " + sim_->control_url());
  EXPECT_EQ(sim_->control_url(), "http://127.0.0.1:" + std::to_string(sim_->control_port()));
}

TEST_F(SpSimTest, RegistersEveryProviderRetryingAfter503s) {
  FakeDcm dcm(/*failures=*/2);
  SpSimOptions options;
  options.dcm_url = dcm.url();
  Start(options);
  ASSERT_TRUE(WaitFor([&] {
    for (const auto& p : sim_->Providers()) {
      if (p.registration != RegistrationState::kRegistered) return false;
    }
    return true;
  }));
  EXPECT_EQ(dcm.requests(), 5u);  // 2 failures + 3 successes
  for (const auto& p : sim_->Providers()) {
    ASSERT_TRUE(p.id.has_value());
    EXPECT_EQ(*p.id, "id-" + p.name);
  }
  const auto announced = lines();
  ASSERT_EQ(announced.size(), 4u);
  EXPECT_EQ(announced[0].rfind("sp-sim control http://127.0.0.1:", 0), 0u);
  const auto p0 = Provider(0);
  EXPECT_NE(std::find(announced.begin(), announced.end(),
                      "registered name=sim-vm-0 id=id-sim-vm-0 endpoint=" + p0.endpoint),
            announced.end());

  simdjson::dom::parser parser;
  simdjson::dom::element body = parser.parse(dcm.bodies().back());
  EXPECT_EQ(std::string_view(body["endpoint"]).substr(0, 17), "http://127.0.0.1:");
  EXPECT_EQ(simdjson::minify(body["operations"]), R"(["create","read","delete"])");
  EXPECT_TRUE(body["metadata"]["region_code"].is_string());
  EXPECT_TRUE(body["metadata"]["zone"].is_string());
  EXPECT_TRUE(body["display_name"].is_string());
}

TEST_F(SpSimTest, DoesNotRetryARejectedRegistration) {
  FakeDcm dcm(/*failures=*/0, /*final_status=*/400);
  SpSimOptions options;
  options.dcm_url = dcm.url();
  options.count = 1;
  Start(options);
  ASSERT_TRUE(WaitFor([&] { return Provider(0).registration == RegistrationState::kRejected; }));
  EXPECT_EQ(dcm.requests(), 1u);
  EXPECT_EQ(Provider(0).registration_attempts, 1);
  EXPECT_NE(Provider(0).last_error.find("400"), std::string::npos);
  EXPECT_FALSE(Provider(0).id.has_value());
}

TEST_F(SpSimTest, RetriesWhileDcmIsUnreachable) {
  SpSimOptions options;
  options.dcm_url = "http://127.0.0.1:1";  // nothing listens on port 1
  options.count = 1;
  Start(options);
  ASSERT_TRUE(WaitFor([&] { return Provider(0).registration_attempts >= 3; }));
  EXPECT_EQ(Provider(0).registration, RegistrationState::kPending);
  EXPECT_FALSE(Provider(0).last_error.empty());
  // Serving does not wait for registration.
  auto health = Health(0);
  ASSERT_TRUE(health) << health.error().message;
  EXPECT_EQ(health->status, 200);
}

TEST_F(SpSimTest, HealthFaultsToggleThroughTheControlApi) {
  Start(ServeOnly(2));
  const std::string name = Provider(0).name;
  auto healthy = Health(0);
  ASSERT_TRUE(healthy);
  EXPECT_EQ(healthy->status, 200);
  EXPECT_EQ(healthy->body, R"({"status":"healthy"})");

  auto set = Control("PUT", "/sim/providers/" + name + "/fault", R"({"health":"unhealthy"})");
  ASSERT_TRUE(set);
  EXPECT_EQ(set->status, 200);
  EXPECT_NE(set->body.find(R"("health":"unhealthy")"), std::string::npos);
  auto unhealthy = Health(0);
  ASSERT_TRUE(unhealthy);
  EXPECT_EQ(unhealthy->status, 200);
  EXPECT_EQ(unhealthy->body, R"({"status":"unhealthy"})");
  EXPECT_EQ(Health(1)->body, R"({"status":"healthy"})");  // the other provider is untouched

  ASSERT_EQ(Control("PUT", "/sim/fault", R"({"health":"503"})")->status, 200);
  EXPECT_EQ(Health(0)->status, 503);
  EXPECT_EQ(Health(1)->status, 503);

  ASSERT_EQ(Control("PUT", "/sim/fault", R"({"health":"healthy"})")->status, 200);
  EXPECT_EQ(Health(0)->body, R"({"status":"healthy"})");
}

TEST_F(SpSimTest, HangHoldsHealthUntilTheClientGivesUpWithoutBlockingOthers) {
  Start(ServeOnly(2));
  ASSERT_TRUE(sim_->SetFault(Provider(0).name, FaultPatch{HealthFault::kHang, {}, {}}));
  auto hung = std::async(std::launch::async, [this] { return Health(0, 500ms); });
  // While provider 0 holds its request, the shared server thread still answers provider 1.
  auto other = Health(1, 2s);
  ASSERT_TRUE(other) << other.error().message;
  EXPECT_EQ(other->status, 200);
  auto res = hung.get();
  ASSERT_FALSE(res);
  EXPECT_EQ(res.error().code, ErrorCode::kTimeout);
  ASSERT_TRUE(sim_->SetFault(Provider(0).name, FaultPatch{HealthFault::kHealthy, {}, {}}));
  EXPECT_EQ(Health(0)->status, 200);
}

TEST_F(SpSimTest, RefuseClosesThePortAndHealthyReopensIt) {
  Start(ServeOnly(2));
  const auto p = Provider(1);
  auto set = Control("PUT", "/sim/providers/" + p.name + "/fault", R"({"health":"refuse"})");
  ASSERT_TRUE(set);
  ASSERT_EQ(set->status, 200);
  auto refused = Health(1, 2s);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(Provider(1).fault.health, HealthFault::kRefuse);
  EXPECT_EQ(Health(0)->status, 200);

  ASSERT_EQ(
      Control("PUT", "/sim/providers/" + p.name + "/fault", R"({"health":"healthy"})")->status,
      200);
  auto back = Health(1);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->status, 200);
  EXPECT_EQ(Provider(1).endpoint, p.endpoint);  // same port
}

TEST_F(SpSimTest, CreateGetDeleteFollowTheSpApi) {
  Start(ServeOnly(1));
  http::HttpClient sp(Provider(0).endpoint);
  auto created = sp.Request("POST", "?id=inst-1", R"({"spec":{"cpu":2}})");  // {endpoint}?id=
  ASSERT_TRUE(created) << created.error().message;
  EXPECT_EQ(created->status, 201);
  simdjson::dom::parser parser;
  simdjson::dom::element doc = parser.parse(created->body);
  EXPECT_EQ(std::string_view(doc["id"]), "inst-1");
  EXPECT_EQ(std::string_view(doc["status"]), "PROVISIONING");
  EXPECT_EQ(simdjson::minify(doc["spec"]), R"({"cpu":2})");

  EXPECT_EQ(sp.Request("POST", "?id=inst-1", R"({"spec":{}})")->status, 409);
  EXPECT_EQ(sp.Request("POST", "", R"({"spec":{}})")->status, 400);        // no id
  EXPECT_EQ(sp.Request("POST", "?id=x", R"({"nospec":1})")->status, 400);  // no spec
  EXPECT_EQ(sp.Request("POST", "?id=x", R"([1])")->status, 400);           // not an object
  EXPECT_EQ(sp.Request("POST", "?id=x", "not json")->status, 400);
  EXPECT_EQ(Provider(0).instances, 1u);

  auto got = sp.Request("GET", "/inst-1");
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, 200);
  EXPECT_NE(got->body.find(R"("id":"inst-1")"), std::string::npos);
  EXPECT_EQ(sp.Request("GET", "/nope")->status, 404);
  EXPECT_EQ(sp.Request("DELETE", "/inst-1")->status, 204);
  EXPECT_EQ(sp.Request("DELETE", "/inst-1")->status, 404);
  EXPECT_EQ(sp.Request("GET", "/inst-1")->status, 404);
  EXPECT_EQ(Provider(0).instances, 0u);
}

TEST_F(SpSimTest, FailCreatesAndFailDeletesAnswer500) {
  Start(ServeOnly(2));
  http::HttpClient sp(Provider(1).endpoint);
  ASSERT_EQ(sp.Request("POST", "?id=a", R"({"spec":{}})")->status, 201);
  auto set = Control("PUT", "/sim/fault", R"({"fail_creates":true,"fail_deletes":true})");
  ASSERT_TRUE(set);
  ASSERT_EQ(set->status, 200);
  EXPECT_EQ(sp.Request("POST", "?id=b", R"({"spec":{}})")->status, 500);
  EXPECT_EQ(sp.Request("DELETE", "/a")->status, 500);
  EXPECT_EQ(sp.Request("GET", "/a")->status, 200);  // reads still work
  EXPECT_EQ(Health(1)->status, 200);                // health is a separate knob
  ASSERT_EQ(Control("PUT", "/sim/fault", R"({"fail_deletes":false})")->status, 200);
  EXPECT_EQ(sp.Request("DELETE", "/a")->status, 204);
  EXPECT_TRUE(Provider(1).fault.fail_creates);  // untouched by the partial update
}

TEST_F(SpSimTest, ControlApiListsProvidersAndRejectsBadRequests) {
  Start(ServeOnly(2));
  auto list = Control("GET", "/sim/providers");
  ASSERT_TRUE(list);
  ASSERT_EQ(list->status, 200);
  simdjson::dom::parser parser;
  simdjson::dom::array providers = parser.parse(list->body).get_array();
  ASSERT_EQ(providers.size(), 2u);
  simdjson::dom::element first = providers.at(0);
  EXPECT_EQ(std::string_view(first["name"]), "sim-vm-0");
  EXPECT_EQ(std::string_view(first["service_type"]), "vm");
  EXPECT_TRUE(first["id"].is_null());
  EXPECT_FALSE(bool(first["registered"]));
  EXPECT_EQ(std::string_view(first["fault"]["health"]), "healthy");
  EXPECT_FALSE(bool(first["fault"]["fail_creates"]));
  EXPECT_EQ(uint64_t(first["instances"]), 0u);

  EXPECT_EQ(Control("GET", "/sim/providers/sim-vm-0")->status, 200);
  EXPECT_EQ(Control("PUT", "/sim/providers/nope/fault", R"({"health":"hang"})")->status, 404);
  auto bad = Control("PUT", "/sim/fault", R"({"health":"sometimes"})");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(bad->content_type, "application/problem+json");
  EXPECT_EQ(Control("PUT", "/sim/fault", R"({"fail_creates":"yes"})")->status, 400);
  EXPECT_EQ(Control("PUT", "/sim/fault", R"({"failCreates":true})")->status, 400);
  EXPECT_EQ(Control("DELETE", "/sim/providers")->status, 405);
}

TEST(FaultPatchTest, ParsesPartialPatches) {
  auto patch = ParseFaultPatch(R"({"health":"hang","fail_deletes":true})");
  ASSERT_TRUE(patch) << patch.error().message;
  EXPECT_EQ(patch->health, HealthFault::kHang);
  EXPECT_FALSE(patch->fail_creates.has_value());
  EXPECT_EQ(patch->fail_deletes, true);
  auto empty = ParseFaultPatch("{}");
  ASSERT_TRUE(empty);
  EXPECT_FALSE(empty->health.has_value());
  auto bad = ParseFaultPatch(R"({"health":1,"extra":2})");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().fields.size(), 2u);
  for (auto f : {HealthFault::kHealthy, HealthFault::kUnhealthy, HealthFault::kUnavailable,
                 HealthFault::kHang, HealthFault::kRefuse}) {
    EXPECT_EQ(ParseHealthFault(HealthFaultName(f)), f);
  }
}

TEST(SpSimOptionsTest, RejectsInvalidOptions) {
  SpSimOptions options;
  options.service_types.clear();
  EXPECT_EQ(SpSim::Start(options).error().code, ErrorCode::kInvalidArgument);
  options = SpSimOptions{};
  options.dcm_url = "https://dcm:8443";
  EXPECT_EQ(SpSim::Start(options).error().code, ErrorCode::kInvalidArgument);
  options = SpSimOptions{};
  options.control_listen = "127.0.0.1:notaport";
  EXPECT_FALSE(SpSim::Start(options));
}

}  // namespace
}  // namespace dcm::sim
