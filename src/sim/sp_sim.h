// SpSim: simulated Service Providers (`dcm sp-sim`) for development, e2e tests and load.
//
// N providers in one process, each on its own listener port of one HttpServer, serving the SP
// side of SPEC §3.2/§3.3:
//   GET    {endpoint}/health     200 {"status":"healthy"} (or the injected fault)
//   POST   {endpoint}?id=X       {"spec":{...}} → 201 {"id","status":"PROVISIONING",...}
//   GET    {endpoint}/{id}       200 / 404
//   DELETE {endpoint}/{id}       204 / 404
// where endpoint = http://{host}:{port}/api/{service_type}. Each provider registers itself with
// DCM (POST {dcm_url}{api_prefix}/providers, SPEC §3.1) from a background thread, retrying
// 5xx and connection errors with exponential backoff, so serving never waits on DCM.
//
// Faults are set at run time through a control HTTP API (see docs/http.md) or SetFault.
//
// Registration state per provider:
//
//   kPending ──201/200──> kRegistered
//      │  ↺ 5xx / connect error / timeout (backoff base·2ⁿ, capped)
//      └──4xx──> kRejected (logged, not retried)
//   kDisabled when options.register_with_dcm is false.
//
// Lifecycle: Start() → serving and registering → Stop()/destructor (idempotent).
// Thread-safety: all public methods are thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/result.h"

namespace dcm::sim {

// What GET {endpoint}/health does.
enum class HealthFault {
  kHealthy,      // 200 {"status":"healthy"}
  kUnhealthy,    // 200 {"status":"unhealthy"}
  kUnavailable,  // 503 problem+json ("503")
  kHang,         // never answers; the request is held until the client leaves
  kRefuse,       // the provider's listener is closed: connections are refused
};

const char* HealthFaultName(HealthFault fault);  // "healthy", "unhealthy", "503", "hang", "refuse"
Result<HealthFault> ParseHealthFault(std::string_view name);

struct FaultConfig {
  HealthFault health = HealthFault::kHealthy;
  bool fail_creates = false;  // POST {endpoint} → 500
  bool fail_deletes = false;  // DELETE {endpoint}/{id} → 500
  bool operator==(const FaultConfig&) const = default;
};

// A partial update of FaultConfig: absent fields are left as they are.
struct FaultPatch {
  std::optional<HealthFault> health;
  std::optional<bool> fail_creates;
  std::optional<bool> fail_deletes;
};

// Parses the control API body {"health":"...","fail_creates":bool,"fail_deletes":bool}
// (all optional). kInvalidArgument with field errors on bad input.
Result<FaultPatch> ParseFaultPatch(std::string_view json);

enum class RegistrationState { kDisabled, kPending, kRegistered, kRejected };
const char* RegistrationStateName(RegistrationState state);

struct ProviderSnapshot {
  std::string name;  // {prefix}-{service_type}-{i}
  std::string service_type;
  std::string endpoint;  // http://{host}:{port}/api/{service_type}
  uint16_t port = 0;
  std::string region_code;
  std::string zone;
  std::optional<std::string> id;  // the id DCM returned, once registered
  RegistrationState registration = RegistrationState::kPending;
  int registration_attempts = 0;
  std::string last_error;  // of the last failed registration attempt
  FaultConfig fault;
  size_t instances = 0;
};

struct SpSimOptions {
  // DCM base URL (http only); the registration target is {dcm_url}{api_prefix}/providers.
  std::string dcm_url = "http://127.0.0.1:8080";
  // Number of simulated providers; 1000 is fine (one listener each, one thread in all).
  int count = 3;
  // Provider i gets service_types[i % size] (round robin).
  std::vector<std::string> service_types{"vm", "container", "database"};
  // Provider names are {name_prefix}-{service_type}-{i}.
  std::string name_prefix = "sim";
  // Address the providers listen on and put in their endpoints.
  std::string host = "127.0.0.1";
  // HOST:PORT of the control API; port 0 picks a free port.
  std::string control_listen = "127.0.0.1:0";
  // Provider i gets region_codes[i % size]; its zone is the region plus a, b or c.
  std::vector<std::string> region_codes{"eu-west-1", "us-east-1"};
  // false: serve only (registration state kDisabled).
  bool register_with_dcm = true;
  // DCM API base path (SPEC §3: /api/v1alpha1).
  std::string api_prefix = "/api/v1alpha1";
  // Registration retry backoff: base·2ⁿ up to cap, as DCM's own SP client does (1 s, 60 s).
  std::chrono::milliseconds register_backoff_base{1000};
  std::chrono::milliseconds register_backoff_cap{60000};
  // Per registration request.
  std::chrono::milliseconds register_timeout{10000};
  // Receives the stdout announcements (`sp-sim control http://...`, `registered name=...`),
  // one line each, without newline. Called from several threads, never concurrently.
  // Default: std::cout, flushed after each line.
  std::function<void(const std::string& line)> announce;
};

class SpSim {
 public:
  // Opens the control listener and one listener per provider, announces the control URL, then
  // starts registering in the background. kInvalidArgument for bad options, kUnavailable if a
  // port cannot be bound.
  static Result<std::unique_ptr<SpSim>> Start(SpSimOptions options);

  ~SpSim();  // Stop()
  SpSim(const SpSim&) = delete;
  SpSim& operator=(const SpSim&) = delete;

  // Stops registration, the control API and all providers. Idempotent.
  void Stop();

  uint16_t control_port() const;
  std::string control_url() const;  // http://HOST:PORT

  std::vector<ProviderSnapshot> Providers() const;

  // Applies `patch` to one provider (kNotFound if unknown) or to all. Switching to kRefuse
  // closes the provider's listener; switching away from it listens on the same port again
  // (kUnavailable if that fails; the provider then stays in kRefuse).
  Status SetFault(const std::string& name, const FaultPatch& patch);
  Status SetFaultAll(const FaultPatch& patch);

 private:
  struct Impl;
  explicit SpSim(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dcm::sim
