// ProbeClient implementation: Beast + Asio C++20 coroutines, one io_context per worker thread.
// See probe_client.h for the contract.
//
// A probe is a shared `Probe` plus one coroutine (RunProbe). The deadline is kept apart from
// the coroutine: the worker's deadline timer (Worker::deadlines) completes the probe with
// kTimeout and then interrupts whatever the coroutine waits on (closes the socket, cancels the
// resolver, leaves the TLS-slot queue). Completion is first-wins
// through `Probe::finished`; the coroutine checks it after every co_await and, when it lost,
// only cleans up. This keeps the deadline exact even when an operation cannot be cancelled
// (getaddrinfo runs on Asio's resolver thread and finishes when it finishes).
//
// Everything about one key (its idle connection, its probes, its TLS waits) lives on one
// worker, so no locks are needed below Check/Forget/Stop.
#include "src/http/probe_client.h"

#include <openssl/ssl.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
// GCC 12 with -fsanitize=address (DCM_SANITIZE) reports a false -Wmaybe-uninitialized inside
// Beast's response parser (a boost::optional in basic_parser::content_length).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <boost/beast/http.hpp>
#pragma GCC diagnostic pop
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "src/common/log.h"
#include "src/common/url.h"
#include "src/http/dialer.h"

namespace dcm::http {
namespace {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using SysError = boost::system::error_code;
using TlsStream = ssl::stream<tcp::socket&>;

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);
// Status line + headers of a health response. Larger is not a health endpoint.
constexpr uint32_t kMaxHeaderBytes = 16 * 1024;
constexpr std::chrono::milliseconds kMinTimeout{0};
constexpr std::chrono::milliseconds kMaxTimeout = std::chrono::hours(24);

// Set on worker threads to their client, so Stop can refuse to join its own thread.
thread_local const void* tls_current_client = nullptr;

struct Core;
struct Worker;
struct KeyState;

// One connection to an origin. The TLS stream, if any, wraps `socket` by reference, so closing
// the socket interrupts a pending TLS operation too.
struct Conn {
  Conn(asio::io_context& ctx, const Url& url, bool reset)
      : socket(ctx),
        https(url.scheme == "https"),
        host(url.host),
        port(url.port),
        reset_on_close(reset) {}
  ~Conn() { Close(); }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  bool SameOrigin(const Url& url) const {
    return https == (url.scheme == "https") && port == url.port && host == url.host;
  }

  void Close() {
    if (!socket.is_open()) return;
    SysError ec;
    // Linger 0: the close sends a reset and leaves no TIME_WAIT socket behind (see
    // ProbeClientOptions::reset_on_close).
    if (reset_on_close) socket.set_option(asio::socket_base::linger(true, 0), ec);
    socket.close(ec);
  }

  tcp::socket socket;
  std::unique_ptr<TlsStream> tls;  // declared after `socket`: destroyed before it
  bool https;
  std::string host;
  uint16_t port;
  bool reset_on_close;
};

struct Probe;

// Unfinished probes of one timeout value, in deadline order (see Worker::deadlines).
struct DeadlineList {
  Probe* head = nullptr;
  Probe* tail = nullptr;
};

struct Probe : std::enable_shared_from_this<Probe> {
  Probe(Worker* wk, ProbeRequest r, HealthChecker::Done d, Clock::time_point s)
      : w(wk), req(std::move(r)), done(std::move(d)), start(s), deadline(s + req.timeout) {}

