// HttpClient implementation: Beast over a private io_context, run to completion for each step,
// with the tcp_stream expiry enforcing one deadline per Request (and a timer for the dial, which
// runs the dialer's coroutine on the same io_context).
#include "src/http/client.h"

#include <boost/asio.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <exception>
#include <optional>
#include <utility>

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
using TlsStream = ssl::stream<beast::tcp_stream&>;

std::string LowerCase(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string HostForUrl(const std::string& host) {
  return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

// True for errors that mean "the server closed this idle keep-alive connection".
bool IsStaleConnectionError(const beast::error_code& ec) {
  return ec == bhttp::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
         ec == asio::error::connection_aborted || ec == ssl::error::stream_truncated;
}

}  // namespace

struct HttpClient::Impl {
  Status init;
  Url url;
  HttpClientOptions options;  // options.tls is set for https (the default context if none)
  std::string origin;         // "http://host:port", for messages
  std::string base_path;      // prefix for every target, without trailing '/'
  std::string host_header;
  asio::io_context io{1};  // declared before the streams: the socket must not outlive it
  beast::tcp_stream stream{io};
  std::unique_ptr<TlsStream> tls;  // https: wraps `stream` by reference; destroyed first
  beast::flat_buffer buffer;
  bool connected = false;

  void RunIo() {
    io.restart();
    io.run();
  }

  void Close() {
    tls.reset();  // no close_notify: the connection is dropped either way
    beast::error_code ec;
    stream.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream.close();
    buffer.clear();
    connected = false;
  }

  Error Fail(const beast::error_code& ec, const std::string& what, const std::string& step) {
    if (ec == beast::error::timeout || ec == asio::error::timed_out) {
      return Error{ErrorCode::kTimeout, what + ": " + step + " timed out", {}};
    }
    return Error{ErrorCode::kUnavailable, what + ": " + step + ": " + ec.message(), {}};
  }

  // Resolve, judge, connect (dialer.h), within the deadline.
  Status Dial(Clock::time_point deadline, const std::string& what) {
    bool timed_out = false;
    const char* phase = "connecting";
    tcp::resolver* resolver = nullptr;
    std::optional<dialer::DialResult> result;
    std::exception_ptr thrown;
    asio::steady_timer timer(io);
    timer.expires_at(deadline);
    timer.async_wait([&](const beast::error_code& ec) {
      if (ec) return;  // the dial finished first
      timed_out = true;
      if (resolver != nullptr) resolver->cancel();
      beast::error_code ignored;
      stream.socket().close(ignored);
    });
    asio::co_spawn(io,
                   dialer::Dial(&stream.socket(), url.host, url.port, options.outbound.get(),
                                dialer::DialWatch{&phase, &resolver, &timed_out}),
                   [&](std::exception_ptr e, dialer::DialResult r) {
                     thrown = e;
                     result = std::move(r);
                     timer.cancel();
                   });
    RunIo();
    if (thrown) std::rethrow_exception(thrown);  // Request turns it into kInternal
    if (timed_out) {
      return MakeError(ErrorCode::kTimeout,
                       what + ": " +
                           (phase == std::string_view("resolving") ? "resolve" : "connect") +
                           " timed out");
    }
    switch (result->failure) {
      case dialer::DialFailure::kNone:
        return OkStatus();
      case dialer::DialFailure::kBlocked:
        return MakeError(ErrorCode::kUnavailable, "blocked: " + result->error + " (" + what + ")");
      case dialer::DialFailure::kDns:
      case dialer::DialFailure::kConnect:
        break;
    }
    return MakeError(ErrorCode::kUnavailable, what + ": " + result->error);
  }

  Status Handshake(Clock::time_point deadline, const std::string& what) {
    tls = std::make_unique<TlsStream>(stream, options.tls->impl().ctx);
    if (!dialer::PrepareTls(tls->native_handle(), url.host, options.tls->verifies())) {
      return MakeError(ErrorCode::kUnavailable, what + ": cannot set up TLS for " + url.host);
    }
    beast::error_code ec;
    stream.expires_at(deadline);
    tls->async_handshake(ssl::stream_base::client, [&](const beast::error_code& e) { ec = e; });
    RunIo();
    if (!ec) return OkStatus();
    if (ec == beast::error::timeout) {
      return MakeError(ErrorCode::kTimeout, what + ": TLS handshake timed out");
    }
    return MakeError(ErrorCode::kUnavailable,
                     what + ": " +
                         dialer::TlsHandshakeError(tls->native_handle(), ec,
                                                   dialer::HostPort(url.host, url.port)));
  }

  Status Connect(Clock::time_point deadline, const std::string& what) {
    if (Clock::now() >= deadline) return MakeError(ErrorCode::kTimeout, what + ": timed out");
    Status status = Dial(deadline, what);
    if (status) {
      beast::error_code ec;
      stream.socket().set_option(tcp::no_delay(true), ec);
      if (options.tls) status = Handshake(deadline, what);
    }
    if (!status) {
      Close();
      return status;
    }
    connected = true;
    return OkStatus();
  }

  // One request/response on the open connection. `*stale` is set when the failure looks like
  // a connection the server had already closed (nothing of a response was read).
  Result<HttpResponse> Exchange(bhttp::request<bhttp::string_body>& req, bool head,
                                Clock::time_point deadline, const std::string& what, bool* stale) {
    if (tls) return ExchangeOn(*tls, req, head, deadline, what, stale);
    return ExchangeOn(stream, req, head, deadline, what, stale);
  }

  template <class Stream>
  Result<HttpResponse> ExchangeOn(Stream& s, bhttp::request<bhttp::string_body>& req, bool head,
                                  Clock::time_point deadline, const std::string& what,
                                  bool* stale) {
    *stale = false;
    beast::error_code ec;
    stream.expires_at(deadline);
    bhttp::async_write(s, req, [&](const beast::error_code& e, size_t) { ec = e; });
    RunIo();
    if (ec) {
      *stale = IsStaleConnectionError(ec);
      return tl::unexpected(Fail(ec, what, "write"));
    }
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(options.max_response_bytes);
    if (head) parser.skip(true);
    stream.expires_at(deadline);
    bhttp::async_read(s, buffer, parser, [&](const beast::error_code& e, size_t) { ec = e; });
    RunIo();
    if (ec) {
      *stale = !parser.got_some() && IsStaleConnectionError(ec);
      return tl::unexpected(Fail(ec, what, "read"));
    }
    auto res = parser.release();
    HttpResponse out;
    out.status = static_cast<int>(res.result_int());
    out.content_type = std::string(res[bhttp::field::content_type]);
    for (const auto& field : res) {
      out.headers.emplace_back(LowerCase(field.name_string()), std::string(field.value()));
    }
    out.body = std::move(res.body());
    if (!res.keep_alive()) Close();
    return out;
  }
};

HttpClient::HttpClient(std::string base_url, HttpClientOptions options)
    : impl_(std::make_unique<Impl>()) {
  auto url = ParseHttpUrl(base_url);
  if (!url) {
    impl_->init = MakeError(ErrorCode::kInvalidArgument,
                            "base URL '" + base_url + "' " + url.error().message);
    return;
  }
  const bool https = url->scheme == "https";
  if (!https) {
    options.tls.reset();  // Impl::Connect handshakes whenever a context is set
  } else if (!options.tls) {
    auto tls = TlsClientContext::Default();
    if (!tls) {
      impl_->init = tl::unexpected(tls.error());
      return;
    }
    options.tls = *tls;
  }
  impl_->options = std::move(options);
  impl_->url = *url;
  const std::string host = HostForUrl(url->host);
  impl_->origin = url->scheme + "://" + host + ":" + std::to_string(url->port);
  const bool default_port = url->port == (https ? 443 : 80);
  impl_->host_header = default_port ? host : host + ":" + std::to_string(url->port);
  std::string path = url->target.substr(0, url->target.find('?'));
  while (!path.empty() && path.back() == '/') path.pop_back();
  impl_->base_path = path;
}

HttpClient::~HttpClient() { impl_->Close(); }

void HttpClient::Close() { impl_->Close(); }

Result<HttpResponse> HttpClient::Request(const std::string& method, const std::string& target,
                                         const std::string& body, const std::string& content_type,
                                         std::chrono::milliseconds timeout) {
  RETURN_IF_ERROR(impl_->init);
  if (!target.empty() && target.front() != '/' && target.front() != '?') {
    return MakeError(ErrorCode::kInvalidArgument, "request target must start with '/' or '?'");
  }
  const auto deadline = Clock::now() + timeout;
  std::string full_target = impl_->base_path + target;
  if (full_target.empty() || full_target.front() != '/') full_target.insert(0, "/");
  const std::string what = method + " " + impl_->origin + full_target;

  bhttp::request<bhttp::string_body> req;
  req.method_string(method);
  req.target(full_target);
  req.version(11);
  req.set(bhttp::field::host, impl_->host_header);
  req.set(bhttp::field::user_agent, "dcm");
  for (const auto& [name, value] : impl_->options.headers) req.set(name, value);
  const bool sends_body = !body.empty() || method == "POST" || method == "PUT" || method == "PATCH";
  if (sends_body) {
    if (!content_type.empty()) req.set(bhttp::field::content_type, content_type);
    req.body() = body;
    req.prepare_payload();
  }
  const bool head = method == "HEAD";

  try {
    for (int attempt = 0;; ++attempt) {
      const bool reused = impl_->connected;
      if (!reused) RETURN_IF_ERROR(impl_->Connect(deadline, what));
      bool stale = false;
      auto response = impl_->Exchange(req, head, deadline, what, &stale);
      if (response) return response;
      impl_->Close();
      if (!(stale && reused && attempt == 0)) return response;
    }
  } catch (const std::exception& e) {  // Asio/Beast allocation or system failures
    impl_->Close();
    return MakeError(ErrorCode::kInternal, what + ": " + e.what());
  }
}

Result<HttpResponse> Fetch(const std::string& method, const std::string& url,
                           const std::string& body, std::chrono::milliseconds timeout,
                           HttpClientOptions options) {
  ASSIGN_OR_RETURN(Url parsed, ParseHttpUrl(url));
  HttpClient client(
      parsed.scheme + "://" + HostForUrl(parsed.host) + ":" + std::to_string(parsed.port),
      std::move(options));
  return client.Request(method, parsed.target, body, "application/json", timeout);
}

}  // namespace dcm::http
