// HttpServer implementation: Beast + Asio C++20 coroutines, one io_context per worker thread.
// See server.h for the contract and docs/http.md for the design.
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
#include "src/http/server.h"

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
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
#include <boost/beast/ssl.hpp>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>
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

// ---- TLS material -------------------------------------------------------------------------

// TLS 1.2 suites: ECDHE key exchange with AEAD only (Mozilla "intermediate" without DHE).
// TLS 1.3 keeps OpenSSL's defaults (all AEAD).
constexpr char kTls12Ciphers[] =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
// Required for session resumption when client certificates are requested.
constexpr unsigned char kSessionIdContext[] = "dcm-http";

// One loaded certificate/key/client-CA set. Each connection holds the one it was accepted with
// by shared_ptr, so ReloadTls never pulls a context from under a live connection.
struct TlsContext {
  explicit TlsContext(ssl::context c) : ctx(std::move(c)) {}
  ssl::context ctx;
  bool verify_clients = false;
  double not_after = 0;     // Unix seconds, the leaf certificate's notAfter
  std::string description;  // subject, serial, expiry: for the log
};

struct FileCloser {
  void operator()(FILE* f) const { std::fclose(f); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};

// The first (root-cause) error in this thread's OpenSSL queue; clears the queue.
std::string TakeOpenSslError() {
  const unsigned long first = ERR_get_error();
  ERR_clear_error();
  if (first == 0) return "no details from OpenSSL";
  if (const char* reason = ERR_reason_error_string(first)) return reason;
  char buf[256];
  ERR_error_string_n(first, buf, sizeof(buf));
  return buf;
}

// An encrypted key fails to load instead of OpenSSL prompting on the terminal.
int NoPassword(char*, int, int, void*) { return 0; }

tl::unexpected<Error> TlsFileError(const char* option, const std::string& path,
                                   const std::string& why) {
  return MakeError(ErrorCode::kInvalidArgument,
                   std::string("cannot load ") + option + " '" + path + "': " + why);
}

Result<std::unique_ptr<FILE, FileCloser>> OpenReadable(const char* option,
                                                       const std::string& path) {
  std::unique_ptr<FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (!f) return TlsFileError(option, path, std::strerror(errno));
  return f;
}

std::string TimeText(double unix_seconds) {
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string Describe(X509* leaf, double not_after) {
  char subject[256];
  X509_NAME_oneline(X509_get_subject_name(leaf), subject, sizeof(subject));
  std::string serial = "?";
  if (BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(leaf), nullptr)) {
    if (char* hex = BN_bn2hex(bn)) {
      serial = hex;
      OPENSSL_free(hex);
    }
    BN_free(bn);
  }
  return "subject=\"" + std::string(subject) + "\" serial=" + serial +
         " not_after=" + TimeText(not_after);
}

// Loads the server's certificate chain, key and optional client CA into a new context with
// the TLS policy of server.h. Never throws.
Result<std::shared_ptr<TlsContext>> LoadTlsContext(const ServerOptions& o) {
  ERR_clear_error();
  std::shared_ptr<TlsContext> tls;
  try {
    tls = std::make_shared<TlsContext>(ssl::context(ssl::context::tls_server));
  } catch (const std::exception& e) {
    return MakeError(ErrorCode::kInternal, std::string("cannot create a TLS context: ") + e.what());
  }
  SSL_CTX* ctx = tls->ctx.native_handle();
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(
      ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  // Frees the per-connection read/write buffers while idle (~84 KiB per idle TLS connection).
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
  if (SSL_CTX_set_cipher_list(ctx, kTls12Ciphers) != 1) {
    return MakeError(ErrorCode::kInternal, "no TLS 1.2 cipher available: " + TakeOpenSslError());
  }
  SSL_CTX_set_session_id_context(ctx, kSessionIdContext, sizeof(kSessionIdContext) - 1);
  SSL_CTX_set_default_passwd_cb(ctx, NoPassword);

  ASSIGN_OR_RETURN(auto cert_file, OpenReadable("tls_cert_file", o.tls_cert_file));
  cert_file.reset();
  if (SSL_CTX_use_certificate_chain_file(ctx, o.tls_cert_file.c_str()) != 1) {
    return TlsFileError("tls_cert_file", o.tls_cert_file,
                        "not a PEM certificate chain (" + TakeOpenSslError() + ")");
  }
  ASSIGN_OR_RETURN(auto key_file, OpenReadable("tls_key_file", o.tls_key_file));
  std::unique_ptr<EVP_PKEY, PkeyFree> key(
      PEM_read_PrivateKey(key_file.get(), nullptr, NoPassword, nullptr));
  if (!key) {
    return TlsFileError("tls_key_file", o.tls_key_file,
                        "not an unencrypted PEM private key (" + TakeOpenSslError() + ")");
  }
  X509* leaf = SSL_CTX_get0_certificate(ctx);
  if (leaf == nullptr || EVP_PKEY_eq(X509_get0_pubkey(leaf), key.get()) != 1 ||
      SSL_CTX_use_PrivateKey(ctx, key.get()) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
    ERR_clear_error();
    return MakeError(ErrorCode::kInvalidArgument,
                     "tls_key_file '" + o.tls_key_file +
                         "' does not match the certificate in tls_cert_file '" + o.tls_cert_file +
                         "'");
  }
  if (!o.tls_client_ca_file.empty()) {
    ASSIGN_OR_RETURN(auto ca_file, OpenReadable("tls_client_ca_file", o.tls_client_ca_file));
    ca_file.reset();
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(o.tls_client_ca_file.c_str());
    if (names == nullptr ||
        SSL_CTX_load_verify_locations(ctx, o.tls_client_ca_file.c_str(), nullptr) != 1) {
      if (names != nullptr) sk_X509_NAME_pop_free(names, X509_NAME_free);
      return TlsFileError("tls_client_ca_file", o.tls_client_ca_file,
                          "no PEM CA certificate in it (" + TakeOpenSslError() + ")");
    }
    SSL_CTX_set_client_CA_list(ctx, names);  // takes ownership; tells clients which CA we want
    // No SSL_VERIFY_FAIL_IF_NO_PEER_CERT: a client without a certificate may use a token.
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    tls->verify_clients = true;
  }
  std::tm tm{};
  if (ASN1_TIME_to_tm(X509_get0_notAfter(leaf), &tm) == 1) {
    tls->not_after = static_cast<double>(timegm(&tm));
  }
  tls->description = Describe(leaf, tls->not_after);
  ERR_clear_error();
  return tls;
}

// Why a handshake failed: the label of dcm_http_tls_handshake_failures_total (server.h).
enum class HandshakeFailure {
  kTimeout,
  kClosed,
  kNotTls,
  kVersion,
  kClientCert,
  kPeerAlert,
  kProtocol,
  kCount
};
constexpr std::array<const char*, static_cast<size_t>(HandshakeFailure::kCount)>
    kHandshakeFailureNames = {"timeout",     "closed",     "not_tls", "version",
                              "client_cert", "peer_alert", "protocol"};

HandshakeFailure ClassifyHandshake(const beast::error_code& ec) {
  if (ec == beast::error::timeout) return HandshakeFailure::kTimeout;
  if (ec.category() != asio::error::get_ssl_category()) return HandshakeFailure::kClosed;
  const auto code = static_cast<unsigned long>(static_cast<unsigned int>(ec.value()));
  if (ERR_GET_LIB(code) != ERR_LIB_SSL) return HandshakeFailure::kProtocol;
  const int reason = ERR_GET_REASON(code);
  switch (reason) {
    case SSL_R_HTTP_REQUEST:
    case SSL_R_HTTPS_PROXY_REQUEST:
    case SSL_R_WRONG_VERSION_NUMBER:
      return HandshakeFailure::kNotTls;
    case SSL_R_UNSUPPORTED_PROTOCOL:
    case SSL_R_VERSION_TOO_LOW:
    case SSL_R_NO_PROTOCOLS_AVAILABLE:
      return HandshakeFailure::kVersion;
    case SSL_R_CERTIFICATE_VERIFY_FAILED:
      return HandshakeFailure::kClientCert;
    default:
      break;
  }
  // Alerts the peer sent come back as SSL_AD_REASON_OFFSET + the alert number.
  if (reason >= SSL_AD_REASON_OFFSET && reason < SSL_AD_REASON_OFFSET + 256) {
    return HandshakeFailure::kPeerAlert;
  }
  return HandshakeFailure::kProtocol;
}

// An IA5String SAN entry (URI, DNS) as text, or "" if it holds anything but printable ASCII
// without spaces (no NUL tricks, no control characters in what the auth layer matches).
std::string SanText(const ASN1_IA5STRING* s) {
  if (s == nullptr) return "";
  const auto* data = ASN1_STRING_get0_data(s);
  const int length = ASN1_STRING_length(s);
  if (length <= 0) return "";
  for (int i = 0; i < length; ++i) {
    if (data[i] <= 0x20 || data[i] >= 0x7f) return "";
  }
  return std::string(reinterpret_cast<const char*>(data), static_cast<size_t>(length));
}

// The identity of a verified client certificate: first SAN URI, else first SAN DNS name, else
// the subject's first CN (server.h). "" when there is no verified certificate.
std::string PeerSubject(SSL* ssl) {
  X509* cert = SSL_get0_peer_certificate(ssl);
  if (cert == nullptr || SSL_get_verify_result(ssl) != X509_V_OK) return "";
  std::string uri;
  std::string dns;
  auto* names =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (names != nullptr) {
    for (int i = 0; i < sk_GENERAL_NAME_num(names) && uri.empty(); ++i) {
      const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, i);
      if (name->type == GEN_URI) uri = SanText(name->d.uniformResourceIdentifier);
      if (name->type == GEN_DNS && dns.empty()) dns = SanText(name->d.dNSName);
    }
    GENERAL_NAMES_free(names);
  }
  if (!uri.empty()) return uri;
  if (!dns.empty()) return dns;
  const X509_NAME* subject = X509_get_subject_name(cert);
  const int index = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (index < 0) return "";
  unsigned char* utf8 = nullptr;
  const int length =
      ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, index)));
  if (length <= 0) return "";
  std::string cn(reinterpret_cast<const char*>(utf8), static_cast<size_t>(length));
  OPENSSL_free(utf8);
  for (const char ch : cn) {
    const auto u = static_cast<unsigned char>(ch);
    if (u < 0x20 || u == 0x7f) return "";
  }
  return cn;
}

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

  // TLS: fixed at Create. The context is read at every accept and swapped by ReloadTls.
  bool tls_enabled = false;
  std::mutex reload_mu;  // one ReloadTls at a time
  std::mutex tls_mu;
  std::shared_ptr<TlsContext> tls;  // under tls_mu
  std::array<Counter*, kHandshakeFailureNames.size()> handshake_failures{};
  Gauge* cert_not_after = nullptr;

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
    if (!co_await WriteResponse(c, std::move(*response), head, keep_alive, version)) co_return;
    if (!keep_alive) {
      if constexpr (kIsTls<Stream>) co_await SendCloseNotify(c);
      beast::error_code ec;
      c->tcp().socket().shutdown(tcp::socket::shutdown_send, ec);
      co_return;
    }
  }
}

