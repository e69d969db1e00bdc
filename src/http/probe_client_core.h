// The state of ProbeClient (probe_client.h) shared by its public methods (probe_client.cc) and
// the probes running on its workers (probe_run.cc): a connection, a probe, a key's pool entry,
// a worker (one io_context and thread), and the client-wide Core. Internal to
// dcm_probe_client.
//
// Thread-safety: everything about one key lives on one worker and is touched only on its thread
// (or by Stop after the thread was joined); Core's `mu` orders Check/Forget/Stop.
#pragma once

#include <openssl/ssl.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
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
#include "src/http/probe_client.h"

namespace dcm::http::probe_detail {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
namespace beast = boost::beast;
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
inline thread_local const void* tls_current_client = nullptr;

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

// Runs one probe on worker `w` (its thread), `done` called exactly once unless the client stops.
void StartProbe(Worker* w, Clock::time_point start, ProbeRequest request, HealthChecker::Done done);
// Drops `key`'s idle connection; probes of it that are running close theirs at the end.
void ForgetOnWorker(Worker* w, const std::string& key);

}  // namespace dcm::http::probe_detail