  Worker* w;
  ProbeRequest req;
  HealthChecker::Done done;
  Clock::time_point start;
  Clock::time_point deadline;
  // Links in the worker's deadline list while unfinished (the list does not own the probe: the
  // coroutine does, and it ends only after the probe finished).
  DeadlineList* deadline_list = nullptr;
  Probe* prev = nullptr;
  Probe* next = nullptr;
  bool finished = false;
  // The key's entry, looked up once: unordered_map nodes never move, and an entry is erased
  // only when no probe of its key is active.
  KeyState* ks = nullptr;
  uint64_t generation = 0;  // of the key when the probe started (see KeyState)
  const char* phase = "";   // for the timeout message
  // What the deadline handler must interrupt, set by the coroutine while it waits on it.
  Conn* conn = nullptr;
  tcp::resolver* resolver = nullptr;
  // TLS handshake slot wait.
  std::optional<asio::steady_timer> slot_wake;
  bool waiting_slot = false;
  bool slot_granted = false;
  std::list<Probe*>::iterator slot_it;
};

// Per key, on its worker. `generation` changes on Forget, so a probe that started before a
// Forget closes its connection instead of returning it to the pool.
struct KeyState {
  std::unique_ptr<Conn> idle;
  uint32_t active = 0;
  uint64_t generation = 0;
};

struct Worker {
  Core* core = nullptr;
  std::unique_ptr<asio::io_context> ctx = std::make_unique<asio::io_context>(1);
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard;
  std::thread thread;
  // Below: touched only on this worker's thread (or by Stop after the thread was joined).
  std::unordered_map<std::string, KeyState> keys;
  size_t idle_count = 0;
  size_t idle_cap = 0;
  size_t tls_free = 0;            // handshake slots not in use
  std::list<Probe*> tls_waiters;  // FIFO
  // Deadlines without one Asio timer per probe: cancelling 10k timers in a 10k-entry heap cost
  // ~1 µs each in cache misses (perf). Probes start in Check order (the start time is taken
  // under the lock that orders the posts), so for one timeout value, appending keeps a list
  // sorted by deadline: O(1) to add and to remove. One timer per worker is armed at the
  // earliest deadline; it is not moved when that probe finishes early, but re-armed when it
  // fires. Few distinct timeout values are expected (one list each).
  std::map<std::chrono::milliseconds::rep, DeadlineList> deadlines;
  std::optional<asio::steady_timer> timer;
  Clock::time_point timer_at = Clock::time_point::max();  // when `timer` fires; max = idle
  // Timed-out probes whose connection or resolve still has to be interrupted (Expire).
  std::deque<std::shared_ptr<Probe>> to_interrupt;
  bool interrupt_posted = false;
  bool stopping = false;
};

struct Core {
  ProbeClientOptions options;
  std::shared_ptr<spdlog::logger> logger = Logger("probe");
  std::shared_ptr<const TlsClientContext> tls;
  std::vector<std::unique_ptr<Worker>> workers;
  std::mutex mu;
  bool stopped = false;  // under mu
  std::atomic<size_t> in_flight{0};
  std::atomic<size_t> idle{0};

  Worker* WorkerFor(const std::string& key) const {
    return workers[std::hash<std::string>{}(key) % workers.size()].get();
  }
};

// ---- completion ------------------------------------------------------------------------------

ProbeResponse Failed(ProbeFailure failure, std::string error) {
  ProbeResponse r;
  r.failure = failure;
  r.error = std::move(error);
  return r;
}

// Runs `done` once; later calls (the coroutine after the deadline, or the reverse) are no-ops.
void Unlink(Probe* p) {
  DeadlineList* list = p->deadline_list;
  if (list == nullptr) return;
  (p->prev != nullptr ? p->prev->next : list->head) = p->next;
  (p->next != nullptr ? p->next->prev : list->tail) = p->prev;
  p->prev = p->next = nullptr;
  p->deadline_list = nullptr;
}

void Finish(Probe* p, ProbeResponse r) {
  if (p->finished) return;
  p->finished = true;
  Unlink(p);
  r.latency_us =
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - p->start).count();
  Core* core = p->w->core;
  core->in_flight.fetch_sub(1, std::memory_order_relaxed);
  HealthChecker::Done done = std::move(p->done);
  try {
    done(std::move(r));
  } catch (const std::exception& e) {
    core->logger->error("msg=\"probe callback threw\" key={} error=\"{}\"", p->req.key, e.what());
  } catch (...) {
    core->logger->error("msg=\"probe callback threw\" key={}", p->req.key);
  }
}

// ---- TLS handshake slots -------------------------------------------------------------------

void ReleaseTlsSlot(Worker* w) {
  if (w->stopping) return;  // Stop is destroying the coroutines; the waiters are gone
  if (w->tls_waiters.empty()) {
    ++w->tls_free;
    return;
  }
  Probe* next = w->tls_waiters.front();  // the slot passes straight to the oldest waiter
  w->tls_waiters.pop_front();
  next->waiting_slot = false;
  next->slot_granted = true;
  next->slot_wake->cancel();
}

