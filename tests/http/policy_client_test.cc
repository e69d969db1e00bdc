// Contract test of HttpPolicyEngine (SPEC §3.3, DCM's Policy Manager
// POST /api/v1alpha1/policies:evaluateRequest) against a fake Policy Manager served by our own
// HttpServer on loopback: what it sends, and every kind of answer (200 with and without a
// selected provider, 406, 409, 5xx, a redirect, a malformed 200, no answer, no listener), and
// over HTTPS through a TLS-terminating proxy (tests/common/tls_proxy.h).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <simdjson.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "src/common/reply_summary.h"
#include "src/http/placement_clients.h"
#include "src/http/server.h"
#include "tests/common/test_pki.h"
#include "tests/common/tls_proxy.h"

namespace dcm::http {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr char kPath[] = "/api/v1alpha1/policies:evaluateRequest";
constexpr char kSpec[] = R"({"service_type":"vm", "cpu": 2,"metadata":{"labels":{"region":"eu"}}})";
constexpr char kSpecMinified[] =
    R"({"service_type":"vm","cpu":2,"metadata":{"labels":{"region":"eu"}}})";

// The fake Policy Manager: answers every request with `answer` (status, content type, body), or
// holds it without answering when `hold` is set. Records what it received.
class FakePolicyManager {
 public:
  FakePolicyManager() {
    ServerOptions options;
    options.handler_timeout = 60s;  // a held request stays held for the whole test
    server_ = std::move(*HttpServer::Create(options));
    port_ = *server_->Listen("127.0.0.1:0", [this](HttpRequest req, Respond respond) {
      std::lock_guard lock(mu_);
      requests_.push_back(req);
      if (hold_) {
        held_.push_back(std::move(respond));  // never answered
        return;
      }
      respond(answer_);
    });
  }
  ~FakePolicyManager() {
    server_->Stop();
    held_.clear();
  }

  void Answer(int status, std::string body, std::string content_type = "application/json",
              std::vector<std::pair<std::string, std::string>> headers = {}) {
    std::lock_guard lock(mu_);
    answer_ = HttpResponse{status, std::move(content_type), std::move(body), std::move(headers)};
  }
  void Hold() {
    std::lock_guard lock(mu_);
    hold_ = true;
  }
  std::vector<HttpRequest> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + kPath; }
  uint16_t port() const { return port_; }

 private:
  mutable std::mutex mu_;
  HttpResponse answer_{200, "application/json", "{}", {}};
  bool hold_ = false;
  std::vector<HttpRequest> requests_;
  std::vector<Respond> held_;
  std::unique_ptr<HttpServer> server_;
  uint16_t port_ = 0;
};

class PolicyClientTest : public ::testing::Test {
 protected:
  Result<PolicyDecision> Evaluate(const std::string& spec = kSpec,
                                  std::chrono::milliseconds timeout = 2s) {
    return HttpPolicyEngine(pm_.url(), timeout).Evaluate(spec);
  }
  FakePolicyManager pm_;
};

TEST_F(PolicyClientTest, SendsTheContractsRequest) {
  pm_.Answer(200, R"({"evaluated_service_instance":{"spec":{}},"status":"APPROVED"})");
  ASSERT_TRUE(Evaluate());
  const auto requests = pm_.requests();
  ASSERT_EQ(requests.size(), 1u);
  const HttpRequest& req = requests[0];
  EXPECT_EQ(req.method, "POST");
  EXPECT_EQ(req.path, kPath);
  EXPECT_EQ(req.target, kPath);
  ASSERT_NE(req.Header("content-type"), nullptr);
  EXPECT_EQ(*req.Header("content-type"), "application/json");
  simdjson::dom::parser parser;
  simdjson::dom::element body;
  ASSERT_EQ(parser.parse(req.body).get(body), simdjson::SUCCESS) << req.body;
  simdjson::dom::object top = body.get_object();
  EXPECT_EQ(top.size(), 1u);  // {service_instance:{spec}} and nothing else
  simdjson::dom::object instance = top["service_instance"].get_object();
  EXPECT_EQ(instance.size(), 1u);
  EXPECT_EQ(simdjson::minify(instance["spec"]), kSpecMinified);
}

