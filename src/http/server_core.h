// The state HttpServer (server.h) shares with its connection coroutines: the workers (one
// io_context and thread each), the Respond hand-over of a deferred response, the server-wide
// Core, and a connection over either stream type. Internal to dcm_http_server.
//
//   server.cc: Create/Listen/CloseListener/Stop over Core ─▶ AcceptLoop (server_connection.cc)
//   ─▶ Session/TlsSession ─▶ ServeConnection: read ─▶ handler ─▶ write, per Conn
//
// Thread-safety: each Worker's connections are touched only on its thread; Core's fields say
// which mutex guards them.
#pragma once

#include <sys/socket.h>

#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "src/common/log.h"
#include "src/common/metrics.h"
#include "src/http/server.h"
#include "src/http/server_tls.h"

namespace dcm::http::server_detail {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace ssl = boost::asio::ssl;
using tcp = asio::ip::tcp;
using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;
template <class Stream>
inline constexpr bool kIsTls = std::is_same_v<Stream, TlsStream>;
using Clock = std::chrono::steady_clock;
using ReusePort = asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);
// After an error response, read and discard what the client still sends for this long, so it
// reads our 4xx instead of a TCP reset (HTTP-NOTES: without it the client never sees the 413).
constexpr std::chrono::milliseconds kDrainTimeout{500};
constexpr size_t kMaxDrainBytes = 64u << 20;
constexpr size_t kFirstReadBytes = 4096;

// Connections being refused at once (a 503 written, then a drain of at most kDrainTimeout so the
// client reads it instead of a reset). Beyond it a refused connection is closed without a word:
// refusals never hold more than this many descriptors.
constexpr size_t kMaxRefusing = kRefusalSlots;

// Set on worker threads to the server they belong to (CloseListener must not wait on itself).
inline thread_local const void* tls_current_server = nullptr;

// ---- server state -------------------------------------------------------------------------

// Lets a Respond called from any thread know whether the worker's io_context may still be
// posted to. Closed (under mu) by Stop before the io_context stops.
struct Gate {
  std::mutex mu;
  bool open = true;
};

struct ConnBase;

struct Worker {
  std::unique_ptr<asio::io_context> ctx = std::make_unique<asio::io_context>(1);
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard;
  std::thread thread;
  std::shared_ptr<Gate> gate = std::make_shared<Gate>();
  // Touched only on this worker's thread.
  std::unordered_map<uint64_t, ConnBase*> conns;
  uint64_t next_conn_id = 0;
  std::unordered_map<int, Counter*> code_counters;
};

// One wait for a deferred response. Shared with the read that watches for the peer leaving,
// and reachable from Respond through a weak_ptr; used only on the worker thread.
struct Wait {
  explicit Wait(asio::io_context& ctx) : timer(ctx) {}
  asio::steady_timer timer;
  bool watch_pending = false;
  bool peer_gone = false;
  size_t watched = 0;  // bytes of a pipelined next request read by the watch
  std::array<char, 4096> watch_buf{};
};

// Shared between the connection coroutine and the Respond given to the handler (which may
// outlive the connection and the server).
struct RespondState {
  RespondState(std::shared_ptr<Gate> g, asio::io_context::executor_type e)
      : gate(std::move(g)), ex(e) {}
  std::mutex mu;
  std::optional<HttpResponse> response;  // under mu
  bool closed = false;                   // under mu: the connection stopped waiting
  bool waiting = false;                  // under mu: the coroutine needs a wake-up post
  std::shared_ptr<Gate> gate;
  asio::io_context::executor_type ex;
  std::weak_ptr<Wait> wait;  // worker thread only
};

inline Respond MakeRespond(std::shared_ptr<RespondState> st) {
  return [st = std::move(st)](HttpResponse response) {
    {
      std::lock_guard lock(st->mu);
      if (st->closed || st->response) return;  // exactly once; late answers are dropped
      st->response = std::move(response);
      if (!st->waiting) return;  // answered inside the handler call: no wake-up needed
    }
    std::lock_guard lock(st->gate->mu);
    if (!st->gate->open) return;
    asio::post(st->ex, [st] {
      if (auto wait = st->wait.lock()) wait->timer.cancel();
    });
  };
}

