// SpSim against a fake DCM (an HttpServer in the test) on loopback ports.
#include "src/sim/sp_sim.h"

#include <gtest/gtest.h>
#include <simdjson.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <set>
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
// id "id-<name>". Records each request body and how often each name got a success. With
// `gate` > 0 the first `gate` requests are held until that many wait at once, which only
// concurrent registration workers can achieve.
class FakeDcm {
 public:
  explicit FakeDcm(int failures, int final_status = 201, size_t gate = 0)
      : failures_(failures), final_status_(final_status), gate_(gate) {
    server_ = std::move(*http::HttpServer::Create({}));
    port_ = *server_->Listen("127.0.0.1:0", [this](HttpRequest req, Respond respond) {
      if (gate_ > 0) return HandleGated(req, std::move(respond));
      respond(Handle(req));
    });
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<std::string> bodies() const {
    std::lock_guard lock(mu_);
    return bodies_;
  }
  size_t requests() const { return bodies().size(); }
  std::map<std::string, int> successes() const {
    std::lock_guard lock(mu_);
    return successes_;
  }
  bool gate_opened() const {
    std::lock_guard lock(mu_);
    return gate_opened_;
  }

 private:
  void HandleGated(const HttpRequest& req, Respond respond) {
    std::vector<std::pair<Respond, HttpResponse>> release;
    {
      std::lock_guard lock(mu_);
      if (gate_opened_ || gate_ == 0) {
        release.emplace_back(std::move(respond), Answer(req));
      } else {
        held_.emplace_back(std::move(respond), Answer(req));
        if (held_.size() == gate_) {
          gate_opened_ = true;
          release.swap(held_);
        }
      }
    }
    for (auto& [r, res] : release) r(std::move(res));
  }

  HttpResponse Handle(const HttpRequest& req) {
    std::lock_guard lock(mu_);
    return Answer(req);
  }

  // Caller holds mu_.
  HttpResponse Answer(const HttpRequest& req) {
    if (req.method != "POST" || req.path != "/api/v1alpha1/providers") {
      return HttpResponse{404, "application/json", "{}", {}};
    }
    bodies_.push_back(req.body);
    if (failures_ > 0) {
      --failures_;
      return HttpResponse{503, "application/problem+json", R"({"status":503})", {}};
    }
    simdjson::dom::parser parser;
    std::string_view name = parser.parse(req.body)["name"].get_string().value_unsafe();
    if (final_status_ < 300) ++successes_[std::string(name)];
    return HttpResponse{final_status_,
                        "application/json",
                        R"({"id":"id-)" + std::string(name) + R"(","status":"registered"})",
                        {}};
  }

  mutable std::mutex mu_;
  int failures_;
  int final_status_;
  size_t gate_;
  bool gate_opened_ = false;
  std::vector<std::pair<Respond, HttpResponse>> held_;
  std::vector<std::string> bodies_;
  std::map<std::string, int> successes_;
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
  // The "status" of provider i's health body, or what went wrong.
  std::string HealthStatus(size_t i) {
    auto res = Health(i);
    if (!res) return "error: " + res.error().message;
    simdjson::dom::parser parser;
    std::string_view status;
    if (parser.parse(res->body)["status"].get(status) != simdjson::SUCCESS) {
      return std::to_string(res->status) + " " + res->body;
    }
    return std::string(status);
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
  EXPECT_EQ(healthy->content_type, "application/json");
  simdjson::dom::parser parser;
  simdjson::dom::element body = parser.parse(healthy->body);  // the seed's body
  EXPECT_EQ(std::string_view(body["status"]), "healthy");
  EXPECT_EQ(std::string_view(body["version"]), "dev");
  EXPECT_TRUE(body["uptime"].is_int64());
  EXPECT_GE(int64_t(body["uptime"]), 0);

  auto set = Control("PUT", "/sim/providers/" + name + "/fault", R"({"health":"unhealthy"})");
  ASSERT_TRUE(set);
  EXPECT_EQ(set->status, 200);
  EXPECT_NE(set->body.find(R"("health":"unhealthy")"), std::string::npos);
  auto unhealthy = Health(0);
  ASSERT_TRUE(unhealthy);
  EXPECT_EQ(unhealthy->status, 200);
  EXPECT_EQ(HealthStatus(0), "unhealthy");
  EXPECT_EQ(HealthStatus(1), "healthy");  // the other provider is untouched

  ASSERT_EQ(Control("PUT", "/sim/fault", R"({"health":"503"})")->status, 200);
  EXPECT_EQ(Health(0)->status, 503);
  EXPECT_EQ(Health(1)->status, 503);

  ASSERT_EQ(Control("PUT", "/sim/fault", R"({"health":"healthy"})")->status, 200);
  EXPECT_EQ(HealthStatus(0), "healthy");
}

TEST_F(SpSimTest, BadBodyAndNotJsonAnswer200WithBodiesAProberMustReject) {
  Start(ServeOnly(2));
  ASSERT_EQ(Control("PUT", "/sim/providers/sim-vm-0/fault", R"({"health":"bad_body"})")->status,
            200);
  ASSERT_EQ(
      Control("PUT", "/sim/providers/sim-container-1/fault", R"({"health":"not_json"})")->status,
      200);
  auto bad_body = Health(0);
  ASSERT_TRUE(bad_body);
  EXPECT_EQ(bad_body->status, 200);
  EXPECT_EQ(bad_body->content_type, "application/json");
  EXPECT_EQ(bad_body->body, R"({"status":"ok"})");
  auto not_json = Health(1);
  ASSERT_TRUE(not_json);
  EXPECT_EQ(not_json->status, 200);
  EXPECT_EQ(not_json->content_type, "text/plain");
  EXPECT_EQ(not_json->body, "OK");
  EXPECT_EQ(Provider(0).fault.health, HealthFault::kBadBody);
  EXPECT_EQ(Provider(1).fault.health, HealthFault::kNotJson);
}

TEST_F(SpSimTest, CountsEveryHealthProbeIncludingHungOnes) {
  Start(ServeOnly(2));
  const auto ms_now = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  const int64_t before = ms_now();
  http::HttpClient sp(Provider(0).endpoint);
  for (int i = 0; i < 70; ++i) ASSERT_EQ(sp.Request("GET", "/health")->status, 200);
  // Neither HEAD nor the instance API is a probe.
  EXPECT_EQ(sp.Request("HEAD", "/health")->status, 200);
  EXPECT_EQ(sp.Request("GET", "/nope")->status, 404);
  ASSERT_TRUE(sim_->SetFault(Provider(0).name, FaultPatch{HealthFault::kHang, {}, {}}));
  auto hung = Health(0, 200ms);
  ASSERT_FALSE(hung);
  EXPECT_EQ(hung.error().code, ErrorCode::kTimeout);
  const int64_t after = ms_now();

  const auto p = Provider(0);
  EXPECT_EQ(p.health_probes, 71u);
  ASSERT_EQ(p.recent_probe_times_ms.size(), 64u);  // the last 64
  EXPECT_TRUE(std::is_sorted(p.recent_probe_times_ms.begin(), p.recent_probe_times_ms.end()));
  EXPECT_GE(p.recent_probe_times_ms.front(), before);
  EXPECT_LE(p.recent_probe_times_ms.back(), after);
  EXPECT_EQ(Provider(1).health_probes, 0u);
  EXPECT_TRUE(Provider(1).recent_probe_times_ms.empty());

  simdjson::dom::parser parser;
  simdjson::dom::element json = parser.parse(Control("GET", "/sim/providers/sim-vm-0")->body);
  EXPECT_EQ(uint64_t(json["health_probes"]), 71u);
  simdjson::dom::array times = json["recent_probe_times_ms"];
  ASSERT_EQ(times.size(), 64u);
  EXPECT_EQ(int64_t(times.at(63)), p.recent_probe_times_ms.back());
  auto stats = Control("GET", "/sim/stats");
  ASSERT_TRUE(stats);
  EXPECT_EQ(stats->body, R"({"providers":2,"health_probes":71,"registered":0,"creates_received":0,)"
                         R"("deletes_received":0,"instances":0})");
  EXPECT_EQ(sim_->Stats().health_probes, 71u);
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

TEST_F(SpSimTest, SharedPortsRouteByTheProviderPrefix) {
  SpSimOptions options = ServeOnly(5);
  options.ports = 2;
  options.service_types = {"vm", "container"};
  Start(options);
  auto providers = sim_->Providers();
  ASSERT_EQ(providers.size(), 5u);
  EXPECT_NE(providers[0].port, providers[1].port);
  EXPECT_EQ(providers[0].port, providers[2].port);  // provider i on listener i % 2
  EXPECT_EQ(providers[1].port, providers[3].port);
  EXPECT_EQ(providers[4].port, providers[0].port);
  EXPECT_EQ(providers[3].endpoint,
            "http://127.0.0.1:" + std::to_string(providers[3].port) + "/p/3/api/container");
  for (size_t i = 0; i < providers.size(); ++i) EXPECT_EQ(HealthStatus(i), "healthy") << i;

  // The instance API of provider 3, and its instances are its own.
  http::HttpClient sp3(providers[3].endpoint);
  auto created = sp3.Request("POST", "?id=inst-1", R"({"spec":{"cpu":2}})");
  ASSERT_TRUE(created) << created.error().message;
  EXPECT_EQ(created->status, 201);
  const std::pair<std::string, std::string> location{"location", "/p/3/api/container/inst-1"};
  EXPECT_NE(std::find(created->headers.begin(), created->headers.end(), location),
            created->headers.end());
  EXPECT_EQ(sp3.Request("GET", "/inst-1")->status, 200);
  http::HttpClient sp1(providers[1].endpoint);  // same listener, another provider
  EXPECT_EQ(sp1.Request("GET", "/inst-1")->status, 404);
  EXPECT_EQ(Provider(3).instances, 1u);
  EXPECT_EQ(sp3.Request("DELETE", "/inst-1")->status, 204);
  EXPECT_EQ(sp3.Request("GET", "/inst-1")->status, 404);

  // Prefixes that name no provider on that listener.
  const std::string origin0 = "http://127.0.0.1:" + std::to_string(providers[0].port);
  EXPECT_EQ(http::Fetch("GET", origin0 + "/p/1/api/container/health")->status, 404);
  EXPECT_EQ(http::Fetch("GET", origin0 + "/p/99/api/vm/health")->status, 404);
  EXPECT_EQ(http::Fetch("GET", origin0 + "/p/x/api/vm/health")->status, 404);
  EXPECT_EQ(http::Fetch("GET", origin0 + "/p/2/api/container/health")->status, 404);  // type
  EXPECT_EQ(http::Fetch("GET", origin0 + "/api/vm/health")->status, 404);
  EXPECT_EQ(sim_->Stats().health_probes, 5u);  // misrouted requests are nobody's probes
}

TEST_F(SpSimTest, RefuseOnASharedPortClosesThatProvidersConnectionsOnly) {
  SpSimOptions options = ServeOnly(4);
  options.ports = 2;
  Start(options);
  const auto p2 = Provider(2);
  ASSERT_EQ(p2.port, Provider(0).port);
  http::HttpClient neighbour(Provider(0).endpoint);  // kept alive across the fault
  ASSERT_EQ(neighbour.Request("GET", "/health")->status, 200);

  auto set = Control("PUT", "/sim/providers/" + p2.name + "/fault", R"({"health":"refuse"})");
  ASSERT_TRUE(set);
  ASSERT_EQ(set->status, 200);
  auto refused = Health(2, 2s);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kUnavailable);  // closed before a response
  auto create = http::Fetch("POST", p2.endpoint + "?id=a", R"({"spec":{}})", 2s);
  EXPECT_FALSE(create);                      // every request of the provider, not only /health
  EXPECT_EQ(Provider(2).health_probes, 1u);  // the request arrived: it counts
  EXPECT_EQ(Provider(2).creates_received, 1u);
  EXPECT_TRUE(Provider(2).instance_ids.empty());
  EXPECT_EQ(neighbour.Request("GET", "/health")->status, 200);
  EXPECT_EQ(HealthStatus(0), "healthy");

  ASSERT_TRUE(sim_->SetFault(p2.name, FaultPatch{HealthFault::kHealthy, {}, {}}));
  EXPECT_EQ(HealthStatus(2), "healthy");
  EXPECT_EQ(Provider(2).endpoint, p2.endpoint);
}

TEST_F(SpSimTest, ConcurrentWorkersRegisterEveryProviderExactlyOnce) {
  // The first 8 requests are held until 8 wait at once: only 8 concurrent workers get past.
  FakeDcm dcm(/*failures=*/20, /*final_status=*/201, /*gate=*/8);
  SpSimOptions options;
  options.dcm_url = dcm.url();
  options.count = 500;
  options.ports = 4;
  options.register_concurrency = 8;
  options.register_timeout = 60s;  // fewer workers cannot open the gate by timing out
  Start(options);
  ASSERT_TRUE(WaitFor([&] { return sim_->Stats().registered == 500; }, 30s))
      << sim_->Stats().registered;
  EXPECT_TRUE(dcm.gate_opened());
  const auto successes = dcm.successes();
  EXPECT_EQ(successes.size(), 500u);
  for (const auto& [name, n] : successes) EXPECT_EQ(n, 1) << name;
  EXPECT_EQ(dcm.requests(), 520u);  // 20 retried 503s
  for (const auto& p : sim_->Providers()) {
    ASSERT_EQ(p.registration, RegistrationState::kRegistered) << p.name;
    EXPECT_EQ(*p.id, "id-" + p.name);
  }
  auto stats = Control("GET", "/sim/stats");
  ASSERT_TRUE(stats);
  EXPECT_EQ(stats->body,
            R"({"providers":500,"health_probes":0,"registered":500,"creates_received":0,)"
            R"("deletes_received":0,"instances":0})");
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

TEST_F(SpSimTest, CountsEveryCreateAndDeleteWhateverItAnswers) {
  Start(ServeOnly(2));
  http::HttpClient sp(Provider(0).endpoint);
  EXPECT_EQ(sp.Request("POST", "?id=b", R"({"spec":{}})")->status, 201);
  EXPECT_EQ(sp.Request("POST", "/?id=a", R"({"spec":{}})")->status, 201);  // {endpoint}/ too
  EXPECT_EQ(sp.Request("POST", "?id=c", R"({"spec":{}})")->status, 201);
  EXPECT_EQ(sp.Request("POST", "?id=a", R"({"spec":{}})")->status, 409);
  EXPECT_EQ(sp.Request("POST", "", R"({"spec":{}})")->status, 400);
  EXPECT_EQ(sp.Request("POST", "?id=x", "not json")->status, 400);
  EXPECT_EQ(sp.Request("DELETE", "/b")->status, 204);
  EXPECT_EQ(sp.Request("DELETE", "/b")->status, 404);
  EXPECT_EQ(sp.Request("DELETE", "/never")->status, 404);
  ASSERT_TRUE(sim_->SetFault(Provider(0).name, FaultPatch{{}, true, true}));
  EXPECT_EQ(sp.Request("POST", "?id=d", R"({"spec":{}})")->status, 500);
  EXPECT_EQ(sp.Request("DELETE", "/a")->status, 500);
  ASSERT_TRUE(sim_->SetFault(Provider(0).name, FaultPatch{{}, false, false}));
  EXPECT_EQ(sp.Request("DELETE", "/c")->status, 204);
  // Not creates or deletes: reads, other methods, other routes.
  EXPECT_EQ(sp.Request("GET", "/a")->status, 200);
  EXPECT_EQ(sp.Request("PUT", "/a", "{}")->status, 405);
  EXPECT_EQ(sp.Request("DELETE", "")->status, 405);
  EXPECT_EQ(sp.Request("POST", "/a", "{}")->status, 405);
  EXPECT_EQ(sp.Request("DELETE", "/a/b")->status, 404);
  EXPECT_EQ(sp.Request("DELETE", "/health")->status, 405);
  EXPECT_EQ(sp.Request("GET", "/health")->status, 200);

  const auto p = Provider(0);
  EXPECT_EQ(p.creates_received, 7u);
  EXPECT_EQ(p.deletes_received, 5u);
  EXPECT_EQ(p.instances, 1u);
  EXPECT_EQ(p.instance_ids, std::vector<std::string>{"a"});
  EXPECT_EQ(p.deleted_ids, (std::vector<std::string>{"b", "c"}));  // 204s only, oldest first
  EXPECT_EQ(p.health_probes, 1u);
  const auto other = Provider(1);
  EXPECT_EQ(other.creates_received, 0u);
  EXPECT_EQ(other.deletes_received, 0u);
  EXPECT_TRUE(other.instance_ids.empty());
  EXPECT_TRUE(other.deleted_ids.empty());

  http::HttpClient sp1(Provider(1).endpoint);
  EXPECT_EQ(sp1.Request("POST", "?id=z", R"({"spec":{}})")->status, 201);
  const SimStats stats = sim_->Stats();
  EXPECT_EQ(stats.creates_received, 8u);
  EXPECT_EQ(stats.deletes_received, 5u);
  EXPECT_EQ(stats.instances, 2u);
  auto stats_json = Control("GET", "/sim/stats");
  ASSERT_TRUE(stats_json);
  EXPECT_EQ(stats_json->body,
            R"({"providers":2,"health_probes":1,"registered":0,"creates_received":8,)"
            R"("deletes_received":5,"instances":2})");

  simdjson::dom::parser parser;
  simdjson::dom::element json = parser.parse(Control("GET", "/sim/providers/sim-vm-0")->body);
  EXPECT_EQ(uint64_t(json["creates_received"]), 7u);
  EXPECT_EQ(uint64_t(json["deletes_received"]), 5u);
  EXPECT_EQ(uint64_t(json["instances"]), 1u);
  EXPECT_EQ(simdjson::minify(json["instance_ids"]), R"(["a"])");
  EXPECT_EQ(simdjson::minify(json["deleted_ids"]), R"(["b","c"])");
  simdjson::dom::array all = parser.parse(Control("GET", "/sim/providers")->body).get_array();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(simdjson::minify(all.at(1)["instance_ids"]), R"(["z"])");
  EXPECT_EQ(simdjson::minify(all.at(1)["deleted_ids"]), "[]");
  EXPECT_EQ(uint64_t(all.at(1)["creates_received"]), 1u);
}

TEST_F(SpSimTest, InstanceIdsAreSortedAndDeletedIdsKeepTheLast256) {
  SpSimOptions options = ServeOnly(3);
  options.ports = 2;  // shared ports count the same way
  Start(options);
  http::HttpClient sp(Provider(2).endpoint);
  for (const char* id : {"m", "z", "a"}) {
    ASSERT_EQ(sp.Request("POST", std::string("?id=") + id, R"({"spec":{}})")->status, 201);
  }
  EXPECT_EQ(Provider(2).instance_ids, (std::vector<std::string>{"a", "m", "z"}));
  auto id_of = [](int i) {
    std::string n = std::to_string(i);
    return "i-" + std::string(3 - n.size(), '0') + n;
  };
  for (int i = 299; i >= 0; --i) {  // created in reverse order: the listing is still sorted
    ASSERT_EQ(sp.Request("POST", "?id=" + id_of(i), R"({"spec":{}})")->status, 201);
  }
  auto held = Provider(2).instance_ids;
  ASSERT_EQ(held.size(), 303u);
  EXPECT_TRUE(std::is_sorted(held.begin(), held.end()));
  for (int i = 0; i < 300; ++i) ASSERT_EQ(sp.Request("DELETE", "/" + id_of(i))->status, 204);

  const auto p = Provider(2);
  EXPECT_EQ(p.creates_received, 303u);
  EXPECT_EQ(p.deletes_received, 300u);
  EXPECT_EQ(p.instance_ids, (std::vector<std::string>{"a", "m", "z"}));
  ASSERT_EQ(p.deleted_ids.size(), 256u);  // the last 256, oldest first
  for (size_t k = 0; k < 256; ++k) ASSERT_EQ(p.deleted_ids[k], id_of(44 + static_cast<int>(k)));
  ASSERT_EQ(sp.Request("DELETE", "/m")->status, 204);  // one more: the ring moves on
  const auto after = Provider(2).deleted_ids;
  ASSERT_EQ(after.size(), 256u);
  EXPECT_EQ(after.front(), id_of(45));
  EXPECT_EQ(after.back(), "m");
  EXPECT_EQ(sim_->Stats().instances, 2u);
  EXPECT_EQ(Provider(0).creates_received, 0u);  // same listener, another provider
  EXPECT_TRUE(Provider(0).deleted_ids.empty());
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
  EXPECT_EQ(uint64_t(first["health_probes"]), 0u);
  EXPECT_EQ(simdjson::minify(first["recent_probe_times_ms"]), "[]");
  EXPECT_EQ(uint64_t(first["creates_received"]), 0u);
  EXPECT_EQ(uint64_t(first["deletes_received"]), 0u);
  EXPECT_EQ(simdjson::minify(first["instance_ids"]), "[]");
  EXPECT_EQ(simdjson::minify(first["deleted_ids"]), "[]");

  EXPECT_EQ(Control("GET", "/sim/providers/sim-vm-0")->status, 200);
  EXPECT_EQ(Control("PUT", "/sim/providers/nope/fault", R"({"health":"hang"})")->status, 404);
  auto bad = Control("PUT", "/sim/fault", R"({"health":"sometimes"})");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(bad->content_type, "application/problem+json");
  EXPECT_EQ(Control("PUT", "/sim/fault", R"({"fail_creates":"yes"})")->status, 400);
  EXPECT_EQ(Control("PUT", "/sim/fault", R"({"failCreates":true})")->status, 400);
  EXPECT_EQ(Control("DELETE", "/sim/providers")->status, 405);
  EXPECT_EQ(Control("POST", "/sim/stats")->status, 405);
}

// DCM's side of liveness by heartbeat: registrations (id from ?id= or "id-<name>"), beats (200,
// or 404 for ids it has forgotten) and deletes, each recorded as "METHOD target body".
class FakeHeartbeatDcm {
 public:
  FakeHeartbeatDcm() {
    server_ = std::move(*http::HttpServer::Create({}));
    port_ = *server_->Listen("127.0.0.1:0",
                             [this](HttpRequest req, Respond respond) { respond(Handle(req)); });
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<std::string> log() const {
    std::lock_guard lock(mu_);
    return log_;
  }
  size_t Count(const std::string& prefix) const {
    const auto l = log();
    return static_cast<size_t>(std::count_if(
        l.begin(), l.end(), [&](const std::string& e) { return e.starts_with(prefix); }));
  }
  void Forget(const std::string& id) {
    std::lock_guard lock(mu_);
    known_.erase(id);
  }

 private:
  HttpResponse Handle(const HttpRequest& req) {
    static const std::string kProviders = "/api/v1alpha1/providers";
    std::lock_guard lock(mu_);
    log_.push_back(req.method + " " + req.target + " " + req.body);
    if (req.method == "POST" && req.path == kProviders) {
      simdjson::dom::parser parser;
      std::string_view name = parser.parse(req.body)["name"].get_string().value_unsafe();
      const std::string* want = req.Query("id");
      const std::string id = want ? *want : "id-" + std::string(name);
      known_.insert(id);
      return HttpResponse{201, "application/json", R"({"id":")" + id + R"("})", {}};
    }
    const std::string id = req.path.substr(
        kProviders.size() + 1, req.path.find('/', kProviders.size() + 1) - kProviders.size() - 1);
    if (!known_.contains(id)) return HttpResponse{404, "application/problem+json", "{}", {}};
    if (req.method == "PUT" && req.path.ends_with("/heartbeat")) {
      return HttpResponse{200, "application/json", R"({"status":"Ready"})", {}};
    }
    if (req.method == "DELETE") {
      known_.erase(id);
      return HttpResponse{204, "application/json", "", {}};
    }
    return HttpResponse{405, "application/json", "{}", {}};
  }

  mutable std::mutex mu_;
  std::vector<std::string> log_;
  std::set<std::string> known_;
  std::unique_ptr<http::HttpServer> server_;
  uint16_t port_ = 0;
};

TEST_F(SpSimTest, HeartbeatProvidersRegisterForHeartbeatsBeatAndRegisterAgainWhenForgotten) {
  FakeHeartbeatDcm dcm;
  SpSimOptions options;
  options.count = 1;
  options.service_types = {"vm"};
  // The first URL refuses connections: everything fails over to the second.
  options.dcm_url = "http://127.0.0.1:1," + dcm.url();
  options.liveness = "heartbeat";
  options.heartbeat_interval = 50ms;
  Start(options);
  ASSERT_TRUE(WaitFor([&] { return Provider(0).heartbeats >= 3; }));
  const auto first = dcm.log();
  ASSERT_FALSE(first.empty());
  EXPECT_TRUE(first[0].starts_with("POST /api/v1alpha1/providers {")) << first[0];
  EXPECT_NE(first[0].find(R"("liveness":"heartbeat")"), std::string::npos) << first[0];
  EXPECT_EQ(first[1], R"(PUT /api/v1alpha1/providers/id-sim-vm-0/heartbeat {"status":"healthy"})");
  EXPECT_EQ(Provider(0).health_probes, 0u);

  dcm.Forget("id-sim-vm-0");
  ASSERT_TRUE(
      WaitFor([&] { return dcm.Count("POST /api/v1alpha1/providers?id=id-sim-vm-0 ") == 1; }));
  const uint64_t beats = Provider(0).heartbeats;
  ASSERT_TRUE(WaitFor([&] { return Provider(0).heartbeats > beats; }));
  EXPECT_EQ(Provider(0).id, "id-sim-vm-0");
  EXPECT_EQ(Provider(0).registration, RegistrationState::kRegistered);

  // The unhealthy fault beats unhealthy; refuse stops the beats.
  ASSERT_TRUE(sim_->SetFault("sim-vm-0", FaultPatch{HealthFault::kUnhealthy, {}, {}}));
  ASSERT_TRUE(WaitFor([&] {
    return dcm.Count(
               R"(PUT /api/v1alpha1/providers/id-sim-vm-0/heartbeat {"status":"unhealthy"})") > 0;
  }));
  ASSERT_TRUE(sim_->SetFault("sim-vm-0", FaultPatch{HealthFault::kRefuse, {}, {}}));
  std::this_thread::sleep_for(100ms);  // a beat in flight lands
  const size_t puts = dcm.Count("PUT ");
  std::this_thread::sleep_for(200ms);  // four intervals
  EXPECT_EQ(dcm.Count("PUT "), puts);

  sim_->Stop();  // deletes the registration
  EXPECT_EQ(dcm.log().back(), "DELETE /api/v1alpha1/providers/id-sim-vm-0 ");
}

TEST_F(SpSimTest, BothProvidersRegisterWithLivenessBothBeatAndAnswerProbes) {
  FakeHeartbeatDcm dcm;
  SpSimOptions options;
  options.count = 1;
  options.service_types = {"vm"};
  options.dcm_url = dcm.url();
  options.liveness = "both";
  options.heartbeat_interval = 50ms;
  Start(options);
  ASSERT_TRUE(WaitFor([&] { return Provider(0).heartbeats >= 2; }));
  const auto log = dcm.log();
  ASSERT_FALSE(log.empty());
  EXPECT_NE(log[0].find(R"("liveness":"both")"), std::string::npos) << log[0];
  EXPECT_EQ(log[1], R"(PUT /api/v1alpha1/providers/id-sim-vm-0/heartbeat {"status":"healthy"})");
  auto probe = Health(0);
  ASSERT_TRUE(probe.has_value()) << probe.error().message;
  EXPECT_EQ(probe->status, 200);
  EXPECT_EQ(Provider(0).health_probes, 1u);
  sim_->Stop();  // deletes the registration, like a heartbeat provider
  EXPECT_EQ(dcm.log().back(), "DELETE /api/v1alpha1/providers/id-sim-vm-0 ");
}

TEST_F(SpSimTest, ProbeProvidersRegisterWithoutLivenessAndAreNotDeletedOnStop) {
  FakeHeartbeatDcm dcm;
  SpSimOptions options;
  options.count = 1;
  options.dcm_url = dcm.url();
  Start(options);
  ASSERT_TRUE(WaitFor([&] { return Provider(0).registration == RegistrationState::kRegistered; }));
  sim_->Stop();
  const auto log = dcm.log();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].find("liveness"), std::string::npos) << log[0];
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
  for (auto f : kAllHealthFaults) EXPECT_EQ(ParseHealthFault(HealthFaultName(f)), f);
  EXPECT_EQ(ParseHealthFault("bad_body"), HealthFault::kBadBody);
  EXPECT_EQ(ParseHealthFault("not_json"), HealthFault::kNotJson);
}

TEST(SpSimOptionsTest, RejectsInvalidOptions) {
  SpSimOptions options;
  options.service_types.clear();
  EXPECT_EQ(SpSim::Start(options).error().code, ErrorCode::kInvalidArgument);
  options = SpSimOptions{};
  options.dcm_url = "ftp://dcm:8443";
  EXPECT_EQ(SpSim::Start(options).error().code, ErrorCode::kInvalidArgument);
  options = SpSimOptions{};
  options.tls_cert_file = "providers.pem";  // without its key
  EXPECT_EQ(SpSim::Start(options).error().code, ErrorCode::kInvalidArgument);
  options = SpSimOptions{};
  options.control_listen = "127.0.0.1:notaport";
  EXPECT_FALSE(SpSim::Start(options));
  options = SpSimOptions{};
  options.ports = -1;
  EXPECT_EQ(SpSim::Start(options).error().code, ErrorCode::kInvalidArgument);
  options = SpSimOptions{};
  options.register_concurrency = 0;
  EXPECT_EQ(SpSim::Start(options).error().code, ErrorCode::kInvalidArgument);
  options = SpSimOptions{};
  options.liveness = "push";
  EXPECT_EQ(SpSim::Start(options).error().code, ErrorCode::kInvalidArgument);
  options = SpSimOptions{};
  options.heartbeat_interval = 0ms;
  EXPECT_EQ(SpSim::Start(options).error().code, ErrorCode::kInvalidArgument);
  options = SpSimOptions{};
  options.dcm_url = "http://127.0.0.1:8080,ftp://dcm:8443";  // each URL is checked
  EXPECT_EQ(SpSim::Start(options).error().code, ErrorCode::kInvalidArgument);
  options = SpSimOptions{};
  options.dcm_url = " , ";
  EXPECT_EQ(SpSim::Start(options).error().code, ErrorCode::kInvalidArgument);
}

TEST(SpSimOptionsTest, PerPortModeRefusesMoreProvidersThanDescriptors) {
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur > 59000) GTEST_SKIP() << "no low limit";
  SpSimOptions options;
  options.register_with_dcm = false;
  options.count = 60000;
  auto sim = SpSim::Start(options);
  ASSERT_FALSE(sim);
  EXPECT_EQ(sim.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(sim.error().message.find("--ports"), std::string::npos);
}

}  // namespace
}  // namespace dcm::sim