asio::awaitable<void> Session(Core* core, Worker* w, tcp::socket socket, uint16_t port,
                              std::shared_ptr<const Handler> handler) {
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
                                 std::shared_ptr<TlsContext> tls) {
  try {
    Conn<TlsStream> conn(core, w, port, std::move(socket), tls->ctx);
    if (co_await Handshake(&conn, *tls)) co_await ServeConnection(&conn, handler.get());
    conn.tcp().close();
  } catch (const std::exception& e) {
    core->logger->warn("msg=\"connection failed\" error=\"{}\"", e.what());
  }
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
    if (core->tls_enabled) {
      asio::co_spawn(*w->ctx,
                     TlsSession(core, w, std::move(socket), port, handler, core->CurrentTls()),
                     asio::detached);
    } else {
      asio::co_spawn(*w->ctx, Session(core, w, std::move(socket), port, handler), asio::detached);
    }
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
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "tls_cert_file and tls_key_file must be given together");
  }
  if (!options.tls_client_ca_file.empty() && options.tls_cert_file.empty()) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "tls_client_ca_file needs tls_cert_file and tls_key_file");
  }
  std::shared_ptr<TlsContext> tls;
  if (!options.tls_cert_file.empty()) {
    ASSIGN_OR_RETURN(tls, LoadTlsContext(options));
  }
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  if (Metrics* m = impl->options.metrics; m != nullptr) {
    impl->duration =
        &m->GetHistogram("dcm_http_request_duration_seconds",
                         "Time from a request read to its response ready to write, seconds");
    if (tls) {
      for (size_t i = 0; i < kHandshakeFailureNames.size(); ++i) {
        impl->handshake_failures[i] = &m->GetCounter(
            "dcm_http_tls_handshake_failures_total", "TLS handshakes that failed, by reason",
            std::string("reason=\"") + kHandshakeFailureNames[i] + "\"");
      }
      impl->cert_not_after = &m->GetGauge("dcm_http_tls_cert_not_after_seconds",
                                          "When the serving TLS certificate expires, Unix seconds");
    }
  }
  if (tls) {
    impl->tls_enabled = true;
    impl->InstallTls(std::move(tls));
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
