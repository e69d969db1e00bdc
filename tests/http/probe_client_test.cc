// ProbeClient against loopback servers: the repo's HttpServer (port 0), a small scripted POSIX
// server (to count connections and misbehave on cue), a listener that never accepts (a black
// hole), and an OpenSSL server with a throwaway CA generated here.
#include "src/http/probe_client.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "events/health_events.h"
#include "src/common/outbound_policy.h"
#include "src/http/server.h"
#include "tests/common/test_pki.h"
#include "tests/common/tls_proxy.h"

namespace dcm::http {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr char kHealthy[] = R"({"status":"healthy"})";
// Waits on futures are generous: they only bound a broken test, never pace a passing one.
constexpr auto kGenerous = 10s;

// ---- loopback sockets ---------------------------------------------------------------------

int ListenLoopback(int backlog, uint16_t* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return -1;
  if (backlog > 0 && ::listen(fd, backlog) != 0) return -1;
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  *port = ntohs(addr.sin_port);
  return fd;
}

// Accepts connections in the kernel (listen backlog) but never reads or answers them.
class BlackHole {
 public:
  BlackHole() : fd_(ListenLoopback(4096, &port_)) {}
  ~BlackHole() { ::close(fd_); }
  uint16_t port() const { return port_; }
  // True once a connection waits in the accept queue (the client's connect has completed).
  bool WaitForConnection() const {
    pollfd pfd{fd_, POLLIN, 0};
    return ::poll(&pfd, 1, 5000) == 1;
  }

 private:
  uint16_t port_ = 0;
  int fd_;
};

// A bound port with no listener: connecting is refused. Kept bound so no one else takes it.
class RefusingPort {
 public:
  RefusingPort() : fd_(ListenLoopback(0, &port_)) {}
  ~RefusingPort() { ::close(fd_); }
  uint16_t port() const { return port_; }

 private:
  uint16_t port_ = 0;
  int fd_;
};

bool WriteAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

std::string Response200(bool close) {
  return std::string("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ") +
         std::to_string(sizeof(kHealthy) - 1) + "\r\n" + (close ? "Connection: close\r\n" : "") +
         "\r\n" + kHealthy;
}

// A raw HTTP/1.1 server, one thread per connection, that follows a script for each
// (connection, request) and counts connections, which HttpServer does not expose.
class ScriptedServer {
 public:
  enum class Action { kRespond, kRespondAndClose, kCloseWithoutResponse };
  using Script = std::function<Action(int connection, int request)>;

  explicit ScriptedServer(Script script) : script_(std::move(script)) {
    listen_fd_ = ListenLoopback(128, &port_);
    acceptor_ = std::thread([this] { AcceptLoop(); });
  }
  ~ScriptedServer() {
    ::shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
    acceptor_.join();
    ::close(listen_fd_);
    std::vector<std::thread> threads;
    {
      std::lock_guard lock(mu_);
      for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);  // wakes blocked reads
      threads = std::move(threads_);
    }
    for (auto& t : threads) t.join();
    for (int fd : fds_) ::close(fd);
  }
  uint16_t port() const { return port_; }
  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/health"; }
  int connections() const { return connections_.load(); }

 private:
  void AcceptLoop() {
    for (;;) {
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) return;
      std::lock_guard lock(mu_);
      const int index = connections_++;
      fds_.push_back(fd);
      threads_.emplace_back([this, fd, index] { Serve(fd, index); });
    }
  }

  void Serve(int fd, int connection) {
    std::string buffer;
    char chunk[4096];
    for (int request = 0;; ++request) {
      size_t end;
      while ((end = buffer.find("\r\n\r\n")) == std::string::npos) {
        const ssize_t n = ::read(fd, chunk, sizeof(chunk));
        if (n <= 0) return;
        buffer.append(chunk, static_cast<size_t>(n));
      }
      buffer.erase(0, end + 4);
      const Action action = script_(connection, request);
      if (action == Action::kCloseWithoutResponse) {
        ::shutdown(fd, SHUT_RDWR);
        return;
      }
      const bool close = action == Action::kRespondAndClose;
      if (!WriteAll(fd, Response200(close))) return;
      if (close) {
        ::shutdown(fd, SHUT_WR);
        return;
      }
    }
  }

  Script script_;
  uint16_t port_ = 0;
  int listen_fd_ = -1;
  std::thread acceptor_;
  std::atomic<int> connections_{0};
  std::mutex mu_;
  std::vector<int> fds_;
  std::vector<std::thread> threads_;
};

ScriptedServer::Action AlwaysRespond(int, int) { return ScriptedServer::Action::kRespond; }

// ---- a throwaway PKI and a TLS server -----------------------------------------------------

