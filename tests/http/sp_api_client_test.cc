// HttpServiceProviderApi (SPEC §3.3's SP instance API) against an in-process sp-sim
// (register_with_dcm = false) and, for the exact request, timeouts, redirects and HTTPS (through
// a TLS-terminating proxy, tests/common/tls_proxy.h), a fake SP served by our own HttpServer.
// Clients are built without an outbound policy (the SPs live on loopback), except where the
// policy is what is tested.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <simdjson.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "src/common/outbound_policy.h"
#include "src/http/placement_clients.h"
#include "src/http/server.h"
#include "src/sim/sp_sim.h"
#include "tests/common/silent_listener.h"
#include "tests/common/test_pki.h"
#include "tests/common/tls_proxy.h"

namespace dcm::http {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class SpApiClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sim::SpSimOptions options;
    options.count = 2;
    options.register_with_dcm = false;
    options.announce = [](const std::string&) {};
    auto started = sim::SpSim::Start(options);
    ASSERT_TRUE(started) << started.error().message;
    sim_ = std::move(*started);
  }
  sim::ProviderSnapshot Provider(size_t i) const { return sim_->Providers().at(i); }
  std::string Endpoint(size_t i = 0) const { return Provider(i).endpoint; }

  HttpServiceProviderApi api_{2s, HttpClientOptions{}};
  std::unique_ptr<sim::SpSim> sim_;
};

// A port that refuses connections: bound, never listening. Closed by the destructor.
class RefusingPort {
 public:
  RefusingPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    socklen_t len = sizeof(addr);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~RefusingPort() { ::close(fd_); }
  uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

TEST_F(SpApiClientTest, CreateAnswers201AndTheSpHoldsTheSpec) {
  auto reply = api_.CreateInstance(Endpoint(), "inst-1", R"({"service_type":"vm", "cpu": 2})");
  ASSERT_TRUE(reply) << reply.error().message;
  EXPECT_EQ(reply->http_status, 201);
  simdjson::dom::parser parser;
  simdjson::dom::element body = parser.parse(reply->body);
  EXPECT_EQ(std::string_view(body["id"]), "inst-1");
  EXPECT_EQ(std::string_view(body["status"]), "PROVISIONING");
  EXPECT_EQ(simdjson::minify(body["spec"]), R"({"service_type":"vm","cpu":2})");
  const auto p = Provider(0);
  EXPECT_EQ(p.instance_ids, std::vector<std::string>{"inst-1"});
  EXPECT_EQ(p.creates_received, 1u);
  EXPECT_EQ(Provider(1).creates_received, 0u);
}

TEST_F(SpApiClientTest, DuplicateCreateAnswers409) {
  ASSERT_EQ(api_.CreateInstance(Endpoint(), "dup", "{}")->http_status, 201);
  auto again = api_.CreateInstance(Endpoint(), "dup", "{}");
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->http_status, 409);
  EXPECT_NE(again->body.find("already exists"), std::string::npos) << again->body;
  EXPECT_EQ(Provider(0).creates_received, 2u);
}

TEST_F(SpApiClientTest, DeleteAnswers204ThenUnknownAnswers404) {
  ASSERT_EQ(api_.CreateInstance(Endpoint(1), "gone-soon", "{}")->http_status, 201);
  auto deleted = api_.DeleteInstance(Endpoint(1), "gone-soon");
  ASSERT_TRUE(deleted) << deleted.error().message;
  EXPECT_EQ(deleted->http_status, 204);
  EXPECT_TRUE(deleted->body.empty());
  auto again = api_.DeleteInstance(Endpoint(1), "gone-soon");
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->http_status, 404);
  auto unknown = api_.DeleteInstance(Endpoint(1), "never-existed");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->http_status, 404);
  const auto p = Provider(1);
  EXPECT_EQ(p.deleted_ids, std::vector<std::string>{"gone-soon"});
  EXPECT_EQ(p.deletes_received, 3u);
  EXPECT_TRUE(p.instance_ids.empty());
}

TEST_F(SpApiClientTest, FailCreatesAndFailDeletesAreRepliesNotErrors) {
  ASSERT_EQ(api_.CreateInstance(Endpoint(), "a", "{}")->http_status, 201);
  ASSERT_TRUE(sim_->SetFault(Provider(0).name, sim::FaultPatch{{}, true, true}));
  auto create = api_.CreateInstance(Endpoint(), "b", "{}");
  ASSERT_TRUE(create) << create.error().message;
  EXPECT_EQ(create->http_status, 500);
  EXPECT_NE(create->body.find("simulated create failure"), std::string::npos) << create->body;
  auto del = api_.DeleteInstance(Endpoint(), "a");
  ASSERT_TRUE(del) << del.error().message;
  EXPECT_EQ(del->http_status, 500);
  EXPECT_EQ(Provider(0).instance_ids, std::vector<std::string>{"a"});
}

