// HttpServer over loopback: routing data, limits, deadlines, deferred responses, listeners, and
// TLS (policy, mTLS peer subject, reload, handshake failures). Malformed and slow traffic goes
// through a raw POSIX socket (RawConn), TLS through a blocking OpenSSL client (TlsConn) with
// certificates from tests/common/test_pki.h; well-formed plain traffic through HttpClient.
#include "src/http/server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <future>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "src/common/metrics.h"
#include "src/http/client.h"
#include "tests/common/test_pki.h"

namespace dcm::http {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A blocking test connection reading HTTP/1.1 responses; RawConn and TlsConn provide the
// transport.
class TestConn {
 public:
  virtual ~TestConn() = default;
  virtual bool Send(std::string_view data) = 0;

  // Waits up to `timeout` for data; appends it to buffer_. Returns false on EOF/error/timeout.
  bool ReadSome(std::chrono::milliseconds timeout) {
    char buf[8192];
    const ssize_t n = Receive(buf, sizeof(buf), timeout);
    if (n < 0) eof_ = true;
    if (n <= 0) return false;
    buffer_.append(buf, static_cast<size_t>(n));
    return true;
  }

  // Reads one response: headers, then Content-Length bytes of body unless `expect_body` is
  // false. Returns "" on failure. Leaves any extra bytes buffered.
  std::string ReadResponse(bool expect_body = true, std::chrono::milliseconds timeout = 5s) {
    const auto deadline = Clock::now() + timeout;
    size_t end = std::string::npos;
    while ((end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (Clock::now() >= deadline || !ReadSome(100ms)) {
        if (eof_ || Clock::now() >= deadline) return "";
      }
    }
    size_t length = 0;
    std::string lower = buffer_.substr(0, end);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (auto cl = lower.find("content-length:"); cl != std::string::npos && expect_body) {
      length = std::stoul(lower.substr(cl + 15));
    }
    while (buffer_.size() < end + 4 + length) {
      if (Clock::now() >= deadline) return "";
      if (!ReadSome(100ms) && eof_) return "";
    }
    std::string response = buffer_.substr(0, end + 4 + length);
    buffer_.erase(0, end + 4 + length);
    return response;
  }

  // True if the peer closed the connection within `timeout` (data read meanwhile is kept).
  bool WaitClosed(std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      ReadSome(50ms);
      if (eof_) return true;
    }
    return false;
  }

  const std::string& buffered() const { return buffer_; }

 protected:
  // > 0: bytes read; 0: nothing within `timeout`; < 0: EOF or error.
  virtual ssize_t Receive(char* buf, size_t size, std::chrono::milliseconds timeout) = 0;

