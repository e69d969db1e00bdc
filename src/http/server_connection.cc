// HttpServer's connections (server.h, server_core.h): accept, TLS handshake, then per request
// read ─▶ handler ─▶ write, with the deadlines, the 100-continue, the watch for a peer that
// leaves while a deferred response is pending, and the drain after an error response.
//
// Per connection (one coroutine, on the worker that accepted it; TLS connections first
// handshake under the read deadline, failures counted by reason and closed):
//
//   wait first byte ──(idle/read deadline)──> close
//        │
//   read request (read deadline) ──parse error──> 400/413/431 + drain + close
//        │                        └─timeout/EOF─> close
//   handler ──respond──> write ──keep-alive──> wait first byte
//        │                  └──close──> shutdown
//        ├─handler_timeout─> 503
//        └─peer gone───────> close
//
// The connection code is a template over the stream (beast::tcp_stream or ssl_stream over it),
// so the plain path has no TLS branch per read; `c->tcp()` is the TCP layer of either.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/beast/http.hpp>
#include <cctype>

#include "src/common/json_writer.h"
#include "src/http/server_core.h"

namespace dcm::http::server_detail {
namespace {

namespace bhttp = boost::beast::http;

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

template <class Stream>
asio::awaitable<ReadOutcome> ReadRequest(Conn<Stream>* c, bool first) {
  const ServerOptions& o = c->core->options;
  ReadOutcome out;
  beast::error_code ec;
  size_t n = 0;
  if (c->buffer.size() == 0) {  // wait for the first byte under the idle deadline
    c->tcp().expires_after(first ? o.read_timeout : o.idle_timeout);
    std::tie(ec, n) =
        co_await c->stream.async_read_some(c->buffer.prepare(kFirstReadBytes), kTuple);
    if (ec) co_return out;
    c->buffer.commit(n);
  }
  c->tcp().expires_after(o.read_timeout);  // the whole request, headers and body
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
// Over TLS the watch reads through the TLS layer (bytes on the socket are records, not the next
// request), with the stream's deadline off: the Wait's timer bounds it.
template <class Stream>
void StartWatch(Conn<Stream>* c, const std::shared_ptr<Wait>& wait) {
  wait->watch_pending = true;
  auto done = [wait](const beast::error_code& ec, size_t n) {
    wait->watch_pending = false;
    wait->watched = n;
    if (ec && ec != asio::error::operation_aborted) wait->peer_gone = true;
    wait->timer.cancel();
  };
  if constexpr (kIsTls<Stream>) {
    c->tcp().expires_never();
    c->stream.async_read_some(asio::buffer(wait->watch_buf), std::move(done));
  } else {
    c->stream.socket().async_read_some(asio::buffer(wait->watch_buf), std::move(done));
  }
}

// Ends the watch and keeps whatever pipelined bytes it read.
template <class Stream>
asio::awaitable<void> StopWatch(Conn<Stream>* c, std::shared_ptr<Wait> wait) {
  if (wait->watch_pending) {
    beast::error_code ec;
    c->tcp().socket().cancel(ec);
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
template <class Stream>
asio::awaitable<std::optional<HttpResponse>> Dispatch(Conn<Stream>* c, const Handler* handler,
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
template <class Stream>
asio::awaitable<bool> WriteResponse(Conn<Stream>* c, HttpResponse r, bool head, bool keep_alive,
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
  c->tcp().expires_after(c->core->options.read_timeout);
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

// Sends TLS close_notify without waiting for the peer's (marking it received first makes
// SSL_shutdown complete as soon as ours is written), bounded by the drain timeout.
asio::awaitable<void> SendCloseNotify(Conn<TlsStream>* c) {
  SSL_set_shutdown(c->stream.native_handle(), SSL_RECEIVED_SHUTDOWN);
  c->tcp().expires_after(kDrainTimeout);
  co_await c->stream.async_shutdown(kTuple);
}

// Over TLS the drain discards raw TCP bytes: nothing is decrypted after our close_notify.
template <class Stream>
asio::awaitable<void> DrainAndClose(Conn<Stream>* c) {
  if constexpr (kIsTls<Stream>) co_await SendCloseNotify(c);
  beast::error_code ec;
  c->tcp().socket().shutdown(tcp::socket::shutdown_send, ec);
  c->tcp().expires_after(kDrainTimeout);
  std::array<char, 16384> scratch;
  size_t total = c->buffer.size();
  while (total < kMaxDrainBytes) {
    auto [rec, n] = co_await c->tcp().async_read_some(asio::buffer(scratch), kTuple);
    if (rec) break;
    total += n;
  }
  c->tcp().close();
}

template <class Stream>
asio::awaitable<void> ServeConnection(Conn<Stream>* c, const Handler* handler) {
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
      if constexpr (kIsTls<Stream>) request->peer_subject = c->peer_subject;
      response = co_await Dispatch(c, handler, std::move(*request));
      if (!response || response->status == kCloseWithoutResponse) co_return;  // Session closes
    } else {
      response = Problem(400, request.error().message);
      keep_alive = false;
    }
    if (WantsClose(*response)) keep_alive = false;
    c->core->Record(c->w, WireStatus(*response), start);
    if (response->stream && !head) {
      co_await StreamResponse(c, std::move(*response), version);
      co_return;
    }
    if (!co_await WriteResponse(c, std::move(*response), head, keep_alive, version)) co_return;
    if (!keep_alive) {
      if constexpr (kIsTls<Stream>) co_await SendCloseNotify(c);
      beast::error_code ec;
      c->tcp().socket().shutdown(tcp::socket::shutdown_send, ec);
      co_return;
    }
  }
}

// `admission` (a parameter: it lives in the frame) holds the connection's place under the caps.
asio::awaitable<void> Session(Core* core, Worker* w, tcp::socket socket, uint16_t port,
                              std::shared_ptr<const Handler> handler,
                              [[maybe_unused]] Admission admission) {
  Conn<PlainStream> conn(core, w, port, std::move(socket));
  try {
    co_await ServeConnection(&conn, handler.get());
  } catch (const std::exception& e) {
    core->logger->warn("msg=\"connection failed\" error=\"{}\"", e.what());
  }
  conn.stream.close();
}

// The handshake, under read_timeout. False (counted, logged at debug) if it failed.
asio::awaitable<bool> Handshake(Conn<TlsStream>* c, const TlsContext& tls) {
  c->tcp().expires_after(c->core->options.read_timeout);
  auto [ec] = co_await c->stream.async_handshake(ssl::stream_base::server, kTuple);
  if (ec) {
    if (!c->closing) {
      const HandshakeFailure why = ClassifyHandshake(ec);
      c->core->CountHandshakeFailure(why);
      c->core->logger->debug("msg=\"tls handshake failed\" reason={} error=\"{}\"",
                             kHandshakeFailureNames[static_cast<size_t>(why)], ec.message());
    }
    co_return false;
  }
  if (tls.verify_clients) c->peer_subject = PeerSubject(c->stream.native_handle());
  co_return true;
}

// `tls` (a parameter, so it outlives the connection in the frame) pins the context this
// connection was accepted with across ReloadTls.
asio::awaitable<void> TlsSession(Core* core, Worker* w, tcp::socket socket, uint16_t port,
                                 std::shared_ptr<const Handler> handler,
                                 std::shared_ptr<TlsContext> tls,
                                 [[maybe_unused]] Admission admission) {
  try {
    Conn<TlsStream> conn(core, w, port, std::move(socket), tls->ctx);
    if (co_await Handshake(&conn, *tls)) co_await ServeConnection(&conn, handler.get());
    conn.tcp().close();
  } catch (const std::exception& e) {
    core->logger->warn("msg=\"connection failed\" error=\"{}\"", e.what());
  }
}

// Holds one of the kMaxRefusing slots (Core::TakeRefusalSlot) for the refusal's lifetime.
struct RefusalSlot {
  explicit RefusalSlot(Core* c) : core(c) {}
  RefusalSlot(RefusalSlot&& other) noexcept : core(std::exchange(other.core, nullptr)) {}
  RefusalSlot(const RefusalSlot&) = delete;
  ~RefusalSlot() {
    if (core != nullptr) core->refusing.fetch_sub(1);
  }
  Core* core;
};

// Writes the 503 of `why` without reading the request, then drains like DrainAndClose (at most
// kDrainTimeout) so the client reads the 503 rather than a reset.
asio::awaitable<void> Refuse(Core* core, tcp::socket socket, Refusal why,
                             [[maybe_unused]] RefusalSlot slot) {
  beast::tcp_stream stream(std::move(socket));
  stream.expires_after(kDrainTimeout);
  const std::string& bytes = core->refusal_bytes[static_cast<size_t>(why)];
  auto [ec, n] = co_await asio::async_write(stream, asio::buffer(bytes), kTuple);
  if (!ec) {
    stream.socket().shutdown(tcp::socket::shutdown_send, ec);
    std::array<char, 4096> scratch;
    for (size_t total = 0; total < kMaxDrainBytes;) {
      auto [rec, got] = co_await stream.async_read_some(asio::buffer(scratch), kTuple);
      if (rec) break;
      total += got;
    }
  }
  stream.close();
}

// Admits the accepted `socket` under the caps (true), or refuses it: counted, logged at most
// once a second, answered 503 when a refusal slot is free (plain HTTP only), closed.
bool AdmitOrRefuse(Core* core, Worker* w, tcp::socket& socket, Admission* admission) {
  beast::error_code ec;
  const tcp::endpoint peer = socket.remote_endpoint(ec);
  if (ec) {  // already gone (reset while in the backlog)
    socket.close(ec);
    return false;
  }
  const Refusal why = core->Admit(peer.address(), admission);
  if (why == Refusal::kNone) return true;
  if (Counter* c = core->refused[static_cast<size_t>(why)]) c->Inc();
  if (core->refusal_log.Allow()) {
    core->logger->warn(
        "msg=\"connection refused: at the cap\" cap={} open={} max_connections={} "
        "max_connections_per_client={} client={}",
        why == Refusal::kTotal ? "total" : "client", core->open_connections.load(),
        core->options.max_connections, core->options.max_connections_per_client,
        peer.address().to_string());
  }
  if (!core->tls_enabled && core->TakeRefusalSlot()) {
    asio::co_spawn(*w->ctx, Refuse(core, std::move(socket), why, RefusalSlot(core)),
                   asio::detached);
  } else {
    socket.close(ec);
  }
  return false;
}

}  // namespace

std::string RefusalResponse(const ServerOptions& options, Refusal why) {
  const std::string detail =
      why == Refusal::kClient
          ? "too many connections from your address: at most " +
                std::to_string(options.max_connections_per_client) + " per client address"
          : "too many connections: this server holds at most " +
                std::to_string(options.max_connections) + " open connections";
  const HttpResponse problem = Problem(503, detail);
  return "HTTP/1.1 503 Service Unavailable\r\nServer: " + options.server_name +
         "\r\nContent-Type: application/problem+json\r\nRetry-After: 1\r\n"
         "Connection: close\r\nContent-Length: " +
         std::to_string(problem.body.size()) + "\r\n\r\n" + problem.body;
}

asio::awaitable<void> AcceptLoop(Core* core, Worker* w, std::shared_ptr<tcp::acceptor> acceptor,
                                 uint16_t port, std::shared_ptr<const Handler> handler) {
  asio::steady_timer pause(*w->ctx);
  LogThrottle accept_log;
  for (;;) {
    auto [ec, socket] = co_await acceptor->async_accept(kTuple);
    if (ec) {
      if (!acceptor->is_open() || ec == asio::error::operation_aborted) co_return;
      // Out of descriptors (EMFILE/ENFILE) or similar: the connection stays in the backlog; back
      // off instead of spinning on the error, and try again (it is served once descriptors free).
      if (core->accept_errors != nullptr) core->accept_errors->Inc();
      if (accept_log.Allow()) {
        core->logger->warn("msg=\"accept failed; retrying in 50 ms\" port={} error=\"{}\"", port,
                           ec.message());
      }
      pause.expires_after(std::chrono::milliseconds(50));
      co_await pause.async_wait(kTuple);
      continue;
    }
    Admission admission;
    if (!AdmitOrRefuse(core, w, socket, &admission)) continue;
    socket.set_option(tcp::no_delay(true), ec);
    if (core->tls_enabled) {
      asio::co_spawn(*w->ctx,
                     TlsSession(core, w, std::move(socket), port, handler, core->CurrentTls(),
                                std::move(admission)),
                     asio::detached);
    } else {
      asio::co_spawn(*w->ctx,
                     Session(core, w, std::move(socket), port, handler, std::move(admission)),
                     asio::detached);
    }
  }
}

}  // namespace dcm::http::server_detail