TEST_F(SpApiClientTest, TrailingSlashAndIdsThatNeedEncoding) {
  const std::string id = "x y+z";  // encoded as x%20y%2Bz in the query and in the path
  auto reply = api_.CreateInstance(Endpoint() + "/", id, R"({"a":1})");
  ASSERT_TRUE(reply) << reply.error().message;
  EXPECT_EQ(reply->http_status, 201) << reply->body;
  EXPECT_EQ(Provider(0).instance_ids, std::vector<std::string>{id});
  auto del = api_.DeleteInstance(Endpoint() + "/", id);
  ASSERT_TRUE(del) << del.error().message;
  EXPECT_EQ(del->http_status, 204);
  // A '/' in an id stays inside its segment: sp-sim refuses it rather than mis-routing it.
  auto slash = api_.CreateInstance(Endpoint(), "a/b", "{}");
  ASSERT_TRUE(slash);
  EXPECT_EQ(slash->http_status, 400);
}

TEST_F(SpApiClientTest, RefusedPortIsUnavailableAndTheCachedConnectionRecovers) {
  // A kept-alive connection to provider 0 is in this thread's cache.
  ASSERT_EQ(api_.CreateInstance(Endpoint(), "before", "{}")->http_status, 201);
  ASSERT_TRUE(sim_->SetFault(Provider(0).name, sim::FaultPatch{sim::HealthFault::kRefuse, {}, {}}));
  auto refused = api_.CreateInstance(Endpoint(), "during", "{}");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kUnavailable) << refused.error().message;
  auto refused_delete = api_.DeleteInstance(Endpoint(), "before");
  ASSERT_FALSE(refused_delete);
  EXPECT_EQ(refused_delete.error().code, ErrorCode::kUnavailable);
  ASSERT_TRUE(
      sim_->SetFault(Provider(0).name, sim::FaultPatch{sim::HealthFault::kHealthy, {}, {}}));
  auto after = api_.DeleteInstance(Endpoint(), "before");
  ASSERT_TRUE(after) << after.error().message;
  EXPECT_EQ(after->http_status, 204);

  RefusingPort port;
  const std::string endpoint = "http://127.0.0.1:" + std::to_string(port.port()) + "/api/vm";
  auto create = api_.CreateInstance(endpoint, "x", "{}");
  ASSERT_FALSE(create);
  EXPECT_EQ(create.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(create.error().message.find("connect"), std::string::npos) << create.error().message;
  auto del = api_.DeleteInstance(endpoint, "x");
  ASSERT_FALSE(del);
  EXPECT_EQ(del.error().code, ErrorCode::kUnavailable);
}

TEST_F(SpApiClientTest, ManyOriginsOnOneThreadStayUsable) {
  // More providers (origins) than the per-thread cache holds: evicted ones reconnect.
  sim::SpSimOptions options;
  options.count = static_cast<int>(kMaxCachedOrigins) + 4;
  options.register_with_dcm = false;
  options.announce = [](const std::string&) {};
  auto many = sim::SpSim::Start(options);
  ASSERT_TRUE(many) << many.error().message;
  const auto providers = (*many)->Providers();
  for (int round = 0; round < 2; ++round) {
    for (const auto& p : providers) {
      auto reply = api_.CreateInstance(p.endpoint, "r" + std::to_string(round), "{}");
      ASSERT_TRUE(reply) << p.name << ": " << reply.error().message;
      EXPECT_EQ(reply->http_status, 201) << p.name;
    }
  }
  for (const auto& p : (*many)->Providers()) {
    EXPECT_EQ(p.instance_ids, (std::vector<std::string>{"r0", "r1"})) << p.name;
  }
}