TEST_F(PolicyClientTest, ApprovedWithSelectedProviderAndEvaluatedSpec) {
  pm_.Answer(200, R"({"evaluated_service_instance":{"spec":{"service_type":"vm","cpu":4,)"
                  R"("tier":"gold"}},"selected_provider":"sp-eu-1","status":"APPROVED"})");
  auto decision = Evaluate();
  ASSERT_TRUE(decision) << decision.error().message;
  EXPECT_EQ(decision->verdict, PolicyDecision::Verdict::kApproved);
  EXPECT_EQ(decision->spec, R"({"service_type":"vm","cpu":4,"tier":"gold"})");
  EXPECT_EQ(decision->selected_provider, "sp-eu-1");
  EXPECT_EQ(decision->status, "APPROVED");
  EXPECT_TRUE(decision->detail.empty());
}

TEST_F(PolicyClientTest, AcceptsTheSeedsCamelCaseSpelling) {
  pm_.Answer(200, R"({"evaluatedServiceInstance":{"spec":{"service_type":"vm","cpu":8}},)"
                  R"("selectedProvider":"sp-2","status":"MODIFIED"})");
  auto decision = Evaluate();
  ASSERT_TRUE(decision) << decision.error().message;
  EXPECT_EQ(decision->verdict, PolicyDecision::Verdict::kApproved);
  EXPECT_EQ(decision->spec, R"({"service_type":"vm","cpu":8})");
  EXPECT_EQ(decision->selected_provider, "sp-2");
  EXPECT_EQ(decision->status, "MODIFIED");
}

TEST_F(PolicyClientTest, ApprovedWithoutSelectedProvider) {
  pm_.Answer(200, R"({"evaluated_service_instance":{"spec":{"service_type":"vm","cpu":2}},)"
                  R"("status":"APPROVED"})");
  auto decision = Evaluate();
  ASSERT_TRUE(decision) << decision.error().message;
  EXPECT_EQ(decision->verdict, PolicyDecision::Verdict::kApproved);
  EXPECT_EQ(decision->spec, R"({"service_type":"vm","cpu":2})");
  EXPECT_EQ(decision->selected_provider, "");  // the built-in choice applies

  pm_.Answer(200, R"({"evaluated_service_instance":{"spec":{"a":1}},"selected_provider":null})");
  decision = Evaluate();
  ASSERT_TRUE(decision) << decision.error().message;
  EXPECT_EQ(decision->selected_provider, "");
  EXPECT_EQ(decision->status, "");
}

TEST_F(PolicyClientTest, NoEvaluatedSpecMeansTheOriginalSpec) {
  for (const char* body :
       {R"({"status":"APPROVED","selected_provider":"sp-1"})",
        R"({"evaluated_service_instance":{},"selected_provider":"sp-1"})",
        R"({"evaluated_service_instance":null,"selected_provider":"sp-1"})",
        R"({"evaluated_service_instance":{"spec":null},"selected_provider":"sp-1"})"}) {
    pm_.Answer(200, body);
    auto decision = Evaluate();
    ASSERT_TRUE(decision) << body << ": " << decision.error().message;
    EXPECT_EQ(decision->verdict, PolicyDecision::Verdict::kApproved) << body;
    EXPECT_EQ(decision->spec, kSpecMinified) << body;
    EXPECT_EQ(decision->selected_provider, "sp-1") << body;
  }
}