// Holds one slot for the duration of a handshake.
class TlsSlot {
 public:
  explicit TlsSlot(Worker* w) : w_(w) {}
  ~TlsSlot() { ReleaseTlsSlot(w_); }
  TlsSlot(const TlsSlot&) = delete;
  TlsSlot& operator=(const TlsSlot&) = delete;

 private:
  Worker* w_;
};

// True with a slot held (the caller must release it); false if the deadline came first.
asio::awaitable<bool> AcquireTlsSlot(Worker* w, std::shared_ptr<Probe> p) {
  if (w->tls_free > 0) {
    --w->tls_free;
    co_return true;
  }
  p->slot_wake.emplace(*w->ctx, Clock::time_point::max());
  p->slot_it = w->tls_waiters.insert(w->tls_waiters.end(), p.get());
  p->waiting_slot = true;
  p->slot_granted = false;
  co_await p->slot_wake->async_wait(kTuple);  // cancelled by ReleaseTlsSlot or the deadline
  co_return p->slot_granted;
}

// ---- deadline ------------------------------------------------------------------------------

// Interrupts what the coroutine waits on; it then sees `finished` and only cleans up. The
// coroutine clears `conn`/`resolver` before it destroys them, so this is safe after it moved on.
void Interrupt(const std::shared_ptr<Probe>& p) {
  if (p->conn != nullptr) p->conn->Close();
  if (p->resolver != nullptr) p->resolver->cancel();
}

// Up to this many interrupts per handler: ~32 connection closes, well under a millisecond.
constexpr size_t kInterruptBatch = 32;

void FlushInterrupts(Worker* w) {
  w->interrupt_posted = false;
  for (size_t i = 0; i < kInterruptBatch && !w->to_interrupt.empty(); ++i) {
    Interrupt(w->to_interrupt.front());
    w->to_interrupt.pop_front();
  }
  if (!w->to_interrupt.empty()) {
    w->interrupt_posted = true;
    asio::post(*w->ctx, [w] { FlushInterrupts(w); });
  }
}

// The probe's deadline passed: report kTimeout now, interrupt what it waits on later.
void Expire(Probe* raw) {
  std::shared_ptr<Probe> p = raw->shared_from_this();  // alive until interrupted
  if (raw->waiting_slot) {
    raw->w->tls_waiters.erase(raw->slot_it);
    raw->waiting_slot = false;
    raw->slot_wake->cancel();
  }
  Finish(raw, Failed(ProbeFailure::kTimeout, "no response in " +
                                                 std::to_string(raw->req.timeout.count()) +
                                                 " ms (" + raw->phase + ")"));
  // Report now, close later: deadlines expire in bursts (a round's black-holed endpoints all
  // at once), and closing a connection costs several times the report (on loopback the peer's
  // side of the reset runs inline). The closes run in small batches, each posted behind the
  // expiries already queued, so they never hold up a report for long.
  Worker* w = raw->w;
  w->to_interrupt.push_back(std::move(p));
  if (!w->interrupt_posted) {
    w->interrupt_posted = true;
    asio::post(*w->ctx, [w] { FlushInterrupts(w); });
  }
}

void OnTimer(Worker* w, const SysError& ec);

// Arms the worker's timer at the earliest deadline, unless it already fires no later.
void ArmTimer(Worker* w) {
  Clock::time_point earliest = Clock::time_point::max();
  for (const auto& [timeout, list] : w->deadlines) {
    if (list.head != nullptr) earliest = std::min(earliest, list.head->deadline);
  }
  if (earliest >= w->timer_at) return;
  w->timer_at = earliest;
  w->timer->expires_at(earliest);  // cancels the previous wait: its handler sees an error
  w->timer->async_wait([w](const SysError& e) { OnTimer(w, e); });
}

void OnTimer(Worker* w, const SysError& ec) {
  if (ec) return;  // superseded by a re-arm, or stopping
  w->timer_at = Clock::time_point::max();
  const auto now = Clock::now();
  for (auto it = w->deadlines.begin(); it != w->deadlines.end();) {
    DeadlineList& list = it->second;
    while (list.head != nullptr && list.head->deadline <= now) Expire(list.head);  // unlinks
    it = list.head == nullptr ? w->deadlines.erase(it) : std::next(it);
  }
  ArmTimer(w);
}

