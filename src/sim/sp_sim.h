// SpSim: simulated Service Providers (`dcm sp-sim`) for development, e2e tests and load.
//
// N providers in one process on one HttpServer thread, serving the SP side of SPEC §3.2/§3.3:
//   GET    {endpoint}/health     200 {"status":"healthy","version","uptime"} (or the fault)
//   POST   {endpoint}?id=X       {"spec":{...}} → 201 {"id","status":"PROVISIONING",...}
//   GET    {endpoint}/{id}       200 / 404
//   DELETE {endpoint}/{id}       204 / 404
// Port modes:
//   ports == 0  one listener per provider, endpoint = http://{host}:{port}/api/{service_type}
//               (one descriptor each: fine for ~1000 providers)
//   ports == N  N shared listeners, provider i on listener i % N, endpoint =
//               http://{host}:{port}/p/{i}/api/{service_type}; requests are routed by the /p/{i}
//               prefix in O(1) (50,000 providers fit in a few descriptors)
// Each provider registers itself with DCM (POST {dcm_url}{api_prefix}/providers, SPEC §3.1)
// from `register_concurrency` background workers, retrying 5xx and connection errors with
// exponential backoff, so serving never waits on DCM. Every GET {endpoint}/health is counted
// (and its arrival time kept, last 64) whatever the fault answers, so tests and benchmarks can
// check what DCM's prober (SPEC §3.2) actually sent; likewise every create and delete request
// (with the ids held now and the last 256 deleted), so they can check what DCM's instance
// worker and cleanup queue (SPEC §3.3) did on the SP side.
//
// Faults are set at run time through a control HTTP API (see docs/http.md) or SetFault.
//
// Registration state per provider (liveness probe; for heartbeat see heartbeat_client.h, whose
// registered state is mirrored here, kPending again while it registers anew):
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
  kHealthy,      // 200 {"status":"healthy","version":...,"uptime":...}
  kUnhealthy,    // 200 {"status":"unhealthy","version":...,"uptime":...}
  kUnavailable,  // 503 problem+json ("503")
  kHang,         // never answers; the request is held until the client leaves
  kRefuse,       // per-port mode: the listener is closed, connections are refused; shared-port
                 // mode: every request of the provider gets its connection closed, no response
  kBadBody,      // 200 {"status":"ok"}: JSON, but not a status the seed defines ("bad_body")
  kNotJson,      // 200 text/plain "OK" ("not_json")
};

inline constexpr HealthFault kAllHealthFaults[] = {
    HealthFault::kHealthy, HealthFault::kUnhealthy, HealthFault::kUnavailable, HealthFault::kHang,
    HealthFault::kRefuse,  HealthFault::kBadBody,   HealthFault::kNotJson};

// "healthy", "unhealthy", "503", "hang", "refuse", "bad_body", "not_json"
const char* HealthFaultName(HealthFault fault);
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
  std::string endpoint;  // http://{host}:{port}[/p/{i}]/api/{service_type}
  uint16_t port = 0;     // its listener's (shared with others when SpSimOptions::ports > 0)
  std::string region_code;
  std::string zone;
  std::optional<std::string> id;  // the id DCM returned, once registered
  RegistrationState registration = RegistrationState::kPending;
  int registration_attempts = 0;
  std::string last_error;   // of the last failed registration attempt (or beat)
  uint64_t heartbeats = 0;  // beats DCM answered 200 (liveness heartbeat)
  FaultConfig fault;
  size_t instances = 0;
  // GET {endpoint}/health requests received, whatever the fault answered (hang included).
  uint64_t health_probes = 0;
  // Arrival times of the last (up to) 64 of them, oldest first: ms since the Unix epoch,
  // system clock (comparable with DCM's event times).
  std::vector<int64_t> recent_probe_times_ms;
  // POST {endpoint} (create) and DELETE {endpoint}/{id} requests received, whatever the answer
  // (400, 409, 404 and the fail_creates/fail_deletes 500s included).
  uint64_t creates_received = 0;
  uint64_t deletes_received = 0;
  std::vector<std::string> instance_ids;  // the instances it holds now, sorted
  // The last (up to) 256 ids it deleted successfully (204), oldest first.
  std::vector<std::string> deleted_ids;
};

// The cheap aggregate behind GET /sim/stats: no per-provider objects, for 10k-provider runs.
struct SimStats {
  size_t providers = 0;
  uint64_t health_probes = 0;     // over all providers
  size_t registered = 0;          // providers in RegistrationState::kRegistered
  uint64_t creates_received = 0;  // over all providers, whatever the answer
  uint64_t deletes_received = 0;
  uint64_t instances = 0;  // held now, over all providers
};