TEST_F(PolicyClientTest, Rejected406CarriesTheProblemDetail) {
  pm_.Answer(406,
             R"({"type":"about:blank","title":"Not Acceptable","status":406,)"
             R"("detail":"region eu is not allowed for tier gold"})",
             "application/problem+json");
  auto decision = Evaluate();
  ASSERT_TRUE(decision) << decision.error().message;
  EXPECT_EQ(decision->verdict, PolicyDecision::Verdict::kRejected);
  EXPECT_EQ(decision->detail, "region eu is not allowed for tier gold");

  pm_.Answer(406, "policy says no", "text/plain");  // not problem+json: the raw text
  decision = Evaluate();
  ASSERT_TRUE(decision) << decision.error().message;
  EXPECT_EQ(decision->verdict, PolicyDecision::Verdict::kRejected);
  EXPECT_EQ(decision->detail, "policy says no");

  pm_.Answer(406, R"({"title":"Rejected by policy p-7"})", "application/problem+json");
  decision = Evaluate();
  ASSERT_TRUE(decision);
  EXPECT_EQ(decision->detail, "Rejected by policy p-7");  // no detail: the title

  pm_.Answer(406, "", "text/plain");
  decision = Evaluate();
  ASSERT_TRUE(decision);
  EXPECT_EQ(decision->verdict, PolicyDecision::Verdict::kRejected);
  EXPECT_NE(decision->detail.find("406"), std::string::npos) << decision->detail;

  pm_.Answer(406, std::string(5000, 'x'), "text/plain");  // bounded
  decision = Evaluate();
  ASSERT_TRUE(decision);
  EXPECT_LE(decision->detail.size(), kMaxReplySummaryBytes);

  pm_.Answer(406, "<html>" + std::string(2000, 'x') + "</html>", "text/html");  // never echoed
  decision = Evaluate();
  ASSERT_TRUE(decision);
  EXPECT_EQ(decision->detail, "HTTP 406 (2,013 bytes of text/html)");

  pm_.Answer(406, R"({"detail":"no\u001b[2J\nway"})", "application/problem+json");  // sanitized
  decision = Evaluate();
  ASSERT_TRUE(decision);
  EXPECT_EQ(decision->detail, "no\xEF\xBF\xBD[2J way");
}

TEST_F(PolicyClientTest, Conflict409CarriesTheDetail) {
  pm_.Answer(409,
             R"({"type":"about:blank","title":"Conflict","status":409,)"
             R"("detail":"policies p-1 and p-2 disagree on the region"})",
             "application/problem+json");
  auto decision = Evaluate();
  ASSERT_TRUE(decision) << decision.error().message;
  EXPECT_EQ(decision->verdict, PolicyDecision::Verdict::kConflict);
  EXPECT_EQ(decision->detail, "policies p-1 and p-2 disagree on the region");
  EXPECT_TRUE(decision->selected_provider.empty());

  pm_.Answer(409, "conflicting policies", "text/plain");
  decision = Evaluate();
  ASSERT_TRUE(decision);
  EXPECT_EQ(decision->verdict, PolicyDecision::Verdict::kConflict);
  EXPECT_EQ(decision->detail, "conflicting policies");
}

TEST_F(PolicyClientTest, NoAnswerWithinTheTimeoutIsATimeout) {
  pm_.Hold();
  const auto start = Clock::now();
  auto decision = Evaluate(kSpec, 200ms);
  const auto elapsed = Clock::now() - start;
  ASSERT_FALSE(decision);
  EXPECT_EQ(decision.error().code, ErrorCode::kTimeout) << decision.error().message;
  EXPECT_NE(decision.error().message.find("policy manager"), std::string::npos);
  EXPECT_GE(elapsed, 190ms);
  EXPECT_LT(elapsed, 2s);
  EXPECT_EQ(pm_.requests().size(), 1u);  // it did arrive
}

TEST_F(PolicyClientTest, ARedirectIsUnavailableAndIsNotFollowed) {
  // A listener nobody accepts from: a followed redirect would reach its accept queue.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 16), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string elsewhere =
      "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + std::string(kPath);
  pm_.Answer(307, "", "text/plain", {{"Location", elsewhere}});
  auto decision = Evaluate();
  ASSERT_FALSE(decision);
  EXPECT_EQ(decision.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(decision.error().message.find("answered 307"), std::string::npos)
      << decision.error().message;
  pollfd pfd{fd, POLLIN, 0};
  EXPECT_EQ(::poll(&pfd, 1, 50), 0) << "the redirect was followed";
  ::close(fd);
}

TEST_F(PolicyClientTest, ServerErrorsAndOtherStatusesAreUnavailable) {
  for (int status : {500, 503, 400, 404, 201}) {
    pm_.Answer(status, R"({"detail":"boom"})");
    auto decision = Evaluate();
    ASSERT_FALSE(decision) << status;
    EXPECT_EQ(decision.error().code, ErrorCode::kUnavailable) << status;
    EXPECT_NE(decision.error().message.find("answered " + std::to_string(status) + ": boom"),
              std::string::npos)
        << decision.error().message;
  }
  pm_.Answer(502, "<html>" + std::string(100000, 'x') + "</html>", "text/html");
  auto decision = Evaluate();
  ASSERT_FALSE(decision);
  EXPECT_EQ(decision.error().message,
            "policy manager at " + pm_.url() + " answered 502 (100,013 bytes of text/html)");
}

TEST_F(PolicyClientTest, AMalformed200IsUnavailable) {
  for (const std::string& body : std::vector<std::string>{
           "not json", "", "[1,2]", R"("approved")", "null",
           R"({"evaluated_service_instance":"x"})",
           R"({"evaluated_service_instance":{"spec":[1]}})",
           R"({"evaluated_service_instance":{"spec":"x"}})", R"({"selected_provider":7})",
           R"({"selectedProvider":{"name":"a"}})",
           R"({"selected_provider":")" + std::string(200, 'a') + R"("})",
           R"({"selected_provider":"sp[2J"})"}) {
    pm_.Answer(200, body);
    auto decision = Evaluate();
    ASSERT_FALSE(decision) << body;
    EXPECT_EQ(decision.error().code, ErrorCode::kUnavailable) << body;
    EXPECT_NE(
        decision.error().message.find("policy manager at " + pm_.url() +
                                      " answered 200 with a body that is not the contract's shape"),
        std::string::npos)
        << decision.error().message;
  }
}

TEST_F(PolicyClientTest, ConnectionRefusedIsUnavailable) {
  // A bound but not listening socket reserves a port that refuses connections.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string url =
      "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + std::string(kPath);
  auto decision = HttpPolicyEngine(url, 2s).Evaluate(kSpec);
  ::close(fd);
  ASSERT_FALSE(decision);
  EXPECT_EQ(decision.error().code, ErrorCode::kUnavailable) << decision.error().message;
  EXPECT_NE(decision.error().message.find("connect"), std::string::npos)
      << decision.error().message;
}

TEST_F(PolicyClientTest, KeepsTheConfiguredQueryAndReusesTheEngine) {
  pm_.Answer(200, R"({"selected_provider":"sp-1"})");
  HttpPolicyEngine engine(pm_.url() + "?tenant=t1", 2s);
  for (int i = 0; i < 3; ++i) {
    auto decision = engine.Evaluate(kSpec);
    ASSERT_TRUE(decision) << decision.error().message;
    EXPECT_EQ(decision->selected_provider, "sp-1");
  }
  const auto requests = pm_.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[2].target, std::string(kPath) + "?tenant=t1");
  ASSERT_NE(requests[2].Query("tenant"), nullptr);
  EXPECT_EQ(*requests[2].Query("tenant"), "t1");
}

TEST_F(PolicyClientTest, PolicyManagerOverHttps) {
  testing::TestCa ca("policy manager CA");
  testing::TestCert cert = ca.Issue("pm.test", "IP:127.0.0.1", testing::CertUsage::kServer);
  ASSERT_TRUE(ca.ok() && cert.ok());
  testing::TlsProxy proxy(cert, pm_.port());
  const std::string url = "https://127.0.0.1:" + std::to_string(proxy.port()) + kPath;
  pm_.Answer(200, R"({"selected_provider":"sp-1","status":"APPROVED"})");
  auto tls = TlsClientContext::Create({ca.cert_file(), false, "", ""});
  ASSERT_TRUE(tls) << tls.error().message;
  HttpPolicyEngine engine(url, 2s, HttpClientOptions{nullptr, *tls});
  for (int i = 0; i < 2; ++i) {
    auto decision = engine.Evaluate(kSpec);
    ASSERT_TRUE(decision) << decision.error().message;
    EXPECT_EQ(decision->selected_provider, "sp-1");
  }
  EXPECT_EQ(proxy.accepted(), 1);  // kept alive
  // Without the CA (the system store by default) the Policy Manager is not trusted.
  auto untrusted = HttpPolicyEngine(url, 2s).Evaluate(kSpec);
  ASSERT_FALSE(untrusted);
  EXPECT_EQ(untrusted.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(untrusted.error().message.find("certificate verify failed"), std::string::npos)
      << untrusted.error().message;
  EXPECT_EQ(pm_.requests().size(), 2u);
}

TEST_F(PolicyClientTest, BadUrlsAndBadSpecsFailClearlyWithoutARequest) {
  auto bad_url = HttpPolicyEngine("not a url", 2s).Evaluate(kSpec);
  ASSERT_FALSE(bad_url);
  EXPECT_EQ(bad_url.error().code, ErrorCode::kInvalidArgument);
  auto bad_spec = Evaluate("{not json");
  ASSERT_FALSE(bad_spec);
  EXPECT_EQ(bad_spec.error().code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(pm_.requests().empty());
}

TEST(PercentEncodeTest, KeepsUnreservedAndEncodesTheRest) {
  EXPECT_EQ(PercentEncode("abc-XYZ_0.9~"), "abc-XYZ_0.9~");
  EXPECT_EQ(PercentEncode("a b/c?d&e=f+g%h"), "a%20b%2Fc%3Fd%26e%3Df%2Bg%25h");
  EXPECT_EQ(PercentEncode("\xC3\xA9"), "%C3%A9");
  EXPECT_EQ(PercentEncode(""), "");
}

}  // namespace
}  // namespace dcm::http
