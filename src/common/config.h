// Config: every setting of `dcm serve`, with its unit, meaning and why the default was chosen.
// Flags and environment variables are bound in src/cli (SPEC §2); this struct is plain data so
// every component can take the part it needs.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "src/common/result.h"

namespace dcm {

// Topic names, all under one configurable prefix (SPEC §4). Defaults give `dcm.providers` etc.
struct Topics {
  std::string prefix = "dcm.";
  std::string ProviderRequests() const { return prefix + "provider-requests"; }
  std::string Providers() const { return prefix + "providers"; }
  // Instance operations (SPEC §3.3): requests and the saga's facts, both keyed by root.
  std::string InstanceRequests() const { return prefix + "instance-requests"; }
  std::string Instances() const { return prefix + "instances"; }
  std::string Status() const { return prefix + "status"; }
  std::string Health() const { return prefix + "health"; }
  std::string DeadLetter() const { return prefix + "dead-letter"; }
  // Every topic that holds events (not the dead-letter topic): what the audit index reads.
  std::vector<std::string> EventTopics() const {
    return {ProviderRequests(), Providers(), Health(), InstanceRequests(), Instances(), Status()};
  }
};

// Active health probing (SPEC §2, §3.2). Env names are DCM's (HEALTH_CHECK_*).
struct HealthCheckConfig {
  // Off: this instance neither probes nor joins the prober group (it still serves health).
  bool enabled = true;
  // Between probes of one provider, ±10% jitter (HEALTH_CHECK_INTERVAL, DCM's 10 s).
  std::chrono::milliseconds interval{10000};
  // One probe as a whole: resolve, connect, TLS, request, response (HEALTH_CHECK_TIMEOUT, 5 s).
  std::chrono::milliseconds timeout{5000};
  // Consecutive failures that make a provider Unavailable (3, as DCM does it).
  int max_consecutive_failures = 3;
  // Consecutive healthy probes that make a provider Ready again. 1 is the seed's rule ("a single
  // 200 OK recovers"); raise it for hysteresis against flapping providers.
  int success_threshold = 1;
  // Unavailable providers are probed at base·2ⁿ up to max (10 s, 5 m).
  std::chrono::milliseconds base_backoff{10000};
  std::chrono::milliseconds max_backoff{300000};
  // PEM CA bundle for https endpoints; empty = the system's trust store.
  std::string ca_file;
  // Skip certificate and host-name verification. An explicit, logged opt-in.
  bool insecure_skip_verify = false;
  // Probes in flight at once; beyond it, due probes wait (and scheduler lag shows it). 4096
  // covers 10k providers at 10 s with 40% black-holed at a 5 s timeout.
  int max_in_flight = 4096;
  // Simultaneous TLS handshakes (../shared/HTTP-NOTES.md: 10k at once collapse every client).
  int max_tls_handshakes = 512;
};

// Instances, placement and deferred cleanup (SPEC §2, §3.3).
struct InstanceConfig {
  // Off: this instance neither decides operations nor cleans up (it still serves reads).
  bool worker_enabled = true;
  // Between cleanup cycles (CLEANUP_INTERVAL, DCM's 1 m).
  std::chrono::milliseconds cleanup_interval{60000};
  // Failed deletes before a record is FAILED (CLEANUP_MAX_RETRIES, 10).
  int cleanup_max_retries = 10;
  // DCM's Policy Manager evaluation URL (POLICY_MANAGER_EVALUATION_URL); empty = built-in policy.
  std::string policy_manager_url;
  // One Policy Manager call as a whole.
  std::chrono::milliseconds policy_timeout{5000};
  // One SP create or delete call as a whole.
  std::chrono::milliseconds sp_timeout{10000};
  // Operations and cleanup attempts running at once (each blocks a thread on an SP call).
  int worker_threads = 32;
};

struct Config {
  // HOST:PORT for the HTTP API (env BIND_ADDRESS). Loopback by default: exposing the API is a
  // deliberate act.
  std::string listen = "127.0.0.1:8080";
  // Where RocksDB keeps projections and their consumed offsets. Empty in dev mode means a fresh
  // temporary directory.
  std::string data_dir = "./data";
  // Comma-separated bootstrap servers (env KAFKA_BROKERS). Empty with --dev: embedded mock.
  std::string kafka_brokers;
  bool dev = false;
  Topics topics;
  // Admin-predefined service types (env SERVICE_TYPES), SPEC §3.1.
  std::vector<std::string> service_types = {"vm",      "container", "database",
                                            "cluster", "storage",   "network"};
  // Partitions of the entity topics (dcm.providers, dcm.status). 12 spreads keys over two to
  // twelve instances; dcm.provider-requests always has exactly one (SPEC §4).
  int partitions = 12;
  // Replication factor for topics created through the Admin API (real brokers only).
  int replication_factor = 1;
  // How long a mutating HTTP call waits for its outcome to be applied locally before answering
  // 503. Registrar failover on a real cluster takes a session timeout; 10 s covers most.
  std::chrono::milliseconds decision_timeout{10000};
  // Kafka consumer-group session timeout for the registrar group, in ms. Failover of the single
  // decider takes about this long. 10 s is a middle ground between quick failover and false
  // alarms on a loaded machine; tests lower it (the mock needs >= 3000).
  int group_session_timeout_ms = 10000;
  // Consumer fetch long-poll in ms. The mock answers empty fetches only after the full wait, so
  // dev mode uses 10; real brokers answer as soon as data arrives, so 100 costs nothing there.
  int fetch_wait_max_ms = 100;
  // HTTP worker threads (one io_context each). 0 = number of cores.
  int http_threads = 0;
  std::string log_level = "info";
  // Identity of this instance in logs, /admin/info and event `source`s. Default: host:port.
  std::string instance_id;
  HealthCheckConfig health;
  InstanceConfig instances;
};

// Parses a comma-separated list, trimming blanks and dropping empty items.
std::vector<std::string> SplitList(const std::string& text);

// Checks values that flags alone cannot (startup config errors are fatal, with this message).
Status ValidateConfig(const Config& config);

}  // namespace dcm
