// HttpServer implementation: Beast + Asio C++20 coroutines, one io_context per worker thread.
// See server.h for the contract and docs/http.md for the design.
//
// Per connection (one coroutine, on the worker that accepted it):
//
//   wait first byte ──(idle/read deadline)──> close
//        │
//   read request (read deadline) ──parse error──> 400/413/431 + drain + close
//        │                        └─timeout/EOF─> close
//   handler ──respond──> write ──keep-alive──> wait first byte
//        │                  └──close──> shutdown
//        ├─handler_timeout─> 503
//        └─peer gone───────> close
#include "src/http/server.h"

#include <sys/socket.h>

#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "src/common/json_writer.h"
#include "src/common/log.h"

namespace dcm::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using ReusePort = asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);
// After an error response, read and discard what the client still sends for this long, so it
// reads our 4xx instead of a TCP reset (HTTP-NOTES: without it the client never sees the 413).
constexpr std::chrono::milliseconds kDrainTimeout{500};
constexpr size_t kMaxDrainBytes = 64u << 20;
constexpr size_t kFirstReadBytes = 4096;

// Set on worker threads to the server they belong to (CloseListener must not wait on itself).
thread_local const void* tls_current_server = nullptr;

// ---- request target parsing -------------------------------------------------------------

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Invalid escapes are kept literally: a lenient decode never turns a request into a 400.
std::string PercentDecode(std::string_view s, bool plus_as_space) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '%' && i + 2 < s.size()) {
      const int hi = HexValue(s[i + 1]);
      const int lo = HexValue(s[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
        continue;
      }
    }
    out.push_back(plus_as_space && c == '+' ? ' ' : c);
  }
  return out;
}

void ParseQuery(std::string_view query, std::multimap<std::string, std::string>* out) {
  while (!query.empty()) {
    const size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    std::string_view key = pair.substr(0, eq);
    std::string_view value =
        eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
    out->emplace(PercentDecode(key, true), PercentDecode(value, true));
  }
}

