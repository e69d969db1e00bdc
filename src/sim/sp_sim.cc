// SpSim implementation. No Beast here: it uses HttpServer/HttpClient through their headers.
#include "src/sim/sp_sim.h"

#include <simdjson.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <iostream>
#include <map>
#include <mutex>
#include <queue>
#include <thread>
#include <utility>

#include "src/common/json_writer.h"
#include "src/common/log.h"
#include "src/common/url.h"
#include "src/http/client.h"
#include "src/http/server.h"

namespace dcm::sim {
namespace {

using http::HttpRequest;
using http::HttpResponse;
using http::Respond;
using Clock = std::chrono::steady_clock;

// A health request held by the `hang` fault stays open until its client leaves; the server
// frees it then. This only bounds a client that never gives up.
constexpr std::chrono::hours kHangLimit{24};

HttpResponse Json(int status, std::string body) {
  return HttpResponse{status, "application/json", std::move(body), {}};
}

HttpResponse Problem(int status, const std::string& title, const std::string& detail) {
  JsonWriter w;
  w.BeginObject();
  w.Field("type", "about:blank");
  w.Field("title", title);
  w.Field("status", status);
  w.Field("detail", detail);
  w.EndObject();
  return HttpResponse{status, "application/problem+json", w.Take(), {}};
}

HttpResponse NotFound(const std::string& detail) { return Problem(404, "Not Found", detail); }
HttpResponse BadRequest(const std::string& detail) { return Problem(400, "Bad Request", detail); }
HttpResponse MethodNotAllowed(const std::string& method) {
  return Problem(405, "Method Not Allowed", "method " + method + " is not allowed here");
}

std::string UrlHost(const std::string& host) {
  return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

struct Instance {
  std::string spec;  // minified JSON object
};

// One simulated provider. Identity fields are fixed at Start; the rest is under `mu`.
struct Provider {
  std::string name;
  std::string service_type;
  std::string display_name;
  std::string base_path;  // /api/{service_type}
  std::string endpoint;
  std::string region_code;
  std::string zone;
  uint16_t port = 0;

  mutable std::mutex mu;
  FaultConfig fault;
  std::map<std::string, Instance> instances;
  std::optional<std::string> id;
  RegistrationState registration = RegistrationState::kPending;
  int attempts = 0;
  std::string last_error;

  ProviderSnapshot Snapshot() const {
    std::lock_guard lock(mu);
    return ProviderSnapshot{name,        service_type, endpoint, port,
                            region_code, zone,         id,       registration,
                            attempts,    last_error,   fault,    instances.size()};
  }
};

void RenderInstance(JsonWriter& w, const Provider& p, const std::string& id, const Instance& inst,
                    const char* status) {
  w.BeginObject();
  w.Field("id", id);
  w.Field("status", status);
  w.Field("service_type", p.service_type);
  w.Field("provider_name", p.name);
  w.Key("spec");
  w.Raw(inst.spec);
  w.EndObject();
}

void RenderProvider(JsonWriter& w, const ProviderSnapshot& s) {
  w.BeginObject();
  w.Field("name", s.name);
  w.Field("endpoint", s.endpoint);
  w.Field("service_type", s.service_type);
  w.Field("port", static_cast<int>(s.port));
  w.Field("region_code", s.region_code);
  w.Field("zone", s.zone);
  w.Key("id");
  if (s.id) {
    w.String(*s.id);
  } else {
    w.Null();
  }
  w.Field("registered", s.registration == RegistrationState::kRegistered);
  w.Field("registration", RegistrationStateName(s.registration));
  w.Field("registration_attempts", s.registration_attempts);
  if (!s.last_error.empty()) w.Field("last_error", s.last_error);
  w.Key("fault");
  w.BeginObject();
  w.Field("health", HealthFaultName(s.fault.health));
  w.Field("fail_creates", s.fault.fail_creates);
  w.Field("fail_deletes", s.fault.fail_deletes);
  w.EndObject();
  w.Key("instances");
  w.Uint(s.instances);
  w.EndObject();
}

simdjson::dom::parser& Parser() {
  thread_local simdjson::dom::parser parser;
  return parser;
}

// ---- the SP API -------------------------------------------------------------------------

HttpResponse Health(const Provider& p, bool* hang) {
  HealthFault health;
  {
    std::lock_guard lock(p.mu);
    health = p.fault.health;
  }
  switch (health) {
    case HealthFault::kHealthy:
      return Json(200, R"({"status":"healthy"})");
    case HealthFault::kUnhealthy:
      return Json(200, R"({"status":"unhealthy"})");
    case HealthFault::kHang:
      *hang = true;
      return {};
    case HealthFault::kUnavailable:
    case HealthFault::kRefuse:  // a request that slipped in while the listener was closing
      break;
  }
  return Problem(503, "Service Unavailable", "simulated outage of " + p.name);
}

HttpResponse Create(Provider& p, const HttpRequest& req) {
  const std::string* id = req.Query("id");
  if (id == nullptr || id->empty()) return BadRequest("query parameter 'id' is required");
  if (id->find('/') != std::string::npos) return BadRequest("id must not contain '/'");
  simdjson::dom::element doc;
  simdjson::dom::element spec;
  if (Parser().parse(req.body).get(doc) != simdjson::SUCCESS || !doc.is_object() ||
      doc["spec"].get(spec) != simdjson::SUCCESS || !spec.is_object()) {
    return BadRequest("body must be a JSON object with an object 'spec'");
  }
  Instance inst{simdjson::minify(spec)};
  std::lock_guard lock(p.mu);
  if (p.fault.fail_creates) {
    return Problem(500, "Internal Server Error", "simulated create failure on " + p.name);
  }
  if (p.instances.count(*id) > 0) {
    return Problem(409, "Conflict", "instance '" + *id + "' already exists on " + p.name);
  }
  JsonWriter w;
  RenderInstance(w, p, *id, inst, "PROVISIONING");
  p.instances.emplace(*id, std::move(inst));
  HttpResponse res = Json(201, w.Take());
  res.headers.emplace_back("Location", p.base_path + "/" + *id);
  return res;
}

HttpResponse GetInstance(const Provider& p, const std::string& id) {
  std::lock_guard lock(p.mu);
  auto it = p.instances.find(id);
  if (it == p.instances.end()) return NotFound("no instance '" + id + "' on " + p.name);
  JsonWriter w;
  RenderInstance(w, p, id, it->second, "READY");
  return Json(200, w.Take());
}

HttpResponse DeleteInstance(Provider& p, const std::string& id) {
  std::lock_guard lock(p.mu);
  if (p.fault.fail_deletes) {
    return Problem(500, "Internal Server Error", "simulated delete failure on " + p.name);
  }
  if (p.instances.erase(id) == 0) return NotFound("no instance '" + id + "' on " + p.name);
  return HttpResponse{204, "", "", {}};
}

void ServeProvider(Provider* p, HttpRequest req, Respond respond) {
  const std::string& base = p->base_path;
  const std::string& path = req.path;
  const bool read = req.method == "GET" || req.method == "HEAD";
  if (path == base + "/health") {
    if (!read) return respond(MethodNotAllowed(req.method));
    bool hang = false;
    HttpResponse res = Health(*p, &hang);
    if (!hang) respond(std::move(res));
    return;  // hang: drop `respond`; the server holds the request until the client leaves
  }
  if (path == base || path == base + "/") {
    return respond(req.method == "POST" ? Create(*p, req) : MethodNotAllowed(req.method));
  }
  if (path.size() > base.size() + 1 && path.compare(0, base.size() + 1, base + "/") == 0) {
    const std::string id = path.substr(base.size() + 1);
    if (id.find('/') == std::string::npos) {
      if (read) return respond(GetInstance(*p, id));
      if (req.method == "DELETE") return respond(DeleteInstance(*p, id));
      return respond(MethodNotAllowed(req.method));
    }
  }
  respond(NotFound("no route for " + path));
}

HttpResponse ErrorResponse(const Error& e) {
  if (e.code == ErrorCode::kNotFound) return NotFound(e.message);
  if (e.code == ErrorCode::kInvalidArgument) {
    std::string detail = e.message;
    for (const auto& f : e.fields) detail += "; " + f.field + ": " + f.message;
    return BadRequest(detail);
  }
  return Problem(503, "Service Unavailable", e.message);
}

// Identity of provider `i` (SPEC §3.1 fields); port and endpoint come when it listens.
std::unique_ptr<Provider> NewProvider(const SpSimOptions& o, int i) {
  auto p = std::make_unique<Provider>();
  const size_t n = static_cast<size_t>(i);
  p->service_type = o.service_types[n % o.service_types.size()];
  p->name = o.name_prefix + "-" + p->service_type + "-" + std::to_string(i);
  p->display_name = "Simulated " + p->service_type + " provider " + std::to_string(i);
  p->region_code = o.region_codes[n % o.region_codes.size()];
  p->zone = p->region_code + static_cast<char>('a' + (n / o.region_codes.size()) % 3);
  p->base_path = "/api/" + p->service_type;
  p->registration =
      o.register_with_dcm ? RegistrationState::kPending : RegistrationState::kDisabled;
  return p;
}

}  // namespace

// ---- names ------------------------------------------------------------------------------

const char* HealthFaultName(HealthFault fault) {
  switch (fault) {
    case HealthFault::kHealthy:
      return "healthy";
    case HealthFault::kUnhealthy:
      return "unhealthy";
    case HealthFault::kUnavailable:
      return "503";
    case HealthFault::kHang:
      return "hang";
    case HealthFault::kRefuse:
      return "refuse";
  }
  return "healthy";
}

Result<HealthFault> ParseHealthFault(std::string_view name) {
  for (auto f : {HealthFault::kHealthy, HealthFault::kUnhealthy, HealthFault::kUnavailable,
                 HealthFault::kHang, HealthFault::kRefuse}) {
    if (name == HealthFaultName(f)) return f;
  }
  return MakeError(ErrorCode::kInvalidArgument,
                   "health must be one of healthy, unhealthy, 503, hang, refuse",
                   {{"health", "unknown value '" + std::string(name) + "'"}});
}

const char* RegistrationStateName(RegistrationState state) {
  switch (state) {
    case RegistrationState::kDisabled:
      return "disabled";
    case RegistrationState::kPending:
      return "pending";
    case RegistrationState::kRegistered:
      return "registered";
    case RegistrationState::kRejected:
      return "rejected";
  }
  return "pending";
}

Result<FaultPatch> ParseFaultPatch(std::string_view json) {
  simdjson::dom::element doc;
  simdjson::dom::object object;
  if (Parser().parse(json.data(), json.size()).get(doc) != simdjson::SUCCESS ||
      doc.get(object) != simdjson::SUCCESS) {
    return MakeError(ErrorCode::kInvalidArgument, "body must be a JSON object");
  }
  FaultPatch patch;
  std::vector<FieldError> errors;
  for (auto [key, value] : object) {
    if (key == "health") {
      std::string_view text;
      if (value.get(text) != simdjson::SUCCESS) {
        errors.push_back({"health", "must be a string"});
        continue;
      }
      auto health = ParseHealthFault(text);
      if (!health) {
        errors.push_back(health.error().fields.front());
        continue;
      }
      patch.health = *health;
    } else if (key == "fail_creates" || key == "fail_deletes") {
      bool flag = false;
      if (value.get(flag) != simdjson::SUCCESS) {
        errors.push_back({std::string(key), "must be a boolean"});
        continue;
      }
      (key == "fail_creates" ? patch.fail_creates : patch.fail_deletes) = flag;
    } else {
      errors.push_back({std::string(key), "unknown field"});
    }
  }
  if (!errors.empty()) {
    return MakeError(ErrorCode::kInvalidArgument, "invalid fault", std::move(errors));
  }
  return patch;
}

// ---- SpSim --------------------------------------------------------------------------------

struct SpSim::Impl {
  SpSimOptions options;
  std::shared_ptr<spdlog::logger> logger = Logger("sp-sim");
  std::unique_ptr<http::HttpServer> providers_server;
  std::unique_ptr<http::HttpServer> control_server;
  std::vector<std::unique_ptr<Provider>> providers;
  std::map<std::string, Provider*> by_name;
  std::string control_host;
  uint16_t control_port = 0;