 private:
  bool eof_ = false;
  std::string buffer_;
};

int ConnectLoopback(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// A blocking loopback TCP connection for sending hand-written (possibly broken) HTTP.
class RawConn : public TestConn {
 public:
  explicit RawConn(uint16_t port) : fd_(ConnectLoopback(port)) {}
  struct Fd {
    int fd;
  };
  explicit RawConn(Fd connected) : fd_(connected.fd) {}
  ~RawConn() override {
    if (fd_ >= 0) ::close(fd_);
  }
  bool connected() const { return fd_ >= 0; }

  bool Send(std::string_view data) override {
    while (!data.empty()) {
      const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

 protected:
  ssize_t Receive(char* buf, size_t size, std::chrono::milliseconds timeout) override {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return 0;
    const ssize_t n = ::recv(fd_, buf, size, 0);
    return n > 0 ? n : -1;
  }

 private:
  int fd_ = -1;
};

std::string StatusLine(const std::string& response) {
  return response.substr(0, response.find("\r\n"));
}

std::string Body(const std::string& response) {
  const size_t end = response.find("\r\n\r\n");
  return end == std::string::npos ? "" : response.substr(end + 4);
}

// Answers "<METHOD> <path>" plus the query as "k=v;" pairs.
void EchoHandler(HttpRequest req, Respond respond) {
  std::string body = req.method + " " + req.path;
  for (const auto& [k, v] : req.query) body += "\n" + k + "=" + v;
  respond(HttpResponse{200, "text/plain", body, {{"X-Echo", "1"}}});
}

class ServerTest : public ::testing::Test {
 protected:
  void Start(ServerOptions options, Handler handler = EchoHandler) {
    auto server = HttpServer::Create(std::move(options));
    ASSERT_TRUE(server) << server.error().message;
    server_ = std::move(*server);
    auto port = server_->Listen("127.0.0.1:0", std::move(handler));
    ASSERT_TRUE(port) << port.error().message;
    port_ = *port;
  }
  std::string BaseUrl() const { return "http://127.0.0.1:" + std::to_string(port_); }

  Metrics metrics_;  // outlives server_ (connections closed at Stop still count)
  std::unique_ptr<HttpServer> server_;
  uint16_t port_ = 0;
};

TEST_F(ServerTest, ServesGetWithHandlerContentTypeAndHeaders) {
  Start({});
  HttpClient client(BaseUrl());
  auto res = client.Request("GET", "/hello");
  ASSERT_TRUE(res) << res.error().message;
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->content_type, "text/plain");
  EXPECT_EQ(res->body, "GET /hello");
  bool has_echo = false, has_server = false;
  for (const auto& [name, value] : res->headers) {
    has_echo |= name == "x-echo" && value == "1";
    has_server |= name == "server" && value == "dcm";
  }
  EXPECT_TRUE(has_echo);
  EXPECT_TRUE(has_server);
}

TEST_F(ServerTest, DecodesPercentEncodedPathAndQuery) {
  HttpRequest seen;
  Start({}, [&seen](HttpRequest req, Respond respond) {
    seen = req;
    respond(HttpResponse{204, "", "", {}});
  });
  HttpClient client(BaseUrl());
  auto res = client.Request("GET", "/a%20b/c%2Fd?x=1%2B2&y=hello+world&x=3&flag&e=%zz");
  ASSERT_TRUE(res) << res.error().message;
  EXPECT_EQ(res->status, 204);
  EXPECT_EQ(seen.target, "/a%20b/c%2Fd?x=1%2B2&y=hello+world&x=3&flag&e=%zz");
  EXPECT_EQ(seen.path, "/a b/c/d");
  EXPECT_EQ(seen.query.count("x"), 2u);
  EXPECT_EQ(*seen.Query("x"), "1+2");
  EXPECT_EQ(*seen.Query("y"), "hello world");
  ASSERT_NE(seen.Query("flag"), nullptr);
  EXPECT_EQ(*seen.Query("flag"), "");
  EXPECT_EQ(*seen.Query("e"), "%zz");             // invalid escapes are kept as sent
  ASSERT_NE(seen.Header("user-agent"), nullptr);  // names are lower-cased
  EXPECT_EQ(*seen.Header("host"), "127.0.0.1:" + std::to_string(port_));
}

TEST_F(ServerTest, PassesRequestBodyAndMethodToHandler) {
  HttpRequest seen;
  Start({}, [&seen](HttpRequest req, Respond respond) {
    seen = req;
    respond(HttpResponse{201, "application/json", R"({"ok":true})", {{"Location", "/x/1"}}});
  });
  HttpClient client(BaseUrl());
  auto res = client.Request("POST", "/x", R"({"a":1})");
  ASSERT_TRUE(res) << res.error().message;
  EXPECT_EQ(res->status, 201);
  EXPECT_EQ(res->body, R"({"ok":true})");
  EXPECT_EQ(seen.method, "POST");
  EXPECT_EQ(seen.body, R"({"a":1})");
  EXPECT_EQ(*seen.Header("content-type"), "application/json");
}

TEST_F(ServerTest, Returns413ForContentLengthOverLimit) {
  ServerOptions options;
  options.max_body_bytes = 1000;
  Start(options);
  RawConn conn(port_);
  ASSERT_TRUE(conn.connected());
  ASSERT_TRUE(conn.Send("POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 2000\r\n\r\n" +
                        std::string(2000, 'a')));
  const std::string res = conn.ReadResponse();
  EXPECT_EQ(StatusLine(res), "HTTP/1.1 413 Payload Too Large");
  EXPECT_NE(res.find("Content-Type: application/problem+json"), std::string::npos);
  EXPECT_NE(res.find("Connection: close"), std::string::npos);
  EXPECT_EQ(Body(res), R"({"type":"about:blank","title":"Payload Too Large","status":413,)"
                       R"("detail":"request body exceeds 1000 bytes"})");
  EXPECT_TRUE(conn.WaitClosed(3s));
}

TEST_F(ServerTest, ClientSendingLargeBodySees413ThanksToDrain) {
  ServerOptions options;
  options.max_body_bytes = 64 * 1024;
  Start(options);
  HttpClient client(BaseUrl());
  auto res = client.Request("POST", "/x", std::string(4 << 20, 'a'));
  ASSERT_TRUE(res) << res.error().message;
  EXPECT_EQ(res->status, 413);
  EXPECT_EQ(res->content_type, "application/problem+json");
}

TEST_F(ServerTest, Returns413ForChunkedBodyOverLimit) {
  ServerOptions options;
  options.max_body_bytes = 1000;
  Start(options);
  RawConn conn(port_);
  std::string request = "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 4; ++i) request += "1f4\r\n" + std::string(500, 'b') + "\r\n";
  request += "0\r\n\r\n";
  ASSERT_TRUE(conn.Send(request));
  const std::string res = conn.ReadResponse();
  EXPECT_EQ(StatusLine(res), "HTTP/1.1 413 Payload Too Large");
  EXPECT_TRUE(conn.WaitClosed(3s));
}

TEST_F(ServerTest, AcceptsChunkedBodyWithinLimit) {
  HttpRequest seen;
  Start({}, [&seen](HttpRequest req, Respond respond) {
    seen = req;
    respond(HttpResponse{});
  });
  RawConn conn(port_);
  ASSERT_TRUE(
      conn.Send("POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: "
                "chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"));
  EXPECT_EQ(StatusLine(conn.ReadResponse()), "HTTP/1.1 200 OK");
  EXPECT_EQ(seen.body, "abcde");
}

TEST_F(ServerTest, Returns431ForHugeHeaders) {
  ServerOptions options;
  options.max_header_bytes = 4096;
  Start(options);
  RawConn conn(port_);
  ASSERT_TRUE(
      conn.Send("GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + std::string(8000, 'x') + "\r\n\r\n"));
  const std::string res = conn.ReadResponse();
  EXPECT_EQ(StatusLine(res), "HTTP/1.1 431 Request Header Fields Too Large");
  EXPECT_NE(Body(res).find("\"status\":431"), std::string::npos);
}

TEST_F(ServerTest, Returns400ForMalformedRequestLine) {
  Start({});
  for (const char* bad : {"GARBAGE\r\n\r\n", "GET / HTTP/1.1 extra\r\nHost: a\r\n\r\n",
                          "GET /\x01 HTTP/1.1\r\n\r\n"}) {
    RawConn conn(port_);
    ASSERT_TRUE(conn.Send(bad));
    const std::string res = conn.ReadResponse();
    EXPECT_EQ(StatusLine(res), "HTTP/1.1 400 Bad Request") << bad;
    EXPECT_NE(res.find("application/problem+json"), std::string::npos);
    EXPECT_TRUE(conn.WaitClosed(3s));
  }
}

TEST_F(ServerTest, Returns400ForContentLengthWithChunkedSmuggling) {
  Start({});
  RawConn conn(port_);
  ASSERT_TRUE(conn.Send(
      "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
      "0\r\n\r\n"));
  EXPECT_EQ(StatusLine(conn.ReadResponse()), "HTTP/1.1 400 Bad Request");
}

TEST_F(ServerTest, Returns400ForTargetThatIsNotAPath) {
  Start({});
  RawConn conn(port_);
  ASSERT_TRUE(conn.Send("GET http://example.com/ HTTP/1.1\r\nHost: a\r\n\r\n"));
  EXPECT_EQ(StatusLine(conn.ReadResponse()), "HTTP/1.1 400 Bad Request");
}

TEST_F(ServerTest, ClosesSlowlorisConnectionAfterReadTimeout) {
  ServerOptions options;
  options.read_timeout = 300ms;
  options.idle_timeout = 10s;
  Start(options);
  RawConn conn(port_);
  const auto start = Clock::now();
  ASSERT_TRUE(conn.Send("GET / HTTP/1.1\r\n"));
  bool closed = false;
  // Trickle a header line every 50 ms, as a slowloris client does, for at most 3 s.
  while (!closed && Clock::now() - start < 3s) {
    conn.Send("X-Slow: 1\r\n");
    closed = conn.WaitClosed(50ms);
  }
  const auto elapsed = Clock::now() - start;
  EXPECT_TRUE(closed);
  EXPECT_GE(elapsed, 250ms);
  EXPECT_LT(elapsed, 2s);
  EXPECT_EQ(conn.buffered(), "");  // closed without an answer
}

TEST_F(ServerTest, ClosesIdleKeepAliveConnectionAfterIdleTimeout) {
  ServerOptions options;
  options.idle_timeout = 300ms;
  Start(options);
  RawConn conn(port_);
  ASSERT_TRUE(conn.Send("GET /a HTTP/1.1\r\nHost: a\r\n\r\n"));
  EXPECT_EQ(StatusLine(conn.ReadResponse()), "HTTP/1.1 200 OK");
  const auto start = Clock::now();
  EXPECT_TRUE(conn.WaitClosed(3s));
  EXPECT_GE(Clock::now() - start, 250ms);
}

TEST_F(ServerTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  Start({});
  RawConn conn(port_);
  for (const char* path : {"/one", "/two", "/three"}) {
    ASSERT_TRUE(conn.Send(std::string("GET ") + path + " HTTP/1.1\r\nHost: a\r\n\r\n"));
    const std::string res = conn.ReadResponse();
    EXPECT_EQ(StatusLine(res), "HTTP/1.1 200 OK");
    EXPECT_EQ(Body(res), std::string("GET ") + path);
  }
}

TEST_F(ServerTest, AnswersPipelinedRequestsInOrder) {
  Start({});
  RawConn conn(port_);
  ASSERT_TRUE(conn.Send("GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\n"));
  EXPECT_EQ(Body(conn.ReadResponse()), "GET /1");
  EXPECT_EQ(Body(conn.ReadResponse()), "GET /2");
}

TEST_F(ServerTest, ConnectionCloseClosesAfterTheResponse) {
  Start({});
  RawConn conn(port_);
  ASSERT_TRUE(conn.Send("GET /a HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"));
  const std::string res = conn.ReadResponse();
  EXPECT_EQ(StatusLine(res), "HTTP/1.1 200 OK");
  EXPECT_NE(res.find("Connection: close"), std::string::npos);
  EXPECT_TRUE(conn.WaitClosed(3s));
}

TEST_F(ServerTest, Http10WithoutKeepAliveIsClosedAfterTheResponse) {
  Start({});
  RawConn conn(port_);
  ASSERT_TRUE(conn.Send("GET /a HTTP/1.0\r\n\r\n"));
  EXPECT_EQ(StatusLine(conn.ReadResponse()), "HTTP/1.0 200 OK");
  EXPECT_TRUE(conn.WaitClosed(3s));
}

TEST_F(ServerTest, HeadSendsContentLengthWithoutBody) {
  Start({});
  RawConn conn(port_);
  ASSERT_TRUE(conn.Send("HEAD /abc HTTP/1.1\r\nHost: a\r\n\r\n"));
  const std::string res = conn.ReadResponse(/*expect_body=*/false);
  EXPECT_EQ(StatusLine(res), "HTTP/1.1 200 OK");
  EXPECT_NE(res.find("Content-Length: 9\r\n"), std::string::npos);  // "HEAD /abc"
  // The connection stays usable and no body bytes precede the next response.
  ASSERT_TRUE(conn.Send("GET /x HTTP/1.1\r\nHost: a\r\n\r\n"));
  EXPECT_EQ(Body(conn.ReadResponse()), "GET /x");
}

TEST_F(ServerTest, NoContentResponseHasNoBodyOrLength) {
  Start({}, [](HttpRequest, Respond respond) {
    respond(HttpResponse{204, "application/json", "ignored", {}});
  });
  RawConn conn(port_);
  ASSERT_TRUE(conn.Send("DELETE /x HTTP/1.1\r\nHost: a\r\n\r\nGET /y HTTP/1.1\r\nHost: a\r\n\r\n"));
  const std::string first = conn.ReadResponse(false);
  EXPECT_EQ(StatusLine(first), "HTTP/1.1 204 No Content");
  EXPECT_EQ(first.find("Content-Length"), std::string::npos);
  EXPECT_EQ(StatusLine(conn.ReadResponse(false)), "HTTP/1.1 204 No Content");
}

TEST_F(ServerTest, DeferredRespondFromAnotherThreadIsDelivered) {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Respond> pending;
  Start({}, [&](HttpRequest, Respond respond) {
    std::lock_guard lock(mu);
    pending.push_back(std::move(respond));
    cv.notify_all();
  });
  auto result = std::async(std::launch::async, [&] {
    HttpClient client(BaseUrl());
    return client.Request("GET", "/later");
  });
  Respond respond;
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 5s, [&] { return !pending.empty(); }));
    respond = pending.front();
  }
  std::thread([respond] { respond(HttpResponse{202, "text/plain", "done", {}}); }).join();
  auto res = result.get();
  ASSERT_TRUE(res) << res.error().message;
  EXPECT_EQ(res->status, 202);
  EXPECT_EQ(res->body, "done");
  respond(HttpResponse{500, "text/plain", "second call", {}});  // ignored: exactly once
}

TEST_F(ServerTest, HandlerTimeoutReturns503AndLateRespondIsIgnored) {
  ServerOptions options;
  options.handler_timeout = 200ms;
  Respond kept;
  std::mutex mu;
  Start(options, [&](HttpRequest, Respond respond) {
    std::lock_guard lock(mu);
    kept = std::move(respond);
  });
  HttpClient client(BaseUrl());
  const auto start = Clock::now();
  auto res = client.Request("GET", "/slow");
  ASSERT_TRUE(res) << res.error().message;
  EXPECT_EQ(res->status, 503);
  EXPECT_EQ(res->content_type, "application/problem+json");
  EXPECT_GE(Clock::now() - start, 190ms);
  std::lock_guard lock(mu);
  kept(HttpResponse{200, "text/plain", "too late", {}});  // dropped, no crash
  kept = nullptr;
}

TEST_F(ServerTest, HandlerThatThrowsGets500) {
  Start({}, [](HttpRequest, Respond) { throw std::runtime_error("boom"); });
  HttpClient client(BaseUrl());
  auto res = client.Request("GET", "/x");
  ASSERT_TRUE(res) << res.error().message;
  EXPECT_EQ(res->status, 500);
  EXPECT_EQ(res->content_type, "application/problem+json");
}

TEST_F(ServerTest, RespondAfterStopIsSafe) {
  std::promise<Respond> got;
  Start({}, [&got](HttpRequest, Respond respond) { got.set_value(std::move(respond)); });
  RawConn conn(port_);
  ASSERT_TRUE(conn.Send("GET /x HTTP/1.1\r\nHost: a\r\n\r\n"));
  auto future = got.get_future();
  ASSERT_EQ(future.wait_for(5s), std::future_status::ready);
  Respond respond = future.get();
  server_->Stop();
  server_->Stop();          // idempotent
  respond(HttpResponse{});  // must not touch the destroyed io_context
  EXPECT_TRUE(conn.WaitClosed(3s));
}

TEST_F(ServerTest, CloseListenerRefusesNewConnectionsAndPortCanBeListenedAgain) {
  Start({});
  RawConn existing(port_);
  ASSERT_TRUE(existing.Send("GET /a HTTP/1.1\r\nHost: a\r\n\r\n"));
  EXPECT_EQ(StatusLine(existing.ReadResponse()), "HTTP/1.1 200 OK");

  server_->CloseListener(port_);
  EXPECT_FALSE(RawConn(port_).connected());
  EXPECT_TRUE(existing.WaitClosed(3s));
  HttpClient client(BaseUrl());
  auto refused = client.Request("GET", "/a", "", "", 2s);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kUnavailable);

  auto again = server_->Listen("127.0.0.1:" + std::to_string(port_), EchoHandler);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(*again, port_);
  auto res = client.Request("GET", "/back");
  ASSERT_TRUE(res) << res.error().message;
  EXPECT_EQ(res->body, "GET /back");
}

TEST_F(ServerTest, ServesSeveralListenersWithTheirOwnHandlers) {
  Start({});
  auto other = server_->Listen("127.0.0.1:0", [](HttpRequest, Respond respond) {
    respond(HttpResponse{200, "text/plain", "other", {}});
  });
  ASSERT_TRUE(other);
  EXPECT_NE(*other, port_);
  auto a = Fetch("GET", BaseUrl() + "/x");
  auto b = Fetch("GET", "http://127.0.0.1:" + std::to_string(*other) + "/x");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->body, "GET /x");
  EXPECT_EQ(b->body, "other");
  auto dup = server_->Listen("127.0.0.1:" + std::to_string(port_), EchoHandler);
  EXPECT_FALSE(dup);
}

