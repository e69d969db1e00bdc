// SpSim's registration workers (sp_sim.h "Registration"): providers due for an attempt wait in
// one queue by due time; each worker POSTs a provider to DCM and re-queues it on a retryable
// answer.
#include <simdjson.h>

#include "src/common/json_writer.h"
#include "src/sim/sp_sim_impl.h"

namespace dcm::sim {
namespace {

using Clock = std::chrono::steady_clock;

simdjson::dom::parser& Parser() {
  thread_local simdjson::dom::parser parser;
  return parser;
}

}  // namespace

std::optional<std::chrono::milliseconds> SpSim::Impl::RegisterOnce(http::HttpClient& client,
                                                                   Provider& p) {
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
  w.EndObject();
  w.EndObject();
  auto res = client.Request("POST", options.api_prefix + "/providers", w.Take(), "application/json",
                            options.register_timeout);

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

void SpSim::Impl::StartRegistration() {
  const auto now = Clock::now();
  for (size_t i = 0; i < providers.size(); ++i) due.emplace(now, i);
  const int workers = std::min(options.register_concurrency, static_cast<int>(providers.size()));
  for (int i = 0; i < workers; ++i) registrars.emplace_back([this] { RegistrarLoop(); });
}

// One worker: takes the provider due first, attempts it with its own keep-alive connection and
// re-queues it at its backoff. Workers exit once nothing is queued or in flight.
void SpSim::Impl::RegistrarLoop() {
  http::HttpClient client(options.dcm_url, dcm_client_options);
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
    const auto retry_in = RegisterOnce(client, *providers[index]);
    lock.lock();
    --in_flight;
    if (retry_in) due.emplace(Clock::now() + *retry_in, index);
    // Wakes a worker for the new entry, or lets idle workers see that all is done.
    if (retry_in || (due.empty() && in_flight == 0)) reg_cv.notify_all();
  }
  reg_cv.notify_all();  // Let the others leave too.
}

}  // namespace dcm::sim