void Link(Worker* w, Probe* p) {
  DeadlineList& list = w->deadlines[p->req.timeout.count()];
  p->deadline_list = &list;
  p->prev = list.tail;
  (list.tail != nullptr ? list.tail->next : list.head) = p;
  list.tail = p;
  if (p->deadline < w->timer_at) ArmTimer(w);
}

// ---- connecting ----------------------------------------------------------------------------

struct Outcome {
  ProbeFailure failure = ProbeFailure::kNone;
  std::string error;
};

// Dials (src/http/dialer.h: resolve, the outbound policy, connect) and, for https, handshakes
// `c`. kNone also when the probe finished meanwhile (the caller checks `finished`). `url` and
// `c` live in the caller's frame.
asio::awaitable<Outcome> Connect(Worker* w, std::shared_ptr<Probe> p, const Url* url, Conn* c) {
  Core* core = w->core;
  p->phase = "connecting";
  const dialer::DialResult dialed =
      co_await dialer::Dial(&c->socket, url->host, url->port, core->options.outbound.get(),
                            dialer::DialWatch{&p->phase, &p->resolver, &p->finished});
  if (p->finished) co_return Outcome{};
  switch (dialed.failure) {
    case dialer::DialFailure::kNone:
      break;
    case dialer::DialFailure::kDns:
      co_return Outcome{ProbeFailure::kDns, dialed.error};
    case dialer::DialFailure::kBlocked:
      co_return Outcome{ProbeFailure::kBlocked, dialed.error};
    case dialer::DialFailure::kConnect:
      co_return Outcome{ProbeFailure::kConnect, dialed.error};
  }
  SysError ec;
  c->socket.set_option(tcp::no_delay(true), ec);
  if (!c->https) co_return Outcome{};

  c->tls = std::make_unique<TlsStream>(c->socket, core->tls->impl().ctx);
  if (!dialer::PrepareTls(c->tls->native_handle(), url->host, core->tls->verifies())) {
    co_return Outcome{ProbeFailure::kTls, "cannot set up TLS for " + url->host};
  }
  p->phase = "waiting for a TLS handshake slot";
  const bool got = co_await AcquireTlsSlot(w, p);
  if (!got) co_return Outcome{};  // the deadline came first
  TlsSlot slot(w);
  if (p->finished) co_return Outcome{};
  p->phase = "TLS handshake";
  auto [hec] = co_await c->tls->async_handshake(ssl::stream_base::client, kTuple);
  if (p->finished) co_return Outcome{};
  if (hec) {
    co_return Outcome{ProbeFailure::kTls,
                      dialer::TlsHandshakeError(c->tls->native_handle(), hec,
                                                dialer::HostPort(url->host, url->port))};
  }
  co_return Outcome{};
}