TEST_F(ServerTest, RejectsBadListenAddressesAndOptions) {
  Start({});
  EXPECT_EQ(server_->Listen("127.0.0.1", EchoHandler).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(server_->Listen("127.0.0.1:99999", EchoHandler).error().code,
            ErrorCode::kInvalidArgument);
  ServerOptions bad;
  bad.threads = 0;
  EXPECT_FALSE(HttpServer::Create(bad));
}

TEST_F(ServerTest, TwoThreadsServeConcurrentClients) {
  ServerOptions options;
  options.threads = 2;
  Start(options);
  std::vector<std::future<int>> clients;
  for (int i = 0; i < 8; ++i) {
    clients.push_back(std::async(std::launch::async, [this] {
      HttpClient client(BaseUrl());
      int ok = 0;
      for (int j = 0; j < 50; ++j) {
        auto res = client.Request("GET", "/n");
        ok += res && res->status == 200 ? 1 : 0;
      }
      return ok;
    }));
  }
  for (auto& c : clients) EXPECT_EQ(c.get(), 50);
}

TEST_F(ServerTest, CountsRequestsByCodeAndObservesDuration) {
  ServerOptions options;
  options.metrics = &metrics_;
  options.max_body_bytes = 10;
  Start(options);
  HttpClient client(BaseUrl());
  ASSERT_TRUE(client.Request("GET", "/a"));
  ASSERT_TRUE(client.Request("GET", "/b"));
  ASSERT_TRUE(client.Request("POST", "/c", std::string(100, 'x')));
  EXPECT_EQ(metrics_.GetCounter("dcm_http_requests_total", "", "code=\"200\"").Value(), 2u);
  EXPECT_EQ(metrics_.GetCounter("dcm_http_requests_total", "", "code=\"413\"").Value(), 1u);
  EXPECT_EQ(metrics_.GetHistogram("dcm_http_request_duration_seconds", "").Count(), 3u);
}

// ---- connection caps (SPEC §7) ---------------------------------------------------------------

// A loopback connection from source address `from` (any 127.x.y.z works on Linux).
class RawConnFrom : public RawConn {
 public:
  RawConnFrom(uint16_t port, const char* from) : RawConn(Fd{Connect(port, from)}) {}

 private:
  static int Connect(uint16_t port, const char* from) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in src{};
    src.sin_family = AF_INET;
    ::inet_pton(AF_INET, from, &src.sin_addr);
    sockaddr_in dst{};
    dst.sin_family = AF_INET;
    dst.sin_port = htons(port);
    dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof(src)) != 0 ||
        ::connect(fd, reinterpret_cast<sockaddr*>(&dst), sizeof(dst)) != 0) {
      ::close(fd);
      return -1;
    }
    return fd;
  }
};

