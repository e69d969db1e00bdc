// HttpClient against an HttpServer on loopback (port 0); HTTPS through a TLS-terminating proxy
// in front of it (tests/common/tls_proxy.h) with a throwaway PKI; the outbound policy against a
// bare listener that counts the connections it was offered.
#include "src/http/client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "src/http/server.h"
#include "tests/common/silent_listener.h"
#include "tests/common/test_pki.h"
#include "tests/common/tls_proxy.h"

namespace dcm::http {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class ClientTest : public ::testing::Test {
 protected:
  void Start(Handler handler, ServerOptions options = {}) {
    auto server = HttpServer::Create(std::move(options));
    ASSERT_TRUE(server) << server.error().message;
    server_ = std::move(*server);
    auto port = server_->Listen("127.0.0.1:0", std::move(handler));
    ASSERT_TRUE(port) << port.error().message;
    port_ = *port;
  }
  std::string BaseUrl() const { return "http://127.0.0.1:" + std::to_string(port_); }

  std::unique_ptr<HttpServer> server_;
  uint16_t port_ = 0;
};

void Echo(HttpRequest req, Respond respond) {
  respond(HttpResponse{200,
                       "text/plain",
                       req.method + " " + req.target + " " + req.body,
                       {{"X-Seen-Type", req.Header("content-type") ? *req.Header("content-type")
                                                                   : std::string("none")}}});
}

std::string HeaderOf(const HttpResponse& res, const std::string& name) {
  for (const auto& [n, v] : res.headers) {
    if (n == name) return v;
  }
  return "";
}

TEST_F(ClientTest, RoundTripSendsBodyAndReadsResponse) {
  Start(Echo);
  HttpClient client(BaseUrl());
  auto res = client.Request("POST", "/things?x=1", "hello", "text/plain");
  ASSERT_TRUE(res) << res.error().message;
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->content_type, "text/plain");
  EXPECT_EQ(res->body, "POST /things?x=1 hello");
  EXPECT_EQ(HeaderOf(*res, "x-seen-type"), "text/plain");
  auto get = client.Request("GET", "/again");  // same client, kept-alive connection
  ASSERT_TRUE(get) << get.error().message;
  EXPECT_EQ(get->body, "GET /again ");
  EXPECT_EQ(HeaderOf(*get, "x-seen-type"), "none");
}

TEST_F(ClientTest, PrependsBaseUrlPathToTargets) {
  Start(Echo);
  HttpClient client(BaseUrl() + "/api/v1alpha1/");
  auto res = client.Request("GET", "/providers");
  ASSERT_TRUE(res) << res.error().message;
  EXPECT_EQ(res->body, "GET /api/v1alpha1/providers ");
  auto query_only = client.Request("POST", "?id=7", "b");  // the base URL itself, as {endpoint}?id=
  ASSERT_TRUE(query_only) << query_only.error().message;
  EXPECT_EQ(query_only->body, "POST /api/v1alpha1?id=7 b");
  EXPECT_EQ(HttpClient(BaseUrl()).Request("GET", "?q=1")->body, "GET /?q=1 ");
  EXPECT_FALSE(client.Request("GET", "relative"));
}

TEST_F(ClientTest, HeadReadsHeadersOnly) {
  Start(Echo);
  HttpClient client(BaseUrl());
  auto res = client.Request("HEAD", "/h");
  ASSERT_TRUE(res) << res.error().message;
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "");
  EXPECT_EQ(HeaderOf(*res, "content-length"), "8");  // "HEAD /h "
  auto next = client.Request("GET", "/n");
  ASSERT_TRUE(next) << next.error().message;
  EXPECT_EQ(next->body, "GET /n ");
}

TEST_F(ClientTest, TimesOutWhenServerNeverAnswers) {
  ServerOptions options;
  options.handler_timeout = 60s;
  Start([](HttpRequest, Respond) {}, options);  // drops respond: never answers
  HttpClient client(BaseUrl());
  const auto start = Clock::now();
  auto res = client.Request("GET", "/hang", "", "", 300ms);
  const auto elapsed = Clock::now() - start;
  ASSERT_FALSE(res);
  EXPECT_EQ(res.error().code, ErrorCode::kTimeout) << res.error().message;
  EXPECT_GE(elapsed, 290ms);
  EXPECT_LT(elapsed, 2s);
}

