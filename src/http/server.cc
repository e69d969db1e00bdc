// HttpServer implementation: Beast + Asio C++20 coroutines, one io_context per worker thread.
// See server.h for the contract and docs/http.md for the design. Files: this one (create, listen,
// close, stop), server_core.h (the state shared with the connections), server_connection.cc
// (the connection coroutines: the per-connection diagram is there), server_tls.h (certificates
// and handshakes).
#include "src/http/server.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "src/common/thread_name.h"
#include "src/http/server_core.h"
#include "src/http/server_tls.h"

namespace dcm::http {

using namespace server_detail;  // NOLINT(google-build-using-namespace): this file's own parts

namespace {

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

Status ValidateOptions(const ServerOptions& options) {
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
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "tls_cert_file and tls_key_file must be given together");
  }
  if (!options.tls_client_ca_file.empty() && options.tls_cert_file.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "tls_client_ca_file needs tls_cert_file and tls_key_file");
  }
  return OkStatus();
}

// The request, TLS and connection metrics of server.h, registered once; the refusal answers.
void RegisterMetrics(Core* core, bool tls) {
  if (Metrics* m = core->options.metrics; m != nullptr) {
    core->duration =
        &m->GetHistogram("dcm_http_request_duration_seconds",
                         "Time from a request read to its response ready to write, seconds");
    if (tls) {
      for (size_t i = 0; i < kHandshakeFailureNames.size(); ++i) {
        core->handshake_failures[i] = &m->GetCounter(
            "dcm_http_tls_handshake_failures_total", "TLS handshakes that failed, by reason",
            std::string("reason=\"") + kHandshakeFailureNames[i] + "\"");
      }
      core->cert_not_after = &m->GetGauge("dcm_http_tls_cert_not_after_seconds",
                                          "When the serving TLS certificate expires, Unix seconds");
    }
    core->open_gauge =
        &m->GetGauge("dcm_http_connections_open", "HTTP connections open (admitted under the cap)");
    const char* help = "HTTP connections refused at once with a 503, by the cap they hit";
    core->refused[static_cast<size_t>(Refusal::kTotal)] =
        &m->GetCounter("dcm_http_connections_refused_total", help, "reason=\"total\"");
    core->refused[static_cast<size_t>(Refusal::kClient)] =
        &m->GetCounter("dcm_http_connections_refused_total", help, "reason=\"client\"");
    core->accept_errors =
        &m->GetCounter("dcm_http_accept_errors_total",
                       "accept() failures (EMFILE/ENFILE: out of descriptors); each pauses 50 ms");
  }
  for (Refusal why : {Refusal::kTotal, Refusal::kClient}) {
    core->refusal_bytes[static_cast<size_t>(why)] = RefusalResponse(core->options, why);
  }
}

// One io_context and thread per worker; an exception escaping the loop is logged and the loop
// runs again.
void StartWorkers(Core* raw) {
  for (int i = 0; i < raw->options.threads; ++i) {
    auto w = std::make_unique<Worker>();
    w->guard.emplace(w->ctx->get_executor());
    Worker* wp = w.get();
    w->thread = std::thread([raw, wp, i] {
      NameThisThread("http-" + std::to_string(i));
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
}

}  // namespace

struct HttpServer::Impl : Core {};

Result<std::unique_ptr<HttpServer>> HttpServer::Create(ServerOptions options) {
  RETURN_IF_ERROR(ValidateOptions(options));
  std::shared_ptr<TlsContext> tls;
  if (!options.tls_cert_file.empty()) {
    ASSIGN_OR_RETURN(tls, LoadTlsContext(options));
  }
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  RegisterMetrics(impl.get(), tls != nullptr);
  if (tls) {
    impl->tls_enabled = true;
    impl->InstallTls(std::move(tls));
  }
  StartWorkers(impl.get());
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::ReloadTls() {
  if (!impl_->tls_enabled) return OkStatus();
  std::lock_guard lock(impl_->reload_mu);
  ASSIGN_OR_RETURN(auto fresh, LoadTlsContext(impl_->options));
  impl_->InstallTls(std::move(fresh));
  return OkStatus();
}

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
        std::vector<ConnBase*> doomed;
        for (auto& [id, conn] : w->conns) {
          if (conn->port == port) doomed.push_back(conn);
        }
        for (ConnBase* conn : doomed) conn->Close();
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