// Sends a GET on `conn` and returns the status line of the answer ("" if none).
std::string Get(TestConn& conn, const std::string& path = "/x") {
  if (!conn.Send("GET " + path + " HTTP/1.1\r\nHost: t\r\n\r\n")) return "";
  return StatusLine(conn.ReadResponse());
}

// Retries `get` until it answers 200 (a closed connection's place frees once the server noticed
// the close), up to 2 s.
template <class Get>
std::string EventuallyOk(Get&& get) {
  std::string status;
  for (auto deadline = Clock::now() + 2s; Clock::now() < deadline;) {
    if ((status = get()) == "HTTP/1.1 200 OK") break;
  }
  return status;
}

TEST_F(ServerTest, AConnectionBeyondTheCapGets503AndTheAdmittedOnesAreStillServed) {
  ServerOptions options;
  options.max_connections = 3;
  options.metrics = &metrics_;
  Start(options);
  std::vector<std::unique_ptr<RawConn>> idle;
  for (int i = 0; i < 3; ++i) {
    idle.push_back(std::make_unique<RawConn>(port_));
    ASSERT_EQ(Get(*idle.back()), "HTTP/1.1 200 OK") << i;  // admitted, then kept idle
  }
  RawConn beyond(port_);
  const std::string refused = beyond.ReadResponse();  // answered without sending anything
  EXPECT_EQ(StatusLine(refused), "HTTP/1.1 503 Service Unavailable");
  EXPECT_NE(refused.find("Retry-After: 1\r\n"), std::string::npos) << refused;
  EXPECT_NE(refused.find("Content-Type: application/problem+json"), std::string::npos);
  EXPECT_NE(Body(refused).find("at most 3 open connections"), std::string::npos) << refused;
  EXPECT_TRUE(beyond.WaitClosed(2s));
  EXPECT_EQ(Get(*idle[1]), "HTTP/1.1 200 OK") << "admitted connections keep being served";
  EXPECT_EQ(metrics_.GetGauge("dcm_http_connections_open", "").Value(), 3);
  EXPECT_EQ(
      metrics_.GetCounter("dcm_http_connections_refused_total", "", "reason=\"total\"").Value(),
      1u);

  idle.pop_back();  // a place frees
  EXPECT_EQ(EventuallyOk([&] {
              RawConn next(port_);
              return Get(next);
            }),
            "HTTP/1.1 200 OK");
}

TEST_F(ServerTest, ThePerClientCapRefusesOneAddressAndServesAnother) {
  ServerOptions options;
  options.max_connections = 100;
  options.max_connections_per_client = 2;
  options.metrics = &metrics_;
  Start(options);
  RawConnFrom a1(port_, "127.0.0.1"), a2(port_, "127.0.0.1");
  ASSERT_TRUE(a1.connected() && a2.connected());
  ASSERT_EQ(Get(a1), "HTTP/1.1 200 OK");
  ASSERT_EQ(Get(a2), "HTTP/1.1 200 OK");
  RawConnFrom a3(port_, "127.0.0.1");
  const std::string refused = a3.ReadResponse();
  EXPECT_EQ(StatusLine(refused), "HTTP/1.1 503 Service Unavailable");
  EXPECT_NE(Body(refused).find("at most 2 per client address"), std::string::npos) << refused;
  RawConnFrom b(port_, "127.0.0.2");
  ASSERT_TRUE(b.connected());
  EXPECT_EQ(Get(b), "HTTP/1.1 200 OK") << "another address has its own allowance";
  EXPECT_EQ(
      metrics_.GetCounter("dcm_http_connections_refused_total", "", "reason=\"client\"").Value(),
      1u);
}

TEST_F(ServerTest, WithoutACapEveryConnectionIsServed) {
  Start(ServerOptions{});
  std::vector<std::unique_ptr<RawConn>> conns;
  for (int i = 0; i < 50; ++i) conns.push_back(std::make_unique<RawConn>(port_));
  for (auto& c : conns) EXPECT_EQ(Get(*c), "HTTP/1.1 200 OK");
}

// Lowers the soft RLIMIT_NOFILE for its lifetime (restored however the test ends).
class NofileLimit {
 public:
  explicit NofileLimit(rlim_t soft) {
    getrlimit(RLIMIT_NOFILE, &saved_);
    rlimit lowered = saved_;
    lowered.rlim_cur = soft;
    ok_ = setrlimit(RLIMIT_NOFILE, &lowered) == 0;
  }
  ~NofileLimit() { Restore(); }
  void Restore() { setrlimit(RLIMIT_NOFILE, &saved_); }
  bool ok() const { return ok_; }

 private:
  rlimit saved_{};
  bool ok_ = false;
};

TEST_F(ServerTest, OutOfDescriptorsTheAcceptLoopPausesWithoutSpinningAndRecovers) {
#ifdef __SANITIZE_ADDRESS__
  // The sanitizers' runtime opens files of its own (UBSan's vptr check reads /proc/self/maps):
  // with no descriptor left it reports a false "invalid vptr". scripts/test.sh runs this test.
  GTEST_SKIP() << "needs free descriptors for the sanitizer runtime";
#endif
  ServerOptions options;
  options.metrics = &metrics_;
  Start(options);
  Counter& errors = metrics_.GetCounter("dcm_http_accept_errors_total", "");
  // Room for exactly one more descriptor: the client's socket. The server's accept then fails
  // with EMFILE while the connection waits in the backlog.
  const int probe = ::dup(0);
  ASSERT_GE(probe, 0);
  ::close(probe);
  NofileLimit limit(static_cast<rlim_t>(probe) + 1);
  ASSERT_TRUE(limit.ok());
  RawConn client(port_);
  ASSERT_TRUE(client.connected());
  ASSERT_TRUE(client.Send("GET /after HTTP/1.1\r\nHost: t\r\n\r\n"));
  std::this_thread::sleep_for(500ms);
  const uint64_t failed = errors.Value();
  EXPECT_GE(failed, 1u) << "accept hit EMFILE";
  EXPECT_LE(failed, 15u) << "one retry per 50 ms, not a spin";
  limit.Restore();
  const std::string response = client.ReadResponse(true, 3s);
  EXPECT_EQ(StatusLine(response), "HTTP/1.1 200 OK") << "served once descriptors are free";
  EXPECT_EQ(Body(response), "GET /after");
}

// ---- TLS ------------------------------------------------------------------------------------

std::string OpenSslErrors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    out += std::string(out.empty() ? "" : "; ") + buf;
  }
  return out;
}

struct TlsClientOptions {
  std::string ca_file;    // the CA the client trusts for the server; "" skips verification
  std::string cert_file;  // client certificate (mTLS), optional
  std::string key_file;
  int min_version = TLS1_2_VERSION;
  int max_version = 0;            // 0: the newest OpenSSL has
  std::string ciphers;            // TLS 1.2 cipher list, "" for OpenSSL's default
  bool legacy = false;            // security level 0, so OpenSSL is willing to speak TLS 1.1
  SSL_SESSION* resume = nullptr;  // offered for resumption (not owned)
};