  std::mutex announce_mu;
  std::mutex fault_mu;  // serialises fault changes, so listener close/re-open never interleave

  std::mutex reg_mu;
  std::condition_variable reg_cv;
  bool stopping = false;  // under reg_mu
  std::thread registrar;
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
  Result<uint16_t> ListenFor(Provider* p, uint16_t port);
  // Applies `patch` to `p`, closing or re-opening its listener for kRefuse. Caller holds
  // fault_mu. `log`: one line per provider (false when the caller logs for all).
  Status ApplyFault(Provider& p, const FaultPatch& patch, bool log);
  void LogFaultAll(const FaultPatch& patch);
  void RegistrarLoop();
  std::optional<std::chrono::milliseconds> RegisterOnce(http::HttpClient& client, Provider& p);
  Status SetFault(const std::string& name, const FaultPatch& patch);
  Status SetFaultAll(const FaultPatch& patch);
  HttpResponse Control(const HttpRequest& req);
  HttpResponse ProviderJson(const std::string& name) const;
  HttpResponse AllProvidersJson() const;
};

Status SpSim::Impl::Build() {
  http::ServerOptions server_options;
  server_options.server_name = "dcm-sp-sim";
  server_options.handler_timeout = kHangLimit;
  ASSIGN_OR_RETURN(providers_server, http::HttpServer::Create(server_options));
  ASSIGN_OR_RETURN(control_server, http::HttpServer::Create(http::ServerOptions{}));
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
  for (int i = 0; i < options.count; ++i) {
    auto p = NewProvider(options, i);
    if (by_name.count(p->name) > 0) {
      return MakeError(ErrorCode::kInvalidArgument, "duplicate provider name " + p->name);
    }
    ASSIGN_OR_RETURN(p->port, ListenFor(p.get(), 0));
    p->endpoint = "http://" + UrlHost(options.host) + ":" + std::to_string(p->port) + p->base_path;
    by_name.emplace(p->name, p.get());
    providers.push_back(std::move(p));
  }
  return OkStatus();
}

Result<uint16_t> SpSim::Impl::ListenFor(Provider* p, uint16_t port) {
  return providers_server->Listen(UrlHost(options.host) + ":" + std::to_string(port),
                                  [p](HttpRequest req, Respond respond) {
                                    ServeProvider(p, std::move(req), std::move(respond));
                                  });
}

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
  if (!was_refusing && refuses) {
    providers_server->CloseListener(p.port);
  } else if (was_refusing && !refuses) {
    auto port = ListenFor(&p, p.port);
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

// ---- registration -----------------------------------------------------------------------

std::optional<std::chrono::milliseconds> SpSim::Impl::RegisterOnce(http::HttpClient& client,
                                                                   Provider& p) {
  JsonWriter w;
  w.BeginObject();
  w.Field("name", p.name);
  w.Field("endpoint", p.endpoint);
  w.Field("service_type", p.service_type);
  w.Field("display_name", p.display_name);
  w.Key("operations");
  w.BeginArray();
  for (const char* op : {"create", "read", "delete"}) w.String(op);
  w.EndArray();
  w.Key("metadata");
  w.BeginObject();
  w.Field("region_code", p.region_code);
  w.Field("zone", p.zone);
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

void SpSim::Impl::RegistrarLoop() {
  http::HttpClient client(options.dcm_url);
  using Due = std::pair<Clock::time_point, size_t>;
  std::priority_queue<Due, std::vector<Due>, std::greater<>> due;
  const auto now = Clock::now();
  for (size_t i = 0; i < providers.size(); ++i) due.emplace(now, i);
  std::unique_lock lock(reg_mu);
  while (!due.empty()) {
    const auto [when, index] = due.top();
    if (reg_cv.wait_until(lock, when, [this] { return stopping; })) return;
    due.pop();
    lock.unlock();
    auto retry_in = RegisterOnce(client, *providers[index]);
    lock.lock();
    if (retry_in) due.emplace(Clock::now() + *retry_in, index);
  }
}

// ---- control API --------------------------------------------------------------------------

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

HttpResponse SpSim::Impl::ProviderJson(const std::string& name) const {
  auto it = by_name.find(name);
  if (it == by_name.end()) return NotFound("no simulated provider '" + name + "'");
  JsonWriter w;
  RenderProvider(w, it->second->Snapshot());
  return Json(200, w.Take());
}

HttpResponse SpSim::Impl::AllProvidersJson() const {
  JsonWriter w;
  w.BeginArray();
  for (const auto& p : providers) RenderProvider(w, p->Snapshot());
  w.EndArray();
  return Json(200, w.Take());
}

// GET /sim/providers[/{name}], PUT /sim/providers/{name}/fault, PUT /sim/fault.
HttpResponse SpSim::Impl::Control(const HttpRequest& req) {
  static const std::string kProviders = "/sim/providers";
  static const std::string kFaultSuffix = "/fault";
  const std::string& path = req.path;
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
  if (path.rfind(kProviders + "/", 0) != 0) return NotFound("no route for " + path);
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

Result<std::unique_ptr<SpSim>> SpSim::Start(SpSimOptions options) {
  auto bad = [](const std::string& why) { return MakeError(ErrorCode::kInvalidArgument, why); };
  if (options.count < 0 || options.count > 60000) return bad("count must be in 0..60000");
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
  if (options.register_with_dcm) {
    auto url = ParseHttpUrl(options.dcm_url);
    if (!url) return bad("dcm_url " + url.error().message);
    if (url->scheme != "http") return bad("dcm_url must be http (https is not supported yet)");
  }

  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  if (auto st = impl->Build(); !st) {
    // Stop the servers before the providers their handlers point at go away.
    if (impl->control_server) impl->control_server->Stop();
    if (impl->providers_server) impl->providers_server->Stop();
    return tl::unexpected(st.error());
  }
  Impl* raw = impl.get();
  raw->Announce("sp-sim control http://" + UrlHost(raw->control_host) + ":" +
                std::to_string(raw->control_port));
  raw->logger->info("msg=\"started\" providers={} control_port={} register={}",
                    raw->providers.size(), raw->control_port, raw->options.register_with_dcm);
  if (raw->options.register_with_dcm && !raw->providers.empty()) {
    raw->registrar = std::thread([raw] { raw->RegistrarLoop(); });
  }
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
  if (impl_->registrar.joinable()) impl_->registrar.join();
  impl_->control_server->Stop();
  impl_->providers_server->Stop();
  impl_->logger->info("msg=\"stopped\"");
}

uint16_t SpSim::control_port() const { return impl_->control_port; }

std::string SpSim::control_url() const {
  return "http://" + UrlHost(impl_->control_host) + ":" + std::to_string(impl_->control_port);
}

std::vector<ProviderSnapshot> SpSim::Providers() const {
  std::vector<ProviderSnapshot> out;
  out.reserve(impl_->providers.size());
  for (const auto& p : impl_->providers) out.push_back(p->Snapshot());
  return out;
}

Status SpSim::SetFault(const std::string& name, const FaultPatch& patch) {
  return impl_->SetFault(name, patch);
}

Status SpSim::SetFaultAll(const FaultPatch& patch) { return impl_->SetFaultAll(patch); }

}  // namespace dcm::sim