// At most one log line a second from any number of threads (races only blur the second).
class LogThrottle {
 public:
  bool Allow() {
    const int64_t second =
        std::chrono::duration_cast<std::chrono::seconds>(Clock::now().time_since_epoch()).count();
    int64_t last = last_.load(std::memory_order_relaxed);
    return last != second && last_.compare_exchange_strong(last, second);
  }

 private:
  std::atomic<int64_t> last_{-1};
};

struct Core;

// Why an accepted connection is refused (ServerOptions::max_connections and
// max_connections_per_client), or kNone when it is admitted.
enum class Refusal { kNone, kTotal, kClient };

// An admitted connection's place under the caps: it counts from Core::Admit until destroyed
// (moved into the connection's coroutine frame, so it ends with the connection).
class Admission {
 public:
  Admission() = default;
  Admission(Admission&& other) noexcept
      : core_(std::exchange(other.core_, nullptr)), client_(std::move(other.client_)) {}
  Admission& operator=(Admission&&) = delete;
  Admission(const Admission&) = delete;
  ~Admission();

 private:
  friend struct Core;
  Core* core_ = nullptr;
  std::optional<asio::ip::address> client_;  // counted per client
};

// Everything the workers share; HttpServer::Impl derives from it (the coroutines below are
// free functions and cannot name the private HttpServer::Impl).
struct Core {
  ServerOptions options;
  std::shared_ptr<spdlog::logger> logger = Logger("http");
  Histogram* duration = nullptr;
  std::vector<std::unique_ptr<Worker>> workers;

  std::mutex mu;
  bool stopped = false;                                                       // under mu
  std::map<uint16_t, std::vector<std::shared_ptr<tcp::acceptor>>> listeners;  // under mu

  // TLS: fixed at Create. The context is read at every accept and swapped by ReloadTls.
  bool tls_enabled = false;
  std::mutex reload_mu;  // one ReloadTls at a time
  std::mutex tls_mu;
  std::shared_ptr<TlsContext> tls;  // under tls_mu
  std::array<Counter*, kHandshakeFailureNames.size()> handshake_failures{};
  Gauge* cert_not_after = nullptr;

  // Connection caps (SPEC §7): every admitted connection, and refusals in progress.
  std::atomic<size_t> open_connections{0};
  std::atomic<size_t> refusing{0};
  std::mutex clients_mu;
  std::unordered_map<asio::ip::address, size_t> per_client;  // under clients_mu
  std::array<std::string, 3> refusal_bytes;  // the raw 503 per Refusal, built at Create
  Gauge* open_gauge = nullptr;
  std::array<Counter*, 3> refused{};
  Counter* accept_errors = nullptr;
  LogThrottle refusal_log;

  // Counts a connection from `peer` under the caps: kNone and `*out` holds its place, or why it
  // is refused (nothing counted). Any thread.
  Refusal Admit(asio::ip::address peer, Admission* out) {
    const size_t cap = options.max_connections;
    if (open_connections.fetch_add(1) >= cap && cap > 0) {
      open_connections.fetch_sub(1);
      return Refusal::kTotal;
    }
    if (options.max_connections_per_client > 0) {
      if (peer.is_v6() && peer.to_v6().is_v4_mapped()) {
        peer = asio::ip::make_address_v4(asio::ip::v4_mapped, peer.to_v6());
      }
      std::lock_guard lock(clients_mu);
      size_t& n = per_client[peer];
      if (n >= options.max_connections_per_client) {
        open_connections.fetch_sub(1);
        return Refusal::kClient;
      }
      ++n;
      out->client_ = peer;
    }
    out->core_ = this;
    if (open_gauge != nullptr) open_gauge->Add(1);
    return Refusal::kNone;
  }

  void Release(Admission& a) {
    if (a.client_) {
      std::lock_guard lock(clients_mu);
      auto it = per_client.find(*a.client_);
      if (it != per_client.end() && --it->second == 0) per_client.erase(it);
    }
    open_connections.fetch_sub(1);
    if (open_gauge != nullptr) open_gauge->Add(-1);
  }

  // A slot to write a refusal in, or false when kMaxRefusing are in progress.
  bool TakeRefusalSlot() {
    if (refusing.fetch_add(1) < kMaxRefusing) return true;
    refusing.fetch_sub(1);
    return false;
  }