// False if the server has closed an idle connection (FIN read as EOF), or sent something
// unsolicited on a plain one (e.g. a 408 before closing). One non-blocking peek: it spares the
// retry in the common case; the retry still covers a close racing with our request.
bool StillOpen(Conn& c) {
  char byte = 0;
  const ssize_t n = ::recv(c.socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return false;
  if (n > 0) return c.tls != nullptr;  // TLS: may be a session ticket; the TLS layer decides
  return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
}

// ---- the exchange --------------------------------------------------------------------------

struct Exchanged {
  bool ok = false;
  bool bad_body = false;
  bool got_some = false;   // any response byte arrived
  bool tls_error = false;  // OpenSSL failed (e.g. an alert after the handshake)
  bool keep_alive = false;
  int status = 0;
  std::string body;
  std::string error;
};

template <class Stream>
asio::awaitable<Exchanged> Exchange(Stream* stream, const std::string* request, size_t max_body,
                                    std::shared_ptr<Probe> p) {
  Exchanged x;
  p->phase = "sending the request";
  auto [wec, written] = co_await asio::async_write(*stream, asio::buffer(*request), kTuple);
  if (wec) {
    x.error = "send failed: " + wec.message();
    co_return x;
  }
  p->phase = "waiting for the response";
  beast::flat_buffer buffer;
  bhttp::response_parser<bhttp::string_body> parser;
  parser.header_limit(kMaxHeaderBytes);
  parser.body_limit(max_body);
  auto [rec, read] = co_await bhttp::async_read(*stream, buffer, parser, kTuple);
  x.got_some = parser.got_some();
  if (rec == bhttp::error::body_limit) {
    x.bad_body = true;
    x.error = "response body exceeds " + std::to_string(max_body) + " bytes";
    co_return x;
  }
  if (rec) {
    // With TLS 1.3 a server that refuses our client certificate says so only after the
    // handshake completed on our side: its alert arrives here, and is a TLS failure.
    x.tls_error = rec.category() == asio::error::get_ssl_category();
    x.error = rec == bhttp::error::end_of_stream ? "connection closed before a response"
                                                 : "reading the response: " + rec.message();
    co_return x;
  }
  x.ok = true;
  x.status = static_cast<int>(parser.get().result_int());
  // Bytes after the response would be a protocol error (we never pipeline): do not reuse.
  x.keep_alive = parser.keep_alive() && buffer.size() == 0;
  x.body = std::move(parser.get().body());
  co_return x;
}

// "GET /path HTTP/1.1" by hand: the URL parser already rejected whitespace and control
// characters, and this is cheaper than Beast's serializer for a fixed request.
std::string BuildRequest(const Url& url, const std::string& user_agent) {
  const bool v6 = url.host.find(':') != std::string::npos;
  std::string host = v6 ? "[" + url.host + "]" : url.host;
  const bool default_port = url.port == (url.scheme == "https" ? 443 : 80);
  if (!default_port) host += ":" + std::to_string(url.port);
  std::string out;
  out.reserve(url.target.size() + host.size() + user_agent.size() + 80);
  out.append("GET ").append(url.target).append(" HTTP/1.1\r\nHost: ").append(host);
  out.append("\r\nUser-Agent: ").append(user_agent);
  out.append("\r\nAccept: application/json\r\n\r\n");
  return out;
}

// ---- the pool ------------------------------------------------------------------------------

void SetIdle(Worker* w, KeyState& ks, std::unique_ptr<Conn> conn) {
  ks.idle = std::move(conn);
  ++w->idle_count;
  w->core->idle.fetch_add(1, std::memory_order_relaxed);
}

std::unique_ptr<Conn> TakeIdle(Worker* w, KeyState& ks) {
  if (!ks.idle) return nullptr;
  --w->idle_count;
  w->core->idle.fetch_sub(1, std::memory_order_relaxed);
  return std::move(ks.idle);
}

// Keeps `conn` for the key's next probe, or closes it: after a Forget, when the key already
// has one (concurrent probes of a key), or beyond the cap. Closing on return (rather than
// evicting the least recently used) keeps a stable set alive when every key is probed in turn.
void ReturnToPool(Worker* w, const Probe& p, std::unique_ptr<Conn> conn) {
  KeyState& ks = *p.ks;
  if (w->stopping || ks.generation != p.generation || ks.idle || w->idle_count >= w->idle_cap) {
    return;
  }
  SetIdle(w, ks, std::move(conn));
}

void EndProbe(Worker* w, const Probe& p) {
  if (--p.ks->active == 0 && !p.ks->idle) w->keys.erase(p.req.key);
}

asio::awaitable<void> RunProbe(Worker* w, std::shared_ptr<Probe> p, Url url) {
  Core* core = w->core;
  std::unique_ptr<Conn> conn;
  p->ks = &w->keys[p->req.key];
  ++p->ks->active;
  p->generation = p->ks->generation;
  conn = TakeIdle(w, *p->ks);
  if (conn && !conn->SameOrigin(url)) conn.reset();  // the endpoint moved
  try {
    const std::string request = BuildRequest(url, core->options.user_agent);
    for (int attempt = 0;; ++attempt) {
      if (conn && !StillOpen(*conn)) conn.reset();
      const bool reused = conn != nullptr;
      if (!conn) {
        conn = std::make_unique<Conn>(*w->ctx, url, core->options.reset_on_close);
        p->conn = conn.get();
        Outcome connected = co_await Connect(w, p, &url, conn.get());
        if (p->finished) break;
        if (connected.failure != ProbeFailure::kNone) {
          Finish(p.get(), Failed(connected.failure, std::move(connected.error)));
          break;
        }
      }
      p->conn = conn.get();
      // Two statements, not `?:` around co_await: GCC 12 has bugs with co_await in
      // conditional expressions.
      Exchanged x;
      if (conn->tls) {
        x = co_await Exchange(conn->tls.get(), &request, core->options.max_body_bytes, p);
      } else {
        x = co_await Exchange(&conn->socket, &request, core->options.max_body_bytes, p);
      }
      p->conn = nullptr;
      if (p->finished) break;
      if (x.ok) {
        if (x.keep_alive) ReturnToPool(w, *p, std::move(conn));
        ProbeResponse r;
        r.http_status = x.status;
        r.body = std::move(x.body);
        Finish(p.get(), std::move(r));
        break;
      }
      conn.reset();
      if (x.bad_body) {
        Finish(p.get(), Failed(ProbeFailure::kBadBody, std::move(x.error)));
        break;
      }
      // A kept-alive connection the server closed while we sent: once more on a fresh one.
      if (reused && !x.got_some && attempt == 0) continue;
      Finish(p.get(),
             Failed(x.tls_error ? ProbeFailure::kTls : ProbeFailure::kConnect, std::move(x.error)));
      break;
    }
  } catch (const std::exception& e) {  // allocation or other unexpected library failures
    p->conn = nullptr;
    p->resolver = nullptr;
    Finish(p.get(), Failed(ProbeFailure::kConnect, std::string("internal error: ") + e.what()));
  }
  p->conn = nullptr;
  conn.reset();
  EndProbe(w, *p);
}

void StartProbe(Worker* w, Clock::time_point start, ProbeRequest request,
                HealthChecker::Done done) {
  // Clamped so that start + timeout cannot overflow, and a negative timeout expires at once.
  request.timeout =
      std::clamp<std::chrono::milliseconds>(request.timeout, kMinTimeout, kMaxTimeout);
  auto p = std::make_shared<Probe>(w, std::move(request), std::move(done), start);
  auto url = ParseHttpUrl(p->req.url);
  if (!url) {
    Finish(p.get(), Failed(ProbeFailure::kConnect, "invalid URL: " + url.error().message));
    return;
  }
  Link(w, p.get());
  asio::co_spawn(*w->ctx, RunProbe(w, p, std::move(*url)), asio::detached);
}

void ForgetOnWorker(Worker* w, const std::string& key) {
  auto it = w->keys.find(key);
  if (it == w->keys.end()) return;
  ++it->second.generation;
  TakeIdle(w, it->second).reset();
  if (it->second.active == 0) w->keys.erase(it);
}

size_t DefaultIdleCap() {
  rlimit limit{};
  size_t nofile = 1024;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    nofile = limit.rlim_cur == RLIM_INFINITY ? (1u << 20) : static_cast<size_t>(limit.rlim_cur);
  }
  const size_t reserve = std::min<size_t>(1024, nofile / 4);
  return (nofile - reserve) / 2;
}

}  // namespace

