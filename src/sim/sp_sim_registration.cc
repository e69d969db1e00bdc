// SpSim's registration workers (sp_sim.h "Registration"): providers due for an attempt wait in
// one queue by due time; each worker POSTs a provider to DCM and re-queues it on a retryable
// answer. With liveness heartbeat the worker steps the provider's HeartbeatClient instead, and
// re-queues it at the time that returns (beats go on until Stop).
#include <simdjson.h>

#include <random>

#include "src/common/json_writer.h"
#include "src/sim/sp_sim_impl.h"

namespace dcm::sim {
namespace {

using Clock = std::chrono::steady_clock;

simdjson::dom::parser& Parser() {
  thread_local simdjson::dom::parser parser;
  return parser;
}

// For the heartbeat backoff's jitter: [0, 1), a generator per worker thread.
double Uniform01() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
}

}  // namespace

std::string SpSim::Impl::RegistrationBody(const Provider& p) const {
  JsonWriter w;
  w.BeginObject();
  w.Field("name", p.name);
  w.Field("endpoint", p.endpoint);
  w.Field("service_type", *p.service_type);
  w.Field("display_name", "Simulated " + *p.service_type + " provider " + std::to_string(p.index));
  w.Key("operations");
  w.BeginArray();
  for (const char* op : {"create", "read", "delete"}) w.String(op);
  w.EndArray();
  w.Key("metadata");
  w.BeginObject();
  w.Field("region_code", *p.region_code);
  w.Field("zone", p.zone());
  if (options.max_instances > 0) {
    w.Key("resources");
    w.BeginObject();
    w.Field("max_instances", options.max_instances);
    w.EndObject();
  }
  w.EndObject();
  if (heartbeat) w.Field("liveness", options.liveness);  // heartbeat or both
  w.EndObject();
  return w.Take();
}

std::optional<std::chrono::milliseconds> SpSim::Impl::RegisterOnce(http::HttpClient& client,
                                                                   Provider& p) {
  auto res = client.Request("POST", options.api_prefix + "/providers", RegistrationBody(p),
                            "application/json", options.register_timeout);

  std::string error;
  bool retry = true;
  std::string id;
  if (!res) {
    error = res.error().message;
  } else if (res->status == 200 || res->status == 201) {
    simdjson::dom::element doc;
    std::string_view id_view;
    if (Parser().parse(res->body).get(doc) == simdjson::SUCCESS &&
        doc["id"].get(id_view) == simdjson::SUCCESS && !id_view.empty()) {
      id.assign(id_view);
    } else {
      error = "DCM answered " + std::to_string(res->status) + " without an id";
      retry = false;
    }
  } else {
    error = "DCM answered " + std::to_string(res->status) + ": " + res->body.substr(0, 512);
    retry = res->status >= 500;
  }

  int attempts;
  {
    std::lock_guard lock(p.mu);
    attempts = ++p.attempts;
    if (error.empty()) {
      p.id = id;
      p.registration = RegistrationState::kRegistered;
      p.last_error.clear();
    } else {
      p.last_error = error;
      if (!retry) p.registration = RegistrationState::kRejected;
    }
  }
  if (error.empty()) {
    registered.fetch_add(1, std::memory_order_relaxed);
    logger->info("msg=\"registered\" name={} id={} endpoint={} status={}", p.name, id, p.endpoint,
                 res->status);
    Announce("registered name=" + p.name + " id=" + id + " endpoint=" + p.endpoint);
    return std::nullopt;
  }
  if (!retry) {
    logger->error("msg=\"registration rejected\" name={} attempt={} error=\"{}\"", p.name, attempts,
                  error);
    return std::nullopt;
  }
  // base·2^(attempts-1), capped; computed in doubles to avoid overflow on long outages.
  const double factor = std::pow(2.0, std::min(attempts - 1, 30));
  const auto delay = std::chrono::milliseconds(static_cast<int64_t>(
      std::min<double>(static_cast<double>(options.register_backoff_cap.count()),
                       static_cast<double>(options.register_backoff_base.count()) * factor)));
  // Warn on the first failure and every tenth, so a long DCM outage with 1000 providers does
  // not flood stderr; the rest go to debug.
  const auto level =
      attempts == 1 || attempts % 10 == 0 ? spdlog::level::warn : spdlog::level::debug;
  logger->log(level,
              "msg=\"registration failed, will retry\" name={} attempt={} retry_in_ms={} "
              "error=\"{}\"",
              p.name, attempts, delay.count(), error);
  return delay;
}