// Two CAs; the server certificate is signed by `trusted` for 127.0.0.1 and probe.test.
struct Pki {
  Pki()
      : ca("probe test CA"),
        other_ca("some other CA"),
        server(ca.Issue("probe.test", "DNS:probe.test,IP:127.0.0.1", testing::CertUsage::kServer)),
        trusted_file(ca.cert_file()),
        other_file(other_ca.cert_file()) {}
  bool ok() const { return ca.ok() && other_ca.ok() && server.ok(); }

  testing::TestCa ca, other_ca;
  testing::TestCert server;
  std::string trusted_file, other_file;
};

// Serves one TLS connection at a time: handshake, read one request, answer with
// `Connection: close`.
class TlsServer {
 public:
  explicit TlsServer(const Pki& pki) {
    ctx_ = SSL_CTX_new(TLS_server_method());
    SSL_CTX_use_certificate(ctx_, pki.server.cert.get());
    SSL_CTX_use_PrivateKey(ctx_, pki.server.key.get());
    listen_fd_ = ListenLoopback(64, &port_);
    thread_ = std::thread([this] { Loop(); });
  }
  ~TlsServer() {
    ::shutdown(listen_fd_, SHUT_RDWR);
    thread_.join();
    ::close(listen_fd_);
    SSL_CTX_free(ctx_);
  }
  uint16_t port() const { return port_; }
  int served() const { return served_.load(); }

 private:
  void Loop() {
    for (;;) {
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) return;
      timeval tv{5, 0};  // a stuck client must not wedge the test
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      SSL* ssl = SSL_new(ctx_);
      SSL_set_fd(ssl, fd);
      if (SSL_accept(ssl) == 1) {
        std::string request;
        char chunk[4096];
        while (request.find("\r\n\r\n") == std::string::npos) {
          const int n = SSL_read(ssl, chunk, sizeof(chunk));
          if (n <= 0) break;
          request.append(chunk, static_cast<size_t>(n));
        }
        const std::string response = Response200(true);
        ++served_;  // before the client can see the answer
        SSL_write(ssl, response.data(), static_cast<int>(response.size()));
        SSL_shutdown(ssl);
      }
      SSL_free(ssl);
      ::close(fd);
    }
  }

  SSL_CTX* ctx_ = nullptr;
  uint16_t port_ = 0;
  int listen_fd_ = -1;
  std::thread thread_;
  std::atomic<int> served_{0};
};

// ---- helpers ------------------------------------------------------------------------------

// The shared TLS context a probe client gets (tls_client.h).
std::shared_ptr<const TlsClientContext> Tls(TlsClientOptions options) {
  auto tls = TlsClientContext::Create(options);
  EXPECT_TRUE(tls) << tls.error().message;
  return tls ? *tls : nullptr;
}

std::future<ProbeResponse> Start(ProbeClient& client, std::string key, std::string url,
                                 std::chrono::milliseconds timeout = 5s) {
  auto promise = std::make_shared<std::promise<ProbeResponse>>();
  auto future = promise->get_future();
  client.Check(ProbeRequest{std::move(key), std::move(url), timeout},
               [promise](ProbeResponse r) { promise->set_value(std::move(r)); });
  return future;
}

ProbeResponse Await(std::future<ProbeResponse>& f) {
  if (f.wait_for(kGenerous) != std::future_status::ready) {
    ADD_FAILURE() << "probe did not complete";
    return ProbeResponse{};
  }
  return f.get();
}

ProbeResponse Probe(ProbeClient& client, std::string key, std::string url,
                    std::chrono::milliseconds timeout = 5s) {
  auto f = Start(client, std::move(key), std::move(url), timeout);
  return Await(f);
}

class ProbeClientTest : public ::testing::Test {
 protected:
  std::unique_ptr<ProbeClient> Client(ProbeClientOptions options = {}) {
    auto client = ProbeClient::Create(std::move(options));
    EXPECT_TRUE(client) << client.error().message;
    return client ? std::move(*client) : nullptr;
  }

  // An HttpServer on 127.0.0.1:0 with `handler`; returns the health URL.
  std::string Serve(Handler handler) {
    if (!server_) {
      auto server = HttpServer::Create({});
      EXPECT_TRUE(server) << server.error().message;
      server_ = std::move(*server);
    }
    auto port = server_->Listen("127.0.0.1:0", std::move(handler));
    EXPECT_TRUE(port) << port.error().message;
    return "http://127.0.0.1:" + std::to_string(*port) + "/api/vm/health";
  }

  static void Healthy(HttpRequest, Respond respond) {
    respond(HttpResponse{200, "application/json", kHealthy, {}});
  }

  std::unique_ptr<HttpServer> server_;
};

// ---- plain HTTP ---------------------------------------------------------------------------

