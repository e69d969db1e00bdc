// The SP API of one simulated provider, its fault names and the control API rendering.
#include "src/sim/sim_provider.h"

#include <simdjson.h>

#include <algorithm>
#include <cstdint>
#include <utility>

namespace dcm::sim {
namespace {

using http::HttpRequest;
using http::HttpResponse;

simdjson::dom::parser& Parser() {
  thread_local simdjson::dom::parser parser;
  return parser;
}

HttpResponse NotFound(const std::string& detail) {
  return ProblemResponse(404, "Not Found", detail);
}
HttpResponse BadRequest(const std::string& detail) {
  return ProblemResponse(400, "Bad Request", detail);
}

// Now as an offset from shared.epoch_ms; 0 if the system clock stepped back before it.
uint32_t ProbeOffset(const SimShared& shared) {
  const int64_t now = SystemMillis();
  return static_cast<uint32_t>(std::clamp<int64_t>(now - shared.epoch_ms, 0, UINT32_MAX));
}

// The seed's health body (sp-health-check): status, version and uptime in whole seconds.
HttpResponse HealthBody(const char* status, const SimShared& shared) {
  const auto uptime = std::chrono::duration_cast<std::chrono::seconds>(
      std::chrono::steady_clock::now() - shared.started);
  JsonWriter w;
  w.BeginObject();
  w.Field("status", status);
  w.Field("version", shared.version);
  w.Field("uptime", static_cast<int64_t>(uptime.count()));
  w.EndObject();
  return JsonResponse(200, w.Take());
}

// nullopt: hang (answer nothing).
std::optional<HttpResponse> Health(HealthFault health, const Provider& p, const SimShared& shared) {
  switch (health) {
    case HealthFault::kHealthy:
      return HealthBody("healthy", shared);
    case HealthFault::kUnhealthy:
      return HealthBody("unhealthy", shared);
    case HealthFault::kBadBody:
      return JsonResponse(200, R"({"status":"ok"})");
    case HealthFault::kNotJson:
      return HttpResponse{200, "text/plain", "OK", {}};
    case HealthFault::kHang:
      return std::nullopt;
    case HealthFault::kUnavailable:
    case HealthFault::kRefuse:  // per-port: a request that slipped in while the listener closed
      break;
  }
  return ProblemResponse(503, "Service Unavailable", "simulated outage of " + p.name);
}

void RenderInstance(JsonWriter& w, const Provider& p, const std::string& id,
                    const std::string& spec, const char* status) {
  w.BeginObject();
  w.Field("id", id);
  w.Field("status", status);
  w.Field("service_type", *p.service_type);
  w.Field("provider_name", p.name);
  w.Key("spec");
  w.Raw(spec);
  w.EndObject();
}

HttpResponse Create(Provider& p, SimShared& shared, const HttpRequest& req) {
  const std::string* id = req.Query("id");
  if (id == nullptr || id->empty()) return BadRequest("query parameter 'id' is required");
  if (id->find('/') != std::string::npos) return BadRequest("id must not contain '/'");
  simdjson::dom::element doc;
  simdjson::dom::element spec;
  if (Parser().parse(req.body).get(doc) != simdjson::SUCCESS || !doc.is_object() ||
      doc["spec"].get(spec) != simdjson::SUCCESS || !spec.is_object()) {
    return BadRequest("body must be a JSON object with an object 'spec'");
  }
  std::string minified = simdjson::minify(spec);
  std::lock_guard lock(p.mu);
  if (p.fault.fail_creates) {
    return ProblemResponse(500, "Internal Server Error", "simulated create failure on " + p.name);
  }
  if (p.instances.count(*id) > 0) {
    return ProblemResponse(409, "Conflict", "instance '" + *id + "' already exists on " + p.name);
  }
  JsonWriter w;
  RenderInstance(w, p, *id, minified, "PROVISIONING");
  p.instances.emplace(*id, std::move(minified));
  shared.instances.fetch_add(1, std::memory_order_relaxed);
  HttpResponse res = JsonResponse(201, w.Take());
  res.headers.emplace_back("Location", std::string(p.base_path()) + "/" + *id);
  return res;
}

HttpResponse GetInstance(const Provider& p, const std::string& id) {
  std::lock_guard lock(p.mu);
  auto it = p.instances.find(id);
  if (it == p.instances.end()) return NotFound("no instance '" + id + "' on " + p.name);
  JsonWriter w;
  RenderInstance(w, p, id, it->second, "READY");
  return JsonResponse(200, w.Take());
}

HttpResponse DeleteInstance(Provider& p, SimShared& shared, const std::string& id) {
  std::lock_guard lock(p.mu);
  if (p.fault.fail_deletes) {
    return ProblemResponse(500, "Internal Server Error", "simulated delete failure on " + p.name);
  }
  if (p.instances.erase(id) == 0) return NotFound("no instance '" + id + "' on " + p.name);
  shared.instances.fetch_sub(1, std::memory_order_relaxed);
  p.RecordDeleted(id);
  return HttpResponse{204, "", "", {}};
}

// Everything but /health, once the provider is known to answer. `req.path` is the base path or
// continues it with '/'.
HttpResponse ServeInstances(Provider& p, SimShared& shared, const HttpRequest& req) {
  const std::string_view base = p.base_path();
  const std::string_view path = req.path;
  const bool read = req.method == "GET" || req.method == "HEAD";
  if (path == base || (path.size() == base.size() + 1 && path.back() == '/')) {
    return req.method == "POST" ? Create(p, shared, req) : MethodNotAllowed(req.method);
  }
  const std::string id(path.substr(base.size() + 1));  // past "{base}/"
  if (id.find('/') != std::string::npos) return NotFound("no route for " + req.path);
  if (read) return GetInstance(p, id);
  if (req.method == "DELETE") return DeleteInstance(p, shared, id);
  return MethodNotAllowed(req.method);
}

// What an SP API request is, for the accounting: a create is a POST on the base path, a delete
// a DELETE on {base}/{id} (the routes ServeInstances answers them on).
enum class Kind { kOther, kProbe, kCreate, kDelete };

Kind Classify(std::string_view base, const HttpRequest& req) {
  const std::string_view path = req.path;
  if (path.size() == base.size() + 7 && path.ends_with("/health")) {
    return req.method == "GET" ? Kind::kProbe : Kind::kOther;
  }
  if (path == base || (path.size() == base.size() + 1 && path.back() == '/')) {
    return req.method == "POST" ? Kind::kCreate : Kind::kOther;
  }
  const std::string_view rest = path.substr(base.size() + 1);
  if (req.method == "DELETE" && rest.find('/') == std::string_view::npos) return Kind::kDelete;
  return Kind::kOther;
}

}  // namespace

HttpResponse JsonResponse(int status, std::string body) {
  return HttpResponse{status, "application/json", std::move(body), {}};
}

HttpResponse ProblemResponse(int status, const std::string& title, const std::string& detail) {
  JsonWriter w;
  w.BeginObject();
  w.Field("type", "about:blank");
  w.Field("title", title);
  w.Field("status", status);
  w.Field("detail", detail);
  w.EndObject();
  return HttpResponse{status, "application/problem+json", w.Take(), {}};
}

HttpResponse MethodNotAllowed(const std::string& method) {
  return ProblemResponse(405, "Method Not Allowed", "method " + method + " is not allowed here");
}

int64_t SystemMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void Provider::RecordProbe(uint32_t offset_ms) {
  ++health_probes;
  if (probe_offsets_ms.size() < kRecentProbes) {
    if (probe_offsets_ms.empty()) probe_offsets_ms.reserve(kRecentProbes);
    probe_offsets_ms.push_back(offset_ms);
    return;
  }
  probe_offsets_ms[probe_next] = offset_ms;
  probe_next = static_cast<uint8_t>((probe_next + 1) % kRecentProbes);
}

void Provider::RecordDeleted(const std::string& deleted_id) {
  if (deleted_ids.size() < kRecentDeletes) {
    deleted_ids.push_back(deleted_id);  // grows as needed: most providers never fill it
    return;
  }
  deleted_ids[deleted_next] = deleted_id;
  deleted_next = static_cast<uint16_t>((deleted_next + 1) % kRecentDeletes);
}

ProviderSnapshot Provider::Snapshot(const SimShared& shared) const {
  ProviderSnapshot s;
  s.name = name;
  s.service_type = *service_type;
  s.endpoint = endpoint;
  s.port = port;
  s.region_code = *region_code;
  s.zone = zone();
  std::lock_guard lock(mu);
  s.id = id;
  s.registration = registration;
  s.registration_attempts = attempts;
  s.last_error = last_error;
  s.heartbeats = heartbeats;
  s.fault = fault;
  s.instances = instances.size();
  s.health_probes = health_probes;
  const size_t n = probe_offsets_ms.size();
  s.recent_probe_times_ms.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    s.recent_probe_times_ms.push_back(shared.epoch_ms + probe_offsets_ms[(probe_next + i) % n]);
  }
  s.creates_received = creates_received;
  s.deletes_received = deletes_received;
  s.instance_ids.reserve(instances.size());
  for (const auto& [instance_id, spec] : instances) s.instance_ids.push_back(instance_id);
  const size_t d = deleted_ids.size();
  s.deleted_ids.reserve(d);
  for (size_t i = 0; i < d; ++i) s.deleted_ids.push_back(deleted_ids[(deleted_next + i) % d]);
  return s;
}