std::optional<std::chrono::milliseconds> SpSim::Impl::HeartbeatOnce(
    const HeartbeatTransport& transport, Provider& p) {
  BeatHealth health;
  {
    std::lock_guard lock(p.mu);
    switch (p.fault.health) {
      case HealthFault::kUnhealthy:
        health = BeatHealth::kUnhealthy;
        break;
      case HealthFault::kUnavailable:
      case HealthFault::kHang:
      case HealthFault::kRefuse:
        health = BeatHealth::kSilent;  // the SP is down: it stops beating
        break;
      default:
        health = BeatHealth::kHealthy;
    }
  }
  HeartbeatClient& hb = *p.heartbeat;
  const bool was_registered = hb.registered();
  const auto step = hb.Step(transport, health);
  {
    std::lock_guard lock(p.mu);
    p.attempts = hb.attempts();
    p.heartbeats = hb.beats();
    p.last_error = hb.last_error();
    if (hb.id()) p.id = hb.id();
    p.registration = hb.registered() ? RegistrationState::kRegistered
                     : step.next     ? RegistrationState::kPending
                                     : RegistrationState::kRejected;
  }
  if (step.registered) {
    registered.fetch_add(1, std::memory_order_relaxed);
    logger->info("msg=\"registered\" name={} id={} endpoint={} liveness={} dcm_url={}", p.name,
                 *hb.id(), p.endpoint, options.liveness, dcm_urls[hb.url()]);
    Announce("registered name=" + p.name + " id=" + *hb.id() + " endpoint=" + p.endpoint);
  } else if (was_registered && !hb.registered()) {
    registered.fetch_sub(1, std::memory_order_relaxed);
    logger->warn("msg=\"registering again\" name={} id={} error=\"{}\"", p.name,
                 hb.id().value_or(""), hb.last_error());
  } else if (!step.next) {
    logger->error("msg=\"registration rejected\" name={} error=\"{}\"", p.name, hb.last_error());
  } else if (!hb.last_error().empty() && step.next->count() > 0) {
    const int failures = hb.backoff().failures();
    const auto level =
        failures == 1 || failures % 10 == 0 ? spdlog::level::warn : spdlog::level::debug;
    logger->log(level,
                "msg=\"DCM unreachable, backing off\" name={} failures={} retry_in_ms={} "
                "error=\"{}\"",
                p.name, failures, step.next->count(), hb.last_error());
  }
  return step.next;
}

void SpSim::Impl::DeregisterAll() {
  std::vector<std::unique_ptr<http::HttpClient>> clients;
  for (const auto& url : dcm_urls) {
    clients.push_back(std::make_unique<http::HttpClient>(url, dcm_client_options));
  }
  const HeartbeatTransport transport = [&](const HeartbeatRequest& r) {
    return clients[r.url]->Request(r.method, r.target, r.body, "application/json",
                                   std::chrono::milliseconds(2000));
  };
  for (auto& p : providers) {
    if (!p->heartbeat || !p->heartbeat->registered()) continue;
    const std::string id = *p->heartbeat->id();
    if (auto st = p->heartbeat->Deregister(transport); !st) {
      logger->warn("msg=\"cannot delete registration\" name={} id={} error=\"{}\"", p->name, id,
                   st.error().message);
      continue;
    }
    logger->info("msg=\"registration deleted\" name={} id={}", p->name, id);
    registered.fetch_sub(1, std::memory_order_relaxed);
    std::lock_guard lock(p->mu);
    p->registration = RegistrationState::kPending;
  }
}

void SpSim::Impl::StartRegistration() {
  if (heartbeat) {
    HeartbeatOptions hb;
    hb.api_prefix = options.api_prefix;
    hb.interval = options.heartbeat_interval;
    hb.backoff_base = options.register_backoff_base;
    hb.backoff_cap = options.register_backoff_cap;
    for (auto& p : providers) {
      p->heartbeat =
          std::make_unique<HeartbeatClient>(RegistrationBody(*p), dcm_urls.size(), hb, Uniform01);
    }
  }
  const auto now = Clock::now();
  for (size_t i = 0; i < providers.size(); ++i) due.emplace(now, i);
  const int workers = std::min(options.register_concurrency, static_cast<int>(providers.size()));
  for (int i = 0; i < workers; ++i) registrars.emplace_back([this] { RegistrarLoop(); });
}

// One worker: takes the provider due first, attempts it with its own keep-alive connection and
// re-queues it at its backoff. Workers exit once nothing is queued or in flight.
void SpSim::Impl::RegistrarLoop() {
  std::vector<std::unique_ptr<http::HttpClient>> clients;
  for (const auto& url : dcm_urls) {
    clients.push_back(std::make_unique<http::HttpClient>(url, dcm_client_options));
  }
  const HeartbeatTransport transport = [&](const HeartbeatRequest& r) {
    return clients[r.url]->Request(r.method, r.target, r.body, "application/json",
                                   options.register_timeout);
  };
  std::unique_lock lock(reg_mu);
  while (!stopping) {
    if (due.empty()) {
      if (in_flight == 0) break;
      reg_cv.wait(lock);  // an attempt in flight may re-queue its provider
      continue;
    }
    const auto [when, index] = due.top();
    if (when > Clock::now()) {
      reg_cv.wait_until(lock, when);  // or earlier: a sooner retry, or Stop
      continue;
    }
    due.pop();
    ++in_flight;
    lock.unlock();
    Provider& p = *providers[index];
    const auto retry_in = heartbeat ? HeartbeatOnce(transport, p) : RegisterOnce(*clients[0], p);
    lock.lock();
    --in_flight;
    if (retry_in) due.emplace(Clock::now() + *retry_in, index);
    // Wakes a worker for the new entry, or lets idle workers see that all is done.
    if (retry_in || (due.empty() && in_flight == 0)) reg_cv.notify_all();
  }
  reg_cv.notify_all();  // Let the others leave too.
}

}  // namespace dcm::sim