// A blocking OpenSSL client: TCP connect, then handshake with SNI and host name "server.test".
// Reads poll through SO_RCVTIMEO, so TLS 1.3 tickets never block a read.
class TlsConn : public TestConn {
 public:
  TlsConn(uint16_t port, const TlsClientOptions& o) {
    ctx_ = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_min_proto_version(ctx_, o.min_version);
    SSL_CTX_set_max_proto_version(ctx_, o.max_version);
    // No client cache: freeing a context flushes its cache, and that marks the sessions it held
    // not resumable. Resumption is explicit (`resume`, Session()).
    SSL_CTX_set_session_cache_mode(ctx_, SSL_SESS_CACHE_OFF);
    if (o.legacy) {
      SSL_CTX_set_security_level(ctx_, 0);
      SSL_CTX_set_cipher_list(ctx_, "DEFAULT:@SECLEVEL=0");
    }
    if (!o.ciphers.empty() && SSL_CTX_set_cipher_list(ctx_, o.ciphers.c_str()) != 1) {
      error_ = "bad cipher list";
      return;
    }
    if (!o.ca_file.empty()) {
      SSL_CTX_load_verify_locations(ctx_, o.ca_file.c_str(), nullptr);
      SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    }
    if (!o.cert_file.empty() &&
        (SSL_CTX_use_certificate_file(ctx_, o.cert_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
         SSL_CTX_use_PrivateKey_file(ctx_, o.key_file.c_str(), SSL_FILETYPE_PEM) != 1)) {
      error_ = "cannot load the client certificate: " + OpenSslErrors();
      return;
    }
    fd_ = ConnectLoopback(port);
    if (fd_ < 0) {
      error_ = "connect failed";
      return;
    }
    SetReceiveTimeout(100ms);
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    SSL_set_tlsext_host_name(ssl_, "server.test");
    SSL_set1_host(ssl_, "server.test");
    if (o.resume != nullptr) SSL_set_session(ssl_, o.resume);
    const auto deadline = Clock::now() + 5s;
    for (;;) {
      const int rc = SSL_connect(ssl_);
      if (rc == 1) {
        ok_ = true;
        return;
      }
      const int err = SSL_get_error(ssl_, rc);
      if (err != SSL_ERROR_WANT_READ || Clock::now() >= deadline) {
        error_ = "handshake failed: " + OpenSslErrors() +
                 " verify=" + X509_verify_cert_error_string(SSL_get_verify_result(ssl_));
        return;
      }
    }
  }
  ~TlsConn() override {
    // close_notify: without it OpenSSL marks the session not resumable.
    if (ok_) SSL_shutdown(ssl_);
    if (ssl_ != nullptr) SSL_free(ssl_);
    if (fd_ >= 0) ::close(fd_);
    SSL_CTX_free(ctx_);
  }

  // The client side of the handshake completed (with TLS 1.3 the server may still refuse our
  // certificate after this: that shows as an error on the first read).
  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }

  bool Send(std::string_view data) override {
    if (!ok_) return false;
    while (!data.empty()) {
      const int n = SSL_write(ssl_, data.data(), static_cast<int>(data.size()));
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // The server certificate's CN.
  std::string PeerCn() const {
    X509* cert = SSL_get0_peer_certificate(ssl_);
    if (cert == nullptr) return "";
    char cn[256] = {};
    X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof(cn));
    return cn;
  }
  std::string Cipher() const { return SSL_get_cipher_name(ssl_); }
  int Version() const { return SSL_version(ssl_); }
  bool Resumed() const { return SSL_session_reused(ssl_) == 1; }
  // The session for resumption (caller frees). With TLS 1.3 the ticket arrives after the
  // handshake, so call this after reading a response.
  SSL_SESSION* Session() const { return SSL_get1_session(ssl_); }

  // Asks for a TLS 1.2 renegotiation; true if it completed.
  bool Renegotiate() {
    if (SSL_renegotiate(ssl_) != 1) return false;
    const auto deadline = Clock::now() + 3s;
    while (Clock::now() < deadline) {
      const int rc = SSL_do_handshake(ssl_);
      if (rc == 1) {
        // The new handshake runs inside the next exchange of records.
        if (!Send("GET /after-renegotiation HTTP/1.1\r\nHost: a\r\n\r\n")) return false;
        return !ReadResponse().empty() && SSL_renegotiate_pending(ssl_) == 0;
      }
      if (SSL_get_error(ssl_, rc) != SSL_ERROR_WANT_READ) return false;
    }
    return false;
  }

 protected:
  ssize_t Receive(char* buf, size_t size, std::chrono::milliseconds timeout) override {
    if (!ok_) return -1;
    SetReceiveTimeout(timeout);
    const int n = SSL_read(ssl_, buf, static_cast<int>(size));
    if (n > 0) return n;
    const int err = SSL_get_error(ssl_, n);
    ERR_clear_error();
    return err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE ? 0 : -1;
  }

 private:
  void SetReceiveTimeout(std::chrono::milliseconds t) {
    timeval tv{static_cast<time_t>(t.count() / 1000),
               static_cast<suseconds_t>((t.count() % 1000) * 1000)};
    if (t.count() <= 0) tv.tv_usec = 1000;
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }

  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  int fd_ = -1;
  bool ok_ = false;
  std::string error_;
};

// Answers with what the server set on the request: "peer=<peer_subject>".
void PeerHandler(HttpRequest req, Respond respond) {
  respond(HttpResponse{200, "text/plain", "peer=" + req.peer_subject, {}});
}

template <class Pred>
bool WaitFor(Pred pred, std::chrono::milliseconds timeout = 3s) {
  const auto deadline = Clock::now() + timeout;
  while (!pred()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

class TlsServerTest : public ServerTest {
 protected:
  void SetUp() override {
    ASSERT_TRUE(ca_.ok());
    ASSERT_TRUE(server_cert_.ok());
    ASSERT_TRUE(client_ca_.ok());
  }

  // TLS with the test CA's server certificate; mTLS against client_ca_ when `mtls`.
  ServerOptions TlsOptions(bool mtls = false) {
    ServerOptions o;
    o.metrics = &metrics_;
    o.tls_cert_file = server_cert_.cert_file;
    o.tls_key_file = server_cert_.key_file;
    if (mtls) o.tls_client_ca_file = client_ca_.cert_file();
    return o;
  }
  TlsClientOptions Trusting() const {
    TlsClientOptions o;
    o.ca_file = ca_.cert_file();
    return o;
  }
  TlsClientOptions WithClientCert(const testing::TestCert& cert) const {
    TlsClientOptions o = Trusting();
    o.cert_file = cert.cert_file;
    o.key_file = cert.key_file;
    return o;
  }
  uint64_t HandshakeFailures(const std::string& reason) {
    return metrics_
        .GetCounter("dcm_http_tls_handshake_failures_total", "", "reason=\"" + reason + "\"")
        .Value();
  }
  // GET /who on a fresh connection; the response body, or "" if there was no HTTP answer.
  std::string GetBody(const TlsClientOptions& o) {
    TlsConn conn(port_, o);
    if (!conn.ok() || !conn.Send("GET /who HTTP/1.1\r\nHost: a\r\n\r\n")) return "";
    return Body(conn.ReadResponse());
  }

  testing::TestCa ca_{"dcm test server CA"};
  testing::TestCert server_cert_ =
      ca_.Issue("server.test", "DNS:server.test,IP:127.0.0.1", testing::CertUsage::kServer);
  testing::TestCa client_ca_{"dcm test client CA"};
};

TEST_F(TlsServerTest, ServesHttpsToAClientTrustingTheCa) {
  Start(TlsOptions());
  TlsConn conn(port_, Trusting());
  ASSERT_TRUE(conn.ok()) << conn.error();
  EXPECT_EQ(conn.PeerCn(), "server.test");
  ASSERT_TRUE(conn.Send("GET /hello?x=1 HTTP/1.1\r\nHost: a\r\n\r\n"));
  const std::string res = conn.ReadResponse();
  EXPECT_EQ(StatusLine(res), "HTTP/1.1 200 OK");
  EXPECT_EQ(Body(res), "GET /hello\nx=1");
  EXPECT_EQ(metrics_.GetCounter("dcm_http_requests_total", "", "code=\"200\"").Value(), 1u);
  EXPECT_GT(metrics_.GetGauge("dcm_http_tls_cert_not_after_seconds", "").Value(), 0);
}

TEST_F(TlsServerTest, ServerWithoutClientCaLeavesPeerSubjectEmpty) {
  Start(TlsOptions(), PeerHandler);
  auto client = ca_.Issue("would-be-admin", "", testing::CertUsage::kClient);
  EXPECT_EQ(GetBody(WithClientCert(client)), "peer=");  // not asked for, not used
}

TEST_F(TlsServerTest, ClientTrustingAnotherCaRefusesTheServer) {
  Start(TlsOptions());
  TlsClientOptions o;
  o.ca_file = client_ca_.cert_file();
  TlsConn conn(port_, o);
  EXPECT_FALSE(conn.ok());
  EXPECT_NE(conn.error().find("certificate verify failed"), std::string::npos) << conn.error();
  EXPECT_TRUE(WaitFor([&] { return HandshakeFailures("peer_alert") == 1; }));
}

TEST_F(TlsServerTest, PlainHttpToTheTlsPortGetsNoHttpAnswer) {
  Start(TlsOptions());
  RawConn conn(port_);
  ASSERT_TRUE(conn.Send("GET / HTTP/1.1\r\nHost: a\r\n\r\n"));
  EXPECT_TRUE(conn.WaitClosed(3s));
  EXPECT_EQ(conn.buffered().find("HTTP/"), std::string::npos);
  EXPECT_TRUE(WaitFor([&] { return HandshakeFailures("not_tls") == 1; }));
}

TEST_F(TlsServerTest, Tls11ClientIsRefused) {
  Start(TlsOptions());
  TlsClientOptions o = Trusting();
  o.min_version = TLS1_1_VERSION;
  o.max_version = TLS1_1_VERSION;
  o.legacy = true;
  TlsConn conn(port_, o);
  EXPECT_FALSE(conn.ok());
  EXPECT_TRUE(WaitFor([&] { return HandshakeFailures("version") == 1; }));
}

TEST_F(TlsServerTest, Tls12ClientGetsAnEcdheAeadCipher) {
  Start(TlsOptions());
  TlsClientOptions o = Trusting();
  o.max_version = TLS1_2_VERSION;
  TlsConn conn(port_, o);
  ASSERT_TRUE(conn.ok()) << conn.error();
  EXPECT_EQ(conn.Version(), TLS1_2_VERSION);
  EXPECT_EQ(conn.Cipher().rfind("ECDHE-", 0), 0u) << conn.Cipher();
  EXPECT_TRUE(conn.Cipher().find("GCM") != std::string::npos ||
              conn.Cipher().find("CHACHA20") != std::string::npos)
      << conn.Cipher();
}

TEST_F(TlsServerTest, Tls12ClientOfferingOnlyCbcCiphersIsRefused) {
  Start(TlsOptions());
  TlsClientOptions o = Trusting();
  o.max_version = TLS1_2_VERSION;
  o.ciphers = "ECDHE-ECDSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA";
  TlsConn conn(port_, o);
  EXPECT_FALSE(conn.ok());
  EXPECT_TRUE(WaitFor([&] { return HandshakeFailures("protocol") == 1; }));
}

TEST_F(TlsServerTest, ClientInitiatedRenegotiationIsRefused) {
  Start(TlsOptions());
  TlsClientOptions o = Trusting();
  o.max_version = TLS1_2_VERSION;
  TlsConn conn(port_, o);
  ASSERT_TRUE(conn.ok()) << conn.error();
  ASSERT_TRUE(conn.Send("GET /a HTTP/1.1\r\nHost: a\r\n\r\n"));
  EXPECT_EQ(StatusLine(conn.ReadResponse()), "HTTP/1.1 200 OK");
  EXPECT_FALSE(conn.Renegotiate());
}

TEST_F(TlsServerTest, KeepAliveServesTwoRequestsOnOneTlsConnection) {
  Start(TlsOptions());
  TlsConn conn(port_, Trusting());
  ASSERT_TRUE(conn.ok()) << conn.error();
  for (const char* path : {"/one", "/two"}) {
    ASSERT_TRUE(conn.Send(std::string("GET ") + path + " HTTP/1.1\r\nHost: a\r\n\r\n"));
    EXPECT_EQ(Body(conn.ReadResponse()), std::string("GET ") + path);
  }
}

TEST_F(TlsServerTest, ConnectionCloseOverTlsEndsWithCloseNotify) {
  Start(TlsOptions());
  TlsConn conn(port_, Trusting());
  ASSERT_TRUE(conn.ok()) << conn.error();
  ASSERT_TRUE(conn.Send("GET /a HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(StatusLine(conn.ReadResponse()), "HTTP/1.1 200 OK");
  EXPECT_TRUE(conn.WaitClosed(3s));
}

TEST_F(TlsServerTest, HandshakeTimeoutClosesASilentConnection) {
  ServerOptions options = TlsOptions();
  options.read_timeout = 300ms;
  Start(options);
  RawConn conn(port_);  // connects, never says a word
  const auto start = Clock::now();
  EXPECT_TRUE(conn.WaitClosed(3s));
  EXPECT_GE(Clock::now() - start, 250ms);
  EXPECT_TRUE(WaitFor([&] { return HandshakeFailures("timeout") == 1; }));
}

TEST_F(TlsServerTest, SlowRequestAfterTheHandshakeIsClosedAtReadTimeout) {
  ServerOptions options = TlsOptions();
  options.read_timeout = 300ms;
  Start(options);
  TlsConn conn(port_, Trusting());
  ASSERT_TRUE(conn.ok()) << conn.error();
  const auto start = Clock::now();
  ASSERT_TRUE(conn.Send("GET / HTTP/1.1\r\n"));
  bool closed = false;
  while (!closed && Clock::now() - start < 3s) {
    conn.Send("X-Slow: 1\r\n");
    closed = conn.WaitClosed(50ms);
  }
  EXPECT_TRUE(closed);
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_EQ(conn.buffered(), "");
}

TEST_F(TlsServerTest, OversizedBodyOverTlsGets413) {
  ServerOptions options = TlsOptions();
  options.max_body_bytes = 1000;
  Start(options);
  TlsConn conn(port_, Trusting());
  ASSERT_TRUE(conn.ok()) << conn.error();
  ASSERT_TRUE(conn.Send("POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 2000\r\n\r\n" +
                        std::string(2000, 'a')));
  const std::string res = conn.ReadResponse();
  EXPECT_EQ(StatusLine(res), "HTTP/1.1 413 Payload Too Large");
  EXPECT_NE(Body(res).find("request body exceeds 1000 bytes"), std::string::npos);
  EXPECT_TRUE(conn.WaitClosed(3s));
}

TEST_F(TlsServerTest, HandlerTimeoutOverTlsGets503) {
  ServerOptions options = TlsOptions();
  options.handler_timeout = 200ms;
  std::mutex mu;
  Respond kept;
  Start(options, [&](HttpRequest, Respond respond) {
    std::lock_guard lock(mu);
    kept = std::move(respond);
  });
  TlsConn conn(port_, Trusting());
  ASSERT_TRUE(conn.ok()) << conn.error();
  ASSERT_TRUE(conn.Send("GET /slow HTTP/1.1\r\nHost: a\r\n\r\n"));
  EXPECT_EQ(StatusLine(conn.ReadResponse()), "HTTP/1.1 503 Service Unavailable");
  std::lock_guard lock(mu);
  kept = nullptr;
}

// While a deferred response is pending the server watches the connection through TLS; a
// pipelined request read by that watch is served next.
TEST_F(TlsServerTest, DeferredResponseOverTlsKeepsThePipelinedRequest) {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Respond> pending;
  Start(TlsOptions(), [&](HttpRequest req, Respond respond) {
    if (req.path != "/later") return EchoHandler(std::move(req), std::move(respond));
    std::lock_guard lock(mu);
    pending.push_back(std::move(respond));
    cv.notify_all();
  });
  TlsConn conn(port_, Trusting());
  ASSERT_TRUE(conn.ok()) << conn.error();
  ASSERT_TRUE(conn.Send("GET /later HTTP/1.1\r\nHost: a\r\n\r\n"));
  Respond respond;
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 5s, [&] { return !pending.empty(); }));
    respond = pending.front();
  }
  ASSERT_TRUE(conn.Send("GET /next HTTP/1.1\r\nHost: a\r\n\r\n"));
  std::this_thread::sleep_for(100ms);  // let the watch read it
  respond(HttpResponse{202, "text/plain", "done", {}});
  EXPECT_EQ(Body(conn.ReadResponse()), "done");
  EXPECT_EQ(Body(conn.ReadResponse()), "GET /next");
}

TEST_F(TlsServerTest, CloseWithoutResponseOverTlsClosesTheConnection) {
  Start(TlsOptions(), [](HttpRequest, Respond respond) {
    respond(HttpResponse{kCloseWithoutResponse, "", "", {}});
  });
  TlsConn conn(port_, Trusting());
  ASSERT_TRUE(conn.ok()) << conn.error();
  ASSERT_TRUE(conn.Send("GET / HTTP/1.1\r\nHost: a\r\n\r\n"));
  EXPECT_TRUE(conn.WaitClosed(3s));
  EXPECT_EQ(conn.buffered(), "");
}

TEST_F(TlsServerTest, CloseListenerClosesTlsConnections) {
  Start(TlsOptions());
  TlsConn conn(port_, Trusting());
  ASSERT_TRUE(conn.ok()) << conn.error();
  ASSERT_TRUE(conn.Send("GET /a HTTP/1.1\r\nHost: a\r\n\r\n"));
  EXPECT_EQ(StatusLine(conn.ReadResponse()), "HTTP/1.1 200 OK");
  server_->CloseListener(port_);
  EXPECT_TRUE(conn.WaitClosed(3s));
}

// ---- mTLS -------------------------------------------------------------------------------

TEST_F(TlsServerTest, ClientCertificateSanUriBecomesPeerSubject) {
  Start(TlsOptions(/*mtls=*/true), PeerHandler);
  // The URI wins over a DNS name listed before it.
  auto client = client_ca_.Issue("cn-ignored", "DNS:dns.dcm.test,URI:spiffe://dcm.test/admin",
                                 testing::CertUsage::kClient);
  EXPECT_EQ(GetBody(WithClientCert(client)), "peer=spiffe://dcm.test/admin");
}

TEST_F(TlsServerTest, ClientCertificateSanDnsBecomesPeerSubjectWithoutUri) {
  Start(TlsOptions(/*mtls=*/true), PeerHandler);
  auto client = client_ca_.Issue("cn-ignored", "DNS:agent.dcm.test,DNS:second.dcm.test",
                                 testing::CertUsage::kClient);
  EXPECT_EQ(GetBody(WithClientCert(client)), "peer=agent.dcm.test");
}

TEST_F(TlsServerTest, ClientCertificateCnBecomesPeerSubjectWithoutSans) {
  Start(TlsOptions(/*mtls=*/true), PeerHandler);
  auto client = client_ca_.Issue("ops-admin", "", testing::CertUsage::kClient);
  EXPECT_EQ(GetBody(WithClientCert(client)), "peer=ops-admin");
}

TEST_F(TlsServerTest, PeerSubjectIsSetOnEveryRequestOfTheConnection) {
  Start(TlsOptions(/*mtls=*/true), PeerHandler);
  auto client = client_ca_.Issue("ops-admin", "", testing::CertUsage::kClient);
  TlsConn conn(port_, WithClientCert(client));
  ASSERT_TRUE(conn.ok()) << conn.error();
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(conn.Send("GET /who HTTP/1.1\r\nHost: a\r\n\r\n"));
    EXPECT_EQ(Body(conn.ReadResponse()), "peer=ops-admin");
  }
}

TEST_F(TlsServerTest, ClientWithoutCertificateReachesHandlerWithEmptyPeerSubject) {
  Start(TlsOptions(/*mtls=*/true), PeerHandler);
  EXPECT_EQ(GetBody(Trusting()), "peer=");
}

TEST_F(TlsServerTest, ClientCertificateFromAnotherCaIsRefused) {
  std::atomic<int> calls{0};
  Start(TlsOptions(/*mtls=*/true), [&calls](HttpRequest req, Respond respond) {
    ++calls;
    PeerHandler(std::move(req), std::move(respond));
  });
  auto stranger = ca_.Issue("intruder", "URI:spiffe://dcm.test/admin", testing::CertUsage::kClient);
  EXPECT_EQ(GetBody(WithClientCert(stranger)), "");
  EXPECT_TRUE(WaitFor([&] { return HandshakeFailures("client_cert") == 1; }));
  EXPECT_EQ(calls.load(), 0);
}

TEST_F(TlsServerTest, ExpiredClientCertificateIsRefused) {
  Start(TlsOptions(/*mtls=*/true), PeerHandler);
  auto expired = client_ca_.Issue("old", "", testing::CertUsage::kClient, /*valid_days=*/-1);
  EXPECT_EQ(GetBody(WithClientCert(expired)), "");
  EXPECT_TRUE(WaitFor([&] { return HandshakeFailures("client_cert") == 1; }));
}

TEST_F(TlsServerTest, ClientCertificateWithoutClientAuthUsageIsRefused) {
  Start(TlsOptions(/*mtls=*/true), PeerHandler);
  auto server_only = client_ca_.Issue("svc", "", testing::CertUsage::kServer);
  EXPECT_EQ(GetBody(WithClientCert(server_only)), "");
  EXPECT_TRUE(WaitFor([&] { return HandshakeFailures("client_cert") == 1; }));
}

TEST_F(TlsServerTest, ResumedSessionKeepsThePeerSubject) {
  Start(TlsOptions(/*mtls=*/true), PeerHandler);
  auto client =
      client_ca_.Issue("ops-admin", "URI:spiffe://dcm.test/ops", testing::CertUsage::kClient);
  for (const int version : {TLS1_2_VERSION, TLS1_3_VERSION}) {
    TlsClientOptions o = WithClientCert(client);
    o.max_version = version;
    SSL_SESSION* session = nullptr;
    {
      TlsConn first(port_, o);
      ASSERT_TRUE(first.ok()) << first.error();
      ASSERT_TRUE(first.Send("GET /who HTTP/1.1\r\nHost: a\r\n\r\n"));
      EXPECT_EQ(Body(first.ReadResponse()), "peer=spiffe://dcm.test/ops");
      session = first.Session();
    }
    ASSERT_NE(session, nullptr);
    o.resume = session;
    TlsConn second(port_, o);
    ASSERT_TRUE(second.ok()) << second.error();
    EXPECT_TRUE(second.Resumed()) << "version " << version;
    ASSERT_TRUE(second.Send("GET /who HTTP/1.1\r\nHost: a\r\n\r\n"));
    EXPECT_EQ(Body(second.ReadResponse()), "peer=spiffe://dcm.test/ops") << "version " << version;
    SSL_SESSION_free(session);
  }
}

// ---- ReloadTls and Create -------------------------------------------------------------

// Server certificate files at paths the test may overwrite (TestCert removes its own).
class ReloadTest : public TlsServerTest {
 protected:
  void SetUp() override {
    TlsServerTest::SetUp();
    const std::string base =
        ::testing::TempDir() + "/dcm_reload_" + std::to_string(::getpid()) + "_";
    cert_path_ = base + "cert.pem";
    key_path_ = base + "key.pem";
    Install(first_);
  }
  void TearDown() override {
    std::remove(cert_path_.c_str());
    std::remove(key_path_.c_str());
  }
  void Install(const testing::TestCert& c) {
    WriteFile(cert_path_, ReadFile(c.cert_file));
    WriteFile(key_path_, ReadFile(c.key_file));
  }
  ServerOptions ReloadableOptions() {
    ServerOptions o = TlsOptions();
    o.tls_cert_file = cert_path_;
    o.tls_key_file = key_path_;
    return o;
  }
  std::string NewConnectionCn() {
    TlsConn conn(port_, Trusting());
    return conn.ok() ? conn.PeerCn() : "handshake failed: " + conn.error();
  }