struct SpSimOptions {
  // DCM base URL (http or https); the registration target is {dcm_url}{api_prefix}/providers.
  // Several comma-separated URLs (instances of one DCM): heartbeat providers fail over from one
  // to the next (heartbeat_client.h); probe providers register with the first.
  std::string dcm_url = "http://127.0.0.1:8080";
  // "probe" (DCM probes GET {endpoint}/health; registration carries no liveness field) or
  // "heartbeat": providers register with "liveness":"heartbeat", then beat
  // (PUT {api_prefix}/providers/{id}/heartbeat) every heartbeat_interval, register again on a
  // 404, and delete their registration on Stop (heartbeat_client.h); "both": the same with
  // "liveness":"both", and DCM probes them too.
  std::string liveness = "probe";
  std::chrono::milliseconds heartbeat_interval{5000};
  // Bearer token sent with every registration (a DCM with authentication: a token with the
  // dcm-provider role, whose subject then owns the providers). Empty: none.
  std::string token;
  // PEM CA bundle verifying an https dcm_url; empty = the system's trust store.
  std::string dcm_ca_file;
  // Serve the providers over HTTPS with this certificate and key (endpoints are then https://).
  // The control API stays plain HTTP.
  std::string tls_cert_file;
  std::string tls_key_file;
  // Number of simulated providers (0..60000). With ports == 0 each needs a descriptor: ~1000
  // is fine; use ports > 0 for more.
  int count = 3;
  // 0: one listener port per provider. N > 0: N shared listener ports, provider i on port
  // i % N, endpoints prefixed with /p/{i}; at most `count` listeners are opened. 8–64 spreads
  // DCM's kept-alive probe connections without costing descriptors.
  int ports = 0;
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
  // metadata.resources.max_instances of every provider (the capacity flavours offer, SPEC §10);
  // 0: not declared (unlimited).
  int64_t max_instances = 0;
  // false: serve only (registration state kDisabled).
  bool register_with_dcm = true;
  // DCM API base path (SPEC §3: /api/v1alpha1).
  std::string api_prefix = "/api/v1alpha1";
  // Registration retry backoff: base·2ⁿ up to cap, as DCM's own SP client does (1 s, 60 s).
  std::chrono::milliseconds register_backoff_base{1000};
  std::chrono::milliseconds register_backoff_cap{60000};
  // Per registration request.
  std::chrono::milliseconds register_timeout{10000};
  // Registration workers, each with its own keep-alive connection to DCM (1..1024). One at a
  // time, 50,000 providers wait on 50,000 round trips; 8 overlap them without flooding DCM.
  int register_concurrency = 8;
  // Reported as "version" in the health body (the seed's example has one); the CLI passes
  // DCM's own version.
  std::string version = "dev";
  // Receives the stdout announcements (`sp-sim control http://...`, `registered name=...`),
  // one line each, without newline. Called from several threads, never concurrently.
  // Default: std::cout, flushed after each line.
  std::function<void(const std::string& line)> announce;
};

class SpSim {
 public:
  // Opens the control listener and the provider listeners (one per provider, or `ports`),
  // announces the control URL, then starts registering in the background. kInvalidArgument for
  // bad options (also a per-port count that cannot fit under the soft RLIMIT_NOFILE),
  // kUnavailable if a port cannot be bound.
  static Result<std::unique_ptr<SpSim>> Start(SpSimOptions options);

  ~SpSim();  // Stop()
  SpSim(const SpSim&) = delete;
  SpSim& operator=(const SpSim&) = delete;

  // Stops registration (and beats), deletes the heartbeat providers' registrations, stops the
  // control API and all providers. Idempotent.
  void Stop();

  // Re-reads the providers' TLS certificate and key (SIGHUP): new connections get them, kept
  // ones keep theirs. A no-op without TLS.
  Status ReloadTls();

  uint16_t control_port() const;
  std::string control_url() const;  // http://HOST:PORT

  std::vector<ProviderSnapshot> Providers() const;
  SimStats Stats() const;  // O(1): counters, not a walk over the providers

  // Applies `patch` to one provider (kNotFound if unknown) or to all. In per-port mode,
  // switching to kRefuse closes the provider's listener and switching away from it listens on
  // the same port again (kUnavailable if that fails; the provider then stays in kRefuse). In
  // shared-port mode no listener changes: the provider's requests get their connection closed.
  Status SetFault(const std::string& name, const FaultPatch& patch);
  Status SetFaultAll(const FaultPatch& patch);

 private:
  struct Impl;
  explicit SpSim(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dcm::sim
