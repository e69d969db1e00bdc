// One probe on a ProbeClient worker (probe_client.h, probe_client_core.h): connect (resolve,
// dial through the outbound policy, TLS under a handshake slot), exchange, return the
// connection to the key's pool; the deadline completes the probe first and interrupts whatever
// it waits on.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
// GCC 12 with -fsanitize=address (DCM_SANITIZE) reports a false -Wmaybe-uninitialized inside
// Beast's response parser (a boost::optional in basic_parser::content_length).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <boost/beast/http.hpp>
#pragma GCC diagnostic pop

#include "src/http/probe_client_core.h"

namespace dcm::http::probe_detail {
namespace {

namespace bhttp = boost::beast::http;

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

}  // namespace

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

}  // namespace dcm::http::probe_detail
