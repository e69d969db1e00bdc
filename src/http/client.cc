// HttpClient implementation: Beast over a private io_context, run to completion for each step,
// with the tcp_stream expiry enforcing one deadline per Request.
#include "src/http/client.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <utility>

#include "src/common/url.h"

namespace dcm::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kMaxResponseBody = 64u << 20;

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
         ec == asio::error::connection_aborted;
}

}  // namespace

struct HttpClient::Impl {
  Status init;
  Url url;
  std::string origin;     // "http://host:port", for messages
  std::string base_path;  // prefix for every target, without trailing '/'
  std::string host_header;
  asio::io_context io{1};  // declared before the stream: the socket must not outlive it
  beast::tcp_stream stream{io};
  beast::flat_buffer buffer;
  bool connected = false;

  void RunIo() {
    io.restart();
    io.run();
  }

  void Close() {
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

  Result<tcp::resolver::results_type> Resolve(Clock::time_point deadline, const std::string& what) {
    tcp::resolver resolver(io);
    asio::steady_timer timer(io);
    beast::error_code result_ec;
    tcp::resolver::results_type results;
    bool timed_out = false;
    resolver.async_resolve(url.host, std::to_string(url.port),
                           [&](const beast::error_code& ec, tcp::resolver::results_type r) {
                             result_ec = ec;
                             results = std::move(r);
                             timer.cancel();
                           });
    timer.expires_at(deadline);
    timer.async_wait([&](const beast::error_code& ec) {
      if (!ec) {
        timed_out = true;
        resolver.cancel();
      }
    });
    RunIo();
    if (timed_out) return MakeError(ErrorCode::kTimeout, what + ": resolve timed out");
    if (result_ec) return tl::unexpected(Fail(result_ec, what, "resolve"));
    return results;
  }

  Status Connect(Clock::time_point deadline, const std::string& what) {
    if (Clock::now() >= deadline) return MakeError(ErrorCode::kTimeout, what + ": timed out");
    beast::error_code ec;
    stream.expires_at(deadline);
    const auto address = asio::ip::make_address(url.host, ec);
    if (!ec) {
      stream.async_connect(tcp::endpoint(address, url.port),
                           [&](const beast::error_code& e) { ec = e; });
    } else {
      ASSIGN_OR_RETURN(auto results, Resolve(deadline, what));
      stream.expires_at(deadline);
      stream.async_connect(results,
                           [&](const beast::error_code& e, const tcp::endpoint&) { ec = e; });
    }
    RunIo();
    if (ec) {
      Close();
      return tl::unexpected(Fail(ec, what, "connect"));
    }
    stream.socket().set_option(tcp::no_delay(true), ec);
    connected = true;
    return OkStatus();
  }

  // One request/response on the open connection. `*stale` is set when the failure looks like
  // a connection the server had already closed (nothing of a response was read).
  Result<HttpResponse> Exchange(bhttp::request<bhttp::string_body>& req, bool head,
                                Clock::time_point deadline, const std::string& what, bool* stale) {
    *stale = false;
    beast::error_code ec;
    stream.expires_at(deadline);
    bhttp::async_write(stream, req, [&](const beast::error_code& e, size_t) { ec = e; });
    RunIo();
    if (ec) {
      *stale = IsStaleConnectionError(ec);
      return tl::unexpected(Fail(ec, what, "write"));
    }
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(kMaxResponseBody);
    if (head) parser.skip(true);
    stream.expires_at(deadline);
    bhttp::async_read(stream, buffer, parser, [&](const beast::error_code& e, size_t) { ec = e; });
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

HttpClient::HttpClient(std::string base_url) : impl_(std::make_unique<Impl>()) {
  auto url = ParseHttpUrl(base_url);
  if (!url) {
    impl_->init = MakeError(ErrorCode::kInvalidArgument,
                            "base URL '" + base_url + "' " + url.error().message);
    return;
  }
  if (url->scheme != "http") {
    impl_->init = MakeError(ErrorCode::kInvalidArgument,
                            "base URL '" + base_url + "': https is not supported by HttpClient");
    return;
  }
  impl_->url = *url;
  const std::string host = HostForUrl(url->host);
  impl_->origin = "http://" + host + ":" + std::to_string(url->port);
  impl_->host_header = url->port == 80 ? host : host + ":" + std::to_string(url->port);
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
                           const std::string& body, std::chrono::milliseconds timeout) {
  ASSIGN_OR_RETURN(Url parsed, ParseHttpUrl(url));
  HttpClient client(parsed.scheme + "://" + HostForUrl(parsed.host) + ":" +
                    std::to_string(parsed.port));
  return client.Request(method, parsed.target, body, "application/json", timeout);
}

}  // namespace dcm::http