TEST_F(ProbeClientTest, Returns200WithBody) {
  std::mutex mu;
  std::string seen_target, seen_agent;
  const std::string url = Serve([&](HttpRequest req, Respond respond) {
    std::lock_guard lock(mu);
    seen_target = req.target;
    seen_agent = req.Header("user-agent") ? *req.Header("user-agent") : "";
    respond(HttpResponse{200, "application/json", kHealthy, {}});
  });
  auto client = Client();
  ProbeResponse r = Probe(*client, "sp-1", url);
  EXPECT_EQ(r.failure, ProbeFailure::kNone) << r.error;
  EXPECT_EQ(r.http_status, 200);
  EXPECT_EQ(r.body, kHealthy);
  EXPECT_TRUE(r.error.empty());
  EXPECT_GT(r.latency_us, 0);
  std::lock_guard lock(mu);
  EXPECT_EQ(seen_target, "/api/vm/health");
  EXPECT_EQ(seen_agent, "dcm-prober");
}

TEST_F(ProbeClientTest, ReturnsNon200StatusAndBodyWithoutFailure) {
  const std::string url = Serve([](HttpRequest, Respond respond) {
    respond(HttpResponse{503, "application/json", R"({"status":"unhealthy"})", {}});
  });
  auto client = Client();
  ProbeResponse r = Probe(*client, "sp-1", url);
  EXPECT_EQ(r.failure, ProbeFailure::kNone) << r.error;
  EXPECT_EQ(r.http_status, 503);
  EXPECT_EQ(r.body, R"({"status":"unhealthy"})");
}

TEST_F(ProbeClientTest, ConnectionRefusedIsConnectFailure) {
  RefusingPort refusing;
  auto client = Client();
  ProbeResponse r =
      Probe(*client, "sp-1", "http://127.0.0.1:" + std::to_string(refusing.port()) + "/health");
  EXPECT_EQ(r.failure, ProbeFailure::kConnect);
  EXPECT_EQ(r.http_status, 0);
  EXPECT_NE(r.error.find("refused"), std::string::npos) << r.error;
}

TEST_F(ProbeClientTest, UnresolvableHostIsDnsFailure) {
  auto client = Client();
  ProbeResponse r = Probe(*client, "sp-1", "http://no-such-provider.invalid:8080/health");
  EXPECT_EQ(r.failure, ProbeFailure::kDns) << r.error;
  EXPECT_NE(r.error.find("no-such-provider.invalid"), std::string::npos) << r.error;
}

TEST_F(ProbeClientTest, MalformedUrlIsConnectFailureWithReason) {
  auto client = Client();
  for (const char* url : {"ftp://h/health", "not a url", "http://:80/x", "http://h:99999/"}) {
    ProbeResponse r = Probe(*client, "sp-1", url);
    EXPECT_EQ(r.failure, ProbeFailure::kConnect) << url;
    EXPECT_EQ(r.error.rfind("invalid URL: ", 0), 0u) << r.error;
  }
}