void ServeProvider(Provider& p, SimShared& shared, HttpRequest req, http::Respond respond) {
  const std::string_view base = p.base_path();
  const std::string_view path = req.path;
  if (!path.starts_with(base) || (path.size() > base.size() && path[base.size()] != '/')) {
    return respond(NotFound("no route for " + req.path));
  }
  const bool health_route = path.size() == base.size() + 7 && path.ends_with("/health");
  // Counted on arrival, before any fault decides the answer (a refused request arrived too).
  const Kind kind = Classify(base, req);
  FaultConfig fault;
  {
    std::lock_guard lock(p.mu);
    if (kind == Kind::kProbe) p.RecordProbe(ProbeOffset(shared));
    if (kind == Kind::kCreate) ++p.creates_received;
    if (kind == Kind::kDelete) ++p.deletes_received;
    fault = p.fault;
  }
  if (kind == Kind::kProbe) shared.health_probes.fetch_add(1, std::memory_order_relaxed);
  if (kind == Kind::kCreate) shared.creates_received.fetch_add(1, std::memory_order_relaxed);
  if (kind == Kind::kDelete) shared.deletes_received.fetch_add(1, std::memory_order_relaxed);
  if (shared.shared_ports && fault.health == HealthFault::kRefuse) {
    // The closest a shared listener gets to a refused connection: the client reads EOF.
    return respond(HttpResponse{http::kCloseWithoutResponse, "", "", {}});
  }
  if (health_route) {
    if (req.method != "GET" && req.method != "HEAD") return respond(MethodNotAllowed(req.method));
    auto res = Health(fault.health, p, shared);
    if (res) respond(std::move(*res));
    return;  // hang: drop `respond`; the server holds the request until the client leaves
  }
  respond(ServeInstances(p, shared, req));
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
  w.Key("heartbeats");
  w.Uint(s.heartbeats);
  w.Key("fault");
  w.BeginObject();
  w.Field("health", HealthFaultName(s.fault.health));
  w.Field("fail_creates", s.fault.fail_creates);
  w.Field("fail_deletes", s.fault.fail_deletes);
  w.EndObject();
  w.Key("instances");
  w.Uint(s.instances);
  w.Key("health_probes");
  w.Uint(s.health_probes);
  w.Key("recent_probe_times_ms");
  w.BeginArray();
  for (int64_t t : s.recent_probe_times_ms) w.Int(t);
  w.EndArray();
  w.Key("creates_received");
  w.Uint(s.creates_received);
  w.Key("deletes_received");
  w.Uint(s.deletes_received);
  w.StringArray("instance_ids", s.instance_ids);
  w.StringArray("deleted_ids", s.deleted_ids);
  w.EndObject();
}

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
    case HealthFault::kBadBody:
      return "bad_body";
    case HealthFault::kNotJson:
      return "not_json";
  }
  return "healthy";
}

Result<HealthFault> ParseHealthFault(std::string_view name) {
  for (auto f : kAllHealthFaults) {
    if (name == HealthFaultName(f)) return f;
  }
  return MakeError(ErrorCode::kInvalidArgument,
                   "health must be one of healthy, unhealthy, 503, hang, refuse, bad_body, "
                   "not_json",
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

}  // namespace dcm::sim