TEST_F(SpApiClientTest, BadEndpointsAndSpecsFailWithoutARequest) {
  auto bad = api_.CreateInstance("not a url", "x", "{}");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  auto bad_spec = api_.CreateInstance(Endpoint(), "x", "{broken");
  ASSERT_FALSE(bad_spec);
  EXPECT_EQ(bad_spec.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(Provider(0).creates_received, 0u);
}

// The exact wire requests and the timeout, against a fake SP.
class FakeSp {
 public:
  FakeSp() {
    ServerOptions options;
    options.handler_timeout = 60s;
    server_ = std::move(*HttpServer::Create(options));
    port_ = *server_->Listen("127.0.0.1:0", [this](HttpRequest req, Respond respond) {
      std::lock_guard lock(mu_);
      requests_.push_back(req);
      if (hold_) {
        held_.push_back(std::move(respond));
        return;
      }
      if (answer_) {
        respond(*answer_);
        return;
      }
      respond(HttpResponse{req.method == "POST" ? 201 : 204,
                           "application/json",
                           req.method == "POST" ? R"({"status":"PROVISIONING"})" : "",
                           {}});
    });
  }
  // Every later request gets `answer`.
  void Answer(HttpResponse answer) {
    std::lock_guard lock(mu_);
    answer_ = std::move(answer);
  }
  uint16_t port() const { return port_; }
  ~FakeSp() {
    server_->Stop();
    held_.clear();
  }
  void Hold() {
    std::lock_guard lock(mu_);
    hold_ = true;
  }
  std::vector<HttpRequest> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_) + "/api/vm"; }

 private:
  mutable std::mutex mu_;
  bool hold_ = false;
  std::optional<HttpResponse> answer_;
  std::vector<HttpRequest> requests_;
  std::vector<Respond> held_;
  std::unique_ptr<HttpServer> server_;
  uint16_t port_ = 0;
};

TEST(SpApiWireTest, SendsTheSpecsRequests) {
  FakeSp sp;
  HttpServiceProviderApi api(2s, HttpClientOptions{});
  auto created = api.CreateInstance(sp.endpoint() + "/", "inst-7", R"({ "service_type" : "vm" })");
  ASSERT_TRUE(created) << created.error().message;
  EXPECT_EQ(created->http_status, 201);
  EXPECT_EQ(created->body, R"({"status":"PROVISIONING"})");
  auto deleted = api.DeleteInstance(sp.endpoint(), "inst-7");
  ASSERT_TRUE(deleted) << deleted.error().message;
  EXPECT_EQ(deleted->http_status, 204);

  const auto requests = sp.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].method, "POST");
  EXPECT_EQ(requests[0].target, "/api/vm?id=inst-7");  // {endpoint}?id=, no trailing '/'
  ASSERT_NE(requests[0].Header("content-type"), nullptr);
  EXPECT_EQ(*requests[0].Header("content-type"), "application/json");
  EXPECT_EQ(requests[0].body, R"({"spec":{"service_type":"vm"}})");
  EXPECT_EQ(requests[1].method, "DELETE");
  EXPECT_EQ(requests[1].target, "/api/vm/inst-7");
  EXPECT_TRUE(requests[1].body.empty());
}

TEST(SpApiWireTest, NoAnswerWithinTheTimeoutIsATimeout) {
  FakeSp sp;
  sp.Hold();
  HttpServiceProviderApi api(200ms, HttpClientOptions{});
  const auto start = Clock::now();
  auto created = api.CreateInstance(sp.endpoint(), "slow", "{}");
  const auto elapsed = Clock::now() - start;
  ASSERT_FALSE(created);
  EXPECT_EQ(created.error().code, ErrorCode::kTimeout) << created.error().message;
  EXPECT_GE(elapsed, 190ms);
  EXPECT_LT(elapsed, 2s);
  auto deleted = api.DeleteInstance(sp.endpoint(), "slow");
  ASSERT_FALSE(deleted);
  EXPECT_EQ(deleted.error().code, ErrorCode::kTimeout);
}

TEST(SpApiWireTest, ACreateAnswering302IsAReplyAndTheRedirectIsNotFollowed) {
  FakeSp sp;
  testing::SilentListener elsewhere;
  sp.Answer(HttpResponse{
      302,
      "text/html",
      "<a>moved</a>",
      {{"Location", "http://127.0.0.1:" + std::to_string(elsewhere.port()) + "/api/vm"}}});
  HttpServiceProviderApi api(2s, HttpClientOptions{});
  auto created = api.CreateInstance(sp.endpoint(), "inst-1", "{}");
  ASSERT_TRUE(created) << created.error().message;
  EXPECT_EQ(created->http_status, 302);  // the instance worker treats it as a failed create
  EXPECT_EQ(created->content_type, "text/html");
  auto deleted = api.DeleteInstance(sp.endpoint(), "inst-1");
  ASSERT_TRUE(deleted) << deleted.error().message;
  EXPECT_EQ(deleted->http_status, 302);
  EXPECT_EQ(sp.requests().size(), 2u);
  EXPECT_FALSE(elsewhere.Offered());
}

std::shared_ptr<const OutboundPolicy> DefaultPolicy() {
  auto policy = OutboundPolicy::Create({});
  EXPECT_TRUE(policy) << policy.error().message;
  return std::make_shared<const OutboundPolicy>(std::move(*policy));
}

