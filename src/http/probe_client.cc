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
//
// Files: this one (create, check, forget, stop), probe_client_core.h (the shared state),
// probe_run.cc (one probe on its worker: connect, exchange, pool, deadline).
#include "src/http/probe_client.h"

#include <pthread.h>
#include <sys/resource.h>

#include <algorithm>
#include <string>
#include <thread>

#include "src/common/thread_name.h"
#include "src/http/probe_client.h"
#include "src/http/probe_client_core.h"

namespace dcm::http {

using namespace probe_detail;  // NOLINT(google-build-using-namespace): this client's own parts

namespace {

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
        NameThisThread("probe-" + std::to_string(i));
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