std::string LowerCase(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// ---- responses ----------------------------------------------------------------------------

std::string Reason(int status) {
  const auto reason = bhttp::obsolete_reason(bhttp::int_to_status(static_cast<unsigned>(status)));
  return std::string(reason);
}

HttpResponse Problem(int status, std::string_view detail) {
  JsonWriter w;
  w.BeginObject();
  w.Field("type", "about:blank");
  w.Field("title", Reason(status));
  w.Field("status", status);
  w.Field("detail", detail);
  w.EndObject();
  return HttpResponse{status, "application/problem+json", w.Take(), {}};
}

// ---- server state -------------------------------------------------------------------------

// Lets a Respond called from any thread know whether the worker's io_context may still be
// posted to. Closed (under mu) by Stop before the io_context stops.
struct Gate {
  std::mutex mu;
  bool open = true;
};

struct Conn;

struct Worker {
  std::unique_ptr<asio::io_context> ctx = std::make_unique<asio::io_context>(1);
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard;
  std::thread thread;
  std::shared_ptr<Gate> gate = std::make_shared<Gate>();
  // Touched only on this worker's thread.
  std::unordered_map<uint64_t, Conn*> conns;
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

Respond MakeRespond(std::shared_ptr<RespondState> st) {
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

// A connection, living in its coroutine's frame. Registered with its worker so CloseListener
// and Stop can close it.
struct Conn {
  Conn(Core* c, Worker* wk, tcp::socket socket, uint16_t p)
      : core(c), w(wk), stream(std::move(socket)), port(p), id(wk->next_conn_id++) {
    w->conns.emplace(id, this);
  }
  ~Conn() { w->conns.erase(id); }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  void Close() {
    closing = true;
    beast::error_code ec;
    stream.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream.close();
    if (auto wt = wait.lock()) wt->timer.cancel();
  }

  Core* core;
  Worker* w;
  beast::tcp_stream stream;
  beast::flat_buffer buffer;
  uint16_t port;
  uint64_t id;
  bool closing = false;
  std::weak_ptr<Wait> wait;
};

struct ReadOutcome {
  enum Kind { kRequest, kClose, kReject } kind = kClose;
  int status = 0;  // for kReject
  std::string detail;
  bhttp::request<bhttp::string_body> request;
};

ReadOutcome Classify(const beast::error_code& ec, const ServerOptions& o) {
  ReadOutcome out;
  if (ec == bhttp::error::header_limit || ec == bhttp::error::buffer_overflow) {
    out.kind = ReadOutcome::kReject;
    out.status = 431;
    out.detail = "request headers exceed " + std::to_string(o.max_header_bytes) + " bytes";
  } else if (ec == bhttp::error::body_limit) {
    out.kind = ReadOutcome::kReject;
    out.status = 413;
    out.detail = "request body exceeds " + std::to_string(o.max_body_bytes) + " bytes";
  } else if (ec.category() == bhttp::make_error_code(bhttp::error::bad_target).category() &&
             ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message) {
    out.kind = ReadOutcome::kReject;
    out.status = 400;
    out.detail = "malformed request: " + ec.message();
  }
  return out;  // timeouts, resets and EOF: just close
}

bool ExpectsContinue(const bhttp::request<bhttp::string_body>& req) {
  auto expect = req[bhttp::field::expect];
  return req.version() >= 11 && beast::iequals(expect, "100-continue");
}

asio::awaitable<ReadOutcome> ReadRequest(Conn* c, bool first) {
  const ServerOptions& o = c->core->options;
  ReadOutcome out;
  beast::error_code ec;
  size_t n = 0;
  if (c->buffer.size() == 0) {  // wait for the first byte under the idle deadline
    c->stream.expires_after(first ? o.read_timeout : o.idle_timeout);
    std::tie(ec, n) =
        co_await c->stream.async_read_some(c->buffer.prepare(kFirstReadBytes), kTuple);
    if (ec) co_return out;
    c->buffer.commit(n);
  }
  c->stream.expires_after(o.read_timeout);  // the whole request, headers and body
  bhttp::request_parser<bhttp::string_body> parser;
  parser.header_limit(static_cast<uint32_t>(o.max_header_bytes));
  parser.body_limit(o.max_body_bytes);
  std::tie(ec, n) = co_await bhttp::async_read_header(c->stream, c->buffer, parser, kTuple);
  if (!ec && !parser.is_done() && ExpectsContinue(parser.get())) {
    static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
    std::tie(ec, n) = co_await asio::async_write(
        c->stream, asio::buffer(kContinue, sizeof(kContinue) - 1), kTuple);
  }
  if (!ec && !parser.is_done()) {
    std::tie(ec, n) = co_await bhttp::async_read(c->stream, c->buffer, parser, kTuple);
  }
  if (ec) co_return Classify(ec, o);
  out.kind = ReadOutcome::kRequest;
  out.request = parser.release();
  co_return out;
}

Result<HttpRequest> ToHttpRequest(bhttp::request<bhttp::string_body>&& req) {
  HttpRequest out;
  out.method = std::string(req.method_string());
  out.target = std::string(req.target());
  if (out.target.empty() || out.target.front() != '/') {
    return MakeError(ErrorCode::kInvalidArgument, "request target must start with '/'");
  }
  const size_t q = out.target.find('?');
  out.path = PercentDecode(std::string_view(out.target).substr(0, q), false);
  if (q != std::string::npos) ParseQuery(std::string_view(out.target).substr(q + 1), &out.query);
  for (const auto& field : req) {
    auto [it, inserted] = out.headers.emplace(LowerCase(field.name_string()), field.value());
    if (!inserted) it->second.append(", ").append(field.value());
  }
  out.body = std::move(req.body());
  return out;
}

// Watches the socket while a deferred response is pending, so a client that gives up (closes)
// frees the connection at once instead of at handler_timeout.
void StartWatch(Conn* c, const std::shared_ptr<Wait>& wait) {
  wait->watch_pending = true;
  c->stream.socket().async_read_some(asio::buffer(wait->watch_buf),
                                     [wait](const beast::error_code& ec, size_t n) {
                                       wait->watch_pending = false;
                                       wait->watched = n;
                                       if (ec && ec != asio::error::operation_aborted) {
                                         wait->peer_gone = true;
                                       }
                                       wait->timer.cancel();
                                     });
}

// Ends the watch and keeps whatever pipelined bytes it read.
asio::awaitable<void> StopWatch(Conn* c, std::shared_ptr<Wait> wait) {
  if (wait->watch_pending) {
    beast::error_code ec;
    c->stream.socket().cancel(ec);
    wait->timer.expires_at(Clock::time_point::max());
    while (wait->watch_pending) co_await wait->timer.async_wait(kTuple);
  }
  if (wait->watched > 0) {
    auto buf = c->buffer.prepare(wait->watched);
    asio::buffer_copy(buf, asio::buffer(wait->watch_buf.data(), wait->watched));
    c->buffer.commit(wait->watched);
  }
}

// Calls the handler and waits for its response. nullopt: the connection is gone.
asio::awaitable<std::optional<HttpResponse>> Dispatch(Conn* c, const Handler* handler,
                                                      HttpRequest request) {
  auto st = std::make_shared<RespondState>(c->w->gate, c->w->ctx->get_executor());
  try {
    (*handler)(std::move(request), MakeRespond(st));
  } catch (const std::exception& e) {
    c->core->logger->error("msg=\"handler threw\" error=\"{}\"", e.what());
    MakeRespond(st)(Problem(500, "the request handler failed"));
  } catch (...) {
    c->core->logger->error("msg=\"handler threw a non-exception\"");
    MakeRespond(st)(Problem(500, "the request handler failed"));
  }
  {
    std::lock_guard lock(st->mu);
    if (st->response) co_return std::move(*st->response);
    st->waiting = true;
  }
  // Respond's wake-up post runs on this thread after this coroutine suspends, so setting the
  // weak_ptr here, without the lock, is in time.
  auto wait = std::make_shared<Wait>(*c->w->ctx);
  st->wait = wait;
  c->wait = wait;
  wait->timer.expires_after(c->core->options.handler_timeout);
  StartWatch(c, wait);
  bool expired = false;
  for (;;) {
    auto [ec] = co_await wait->timer.async_wait(kTuple);
    {
      std::lock_guard lock(st->mu);
      if (st->response) break;
    }
    if (c->closing || wait->peer_gone) break;
    if (!ec || Clock::now() >= wait->timer.expiry()) {
      expired = true;
      break;
    }
  }
  std::optional<HttpResponse> result;
  {
    std::lock_guard lock(st->mu);
    st->closed = true;
    if (st->response) result = std::move(*st->response);
  }
  c->wait.reset();
  if (c->closing) co_return std::nullopt;
  co_await StopWatch(c, wait);
  if (result) co_return result;
  if (expired) {
    co_return Problem(503, "the request handler did not answer within " +
                               std::to_string(c->core->options.handler_timeout.count()) + " ms");
  }
  co_return std::nullopt;  // peer gone
}

bool WantsClose(const HttpResponse& r) {
  for (const auto& [name, value] : r.headers) {
    if (beast::iequals(name, "connection") && beast::iequals(value, "close")) return true;
  }
  return false;
}

bool IsFramingHeader(std::string_view name) {
  return beast::iequals(name, "content-length") || beast::iequals(name, "transfer-encoding") ||
         beast::iequals(name, "connection");
}

int WireStatus(const HttpResponse& r) {
  return r.status >= 100 && r.status <= 999 ? r.status : 500;
}

// Returns false if the write failed.
asio::awaitable<bool> WriteResponse(Conn* c, HttpResponse r, bool head, bool keep_alive,
                                    unsigned version) {
  const int status = WireStatus(r);
  const bool bodiless = status < 200 || status == 204 || status == 304;
  bhttp::response<bhttp::string_body> res;
  res.version(version);
  res.result(static_cast<unsigned>(status));
  res.set(bhttp::field::server, c->core->options.server_name);
  if (!bodiless && !r.content_type.empty()) res.set(bhttp::field::content_type, r.content_type);
  for (const auto& [name, value] : r.headers) {
    if (!IsFramingHeader(name)) res.insert(name, value);
  }
  res.keep_alive(keep_alive);
  c->stream.expires_after(c->core->options.read_timeout);
  beast::error_code ec;
  size_t n = 0;
  if (bodiless || head) {
    if (!bodiless) res.content_length(r.body.size());
    bhttp::response<bhttp::empty_body> out{std::move(res.base())};
    std::tie(ec, n) = co_await bhttp::async_write(c->stream, out, kTuple);
  } else {
    res.body() = std::move(r.body);
    res.prepare_payload();
    std::tie(ec, n) = co_await bhttp::async_write(c->stream, res, kTuple);
  }
  co_return !ec;
}

asio::awaitable<void> DrainAndClose(Conn* c) {
  beast::error_code ec;
  c->stream.socket().shutdown(tcp::socket::shutdown_send, ec);
  c->stream.expires_after(kDrainTimeout);
  std::array<char, 16384> scratch;
  size_t total = c->buffer.size();
  while (total < kMaxDrainBytes) {
    auto [rec, n] = co_await c->stream.async_read_some(asio::buffer(scratch), kTuple);
    if (rec) break;
    total += n;
  }
  c->stream.close();
}

asio::awaitable<void> ServeConnection(Conn* c, const Handler* handler) {
  for (bool first = true; !c->closing; first = false) {
    ReadOutcome in = co_await ReadRequest(c, first);
    if (in.kind == ReadOutcome::kClose) co_return;
    const auto start = Clock::now();
    if (in.kind == ReadOutcome::kReject) {
      c->core->logger->debug("msg=\"rejected request\" status={} detail=\"{}\"", in.status,
                             in.detail);
      c->core->Record(c->w, in.status, start);
      if (co_await WriteResponse(c, Problem(in.status, in.detail), false, false, 11)) {
        co_await DrainAndClose(c);
      }
      co_return;
    }
    const bool head = in.request.method() == bhttp::verb::head;
    bool keep_alive = in.request.keep_alive();
    const unsigned version = in.request.version();
    std::optional<HttpResponse> response;
    if (auto request = ToHttpRequest(std::move(in.request)); request) {
      response = co_await Dispatch(c, handler, std::move(*request));
      if (!response || response->status == kCloseWithoutResponse) co_return;  // Session closes
    } else {
      response = Problem(400, request.error().message);
      keep_alive = false;
    }
    if (WantsClose(*response)) keep_alive = false;
    c->core->Record(c->w, WireStatus(*response), start);
    if (!co_await WriteResponse(c, std::move(*response), head, keep_alive, version)) co_return;
    if (!keep_alive) {
      beast::error_code ec;
      c->stream.socket().shutdown(tcp::socket::shutdown_send, ec);
      co_return;
    }
  }
}

asio::awaitable<void> Session(Core* core, Worker* w, tcp::socket socket, uint16_t port,
                              std::shared_ptr<const Handler> handler) {
  Conn conn(core, w, std::move(socket), port);
  try {
    co_await ServeConnection(&conn, handler.get());
  } catch (const std::exception& e) {
    core->logger->warn("msg=\"connection failed\" error=\"{}\"", e.what());
  }
  conn.stream.close();
}

asio::awaitable<void> AcceptLoop(Core* core, Worker* w, std::shared_ptr<tcp::acceptor> acceptor,
                                 uint16_t port, std::shared_ptr<const Handler> handler) {
  asio::steady_timer pause(*w->ctx);
  for (;;) {
    auto [ec, socket] = co_await acceptor->async_accept(kTuple);
    if (ec) {
      if (!acceptor->is_open() || ec == asio::error::operation_aborted) co_return;
      // Out of descriptors or similar: back off instead of spinning on the error.
      core->logger->warn("msg=\"accept failed\" port={} error=\"{}\"", port, ec.message());
      pause.expires_after(std::chrono::milliseconds(50));
      co_await pause.async_wait(kTuple);
      continue;
    }
    socket.set_option(tcp::no_delay(true), ec);
    asio::co_spawn(*w->ctx, Session(core, w, std::move(socket), port, handler), asio::detached);
  }
}

Result<tcp::endpoint> ResolveListenAddress(const std::string& host_port) {
  auto bad = [&](const char* why) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "listen address '" + host_port + "' " + why + " (want HOST:PORT)");
  };
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos) return bad("has no port");
  std::string host = host_port.substr(0, colon);
  const std::string port_text = host_port.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) host = "0.0.0.0";
  unsigned port = 0;
  if (port_text.empty() || port_text.size() > 5 ||
      port_text.find_first_not_of("0123456789") != std::string::npos ||
      (port = static_cast<unsigned>(std::stoul(port_text))) > 65535) {
    return bad("has an invalid port");
  }
  beast::error_code ec;
  auto address = asio::ip::make_address(host, ec);
  if (!ec) return tcp::endpoint(address, static_cast<uint16_t>(port));
  asio::io_context io;
  tcp::resolver resolver(io);
  auto results = resolver.resolve(host, port_text, ec);
  if (ec || results.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "cannot resolve listen host '" + host +
                                                      "': " + (ec ? ec.message() : "no address"));
  }
  for (const auto& entry : results) {
    if (entry.endpoint().address().is_v4()) return entry.endpoint();
  }
  return results.begin()->endpoint();
}