struct ProbeClient::Impl : Core {};

Result<std::unique_ptr<ProbeClient>> ProbeClient::Create(ProbeClientOptions options) {
  auto bad = [](std::string why) { return MakeError(ErrorCode::kInvalidArgument, std::move(why)); };
  if (options.threads < 1 || options.threads > 256) return bad("threads must be in 1..256");
  if (options.max_tls_handshakes < 1) return bad("max_tls_handshakes must be >= 1");
  if (options.max_body_bytes < 1) return bad("max_body_bytes must be >= 1");
  if (options.user_agent.find_first_of("\r\n") != std::string::npos) {
    return bad("user_agent must not contain line breaks");
  }
  auto impl = std::make_unique<Impl>();
  if (options.tls) {
    impl->tls = options.tls;
  } else {
    ASSIGN_OR_RETURN(impl->tls, TlsClientContext::Default());
  }
  const size_t threads = static_cast<size_t>(options.threads);
  const size_t idle_total =
      options.max_idle_connections > 0 ? options.max_idle_connections : DefaultIdleCap();
  const size_t tls_per_worker = std::max<size_t>(1, options.max_tls_handshakes / threads);
  impl->options = std::move(options);
  Core* core = impl.get();
  try {
    for (size_t i = 0; i < threads; ++i) {
      auto w = std::make_unique<Worker>();
      w->core = core;
      w->idle_cap = (idle_total + threads - 1) / threads;
      w->tls_free = tls_per_worker;
      w->guard.emplace(w->ctx->get_executor());
      w->timer.emplace(*w->ctx);
      Worker* wp = w.get();
      core->workers.push_back(std::move(w));
      wp->thread = std::thread([core, wp, i] {
        tls_current_client = core;
        // Named for top/perf: "probe-0", "probe-1", ...
        pthread_setname_np(pthread_self(), ("probe-" + std::to_string(i)).c_str());
        for (;;) {
          try {
            wp->ctx->run();
            return;
          } catch (const std::exception& e) {
            core->logger->error("msg=\"probe worker loop threw\" error=\"{}\"", e.what());
          }
        }
      });
    }
  } catch (const std::exception& e) {  // std::thread could not start
    auto client = std::unique_ptr<ProbeClient>(new ProbeClient(std::move(impl)));
    client->Stop();
    return MakeError(ErrorCode::kInternal, std::string("cannot start probe threads: ") + e.what());
  }
  return std::unique_ptr<ProbeClient>(new ProbeClient(std::move(impl)));
}