TEST_F(ProbeClientTest, ServerThatNeverAnswersTimesOutOnTime) {
  BlackHole hole;
  auto client = Client();
  const auto start = Clock::now();
  ProbeResponse r =
      Probe(*client, "sp-1", "http://127.0.0.1:" + std::to_string(hole.port()) + "/health", 300ms);
  const auto elapsed = Clock::now() - start;
  EXPECT_EQ(r.failure, ProbeFailure::kTimeout);
  EXPECT_NE(r.error.find("300 ms"), std::string::npos) << r.error;
  EXPECT_GE(elapsed, 300ms);
  EXPECT_LT(elapsed, 400ms);
  EXPECT_GE(r.latency_us, 300'000);
  EXPECT_LT(r.latency_us, 400'000);
  EXPECT_EQ(client->InFlight(), 0u);
}

TEST_F(ProbeClientTest, ManyTimeoutsFireOnTime) {
  BlackHole hole;
  auto client = Client();
  const std::string url = "http://127.0.0.1:" + std::to_string(hole.port()) + "/health";
  std::vector<std::future<ProbeResponse>> futures;
  for (int i = 0; i < 500; ++i)
    futures.push_back(Start(*client, "k" + std::to_string(i), url, 300ms));
  int64_t latest = 0;
  for (auto& f : futures) {
    ProbeResponse r = Await(f);
    EXPECT_EQ(r.failure, ProbeFailure::kTimeout);
    latest = std::max(latest, r.latency_us);
  }
  EXPECT_LT(latest, 400'000);
}

TEST_F(ProbeClientTest, ShorterTimeoutStartedAfterLongerOneFiresOnTime) {
  BlackHole hole;
  auto client = Client();
  const std::string url = "http://127.0.0.1:" + std::to_string(hole.port()) + "/health";
  auto slow = Start(*client, "slow", url, 3s);
  auto fast = Start(*client, "fast", url, 200ms);
  auto fast2 = Start(*client, "fast2", url, 250ms);
  EXPECT_EQ(Await(fast).failure, ProbeFailure::kTimeout);
  ProbeResponse r = Await(fast2);
  EXPECT_EQ(r.failure, ProbeFailure::kTimeout);
  EXPECT_GE(r.latency_us, 250'000);
  EXPECT_LT(r.latency_us, 350'000);
  EXPECT_EQ(slow.wait_for(0s), std::future_status::timeout);  // still waiting for its deadline
  client->Stop();
}

TEST_F(ProbeClientTest, BodyOverLimitIsBadBody) {
  const std::string url = Serve([](HttpRequest, Respond respond) {
    respond(HttpResponse{200, "application/json", std::string(2048, 'x'), {}});
  });
  ProbeClientOptions options;
  options.max_body_bytes = 1024;
  auto client = Client(options);
  ProbeResponse r = Probe(*client, "sp-1", url);
  EXPECT_EQ(r.failure, ProbeFailure::kBadBody) << r.error;
  EXPECT_TRUE(r.body.empty());
  // A body at the limit is fine, and the connection was not reused after the bad one.
  ProbeResponse ok = Probe(*client, "sp-2", Serve([](HttpRequest, Respond respond) {
    respond(HttpResponse{200, "text/plain", std::string(1024, 'y'), {}});
  }));
  EXPECT_EQ(ok.failure, ProbeFailure::kNone) << ok.error;
  EXPECT_EQ(ok.body.size(), 1024u);
}

// ---- connection reuse ---------------------------------------------------------------------

TEST_F(ProbeClientTest, KeepsOneConnectionAlivePerKey) {
  ScriptedServer server(AlwaysRespond);
  auto client = Client();
  for (int i = 0; i < 5; ++i) {
    ProbeResponse r = Probe(*client, "sp-1", server.Url());
    ASSERT_EQ(r.failure, ProbeFailure::kNone) << r.error;
  }
  EXPECT_EQ(server.connections(), 1);
  EXPECT_EQ(client->IdleConnections(), 1u);
  EXPECT_EQ(Probe(*client, "sp-2", server.Url()).failure, ProbeFailure::kNone);
  EXPECT_EQ(server.connections(), 2);  // another key, another connection
  EXPECT_EQ(client->IdleConnections(), 2u);
}

TEST_F(ProbeClientTest, ChangedEndpointOfKeyUsesNewOrigin) {
  ScriptedServer a(AlwaysRespond);
  ScriptedServer b(AlwaysRespond);
  auto client = Client();
  EXPECT_EQ(Probe(*client, "sp-1", a.Url()).failure, ProbeFailure::kNone);
  EXPECT_EQ(Probe(*client, "sp-1", b.Url()).failure, ProbeFailure::kNone);
  EXPECT_EQ(a.connections(), 1);
  EXPECT_EQ(b.connections(), 1);
  EXPECT_EQ(client->IdleConnections(), 1u);
}

TEST_F(ProbeClientTest, ForgetClosesTheKeptConnection) {
  ScriptedServer server(AlwaysRespond);
  auto client = Client();
  EXPECT_EQ(Probe(*client, "sp-1", server.Url()).failure, ProbeFailure::kNone);
  EXPECT_EQ(client->IdleConnections(), 1u);
  client->Forget("sp-1");
  // Forget and Check of one key run in order on the key's worker: no waiting needed.
  EXPECT_EQ(Probe(*client, "sp-1", server.Url()).failure, ProbeFailure::kNone);
  EXPECT_EQ(server.connections(), 2);
  client->Forget("sp-1");
  client->Forget("never-probed");
  EXPECT_EQ(Probe(*client, "sp-3", server.Url()).failure, ProbeFailure::kNone);
  EXPECT_EQ(server.connections(), 3);
}

TEST_F(ProbeClientTest, IdleCapClosesConnectionsBeyondIt) {
  ScriptedServer server(AlwaysRespond);
  ProbeClientOptions options;
  options.max_idle_connections = 1;
  auto client = Client(options);
  for (int round = 0; round < 2; ++round) {
    EXPECT_EQ(Probe(*client, "a", server.Url()).failure, ProbeFailure::kNone);
    EXPECT_EQ(Probe(*client, "b", server.Url()).failure, ProbeFailure::kNone);
  }
  EXPECT_EQ(client->IdleConnections(), 1u);
  EXPECT_EQ(server.connections(), 3);  // "a" kept its connection, "b" opened one per probe
}

TEST_F(ProbeClientTest, ConnectionCloseFromServerIsRespected) {
  ScriptedServer server([](int, int) { return ScriptedServer::Action::kRespondAndClose; });
  auto client = Client();
  for (int i = 0; i < 3; ++i) {
    ProbeResponse r = Probe(*client, "sp-1", server.Url());
    EXPECT_EQ(r.failure, ProbeFailure::kNone) << r.error;
  }
  EXPECT_EQ(server.connections(), 3);
  EXPECT_EQ(client->IdleConnections(), 0u);
}

TEST_F(ProbeClientTest, ServerClosingIdleConnectionDoesNotFailNextProbe) {
  const std::string url = Serve(Healthy);
  const uint16_t port = static_cast<uint16_t>(std::stoi(url.substr(url.rfind(':') + 1)));
  auto client = Client();
  EXPECT_EQ(Probe(*client, "sp-1", url).failure, ProbeFailure::kNone);
  EXPECT_EQ(client->IdleConnections(), 1u);
  server_->CloseListener(port);  // closes the kept-alive connection on the server side
  ASSERT_TRUE(server_->Listen("127.0.0.1:" + std::to_string(port), Healthy));
  ProbeResponse r = Probe(*client, "sp-1", url);
  EXPECT_EQ(r.failure, ProbeFailure::kNone) << r.error;
  EXPECT_EQ(r.http_status, 200);
}

TEST_F(ProbeClientTest, ReusedConnectionDroppedBeforeResponseIsRetriedOnce) {
  // The server reads the second request on the first connection and closes without answering:
  // the client only learns after sending, so this exercises the retry, not the idle check.
  ScriptedServer server([](int connection, int request) {
    return connection == 0 && request == 1 ? ScriptedServer::Action::kCloseWithoutResponse
                                           : ScriptedServer::Action::kRespond;
  });
  auto client = Client();
  EXPECT_EQ(Probe(*client, "sp-1", server.Url()).failure, ProbeFailure::kNone);
  ProbeResponse r = Probe(*client, "sp-1", server.Url());
  EXPECT_EQ(r.failure, ProbeFailure::kNone) << r.error;
  EXPECT_EQ(server.connections(), 2);
}

TEST_F(ProbeClientTest, FreshConnectionDroppedBeforeResponseIsNotRetried) {
  ScriptedServer server([](int, int) { return ScriptedServer::Action::kCloseWithoutResponse; });
  auto client = Client();
  ProbeResponse r = Probe(*client, "sp-1", server.Url());
  EXPECT_EQ(r.failure, ProbeFailure::kConnect);
  EXPECT_EQ(r.error, "connection closed before a response");
  EXPECT_EQ(server.connections(), 1);
}

TEST_F(ProbeClientTest, ThousandConcurrentProbesAgainstFewServersAllComplete) {
  std::vector<std::string> urls;
  for (int i = 0; i < 4; ++i) urls.push_back(Serve(Healthy));
  ProbeClientOptions options;
  options.threads = 2;
  auto client = Client(options);
  for (int round = 0; round < 2; ++round) {  // the second round reuses the connections
    std::vector<std::future<ProbeResponse>> futures;
    for (int i = 0; i < 1000; ++i) {
      futures.push_back(Start(*client, "sp-" + std::to_string(i), urls[i % urls.size()]));
    }
    int ok = 0;
    for (auto& f : futures) {
      ProbeResponse r = Await(f);
      if (r.failure == ProbeFailure::kNone && r.http_status == 200 && r.body == kHealthy) ++ok;
    }
    EXPECT_EQ(ok, 1000) << "round " << round;
  }
  EXPECT_EQ(client->IdleConnections(), 1000u);
  EXPECT_EQ(client->InFlight(), 0u);
}

// ---- lifecycle ----------------------------------------------------------------------------

TEST_F(ProbeClientTest, StopDropsPendingCallbacksWithoutCallingThem) {
  BlackHole hole;
  auto client = Client();
  auto token = std::make_shared<int>(0);
  std::atomic<int> called{0};
  const std::string url = "http://127.0.0.1:" + std::to_string(hole.port()) + "/health";
  for (int i = 0; i < 10; ++i) {
    client->Check(ProbeRequest{"k" + std::to_string(i), url, 60s},
                  [token, &called](ProbeResponse) { ++called; });
  }
  client->Stop();
  EXPECT_EQ(called.load(), 0);
  EXPECT_EQ(token.use_count(), 1);  // every `done` was destroyed by the time Stop returned
  client->Check(ProbeRequest{"late", url, 1s}, [token, &called](ProbeResponse) { ++called; });
  EXPECT_EQ(called.load(), 0);
  EXPECT_EQ(token.use_count(), 1);
  EXPECT_EQ(client->InFlight(), 0u);
}

TEST_F(ProbeClientTest, StopWithProbesInEveryPhaseCallsNoCallback) {
  BlackHole hole;
  ScriptedServer healthy(AlwaysRespond);
  ProbeClientOptions options;
  options.max_tls_handshakes = 1;
  options.tls = Tls({.insecure_skip_verify = true});
  auto client = Client(options);
  std::atomic<int> called{0};
  auto count = [&called](ProbeResponse) { ++called; };
  const std::string hole_https = "https://127.0.0.1:" + std::to_string(hole.port()) + "/health";
  client->Check(ProbeRequest{"handshaking", hole_https, 60s}, count);
  ASSERT_TRUE(hole.WaitForConnection());
  client->Check(ProbeRequest{"waiting-for-slot", hole_https, 60s}, count);
  client->Check(
      ProbeRequest{"reading", "http://127.0.0.1:" + std::to_string(hole.port()) + "/health", 60s},
      count);
  EXPECT_EQ(Probe(*client, "idle", healthy.Url()).failure, ProbeFailure::kNone);
  const int before = called.load();
  client->Stop();
  client->Stop();  // idempotent
  EXPECT_EQ(called.load(), before);
  EXPECT_EQ(client->IdleConnections(), 0u);
}

TEST_F(ProbeClientTest, CreateRejectsBadOptions) {
  auto tls = TlsClientContext::Create({.ca_file = "/nonexistent/ca.pem"});
  ASSERT_FALSE(tls);
  EXPECT_EQ(tls.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(tls.error().message.find("/nonexistent/ca.pem"), std::string::npos);
  ProbeClientOptions options;
  options.threads = 0;
  EXPECT_FALSE(ProbeClient::Create(options));
}

TEST_F(ProbeClientTest, HalfAClientCertificateIsRefusedAndASharedContextIsUsed) {
  testing::TestCa ca("probe client CA");
  auto cert = ca.Issue("dcm", "", testing::CertUsage::kClient);
  ASSERT_TRUE(cert.ok());
  auto half = TlsClientContext::Create({.client_cert_file = cert.cert_file});
  ASSERT_FALSE(half);
  EXPECT_EQ(half.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(half.error().message.find("go together"), std::string::npos);

  ProbeClientOptions shared;
  shared.tls = Tls({.ca_file = ca.cert_file()});
  EXPECT_TRUE(ProbeClient::Create(shared));
}

// ---- redirects ----------------------------------------------------------------------------

TEST_F(ProbeClientTest, RedirectIsAnHttpStatusFailureAndIsNotFollowed) {
  ScriptedServer elsewhere(AlwaysRespond);
  const std::string location = elsewhere.Url();
  const std::string url = Serve([location](HttpRequest, Respond respond) {
    respond(HttpResponse{302, "text/plain", "", {{"Location", location}}});
  });
  auto client = Client();
  ProbeResponse r = Probe(*client, "sp-1", url);
  EXPECT_EQ(r.failure, ProbeFailure::kNone) << r.error;  // the transport saw a response
  EXPECT_EQ(r.http_status, 302);
  ProbeResponse classified = ClassifyHealthResponse(r);
  EXPECT_EQ(classified.failure, ProbeFailure::kHttpStatus);
  EXPECT_EQ(classified.error, "HTTP 302");
  std::this_thread::sleep_for(50ms);  // a follow-up connection would have been accepted by now
  EXPECT_EQ(elsewhere.connections(), 0);
}

// ---- the outbound policy ------------------------------------------------------------------

std::shared_ptr<const OutboundPolicy> Policy(std::vector<std::string> allow = {}) {
  OutboundPolicy::Options options;
  options.allow_cidrs = std::move(allow);
  auto policy = OutboundPolicy::Create(options);
  EXPECT_TRUE(policy) << policy.error().message;
  return std::make_shared<const OutboundPolicy>(std::move(*policy));
}

class ProbeClientOutboundTest : public ProbeClientTest {
 protected:
  std::unique_ptr<ProbeClient> PolicyClient(std::vector<std::string> allow = {}) {
    ProbeClientOptions options;
    options.outbound = Policy(std::move(allow));
    return Client(options);
  }
  std::string UrlOf(const std::string& host) const {
    return "http://" + host + ":" + std::to_string(server_.port()) + "/health";
  }
  // No connection reached the server (one that had would have been accepted by now).
  void ExpectNoConnection() {
    std::this_thread::sleep_for(50ms);
    EXPECT_EQ(server_.connections(), 0);
  }

  ScriptedServer server_{AlwaysRespond};
};

TEST_F(ProbeClientOutboundTest, LocalhostIsBlockedAndNoConnectionIsMade) {
  auto client = PolicyClient();
  ProbeResponse r = Probe(*client, "sp-1", UrlOf("localhost"));
  EXPECT_EQ(r.failure, ProbeFailure::kBlocked) << r.error;
  EXPECT_EQ(ProbeFailureName(r.failure), "blocked");
  EXPECT_EQ(r.error.rfind("localhost resolves only to refused addresses: ", 0), 0u) << r.error;
  EXPECT_NE(r.error.find("127.0.0.1 is in 127.0.0.0/8 (loopback), refused by the outbound policy"),
            std::string::npos)
      << r.error;
  EXPECT_EQ(r.http_status, 0);
  EXPECT_EQ(ClassifyHealthResponse(r).failure, ProbeFailure::kBlocked);
  ExpectNoConnection();
}

TEST_F(ProbeClientOutboundTest, RefusedIpLiteralsAreBlockedInEverySpelling) {
  auto client = PolicyClient();
  ProbeResponse r = Probe(*client, "sp-1", UrlOf("127.0.0.1"));
  EXPECT_EQ(r.failure, ProbeFailure::kBlocked) << r.error;
  EXPECT_EQ(r.error, "127.0.0.1 is in 127.0.0.0/8 (loopback), refused by the outbound policy");
  // Spellings the resolver turns into 127.0.0.1, and IPv6 forms that embed it.
  for (const char* host : {"2130706433", "0x7f000001", "127.1", "[::ffff:127.0.0.1]"}) {
    ProbeResponse spelled = Probe(*client, std::string("sp-") + host, UrlOf(host));
    EXPECT_EQ(spelled.failure, ProbeFailure::kBlocked) << host << ": " << spelled.error;
  }
  ExpectNoConnection();
}

TEST_F(ProbeClientOutboundTest, AnAllowedCidrLetsTheProbeThrough) {
  auto client = PolicyClient({"127.0.0.0/8"});
  ProbeResponse r = Probe(*client, "sp-1", UrlOf("127.0.0.1"));
  EXPECT_EQ(r.failure, ProbeFailure::kNone) << r.error;
  EXPECT_EQ(r.http_status, 200);
  // localhost's ::1 (if any) stays refused and is dropped; its 127.0.0.1 is used.
  ProbeResponse named = Probe(*client, "sp-2", UrlOf("localhost"));
  EXPECT_EQ(named.failure, ProbeFailure::kNone) << named.error;
  EXPECT_EQ(server_.connections(), 2);
}

TEST_F(ProbeClientOutboundTest, NoPolicyAllowsEverything) {
  auto client = Client();
  ProbeResponse r = Probe(*client, "sp-1", UrlOf("127.0.0.1"));
  EXPECT_EQ(r.failure, ProbeFailure::kNone) << r.error;
}

// ---- HTTPS --------------------------------------------------------------------------------

class ProbeClientTlsTest : public ProbeClientTest {
 protected:
  void SetUp() override { ASSERT_TRUE(pki_.ok()); }
  std::string Url(const char* host) const {
    return std::string("https://") + host + ":" + std::to_string(tls_.port()) + "/health";
  }
  std::unique_ptr<ProbeClient> TlsClient(const std::string& ca_file, bool insecure = false) {
    ProbeClientOptions options;
    options.tls = Tls({.ca_file = ca_file, .insecure_skip_verify = insecure});
    return Client(options);
  }

  Pki pki_;
  TlsServer tls_{pki_};
};

TEST_F(ProbeClientTlsTest, TrustedCaSucceeds) {
  auto client = TlsClient(pki_.trusted_file);
  ProbeResponse r = Probe(*client, "sp-1", Url("127.0.0.1"));
  EXPECT_EQ(r.failure, ProbeFailure::kNone) << r.error;
  EXPECT_EQ(r.http_status, 200);
  EXPECT_EQ(r.body, kHealthy);
  EXPECT_EQ(tls_.served(), 1);
}

TEST_F(ProbeClientTlsTest, UntrustedCertificateIsTlsFailure) {
  auto client = TlsClient(pki_.other_file);
  ProbeResponse r = Probe(*client, "sp-1", Url("127.0.0.1"));
  EXPECT_EQ(r.failure, ProbeFailure::kTls);
  EXPECT_NE(r.error.find("certificate verify failed"), std::string::npos) << r.error;
  EXPECT_EQ(tls_.served(), 0);
}

TEST_F(ProbeClientTlsTest, WrongHostNameIsTlsFailure) {
  auto client = TlsClient(pki_.trusted_file);
  // localhost resolves to this server, but the certificate names 127.0.0.1 and probe.test.
  ProbeResponse r = Probe(*client, "sp-1", Url("localhost"));
  EXPECT_EQ(r.failure, ProbeFailure::kTls);
  EXPECT_NE(r.error.find("mismatch"), std::string::npos) << r.error;
  EXPECT_EQ(tls_.served(), 0);
}

TEST_F(ProbeClientTlsTest, InsecureSkipVerifySucceedsWithUntrustedCertificate) {
  auto client = TlsClient(pki_.other_file, /*insecure=*/true);
  ProbeResponse r = Probe(*client, "sp-1", Url("localhost"));
  EXPECT_EQ(r.failure, ProbeFailure::kNone) << r.error;
  EXPECT_EQ(r.http_status, 200);
}

TEST_F(ProbeClientTlsTest, HandshakesBeyondTheCapWaitForASlot) {
  ProbeClientOptions options;
  options.tls = Tls({.ca_file = pki_.trusted_file});
  options.max_tls_handshakes = 1;
  auto client = Client(options);
  std::vector<std::future<ProbeResponse>> futures;
  for (int i = 0; i < 5; ++i)
    futures.push_back(Start(*client, "k" + std::to_string(i), Url("127.0.0.1")));
  for (auto& f : futures) {
    ProbeResponse r = Await(f);
    EXPECT_EQ(r.failure, ProbeFailure::kNone) << r.error;
  }
  EXPECT_EQ(tls_.served(), 5);
}

TEST_F(ProbeClientTlsTest, WaitForAHandshakeSlotCountsTowardTheDeadline) {
  BlackHole hole;  // a TLS handshake with it never completes, and holds the only slot
  ProbeClientOptions options;
  options.tls = Tls({.ca_file = pki_.trusted_file});
  options.max_tls_handshakes = 1;
  auto client = Client(options);
  auto stuck =
      Start(*client, "stuck", "https://127.0.0.1:" + std::to_string(hole.port()) + "/health", 1s);
  // Once its connect completed, the stuck probe takes the slot in the very next event-loop turn,
  // long before the queued probe below has connected: the queued one must wait and time out.
  ASSERT_TRUE(hole.WaitForConnection());
  auto queued = Start(*client, "queued", Url("127.0.0.1"), 300ms);
  ProbeResponse r = Await(queued);
  EXPECT_EQ(r.failure, ProbeFailure::kTimeout);
  EXPECT_NE(r.error.find("TLS handshake slot"), std::string::npos) << r.error;
  EXPECT_LT(r.latency_us, 400'000);
  EXPECT_EQ(Await(stuck).failure, ProbeFailure::kTimeout);
}

// ---- mTLS: a client certificate for SPs that require one ----------------------------------

class ProbeClientMtlsTest : public ProbeClientTest {
 protected:
  void SetUp() override {
    ASSERT_TRUE(pki_.ok() && client_ca_.ok() && client_cert_.ok());
    const std::string url = Serve(Healthy);
    backend_port_ = static_cast<uint16_t>(std::stoi(url.substr(url.rfind(':') + 1)));
    proxy_ = std::make_unique<testing::TlsProxy>(pki_.server, backend_port_, &client_ca_);
  }
  std::string Url() const {
    return "https://127.0.0.1:" + std::to_string(proxy_->port()) + "/api/vm/health";
  }

  Pki pki_;
  testing::TestCa client_ca_{"SP client CA"};
  testing::TestCert client_cert_ =
      client_ca_.Issue("dcm-prober", "URI:spiffe://dcm.test/prober", testing::CertUsage::kClient);
  uint16_t backend_port_ = 0;
  std::unique_ptr<testing::TlsProxy> proxy_;
};

TEST_F(ProbeClientMtlsTest, ClientCertificateIsPresentedWhenConfigured) {
  ProbeClientOptions options;
  options.tls = Tls({.ca_file = pki_.trusted_file,
                     .client_cert_file = client_cert_.cert_file,
                     .client_key_file = client_cert_.key_file});
  auto client = Client(options);
  ProbeResponse r = Probe(*client, "sp-1", Url());
  EXPECT_EQ(r.failure, ProbeFailure::kNone) << r.error;
  EXPECT_EQ(r.http_status, 200);
  EXPECT_EQ(proxy_->client_subjects(), std::vector<std::string>{"dcm-prober"});
}

TEST_F(ProbeClientMtlsTest, WithoutAClientCertificateTheProbeFails) {
  ProbeClientOptions options;
  options.tls = Tls({.ca_file = pki_.trusted_file});
  auto client = Client(options);
  // TLS 1.3: the server refuses after our side of the handshake completed, so the failure shows
  // as its alert (kTls) or, when the server's reset wins the race, as a reset (kConnect).
  ProbeResponse r = Probe(*client, "sp-1", Url());
  EXPECT_TRUE(r.failure == ProbeFailure::kTls || r.failure == ProbeFailure::kConnect) << r.error;
  EXPECT_EQ(r.http_status, 0);
  // TLS 1.2: the handshake itself fails.
  testing::TlsProxy tls12(pki_.server, backend_port_, &client_ca_, TLS1_2_VERSION);
  r = Probe(*client, "sp-2",
            "https://127.0.0.1:" + std::to_string(tls12.port()) + "/api/vm/health");
  EXPECT_EQ(r.failure, ProbeFailure::kTls) << r.error;
  EXPECT_EQ(r.error.rfind(
                "TLS handshake with 127.0.0.1:" + std::to_string(tls12.port()) + " failed: ", 0),
            0u)
      << r.error;
  EXPECT_TRUE(proxy_->client_subjects().empty());
}

}  // namespace
}  // namespace dcm::http
