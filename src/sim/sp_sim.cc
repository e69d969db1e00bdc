// SpSim: listeners, request routing, faults and the control API. The SP API of one provider is
// in sim_provider.cc, the registration workers in sp_sim_registration.cc. No Beast here:
// HttpServer/HttpClient through their headers.
#include "src/sim/sp_sim.h"

#include <simdjson.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <queue>
#include <thread>
#include <unordered_map>
#include <utility>

#include "src/common/json_writer.h"
#include "src/common/log.h"
#include "src/common/url.h"
#include "src/http/client.h"
#include "src/http/server.h"
#include "src/sim/sim_provider.h"
#include "src/sim/sp_sim_impl.h"

namespace dcm::sim {
namespace {

using http::HttpRequest;
using http::HttpResponse;
using http::Respond;
using Clock = std::chrono::steady_clock;

// A health request held by the `hang` fault stays open until its client leaves; the server
// frees it then. This only bounds a client that never gives up.
constexpr std::chrono::hours kHangLimit{24};

// Descriptors a per-port run needs beyond one listener per provider: the control listener,
// stdio, logs, DCM and probe connections. Below this headroom Start refuses and suggests ports.
constexpr rlim_t kFdHeadroom = 256;

constexpr std::string_view kSharedPrefix = "/p/";

HttpResponse ErrorResponse(const Error& e) {
  if (e.code == ErrorCode::kNotFound) return ProblemResponse(404, "Not Found", e.message);
  if (e.code == ErrorCode::kInvalidArgument) {
    std::string detail = e.message;
    for (const auto& f : e.fields) detail += "; " + f.field + ": " + f.message;
    return ProblemResponse(400, "Bad Request", detail);
  }
  return ProblemResponse(503, "Service Unavailable", e.message);
}

std::string UrlHost(const std::string& host) {
  return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

// The provider index in a shared-port path "/p/{i}/...", or nullopt.
std::optional<size_t> SharedIndex(std::string_view path) {
  if (!path.starts_with(kSharedPrefix)) return std::nullopt;
  path.remove_prefix(kSharedPrefix.size());
  size_t index = 0;
  const char* last = path.data() + path.size();
  auto [end, ec] = std::from_chars(path.data(), last, index);
  const bool digits_then_slash =
      ec == std::errc() && end != path.data() && end != last && *end == '/';
  return digits_then_slash ? std::optional<size_t>(index) : std::nullopt;
}

// Identity of provider `i` (SPEC §3.1 fields); port and endpoint come when it listens.
std::unique_ptr<Provider> NewProvider(const SpSimOptions& o, int i) {
  auto p = std::make_unique<Provider>();
  const size_t n = static_cast<size_t>(i);
  p->index = static_cast<uint32_t>(i);
  p->service_type = &o.service_types[n % o.service_types.size()];
  p->region_code = &o.region_codes[n % o.region_codes.size()];
  p->zone_letter = static_cast<char>('a' + (n / o.region_codes.size()) % 3);
  p->name = o.name_prefix + "-" + *p->service_type + "-" + std::to_string(i);
  p->registration =
      o.register_with_dcm ? RegistrationState::kPending : RegistrationState::kDisabled;
  return p;
}

void SetEndpoint(Provider& p, const SpSimOptions& o, uint16_t port) {
  p.port = port;
  const char* scheme = o.tls_cert_file.empty() ? "http://" : "https://";
  std::string origin = scheme + UrlHost(o.host) + ":" + std::to_string(port);
  p.path_start = static_cast<uint16_t>(origin.size());
  std::string path = o.ports > 0 ? std::string(kSharedPrefix) + std::to_string(p.index) : "";
  p.endpoint = origin + path + "/api/" + *p.service_type;
}

}  // namespace

// ---- listeners and routing ----------------------------------------------------------------

Status SpSim::Impl::Build() {
  if (!options.dcm_ca_file.empty()) {
    ASSIGN_OR_RETURN(dcm_client_options.tls,
                     http::TlsClientContext::Create({options.dcm_ca_file, false, "", ""}));
  }
  if (!options.token.empty()) {
    dcm_client_options.headers.emplace_back("Authorization", "Bearer " + options.token);
  }
  http::ServerOptions server_options;
  server_options.server_name = "dcm-sp-sim";
  server_options.handler_timeout = kHangLimit;
  server_options.tls_cert_file = options.tls_cert_file;
  server_options.tls_key_file = options.tls_key_file;
  ASSIGN_OR_RETURN(providers_server, http::HttpServer::Create(server_options));
  ASSIGN_OR_RETURN(control_server, http::HttpServer::Create(http::ServerOptions{}));
  RETURN_IF_ERROR(ListenControl());
  providers.reserve(static_cast<size_t>(options.count));
  by_name.reserve(static_cast<size_t>(options.count));
  for (int i = 0; i < options.count; ++i) {
    auto p = NewProvider(options, i);
    if (!by_name.emplace(p->name, p.get()).second) {
      return MakeError(ErrorCode::kInvalidArgument, "duplicate provider name " + p->name);
    }
    providers.push_back(std::move(p));
  }
  return options.ports > 0 ? ListenShared() : ListenPerProvider();
}

Status SpSim::Impl::ListenControl() {
  const size_t colon = options.control_listen.rfind(':');
  control_host = colon == std::string::npos ? "" : options.control_listen.substr(0, colon);
  if (control_host.size() >= 2 && control_host.front() == '[') {
    control_host = control_host.substr(1, control_host.size() - 2);
  }
  if (control_host.empty()) control_host = "0.0.0.0";
  ASSIGN_OR_RETURN(control_port, control_server->Listen(options.control_listen,
                                                        [this](HttpRequest req, Respond respond) {
                                                          respond(Control(req));
                                                        }));
  return OkStatus();
}

Status SpSim::Impl::ListenPerProvider() {
  for (auto& p : providers) {
    ASSIGN_OR_RETURN(uint16_t port, ListenFor(p.get(), 0));
    SetEndpoint(*p, options, port);
  }
  return OkStatus();
}

Status SpSim::Impl::ListenShared() {
  const size_t slots = std::min(providers.size(), static_cast<size_t>(options.ports));
  for (size_t slot = 0; slot < slots; ++slot) {
    ASSIGN_OR_RETURN(uint16_t port, providers_server->Listen(
                                        UrlHost(options.host) + ":0",
                                        [this, slot](HttpRequest req, Respond respond) {
                                          ServeShared(slot, std::move(req), std::move(respond));
                                        }));
    for (size_t i = slot; i < providers.size(); i += slots) {
      SetEndpoint(*providers[i], options, port);
    }
  }
  return OkStatus();
}

Result<uint16_t> SpSim::Impl::ListenFor(Provider* p, uint16_t port) {
  return providers_server->Listen(UrlHost(options.host) + ":" + std::to_string(port),
                                  [this, p](HttpRequest req, Respond respond) {
                                    ServeProvider(*p, shared, std::move(req), std::move(respond));
                                  });
}

// O(1): the index in "/p/{i}/" picks the provider; it must live on this listener.
void SpSim::Impl::ServeShared(size_t slot, HttpRequest req, Respond respond) {
  const auto index = SharedIndex(req.path);
  const size_t slots = std::min(providers.size(), static_cast<size_t>(options.ports));
  if (!index || *index >= providers.size() || *index % slots != slot) {
    return respond(ProblemResponse(404, "Not Found", "no provider at " + req.path));
  }
  ServeProvider(*providers[*index], shared, std::move(req), std::move(respond));
}

// ---- faults -------------------------------------------------------------------------------

Status SpSim::Impl::ApplyFault(Provider& p, const FaultPatch& patch, bool log) {
  FaultConfig before;
  {
    std::lock_guard lock(p.mu);
    before = p.fault;
  }
  FaultConfig after = before;
  if (patch.health) after.health = *patch.health;
  if (patch.fail_creates) after.fail_creates = *patch.fail_creates;
  if (patch.fail_deletes) after.fail_deletes = *patch.fail_deletes;
  const bool was_refusing = before.health == HealthFault::kRefuse;
  const bool refuses = after.health == HealthFault::kRefuse;
  if (!shared.shared_ports && !was_refusing && refuses) {
    providers_server->CloseListener(p.port);
  } else if (!shared.shared_ports && was_refusing && !refuses) {
    // While the port was closed, a short-lived connection elsewhere on the machine may have taken
    // it as its local port: wait for it to go (up to 5 s) rather than fail the fault change.
    auto port = ListenFor(&p, p.port);
    for (int attempt = 0; !port && attempt < 50; ++attempt) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      port = ListenFor(&p, p.port);
    }
    if (!port) {
      logger->error("msg=\"cannot re-open provider port\" name={} port={} error=\"{}\"", p.name,
                    p.port, port.error().message);
      return MakeError(ErrorCode::kUnavailable, "re-opening " + p.name + " on port " +
                                                    std::to_string(p.port) +
                                                    " failed: " + port.error().message);
    }
  }
  {
    std::lock_guard lock(p.mu);
    p.fault = after;
  }
  if (log && !(before == after)) {
    logger->info("msg=\"fault set\" name={} health={} fail_creates={} fail_deletes={}", p.name,
                 HealthFaultName(after.health), after.fail_creates, after.fail_deletes);
  }
  return OkStatus();
}

void SpSim::Impl::LogFaultAll(const FaultPatch& patch) {
  auto text = [](const std::optional<bool>& v) {
    return v ? (*v ? "true" : "false") : "unchanged";
  };
  logger->info("msg=\"fault set\" name=* health={} fail_creates={} fail_deletes={}",
               patch.health ? HealthFaultName(*patch.health) : "unchanged",
               text(patch.fail_creates), text(patch.fail_deletes));
}

Status SpSim::Impl::SetFault(const std::string& name, const FaultPatch& patch) {
  auto it = by_name.find(name);
  if (it == by_name.end()) {
    return MakeError(ErrorCode::kNotFound, "no simulated provider '" + name + "'");
  }
  std::lock_guard lock(fault_mu);
  return ApplyFault(*it->second, patch, true);
}

Status SpSim::Impl::SetFaultAll(const FaultPatch& patch) {
  std::lock_guard lock(fault_mu);
  for (auto& p : providers) RETURN_IF_ERROR(ApplyFault(*p, patch, false));
  LogFaultAll(patch);
  return OkStatus();
}

// ---- control API --------------------------------------------------------------------------

SimStats SpSim::Impl::Stats() const {
  SimStats s;
  s.providers = providers.size();
  s.health_probes = shared.health_probes.load(std::memory_order_relaxed);
  s.registered = registered.load(std::memory_order_relaxed);
  s.creates_received = shared.creates_received.load(std::memory_order_relaxed);
  s.deletes_received = shared.deletes_received.load(std::memory_order_relaxed);
  s.instances = shared.instances.load(std::memory_order_relaxed);
  return s;
}

HttpResponse SpSim::Impl::StatsJson() const {
  const SimStats s = Stats();
  JsonWriter w;
  w.BeginObject();
  w.Key("providers");
  w.Uint(s.providers);
  w.Key("health_probes");
  w.Uint(s.health_probes);
  w.Key("registered");
  w.Uint(s.registered);
  w.Key("creates_received");
  w.Uint(s.creates_received);
  w.Key("deletes_received");
  w.Uint(s.deletes_received);
  w.Key("instances");
  w.Uint(s.instances);
  w.EndObject();
  return JsonResponse(200, w.Take());
}

HttpResponse SpSim::Impl::ProviderJson(const std::string& name) const {
  auto it = by_name.find(name);
  if (it == by_name.end()) {
    return ProblemResponse(404, "Not Found", "no simulated provider '" + name + "'");
  }
  JsonWriter w;
  RenderProvider(w, it->second->Snapshot(shared));
  return JsonResponse(200, w.Take());
}

HttpResponse SpSim::Impl::AllProvidersJson() const {
  JsonWriter w;
  w.BeginArray();
  for (const auto& p : providers) RenderProvider(w, p->Snapshot(shared));
  w.EndArray();
  return JsonResponse(200, w.Take());
}

// GET /sim/stats, GET /sim/providers[/{name}], PUT /sim/providers/{name}/fault, PUT /sim/fault.
HttpResponse SpSim::Impl::Control(const HttpRequest& req) {
  static const std::string kProviders = "/sim/providers";
  static const std::string kFaultSuffix = "/fault";
  const std::string& path = req.path;
  if (path == "/sim/stats") {
    return req.method == "GET" ? StatsJson() : MethodNotAllowed(req.method);
  }
  if (path == kProviders) {
    return req.method == "GET" ? AllProvidersJson() : MethodNotAllowed(req.method);
  }
  if (path == "/sim/fault") {
    if (req.method != "PUT") return MethodNotAllowed(req.method);
    auto patch = ParseFaultPatch(req.body);
    if (!patch) return ErrorResponse(patch.error());
    if (auto st = SetFaultAll(*patch); !st) return ErrorResponse(st.error());
    return AllProvidersJson();
  }
  if (path.rfind(kProviders + "/", 0) != 0) {
    return ProblemResponse(404, "Not Found", "no route for " + path);
  }
  std::string name = path.substr(kProviders.size() + 1);
  if (!name.ends_with(kFaultSuffix)) {
    return req.method == "GET" ? ProviderJson(name) : MethodNotAllowed(req.method);
  }
  name.resize(name.size() - kFaultSuffix.size());
  if (req.method != "PUT") return MethodNotAllowed(req.method);
  auto patch = ParseFaultPatch(req.body);
  if (!patch) return ErrorResponse(patch.error());
  if (auto st = SetFault(name, *patch); !st) return ErrorResponse(st.error());
  return ProviderJson(name);
}

// ---- public API ---------------------------------------------------------------------------

namespace {

// "a,b, c" → {"a","b","c"}; empty items dropped.
std::vector<std::string> SplitUrls(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    std::string item = list.substr(start, comma - start);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(std::move(item));
    start = comma + 1;
  }
  return out;
}

Status ValidateOptions(SpSimOptions& options) {
  auto bad = [](const std::string& why) { return MakeError(ErrorCode::kInvalidArgument, why); };
  if (options.count < 0 || options.count > 60000) return bad("count must be in 0..60000");
  if (options.ports < 0 || options.ports > 60000) return bad("ports must be in 0..60000");
  if (options.register_concurrency < 1 || options.register_concurrency > 1024) {
    return bad("register_concurrency must be in 1..1024");
  }
  if (options.service_types.empty()) return bad("service_types must not be empty");
  if (options.region_codes.empty()) return bad("region_codes must not be empty");
  if (options.name_prefix.empty()) return bad("name_prefix must not be empty");
  if (options.api_prefix.empty() || options.api_prefix.front() != '/') {
    return bad("api_prefix must start with '/'");
  }
  while (options.api_prefix.size() > 1 && options.api_prefix.back() == '/') {
    options.api_prefix.pop_back();
  }
  if (options.register_backoff_base.count() <= 0 ||
      options.register_backoff_cap < options.register_backoff_base) {
    return bad("register backoff must be positive with cap >= base");
  }
  if (options.liveness != "probe" && options.liveness != "heartbeat" &&
      options.liveness != "both") {
    return bad("liveness must be probe, heartbeat or both");
  }
  if (options.heartbeat_interval.count() <= 0) return bad("heartbeat_interval must be positive");
  if (options.register_with_dcm) {
    const auto urls = SplitUrls(options.dcm_url);
    if (urls.empty()) return bad("dcm_url must not be empty");
    for (const auto& u : urls) {
      auto url = ParseHttpUrl(u);
      if (!url) return bad("dcm_url " + url.error().message);
    }
  }
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return bad("tls_cert_file and tls_key_file go together");
  }
  // One listener per provider: fail with a hint rather than with EMFILE halfway through.
  rlimit limit{};
  if (options.ports == 0 && getrlimit(RLIMIT_NOFILE, &limit) == 0 &&
      limit.rlim_cur != RLIM_INFINITY &&
      static_cast<rlim_t>(options.count) + kFdHeadroom > limit.rlim_cur) {
    return bad("count " + std::to_string(options.count) +
               " needs one listener descriptor per provider but the open files limit is " +
               std::to_string(limit.rlim_cur) + ": use shared ports (ports / --ports)");
  }
  return OkStatus();
}

}  // namespace

