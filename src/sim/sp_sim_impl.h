// SpSim's state (sp_sim.h), shared by its files: sp_sim.cc (listeners, routing, faults,
// control API, start and stop) and sp_sim_registration.cc (the workers that register the
// providers with DCM). Internal to dcm_sim.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <queue>
#include <thread>
#include <unordered_map>
#include <utility>

#include "src/common/log.h"
#include "src/http/client.h"
#include "src/http/server.h"
#include "src/sim/sim_provider.h"
#include "src/sim/sp_sim.h"

namespace dcm::sim {

struct SpSim::Impl {
  SpSimOptions options;
  std::vector<std::string> dcm_urls;           // options.dcm_url split at commas
  bool heartbeat = false;                      // options.liveness heartbeat or both
  http::HttpClientOptions dcm_client_options;  // TLS toward DCM and the bearer token
  std::shared_ptr<spdlog::logger> logger = Logger("sp-sim");
  std::unique_ptr<http::HttpServer> providers_server;
  std::unique_ptr<http::HttpServer> control_server;
  std::vector<std::unique_ptr<Provider>> providers;
  std::unordered_map<std::string_view, Provider*> by_name;  // views of Provider::name
  SimShared shared;
  std::atomic<size_t> registered{0};
  std::string control_host;
  uint16_t control_port = 0;

  std::mutex announce_mu;
  std::mutex fault_mu;  // serialises fault changes, so listener close/re-open never interleave

  // Registration: providers due for an attempt, by due time, shared by the workers.
  using Due = std::pair<std::chrono::steady_clock::time_point, size_t>;
  std::mutex reg_mu;
  std::condition_variable reg_cv;
  std::priority_queue<Due, std::vector<Due>, std::greater<>> due;  // under reg_mu
  int in_flight = 0;      // under reg_mu: attempts running (each may re-queue its provider)
  bool stopping = false;  // under reg_mu
  std::vector<std::thread> registrars;
  std::atomic<bool> stopped{false};

  void Announce(const std::string& line) {
    std::lock_guard lock(announce_mu);
    if (options.announce) {
      options.announce(line);
    } else {
      std::cout << line << std::endl;  // flushed: scripts and tests read it
    }
  }

  Status Build();
  Status ListenControl();
  Status ListenShared();
  Status ListenPerProvider();
  Result<uint16_t> ListenFor(Provider* p, uint16_t port);
  void ServeShared(size_t slot, http::HttpRequest req, http::Respond respond);
  // Applies `patch` to `p`, closing or re-opening its listener for kRefuse in per-port mode.
  // Caller holds fault_mu. `log`: one line per provider (false when the caller logs for all).
  Status ApplyFault(Provider& p, const FaultPatch& patch, bool log);
  void LogFaultAll(const FaultPatch& patch);
  void StartRegistration();
  void RegistrarLoop();
  std::optional<std::chrono::milliseconds> RegisterOnce(http::HttpClient& client, Provider& p);
  std::string RegistrationBody(const Provider& p) const;
  // One HeartbeatClient::Step of `p` through `transport`; the delay until the next, or nullopt.
  std::optional<std::chrono::milliseconds> HeartbeatOnce(const HeartbeatTransport& transport,
                                                         Provider& p);
  // DELETE the heartbeat providers' registrations (Stop).
  void DeregisterAll();
  Status SetFault(const std::string& name, const FaultPatch& patch);
  Status SetFaultAll(const FaultPatch& patch);
  SimStats Stats() const;
  http::HttpResponse Control(const http::HttpRequest& req);
  http::HttpResponse ProviderJson(const std::string& name) const;
  http::HttpResponse AllProvidersJson() const;
  http::HttpResponse StatsJson() const;
};

}  // namespace dcm::sim