TEST_F(ClientTest, ConnectionRefusedIsUnavailable) {
  // A bound but not listening socket reserves a port that refuses connections.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const uint16_t port = ntohs(addr.sin_port);
  HttpClient client("http://127.0.0.1:" + std::to_string(port));
  auto res = client.Request("GET", "/", "", "", 2s);
  ::close(fd);
  ASSERT_FALSE(res);
  EXPECT_EQ(res.error().code, ErrorCode::kUnavailable) << res.error().message;
  EXPECT_NE(res.error().message.find("connect"), std::string::npos);
}

TEST_F(ClientTest, ReconnectsOnceWhenServerClosedTheKeptAliveConnection) {
  Start(Echo);
  HttpClient client(BaseUrl());
  ASSERT_TRUE(client.Request("GET", "/first"));
  // Closing the listener also closes the idle kept-alive connection on it.
  server_->CloseListener(port_);
  ASSERT_TRUE(server_->Listen("127.0.0.1:" + std::to_string(port_), Echo));
  auto res = client.Request("POST", "/second", "b");
  ASSERT_TRUE(res) << res.error().message;
  EXPECT_EQ(res->body, "POST /second b");
}

TEST_F(ClientTest, ServerClosingAfterResponseIsNotAnError) {
  Start([](HttpRequest, Respond respond) {
    respond(HttpResponse{200, "text/plain", "bye", {{"Connection", "close"}}});
  });
  HttpClient client(BaseUrl());
  for (int i = 0; i < 3; ++i) {
    auto res = client.Request("GET", "/");
    ASSERT_TRUE(res) << res.error().message;
    EXPECT_EQ(res->body, "bye");
  }
}

TEST_F(ClientTest, RejectsMalformedBaseUrls) {
  auto bad = HttpClient("not a url").Request("GET", "/");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
}

TEST_F(ClientTest, FetchRequestsAnAbsoluteUrl) {
  Start(Echo);
  auto res = Fetch("PUT", BaseUrl() + "/x/y?z=1", R"({"a":1})");
  ASSERT_TRUE(res) << res.error().message;
  EXPECT_EQ(res->body, R"(PUT /x/y?z=1 {"a":1})");
  EXPECT_EQ(HeaderOf(*res, "x-seen-type"), "application/json");
  EXPECT_FALSE(Fetch("GET", "ftp://x/"));
}

TEST_F(ClientTest, RedirectsAreReturnedNotFollowed) {
  auto target = HttpServer::Create({});
  ASSERT_TRUE(target);
  std::atomic<int> followed{0};
  auto target_port = (*target)->Listen("127.0.0.1:0", [&](HttpRequest, Respond respond) {
    ++followed;
    respond(HttpResponse{200, "text/plain", "you followed", {}});
  });
  ASSERT_TRUE(target_port);
  const std::string location = "http://127.0.0.1:" + std::to_string(*target_port) + "/elsewhere";
  Start([&](HttpRequest, Respond respond) {
    respond(HttpResponse{302, "text/plain", "", {{"Location", location}}});
  });
  for (const char* method : {"GET", "POST", "DELETE"}) {
    auto res = HttpClient(BaseUrl()).Request(method, "/x", "{}");
    ASSERT_TRUE(res) << res.error().message;
    EXPECT_EQ(res->status, 302) << method;
    EXPECT_EQ(HeaderOf(*res, "location"), location);
  }
  EXPECT_EQ(followed.load(), 0);
}

// ---- the outbound policy ----------------------------------------------------------------------

std::shared_ptr<const OutboundPolicy> DefaultPolicy(std::vector<std::string> allow = {}) {
  OutboundPolicy::Options options;
  options.allow_cidrs = std::move(allow);
  auto policy = OutboundPolicy::Create(options);
  EXPECT_TRUE(policy) << policy.error().message;
  return std::make_shared<const OutboundPolicy>(std::move(*policy));
}

