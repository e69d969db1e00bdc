// Streamed responses (HttpResponse::stream: SPEC §9 watches), sent by the connection coroutine
// of server_connection.cc once the handler answered with a stream.
//
//   headers (chunked; HTTP/1.0: until close) ─▶ loop:
//     Take bytes ─▶ write one chunk ─▶ Take ...
//       │ nothing buffered: wait for the producer's wake, the keep-alive period, the peer leaving
//       │ or the server closing the connection; silence for stream_keepalive ─▶ ": keep-alive"
//     producer closed ─▶ last chunk ─▶ close      cut off (overflow) / peer gone ─▶ close
//
// A reader that stops reading leaves a write pending; the producer then cuts the stream off when
// its buffer bound is passed, and the wake closes the socket, which ends the write (so a stalled
// reader holds at most the bound plus the kernel's socket buffers). Nothing is read from the
// peer after the request: any byte or EOF it sends ends the stream.
#include <boost/beast/http.hpp>
#include <cstdio>
#include <string>

#include "src/http/response_stream.h"
#include "src/http/server_core.h"

namespace dcm::http::server_detail {
namespace {

namespace bhttp = boost::beast::http;

// The stream's wait: the timer the wake cancels, and what the wake may need to close.
struct StreamWait {
  StreamWait(asio::io_context& ctx, ConnBase* c) : timer(ctx), conn(c) {}
  asio::steady_timer timer;
  ConnBase* conn;  // valid while this lives (the coroutine frame owns the only strong ref)
  bool writing = false;
  bool peer_gone = false;
  bool reading = false;
  std::array<char, 512> scratch{};
};

// Called by the producer's thread: hops to the worker and wakes the coroutine; a stream cut off
// while a write is stuck on a reader that does not read has its socket closed.
std::function<void()> MakeWake(Worker* w, const std::shared_ptr<StreamWait>& wait,
                               const std::shared_ptr<ResponseStream>& stream) {
  return [gate = w->gate, ex = w->ctx->get_executor(), weak = std::weak_ptr(wait),
          ws = std::weak_ptr(stream)] {
    std::lock_guard lock(gate->mu);
    if (!gate->open) return;
    asio::post(ex, [weak, ws] {
      auto sw = weak.lock();
      if (!sw) return;
      sw->timer.cancel();
      auto s = ws.lock();
      if (sw->writing && s && s->state() == ResponseStream::State::kOverflow) sw->conn->Close();
    });
  };
}

std::string Head(const ServerOptions& o, const HttpResponse& r, unsigned version) {
  std::string head = version >= 11 ? "HTTP/1.1 " : "HTTP/1.0 ";
  head += std::to_string(r.status) + " ";
  head +=
      std::string(bhttp::obsolete_reason(bhttp::int_to_status(static_cast<unsigned>(r.status))));
  head += "\r\nServer: " + o.server_name + "\r\nContent-Type: " + r.content_type +
          "\r\nCache-Control: no-cache\r\nX-Accel-Buffering: no\r\nConnection: close\r\n";
  if (version >= 11) head += "Transfer-Encoding: chunked\r\n";
  for (const auto& [name, value] : r.headers) head += name + ": " + value + "\r\n";
  head += "\r\n";
  return head;
}

// `bytes` framed as one chunk (HTTP/1.1) or as is (HTTP/1.0, delimited by the close).
void Frame(std::string_view bytes, bool chunked, std::string* out) {
  out->clear();
  if (!chunked) {
    out->append(bytes);
    return;
  }
  char size[20];
  const int n = std::snprintf(size, sizeof(size), "%zx\r\n", bytes.size());
  out->append(size, static_cast<size_t>(n)).append(bytes).append("\r\n");
}

template <class Stream>
void StartPeerWatch(Conn<Stream>* c, const std::shared_ptr<StreamWait>& wait) {
  wait->reading = true;
  auto done = [wait](const beast::error_code&, size_t) {
    wait->reading = false;
    wait->peer_gone = true;
    wait->timer.cancel();
  };
  if constexpr (kIsTls<Stream>) {
    c->stream.async_read_some(asio::buffer(wait->scratch), std::move(done));
  } else {
    c->stream.socket().async_read_some(asio::buffer(wait->scratch), std::move(done));
  }
}

template <class Stream>
asio::awaitable<bool> Send(Conn<Stream>* c, StreamWait* wait, std::string_view bytes) {
  wait->writing = true;
  auto [ec, n] = co_await asio::async_write(c->stream, asio::buffer(bytes), kTuple);
  wait->writing = false;
  co_return !ec && !c->closing;
}

}  // namespace

template <class Stream>
asio::awaitable<void> StreamResponse(Conn<Stream>* c, HttpResponse r, unsigned version) {
  const ServerOptions& o = c->core->options;
  std::shared_ptr<ResponseStream> stream = std::move(r.stream);
  const bool chunked = version >= 11;
  auto wait = std::make_shared<StreamWait>(*c->w->ctx, c);
  stream->SetWake(MakeWake(c->w, wait, stream));
  c->tcp().expires_never();  // the stream's own timer bounds the waits; writes end by Close
  std::string bytes;
  std::string framed;
  bool ok = co_await Send(c, wait.get(), Head(o, r, version));
  if (ok) StartPeerWatch(c, wait);
  while (ok && !wait->peer_gone && !c->closing) {
    const ResponseStream::State state = stream->Take(&bytes);
    if (state == ResponseStream::State::kOverflow || state == ResponseStream::State::kDetached) {
      break;
    }
    if (!bytes.empty()) {
      Frame(bytes, chunked, &framed);
      ok = co_await Send(c, wait.get(), framed);
      continue;
    }
    if (state == ResponseStream::State::kClosed) {
      if (chunked) co_await Send(c, wait.get(), "0\r\n\r\n");
      break;
    }
    wait->timer.expires_after(o.stream_keepalive);
    auto [ec] = co_await wait->timer.async_wait(kTuple);
    if (c->closing || wait->peer_gone) break;
    if (!ec) {  // silence for the whole period
      Frame(": keep-alive\n\n", chunked, &framed);
      ok = co_await Send(c, wait.get(), framed);
    }
  }
  stream->Detach();
  if (!c->closing) {
    beast::error_code ec;
    c->tcp().socket().shutdown(tcp::socket::shutdown_both, ec);
    c->tcp().socket().cancel(ec);
  }
  // The peer watch holds `wait` and the socket: let it finish before the frame goes.
  wait->timer.expires_at(Clock::time_point::max());
  while (wait->reading) co_await wait->timer.async_wait(kTuple);
}

template asio::awaitable<void> StreamResponse(Conn<PlainStream>*, HttpResponse, unsigned);
template asio::awaitable<void> StreamResponse(Conn<TlsStream>*, HttpResponse, unsigned);

}  // namespace dcm::http::server_detail