  std::shared_ptr<TlsContext> CurrentTls() {
    std::lock_guard lock(tls_mu);
    return tls;
  }

  void InstallTls(std::shared_ptr<TlsContext> fresh) {
    logger->info("msg=\"tls certificate loaded\" {} client_certificates={}", fresh->description,
                 fresh->verify_clients ? "requested" : "off");
    if (cert_not_after != nullptr) cert_not_after->Set(static_cast<int64_t>(fresh->not_after));
    std::lock_guard lock(tls_mu);
    tls.swap(fresh);  // the old context dies with its last connection, outside the lock
  }

  void CountHandshakeFailure(HandshakeFailure why) {
    if (Counter* c = handshake_failures[static_cast<size_t>(why)]) c->Inc();
  }

  Counter* CodeCounter(Worker* w, int code) {
    auto it = w->code_counters.find(code);
    if (it != w->code_counters.end()) return it->second;
    Counter* c = &options.metrics->GetCounter("dcm_http_requests_total",
                                              "HTTP requests answered, by status code",
                                              "code=\"" + std::to_string(code) + "\"");
    w->code_counters.emplace(code, c);
    return c;
  }

  void Record(Worker* w, int code, Clock::time_point start) {
    if (options.metrics == nullptr) return;
    CodeCounter(w, code)->Inc();
    duration->Observe(std::chrono::duration<double>(Clock::now() - start).count());
  }

  // Runs `fn` on worker `w`'s thread and waits for it, unless waiting could deadlock (called
  // from one of this server's own workers). Caller holds `mu` and `stopped` is false.
  std::future<void> RunOn(Worker* w, std::function<void()> fn) {
    if (w->ctx->get_executor().running_in_this_thread()) {
      fn();
      return {};
    }
    auto done = std::make_shared<std::promise<void>>();
    std::future<void> result = done->get_future();
    asio::post(*w->ctx, [fn = std::move(fn), done] {
      fn();
      done->set_value();
    });
    if (tls_current_server == this) return {};
    return result;
  }
};

inline Admission::~Admission() {
  if (core_ != nullptr) core_->Release(*this);
}

// A connection, living in its coroutine's frame. Registered with its worker so CloseListener
// and Stop can close it (the only virtual call: never on the request path).
struct ConnBase {
  ConnBase(Core* c, Worker* wk, uint16_t p) : core(c), w(wk), port(p), id(wk->next_conn_id++) {
    w->conns.emplace(id, this);
  }
  virtual ~ConnBase() { w->conns.erase(id); }
  ConnBase(const ConnBase&) = delete;
  ConnBase& operator=(const ConnBase&) = delete;

  virtual void Close() = 0;

  Core* core;
  Worker* w;
  beast::flat_buffer buffer;
  uint16_t port;
  uint64_t id;
  bool closing = false;
  std::weak_ptr<Wait> wait;
  std::string peer_subject;  // TLS with a verified client certificate only
};

template <class Stream>
struct Conn final : ConnBase {
  template <class... StreamArgs>
  Conn(Core* c, Worker* wk, uint16_t p, StreamArgs&&... args)
      : ConnBase(c, wk, p), stream(std::forward<StreamArgs>(args)...) {}

  // The TCP layer: the stream itself when plain. Deadlines and closing happen here.
  beast::tcp_stream& tcp() { return beast::get_lowest_layer(stream); }

  void Close() override {
    closing = true;
    beast::error_code ec;
    tcp().socket().shutdown(tcp::socket::shutdown_both, ec);
    tcp().close();
    if (auto wt = wait.lock()) wt->timer.cancel();
  }

  Stream stream;
};

// Sends a response whose body is `r.stream` (server_stream.cc), then the connection is done.
template <class Stream>
asio::awaitable<void> StreamResponse(Conn<Stream>* c, HttpResponse r, unsigned version);

// The raw HTTP/1.1 503 a connection refused for `why` gets (problem+json naming the cap).
std::string RefusalResponse(const ServerOptions& options, Refusal why);

// Serves the connections `acceptor` accepts on worker `w`, until the acceptor closes.
asio::awaitable<void> AcceptLoop(Core* core, Worker* w, std::shared_ptr<tcp::acceptor> acceptor,
                                 uint16_t port, std::shared_ptr<const Handler> handler);

}  // namespace dcm::http::server_detail