TEST(ClientOutboundTest, RefusedLiteralIsBlockedWithoutAConnection) {
  testing::SilentListener listener;
  HttpClientOptions options;
  options.outbound = DefaultPolicy();
  HttpClient client("http://127.0.0.1:" + std::to_string(listener.port()), options);
  auto res = client.Request("POST", "/x", "{}", "application/json", 2s);
  ASSERT_FALSE(res);
  EXPECT_EQ(res.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(res.error().message,
            "blocked: 127.0.0.1 is in 127.0.0.0/8 (loopback), refused by the outbound policy "
            "(POST http://127.0.0.1:" +
                std::to_string(listener.port()) + "/x)");
  EXPECT_FALSE(listener.Offered());
}

TEST(ClientOutboundTest, NameResolvingOnlyToRefusedAddressesIsBlockedWithoutAConnection) {
  testing::SilentListener listener;
  HttpClientOptions options;
  options.outbound = DefaultPolicy();
  auto res =
      Fetch("GET", "http://localhost:" + std::to_string(listener.port()) + "/", "", 2s, options);
  ASSERT_FALSE(res);
  EXPECT_EQ(res.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(res.error().message.rfind("blocked: localhost resolves only to refused addresses: ", 0),
            0u)
      << res.error().message;
  EXPECT_NE(res.error().message.find("127.0.0.0/8 (loopback)"), std::string::npos);
  EXPECT_FALSE(listener.Offered());
}

TEST_F(ClientTest, AllowedCidrLetsTheRequestThrough) {
  Start(Echo);
  HttpClientOptions options;
  options.outbound = DefaultPolicy({"127.0.0.0/8"});
  // localhost may also resolve to ::1, which stays refused: it is dropped, 127.0.0.1 is used.
  for (const std::string host : {"127.0.0.1", "localhost"}) {
    auto res =
        Fetch("GET", "http://" + host + ":" + std::to_string(port_) + "/ok", "", 2s, options);
    ASSERT_TRUE(res) << host << ": " << res.error().message;
    EXPECT_EQ(res->body, "GET /ok ");
  }
}

// ---- HTTPS --------------------------------------------------------------------------------

class ClientTlsTest : public ClientTest {
 protected:
  ClientTlsTest()
      : ca_("client test CA"),
        other_ca_("some other CA"),
        client_ca_("client certificate CA"),
        server_cert_(ca_.Issue("sp.test", "DNS:sp.test,IP:127.0.0.1", testing::CertUsage::kServer)),
        client_cert_(client_ca_.Issue("dcm-control-plane", "URI:spiffe://dcm.test/control-plane",
                                      testing::CertUsage::kClient)) {}

  void SetUp() override {
    ASSERT_TRUE(ca_.ok() && other_ca_.ok() && client_ca_.ok() && server_cert_.ok() &&
                client_cert_.ok());
    Start(Echo);
  }

  std::shared_ptr<const TlsClientContext> Tls(TlsClientOptions options) {
    auto tls = TlsClientContext::Create(options);
    EXPECT_TRUE(tls) << tls.error().message;
    return tls ? *tls : nullptr;
  }
  std::shared_ptr<const TlsClientContext> Trusting() {
    return Tls({ca_.cert_file(), false, "", ""});
  }
  static std::string Https(const std::string& host, uint16_t port) {
    return "https://" + host + ":" + std::to_string(port);
  }

  testing::TestCa ca_, other_ca_, client_ca_;
  testing::TestCert server_cert_, client_cert_;
};

TEST_F(ClientTlsTest, HttpsWithTheTrustedCaWorksAndKeepsTheConnectionAlive) {
  testing::TlsProxy proxy(server_cert_, port_);
  HttpClient client(Https("127.0.0.1", proxy.port()) + "/api", {nullptr, Trusting()});
  for (int i = 0; i < 3; ++i) {
    auto res = client.Request("POST", "/things", "body " + std::to_string(i), "text/plain");
    ASSERT_TRUE(res) << res.error().message;
    EXPECT_EQ(res->status, 200);
    EXPECT_EQ(res->body, "POST /api/things body " + std::to_string(i));
  }
  EXPECT_EQ(proxy.accepted(), 1);
  EXPECT_EQ(proxy.handshakes(), 1);
}

TEST_F(ClientTlsTest, UntrustedServerIsAClearTlsError) {
  testing::TlsProxy proxy(server_cert_, port_);
  auto res = Fetch("GET", Https("127.0.0.1", proxy.port()) + "/", "", 2s,
                   {nullptr, Tls({other_ca_.cert_file(), false, "", ""})});
  ASSERT_FALSE(res);
  EXPECT_EQ(res.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(
      res.error().message.find("TLS handshake with 127.0.0.1:" + std::to_string(proxy.port()) +
                               " failed: certificate verify failed (unable to get local "
                               "issuer certificate)"),
      std::string::npos)
      << res.error().message;
}

TEST_F(ClientTlsTest, HostNameMustMatchTheCertificate) {
  testing::TlsProxy proxy(server_cert_, port_);
  // localhost reaches the proxy, but the certificate names sp.test and 127.0.0.1.
  auto res = Fetch("GET", Https("localhost", proxy.port()) + "/", "", 2s, {nullptr, Trusting()});
  ASSERT_FALSE(res);
  EXPECT_EQ(res.error().code, ErrorCode::kUnavailable);
  EXPECT_NE(res.error().message.find("certificate verify failed (hostname mismatch)"),
            std::string::npos)
      << res.error().message;
}

TEST_F(ClientTlsTest, InsecureSkipVerifyIsAnExplicitOptIn) {
  testing::TlsProxy proxy(server_cert_, port_);
  TlsClientOptions insecure;
  insecure.insecure_skip_verify = true;
  auto res = Fetch("GET", Https("localhost", proxy.port()) + "/", "", 2s, {nullptr, Tls(insecure)});
  ASSERT_TRUE(res) << res.error().message;
  EXPECT_EQ(res->status, 200);
  // The default context verifies against the system store, which does not know the test CA.
  auto verified = Fetch("GET", Https("127.0.0.1", proxy.port()) + "/", "", 2s);
  ASSERT_FALSE(verified);
  EXPECT_NE(verified.error().message.find("certificate verify failed"), std::string::npos)
      << verified.error().message;
}

TEST_F(ClientTlsTest, ClientCertificateIsPresentedToAServerThatRequiresOne) {
  testing::TlsProxy proxy(server_cert_, port_, &client_ca_);
  TlsClientOptions with_cert;
  with_cert.ca_file = ca_.cert_file();
  with_cert.client_cert_file = client_cert_.cert_file;
  with_cert.client_key_file = client_cert_.key_file;
  auto res =
      Fetch("GET", Https("127.0.0.1", proxy.port()) + "/", "", 2s, {nullptr, Tls(with_cert)});
  ASSERT_TRUE(res) << res.error().message;
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(proxy.client_subjects(), std::vector<std::string>{"dcm-control-plane"});

  auto without =
      Fetch("GET", Https("127.0.0.1", proxy.port()) + "/", "", 2s, {nullptr, Trusting()});
  ASSERT_FALSE(without);
  EXPECT_EQ(without.error().code, ErrorCode::kUnavailable) << without.error().message;
  EXPECT_EQ(proxy.client_subjects().size(), 1u);
}

TEST_F(ClientTlsTest, ATlsConnectionTheServerDroppedIsReopenedOnce) {
  testing::TlsProxy proxy(server_cert_, port_);
  HttpClient client(Https("127.0.0.1", proxy.port()), {nullptr, Trusting()});
  ASSERT_TRUE(client.Request("GET", "/1"));
  proxy.DropConnections();
  auto res = client.Request("GET", "/2");
  ASSERT_TRUE(res) << res.error().message;
  EXPECT_EQ(res->body, "GET /2 ");
  EXPECT_EQ(proxy.accepted(), 2);
}

TEST_F(ClientTlsTest, TheOutboundPolicyAppliesToHttpsToo) {
  testing::TlsProxy proxy(server_cert_, port_);
  auto res =
      Fetch("GET", Https("127.0.0.1", proxy.port()) + "/", "", 2s, {DefaultPolicy(), Trusting()});
  ASSERT_FALSE(res);
  EXPECT_EQ(res.error().message.rfind("blocked: 127.0.0.1 is in 127.0.0.0/8", 0), 0u)
      << res.error().message;
  EXPECT_EQ(proxy.accepted(), 0);
}

TEST(TlsClientContextTest, CreateRejectsBadFilesWithTheirNames) {
  testing::TestCa ca("ctx test CA");
  auto cert = ca.Issue("c", "", testing::CertUsage::kClient);
  auto other = ca.Issue("d", "", testing::CertUsage::kClient);
  ASSERT_TRUE(cert.ok() && other.ok());
  auto expect_invalid = [](const TlsClientOptions& options, const std::string& mentions) {
    auto tls = TlsClientContext::Create(options);
    ASSERT_FALSE(tls) << mentions;
    EXPECT_EQ(tls.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(tls.error().message.find(mentions), std::string::npos) << tls.error().message;
  };
  expect_invalid({"/nonexistent/ca.pem", false, "", ""}, "/nonexistent/ca.pem");
  expect_invalid({ca.cert_file(), false, cert.cert_file, ""}, "go together");
  expect_invalid({ca.cert_file(), false, "", cert.key_file}, "go together");
  expect_invalid({ca.cert_file(), false, "/nonexistent/c.pem", cert.key_file},
                 "/nonexistent/c.pem");
  expect_invalid({ca.cert_file(), false, cert.cert_file, "/nonexistent/k.pem"},
                 "/nonexistent/k.pem");
  expect_invalid({ca.cert_file(), false, cert.cert_file, other.key_file}, "does not match");
  auto ok = TlsClientContext::Create({ca.cert_file(), false, cert.cert_file, cert.key_file});
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_TRUE((*ok)->verifies());
  EXPECT_EQ((*ok)->options().client_cert_file, cert.cert_file);
}

}  // namespace
}  // namespace dcm::http