  testing::TestCert first_ =
      ca_.Issue("first.server.test", "DNS:server.test", testing::CertUsage::kServer);
  testing::TestCert second_ = ca_.Issue("second.server.test", "DNS:server.test",
                                        testing::CertUsage::kServer, /*valid_days=*/30);
  std::string cert_path_;
  std::string key_path_;
};

TEST_F(ReloadTest, ReloadTlsServesTheNewCertificateToNewConnectionsOnly) {
  Start(ReloadableOptions());
  auto& not_after = metrics_.GetGauge("dcm_http_tls_cert_not_after_seconds", "");
  const int64_t first_expiry = not_after.Value();
  TlsConn old_conn(port_, Trusting());
  ASSERT_TRUE(old_conn.ok()) << old_conn.error();
  ASSERT_TRUE(old_conn.Send("GET /1 HTTP/1.1\r\nHost: a\r\n\r\n"));
  EXPECT_EQ(Body(old_conn.ReadResponse()), "GET /1");

  Install(second_);
  auto reloaded = server_->ReloadTls();
  ASSERT_TRUE(reloaded) << reloaded.error().message;
  EXPECT_EQ(NewConnectionCn(), "second.server.test");
  EXPECT_GT(not_after.Value(), first_expiry + 20 * 24 * 3600);
  // The connection made before the reload keeps working, on its original certificate.
  ASSERT_TRUE(old_conn.Send("GET /2 HTTP/1.1\r\nHost: a\r\n\r\n"));
  EXPECT_EQ(Body(old_conn.ReadResponse()), "GET /2");
  EXPECT_EQ(old_conn.PeerCn(), "first.server.test");
}

TEST_F(ReloadTest, FailedReloadTlsKeepsTheCurrentCertificate) {
  Start(ReloadableOptions());
  WriteFile(cert_path_, "not a certificate\n");
  auto broken = server_->ReloadTls();
  ASSERT_FALSE(broken);
  EXPECT_EQ(broken.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(broken.error().message.find(cert_path_), std::string::npos) << broken.error().message;
  EXPECT_EQ(NewConnectionCn(), "first.server.test");

  // A certificate whose key was not replaced with it: a mismatch, also refused.
  WriteFile(cert_path_, ReadFile(second_.cert_file));
  auto mismatched = server_->ReloadTls();
  ASSERT_FALSE(mismatched);
  EXPECT_NE(mismatched.error().message.find("does not match"), std::string::npos)
      << mismatched.error().message;
  EXPECT_EQ(NewConnectionCn(), "first.server.test");
}

TEST_F(ReloadTest, ReloadUnderLoadNeverFailsAConnection) {
  ServerOptions options = ReloadableOptions();
  options.threads = 2;
  Start(options);
  std::atomic<bool> done{false};
  std::vector<std::future<int>> clients;
  for (int i = 0; i < 3; ++i) {
    clients.push_back(std::async(std::launch::async, [&] {
      int failures = 0;
      while (!done) {
        TlsConn conn(port_, Trusting());
        if (!conn.ok() || !conn.Send("GET /n HTTP/1.1\r\nHost: a\r\n\r\n") ||
            StatusLine(conn.ReadResponse()) != "HTTP/1.1 200 OK") {
          ++failures;
        }
      }
      return failures;
    }));
  }
  for (int i = 0; i < 20; ++i) {
    Install(i % 2 == 0 ? second_ : first_);
    EXPECT_TRUE(server_->ReloadTls());
    std::this_thread::sleep_for(10ms);
  }
  done = true;
  for (auto& c : clients) EXPECT_EQ(c.get(), 0);
}

TEST_F(ServerTest, ReloadTlsOnAPlainServerIsANoOp) {
  Start({});
  EXPECT_TRUE(server_->ReloadTls());
  HttpClient client(BaseUrl());
  auto res = client.Request("GET", "/x");
  ASSERT_TRUE(res) << res.error().message;
  EXPECT_EQ(res->status, 200);
}

TEST_F(ServerTest, PlainConnectionLeavesPeerSubjectEmpty) {
  Start({}, PeerHandler);
  auto res = Fetch("GET", BaseUrl() + "/who");
  ASSERT_TRUE(res) << res.error().message;
  EXPECT_EQ(res->body, "peer=");
}

TEST_F(TlsServerTest, CreateRejectsHalfATlsConfiguration) {
  ServerOptions cert_only = TlsOptions();
  cert_only.tls_key_file.clear();
  auto a = HttpServer::Create(cert_only);
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(a.error().message.find("together"), std::string::npos) << a.error().message;

  ServerOptions key_only = TlsOptions();
  key_only.tls_cert_file.clear();
  EXPECT_EQ(HttpServer::Create(key_only).error().code, ErrorCode::kInvalidArgument);

  ServerOptions ca_only;
  ca_only.tls_client_ca_file = client_ca_.cert_file();
  EXPECT_EQ(HttpServer::Create(ca_only).error().code, ErrorCode::kInvalidArgument);
}

TEST_F(TlsServerTest, CreateRejectsUnreadableOrNonPemFilesNamingThem) {
  const std::string missing = ::testing::TempDir() + "/dcm_no_such_file.pem";
  for (auto field : {&ServerOptions::tls_cert_file, &ServerOptions::tls_key_file,
                     &ServerOptions::tls_client_ca_file}) {
    ServerOptions o = TlsOptions(/*mtls=*/true);
    o.*field = missing;
    auto r = HttpServer::Create(o);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(r.error().message.find(missing), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("No such file"), std::string::npos) << r.error().message;
  }
  // PEM of the wrong kind: a certificate as the key, a key as the client CA.
  ServerOptions key_is_cert = TlsOptions();
  key_is_cert.tls_key_file = server_cert_.cert_file;
  EXPECT_EQ(HttpServer::Create(key_is_cert).error().code, ErrorCode::kInvalidArgument);
  ServerOptions ca_is_key = TlsOptions(/*mtls=*/true);
  ca_is_key.tls_client_ca_file = server_cert_.key_file;
  auto r = HttpServer::Create(ca_is_key);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("tls_client_ca_file"), std::string::npos) << r.error().message;
}

TEST_F(TlsServerTest, CreateRejectsAKeyThatDoesNotMatchTheCertificate) {
  auto other = ca_.Issue("other.test", "", testing::CertUsage::kServer);
  ServerOptions o = TlsOptions();
  o.tls_key_file = other.key_file;
  auto r = HttpServer::Create(o);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error().message.find("does not match"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace dcm::http