Result<std::shared_ptr<tcp::acceptor>> OpenAcceptor(asio::io_context& ctx,
                                                    const tcp::endpoint& endpoint,
                                                    bool reuse_port) {
  auto acceptor = std::make_shared<tcp::acceptor>(ctx);
  beast::error_code ec;
  const char* step = "open";
  if (acceptor->open(endpoint.protocol(), ec); !ec) {
    step = "setsockopt";
    acceptor->set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec && reuse_port) acceptor->set_option(ReusePort(true), ec);
  }
  if (!ec) {
    step = "bind";
    acceptor->bind(endpoint, ec);
  }
  if (!ec) {
    step = "listen";
    acceptor->listen(asio::socket_base::max_listen_connections, ec);
  }
  if (ec) {
    beast::error_code ignored;
    acceptor->close(ignored);
    std::string where = endpoint.address().to_string() + ":" + std::to_string(endpoint.port());
    return MakeError(ErrorCode::kUnavailable,
                     std::string(step) + " " + where + " failed: " + ec.message());
  }
  return acceptor;
}

}  // namespace

struct HttpServer::Impl : Core {};

Result<std::unique_ptr<HttpServer>> HttpServer::Create(ServerOptions options) {
  if (options.threads < 1 || options.threads > 256) {
    return MakeError(ErrorCode::kInvalidArgument, "threads must be in 1..256");
  }
  if (options.max_header_bytes < 256 || options.max_body_bytes < 1) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "max_header_bytes must be >= 256 and max_body_bytes >= 1");
  }
  using std::chrono::milliseconds;
  if (options.read_timeout <= milliseconds::zero() ||
      options.idle_timeout <= milliseconds::zero() ||
      options.handler_timeout <= milliseconds::zero()) {
    return MakeError(ErrorCode::kInvalidArgument, "timeouts must be positive");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  if (impl->options.metrics != nullptr) {
    impl->duration = &impl->options.metrics->GetHistogram(
        "dcm_http_request_duration_seconds",
        "Time from a request read to its response ready to write, seconds");
  }
  Core* raw = impl.get();
  for (int i = 0; i < raw->options.threads; ++i) {
    auto w = std::make_unique<Worker>();
    w->guard.emplace(w->ctx->get_executor());
    Worker* wp = w.get();
    w->thread = std::thread([raw, wp] {
      tls_current_server = raw;
      for (;;) {
        try {
          wp->ctx->run();
          return;
        } catch (const std::exception& e) {
          raw->logger->error("msg=\"worker loop threw\" error=\"{}\"", e.what());
        }
      }
    });
    raw->workers.push_back(std::move(w));
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { Stop(); }

Result<uint16_t> HttpServer::Listen(const std::string& host_port, Handler handler) {
  ASSIGN_OR_RETURN(tcp::endpoint endpoint, ResolveListenAddress(host_port));
  auto shared_handler = std::make_shared<const Handler>(std::move(handler));
  std::lock_guard lock(impl_->mu);
  if (impl_->stopped) return MakeError(ErrorCode::kUnavailable, "server stopped");
  if (endpoint.port() != 0 && impl_->listeners.count(endpoint.port()) > 0) {
    return MakeError(ErrorCode::kUnavailable,
                     "already listening on port " + std::to_string(endpoint.port()));
  }
  // One acceptor per worker; the kernel spreads connections over them (SO_REUSEPORT).
  const bool reuse_port = impl_->workers.size() > 1;
  std::vector<std::shared_ptr<tcp::acceptor>> acceptors;
  for (auto& w : impl_->workers) {
    ASSIGN_OR_RETURN(auto acceptor, OpenAcceptor(*w->ctx, endpoint, reuse_port));
    if (acceptors.empty()) endpoint.port(acceptor->local_endpoint().port());
    acceptors.push_back(std::move(acceptor));
  }
  const uint16_t port = endpoint.port();
  for (size_t i = 0; i < acceptors.size(); ++i) {
    Worker* w = impl_->workers[i].get();
    asio::co_spawn(*w->ctx, AcceptLoop(impl_.get(), w, acceptors[i], port, shared_handler),
                   asio::detached);
  }
  impl_->listeners.emplace(port, std::move(acceptors));
  impl_->logger->debug("msg=\"listening\" address={}:{}", endpoint.address().to_string(), port);
  return port;
}

void HttpServer::CloseListener(uint16_t port) {
  std::vector<std::future<void>> pending;
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->stopped) return;
    auto it = impl_->listeners.find(port);
    if (it == impl_->listeners.end()) return;
    auto acceptors = std::move(it->second);
    impl_->listeners.erase(it);
    for (size_t i = 0; i < acceptors.size(); ++i) {
      Worker* w = impl_->workers[i].get();
      pending.push_back(impl_->RunOn(w, [w, acceptor = acceptors[i], port] {
        beast::error_code ec;
        acceptor->close(ec);
        std::vector<Conn*> doomed;
        for (auto& [id, conn] : w->conns) {
          if (conn->port == port) doomed.push_back(conn);
        }
        for (Conn* conn : doomed) conn->Close();
      }));
    }
  }
  for (auto& f : pending) {
    if (f.valid()) f.wait();  // a broken promise (server stopped meanwhile) also ends the wait
  }
}

void HttpServer::Stop() {
  std::map<uint16_t, std::vector<std::shared_ptr<tcp::acceptor>>> listeners;
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->stopped) return;
    impl_->stopped = true;
    listeners = std::move(impl_->listeners);
  }
  for (auto& w : impl_->workers) {
    std::lock_guard lock(w->gate->mu);
    w->gate->open = false;  // from now on, a late Respond does not touch the io_context
  }
  for (auto& w : impl_->workers) {
    w->guard.reset();
    w->ctx->stop();
  }
  for (auto& w : impl_->workers) {
    if (w->thread.joinable()) w->thread.join();
  }
  for (auto& [port, acceptors] : listeners) {
    for (auto& acceptor : acceptors) {
      beast::error_code ec;
      acceptor->close(ec);
    }
  }
  listeners.clear();
  // Destroying each io_context destroys the suspended coroutines, and with them their sockets,
  // before the io_context itself goes (a socket must not outlive its io_context).
  for (auto& w : impl_->workers) w->ctx.reset();
  impl_->workers.clear();
}

}  // namespace dcm::http