ProbeClient::ProbeClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ProbeClient::~ProbeClient() { Stop(); }

void ProbeClient::Check(ProbeRequest request, Done done) {
  Worker* w = impl_->WorkerFor(request.key);
  std::lock_guard lock(impl_->mu);
  if (impl_->stopped) return;  // `done` is dropped (probe_client.h)
  // Under the lock that orders the posts: a worker sees non-decreasing start times, which keeps
  // its deadline lists sorted (Worker::deadlines).
  const auto start = Clock::now();
  impl_->in_flight.fetch_add(1, std::memory_order_relaxed);
  try {
    asio::post(*w->ctx, [w, start, request = std::move(request), done = std::move(done)]() mutable {
      StartProbe(w, start, std::move(request), std::move(done));
    });
  } catch (const std::exception& e) {
    impl_->in_flight.fetch_sub(1, std::memory_order_relaxed);
    impl_->logger->error("msg=\"cannot queue a probe\" error=\"{}\"", e.what());
  }
}

void ProbeClient::Forget(const std::string& key) {
  Worker* w = impl_->WorkerFor(key);
  std::lock_guard lock(impl_->mu);
  if (impl_->stopped) return;
  try {
    asio::post(*w->ctx, [w, key] { ForgetOnWorker(w, key); });
  } catch (const std::exception& e) {
    impl_->logger->error("msg=\"cannot queue a forget\" error=\"{}\"", e.what());
  }
}

void ProbeClient::Stop() {
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->stopped) return;
    impl_->stopped = true;
  }
  if (tls_current_client == impl_.get()) {
    // Joining our own thread cannot work; fail loudly rather than deadlock or leak threads.
    impl_->logger->critical("msg=\"ProbeClient::Stop called from a probe callback\"");
    std::abort();
  }
  for (auto& w : impl_->workers) {
    w->guard.reset();
    w->ctx->stop();
  }
  for (auto& w : impl_->workers) {
    if (w->thread.joinable()) w->thread.join();
  }
  // The threads are gone: the workers' state is ours now. Close the idle connections, then
  // destroy each io_context, which destroys the queued Checks and the suspended probes with
  // their sockets and `done` callbacks (uncalled), before the io_context itself goes.
  for (auto& w : impl_->workers) {
    w->stopping = true;
    w->timer.reset();
    w->deadlines.clear();
    w->to_interrupt.clear();
    w->tls_waiters.clear();
    w->keys.clear();
  }
  for (auto& w : impl_->workers) w->ctx.reset();
  impl_->in_flight.store(0);
  impl_->idle.store(0);
}

size_t ProbeClient::InFlight() const { return impl_->in_flight.load(std::memory_order_relaxed); }

size_t ProbeClient::IdleConnections() const { return impl_->idle.load(std::memory_order_relaxed); }

}  // namespace dcm::http