Result<std::unique_ptr<SpSim>> SpSim::Start(SpSimOptions options) {
  RETURN_IF_ERROR(ValidateOptions(options));
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->dcm_urls = SplitUrls(impl->options.dcm_url);
  impl->heartbeat = impl->options.liveness != "probe";  // heartbeat, or both (beats and probes)
  impl->shared.version = impl->options.version;
  impl->shared.epoch_ms = SystemMillis();
  impl->shared.shared_ports = impl->options.ports > 0;
  if (auto st = impl->Build(); !st) {
    // Stop the servers before the providers their handlers point at go away.
    if (impl->control_server) impl->control_server->Stop();
    if (impl->providers_server) impl->providers_server->Stop();
    return tl::unexpected(st.error());
  }
  Impl* raw = impl.get();
  raw->Announce("sp-sim control http://" + UrlHost(raw->control_host) + ":" +
                std::to_string(raw->control_port));
  raw->logger->info(
      "msg=\"started\" providers={} ports={} control_port={} register={} "
      "register_concurrency={} liveness={}",
      raw->providers.size(),
      raw->options.ports > 0 ? std::to_string(raw->options.ports) : "per-provider",
      raw->control_port, raw->options.register_with_dcm, raw->options.register_concurrency,
      raw->options.liveness);
  if (raw->options.register_with_dcm && !raw->providers.empty()) raw->StartRegistration();
  return std::unique_ptr<SpSim>(new SpSim(std::move(impl)));
}

