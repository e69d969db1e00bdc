// HttpClient against an HttpServer on loopback (port 0).
#include "src/http/client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "src/http/server.h"

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

TEST_F(ClientTest, RejectsHttpsAndMalformedBaseUrls) {
  auto https = HttpClient("https://127.0.0.1:1").Request("GET", "/");
  ASSERT_FALSE(https);
  EXPECT_EQ(https.error().code, ErrorCode::kInvalidArgument);
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

}  // namespace
}  // namespace dcm::http