TEST(SpApiWireTest, TheOutboundPolicyBlocksALoopbackSpWithoutARequest) {
  FakeSp sp;
  HttpServiceProviderApi permissive(2s, HttpClientOptions{});
  ASSERT_EQ(permissive.CreateInstance(sp.endpoint(), "a", "{}")->http_status, 201);
  // Same thread, same origin, other options: the cached permissive connection is not reused.
  HttpServiceProviderApi api(2s, HttpClientOptions{DefaultPolicy(), nullptr});
  auto created = api.CreateInstance(sp.endpoint(), "b", "{}");
  ASSERT_FALSE(created);
  EXPECT_EQ(created.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(
      created.error().message.rfind(
          "blocked: 127.0.0.1 is in 127.0.0.0/8 (loopback), refused by the outbound policy", 0),
      0u)
      << created.error().message;
  auto deleted = api.DeleteInstance(sp.endpoint(), "a");
  ASSERT_FALSE(deleted);
  EXPECT_EQ(deleted.error().message.rfind("blocked: ", 0), 0u) << deleted.error().message;
  EXPECT_EQ(sp.requests().size(), 1u);  // only the permissive create
}

class SpApiHttpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(ca_.ok() && client_ca_.ok() && server_cert_.ok() && client_cert_.ok());
  }
  std::string Endpoint(const testing::TlsProxy& proxy) const {
    return "https://127.0.0.1:" + std::to_string(proxy.port()) + "/api/vm";
  }
  HttpClientOptions Options(bool with_client_cert) const {
    TlsClientOptions tls;
    tls.ca_file = ca_.cert_file();
    if (with_client_cert) {
      tls.client_cert_file = client_cert_.cert_file;
      tls.client_key_file = client_cert_.key_file;
    }
    auto context = TlsClientContext::Create(tls);
    EXPECT_TRUE(context) << context.error().message;
    return HttpClientOptions{nullptr, context ? *context : nullptr};
  }

  testing::TestCa ca_{"SP server CA"};
  testing::TestCa client_ca_{"SP client CA"};
  testing::TestCert server_cert_ =
      ca_.Issue("sp.test", "DNS:sp.test,IP:127.0.0.1", testing::CertUsage::kServer);
  testing::TestCert client_cert_ = client_ca_.Issue("dcm", "", testing::CertUsage::kClient);
  FakeSp sp_;
};

TEST_F(SpApiHttpsTest, CreateAndDeleteOverHttps) {
  testing::TlsProxy proxy(server_cert_, sp_.port());
  HttpServiceProviderApi api(2s, Options(false));
  auto created = api.CreateInstance(Endpoint(proxy), "inst-1", R"({"service_type":"vm"})");
  ASSERT_TRUE(created) << created.error().message;
  EXPECT_EQ(created->http_status, 201);
  EXPECT_EQ(created->body, R"({"status":"PROVISIONING"})");
  auto deleted = api.DeleteInstance(Endpoint(proxy), "inst-1");
  ASSERT_TRUE(deleted) << deleted.error().message;
  EXPECT_EQ(deleted->http_status, 204);
  const auto requests = sp_.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].target, "/api/vm?id=inst-1");
  EXPECT_EQ(requests[1].target, "/api/vm/inst-1");
  EXPECT_EQ(proxy.accepted(), 1);  // kept alive across both calls
}

TEST_F(SpApiHttpsTest, MutualTlsPresentsTheClientCertificate) {
  testing::TlsProxy proxy(server_cert_, sp_.port(), &client_ca_);
  HttpServiceProviderApi api(2s, Options(true));
  auto created = api.CreateInstance(Endpoint(proxy), "inst-1", "{}");
  ASSERT_TRUE(created) << created.error().message;
  EXPECT_EQ(created->http_status, 201);
  EXPECT_EQ(proxy.client_subjects(), std::vector<std::string>{"dcm"});
  HttpServiceProviderApi no_cert(2s, Options(false));
  auto refused = no_cert.CreateInstance(Endpoint(proxy), "inst-2", "{}");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kUnavailable) << refused.error().message;
  EXPECT_EQ(sp_.requests().size(), 1u);
}

TEST_F(SpApiHttpsTest, AnUntrustedSpIsAClearTlsError) {
  testing::TestCa stranger("stranger CA");
  testing::TestCert cert = stranger.Issue("sp.test", "IP:127.0.0.1", testing::CertUsage::kServer);
  testing::TlsProxy proxy(cert, sp_.port());
  HttpServiceProviderApi api(2s, Options(false));
  auto created = api.CreateInstance(Endpoint(proxy), "inst-1", "{}");
  ASSERT_FALSE(created);
  EXPECT_EQ(created.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(
      created.error().message.find("TLS handshake with 127.0.0.1:" + std::to_string(proxy.port()) +
                                   " failed: certificate verify failed"),
      std::string::npos)
      << created.error().message;
  EXPECT_TRUE(sp_.requests().empty());
}

}  // namespace
}  // namespace dcm::http