SpSim::SpSim(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

SpSim::~SpSim() { Stop(); }

void SpSim::Stop() {
  if (impl_->stopped.exchange(true)) return;
  {
    std::lock_guard lock(impl_->reg_mu);
    impl_->stopping = true;
  }
  impl_->reg_cv.notify_all();
  for (auto& t : impl_->registrars) t.join();
  if (impl_->heartbeat) impl_->DeregisterAll();
  impl_->control_server->Stop();
  impl_->providers_server->Stop();
  impl_->logger->info("msg=\"stopped\"");
}

Status SpSim::ReloadTls() { return impl_->providers_server->ReloadTls(); }

uint16_t SpSim::control_port() const { return impl_->control_port; }

std::string SpSim::control_url() const {
  return "http://" + UrlHost(impl_->control_host) + ":" + std::to_string(impl_->control_port);
}

std::vector<ProviderSnapshot> SpSim::Providers() const {
  std::vector<ProviderSnapshot> out;
  out.reserve(impl_->providers.size());
  for (const auto& p : impl_->providers) out.push_back(p->Snapshot(impl_->shared));
  return out;
}

SimStats SpSim::Stats() const { return impl_->Stats(); }

Status SpSim::SetFault(const std::string& name, const FaultPatch& patch) {
  return impl_->SetFault(name, patch);
}

Status SpSim::SetFaultAll(const FaultPatch& patch) { return impl_->SetFaultAll(patch); }

}  // namespace dcm::sim
