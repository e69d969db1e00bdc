// HttpServer over loopback: routing data, limits, deadlines, deferred responses, listeners.
// Malformed and slow traffic goes through a raw POSIX socket (RawConn); well-formed traffic
// through HttpClient.
#include "src/http/server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "src/common/metrics.h"
#include "src/http/client.h"

namespace dcm::http {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A blocking loopback TCP connection for sending hand-written (possibly broken) HTTP.
class RawConn {
 public:
  explicit RawConn(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~RawConn() { ::close(fd_); }
  bool connected() const { return connected_; }

  bool Send(std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Waits up to `timeout` for data; appends it to buffer_. Returns false on EOF/error/timeout.
  bool ReadSome(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
    char buf[8192];
    const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
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

 private:
  int fd_ = -1;
  bool connected_ = false;
  bool eof_ = false;
  std::string buffer_;
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
  Metrics metrics;
  ServerOptions options;
  options.metrics = &metrics;
  options.max_body_bytes = 10;
  Start(options);
  HttpClient client(BaseUrl());
  ASSERT_TRUE(client.Request("GET", "/a"));
  ASSERT_TRUE(client.Request("GET", "/b"));
  ASSERT_TRUE(client.Request("POST", "/c", std::string(100, 'x')));
  EXPECT_EQ(metrics.GetCounter("dcm_http_requests_total", "", "code=\"200\"").Value(), 2u);
  EXPECT_EQ(metrics.GetCounter("dcm_http_requests_total", "", "code=\"413\"").Value(), 1u);
  EXPECT_EQ(metrics.GetHistogram("dcm_http_request_duration_seconds", "").Count(), 3u);
}

}  // namespace
}  // namespace dcm::http
