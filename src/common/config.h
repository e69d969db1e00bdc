// Config: every setting of `dcm serve`, with its unit, meaning and why the default was chosen.
// Flags and environment variables are bound in src/cli (SPEC §2); this struct is plain data so
// every component can take the part it needs.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/federation_config.h"
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
  // Health transitions (health_changed; before issue #13 also the probes): kept forever.
  std::string Health() const { return prefix + "health"; }
  // Probe events (health_probed v3): kept for HEALTH_EVENTS_RETENTION only (SPEC §7).
  std::string HealthProbes() const { return prefix + "health-probes"; }
  std::string DeadLetter() const { return prefix + "dead-letter"; }
  // Federation, provider side (SPEC §10): peers' requests, decided in total order (one
  // partition), and the decider's outcomes, keyed by reservation id.
  std::string FederationRequests() const { return prefix + "federation-requests"; }
  std::string Federation() const { return prefix + "federation"; }
  // Every topic that holds events (not the dead-letter topic): what the audit index reads.
  std::vector<std::string> EventTopics() const {
    // Append new topics at the end: DCM-Position tokens number topics by their index here.
    return {ProviderRequests(), Providers(),          Health(),
            InstanceRequests(), Instances(),          Status(),
            HealthProbes(),     FederationRequests(), Federation()};
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
  // Liveness by heartbeat (SPEC §8): a heartbeat provider without a beat for this long becomes
  // Unavailable (heartbeat_expired); IS-04's 12 s, two missed 5 s beats (HEARTBEAT_TIMEOUT).
  std::chrono::milliseconds heartbeat_timeout{12000};
  // At least one "still beating" record per provider per this (HEARTBEAT_RECORD_EVERY).
  std::chrono::milliseconds heartbeat_record_every{60000};
  // A heartbeat provider silent this long is removed (dcm.provider.expired); 0: never
  // (PROVIDER_GC_AFTER, default off). At least HEARTBEAT_TIMEOUT.
  std::chrono::milliseconds provider_gc_after{0};
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
  // Resources LOST with their provider (expired or force-deleted) are rehydrated onto another
  // provider (REHYDRATE_ON_PROVIDER_LOSS, SPEC §8); off: they are only marked LOST.
  bool rehydrate_on_provider_loss = false;
};

// The trust boundary (SPEC §6): who may call the API, over what, and where the control plane
// may connect.
struct AuthConfig {
  // AUTH_DISABLED=true: no authentication outside --dev (an explicit, logged choice; /admin/info
  // says `auth: disabled`). --dev without any auth setting is disabled as well.
  bool disabled = false;
  // A JWKS document on disk (AUTH_JWKS_FILE): air-gapped sites. Re-read on SIGHUP.
  std::string jwks_file;
  // An OIDC issuer (AUTH_ISSUER_URL): tokens' `iss` must equal it; without a JWKS file its
  // discovery document's `jwks_uri` gives the keys (fetched at start, refreshed every
  // `refresh_interval` and on an unknown key id, at most every `min_refresh_interval`).
  std::string issuer_url;
  std::chrono::milliseconds refresh_interval{300000};
  std::chrono::milliseconds min_refresh_interval{10000};
  // PEM CA bundle that verifies an https issuer; empty = the system's trust store.
  std::string issuer_ca_file;
  // Tokens' `aud` must contain it when set (AUTH_JWT_AUDIENCE).
  std::string audience;
  // The claim holding the roles (AUTH_ROLES_CLAIM, a dotted path; Keycloak's
  // realm_access.roles is read as well).
  std::string roles_claim = "roles";
  // A `sub` that is always dcm-admin (DCM_ADMIN_SUBJECT).
  std::string admin_subject;
  // mTLS subjects to roles (AUTH_CERT_ROLES, `subject=role,role;...`).
  std::string cert_roles;
  // METRICS_PUBLIC=true: /metrics without credentials.
  bool metrics_public = false;
};

// TLS on the API (SPEC §6). With a certificate and key every listener serves HTTPS only; with a
// client CA, client certificates are verified and their subjects authenticate (mTLS).
struct ApiTlsConfig {
  std::string cert_file;       // --tls-cert-file, TLS_CERT_FILE
  std::string key_file;        // --tls-key-file, TLS_KEY_FILE
  std::string client_ca_file;  // --tls-client-ca-file, TLS_CLIENT_CA_FILE
  bool enabled() const { return !cert_file.empty(); }
};

// Where the control plane may connect on an SP's behalf (SPEC §6): every address that came from
// a registration (probes, SP calls) is checked by one dialer. Loopback, link-local (the cloud
// metadata addresses), unspecified and multicast are refused by default; --dev allows loopback.
struct OutboundConfig {
  std::vector<std::string> allow_cidrs;  // OUTBOUND_ALLOW_CIDRS
  std::vector<std::string> deny_cidrs;   // OUTBOUND_DENY_CIDRS
  // A client certificate presented to SPs (probes and SP calls): SP_CLIENT_CERT_FILE / _KEY_FILE.
  std::string sp_client_cert_file;
  std::string sp_client_key_file;
};

// Bounded per-request cost (SPEC §7).
struct LimitsConfig {
  // Open API connections (--max-connections, DCM_MAX_CONNECTIONS); beyond it a new connection is
  // answered 503. `dcm serve` lowers it to what the open-files limit leaves (SplitDescriptors),
  // so the process never runs out of descriptors. 10,000: the SPEC's default.
  size_t max_connections = 10000;
  // Open API connections from one client address (--max-connections-per-client,
  // DCM_MAX_CONNECTIONS_PER_CLIENT); 0 = none. 1,000 keeps one client from taking the whole cap;
  // behind a proxy every caller shares its address: raise it or set 0.
  size_t max_connections_per_client = 1000;
  // Heavy reads (as_of, filtered scans, /admin/projections) run on this many pool threads, off
  // the I/O threads (--heavy-read-threads, DCM_HEAVY_READ_THREADS; 0 = half the cores, at least 1).
  int heavy_read_threads = 0;
  // Heavy reads waiting for a thread; beyond it 503 (--heavy-read-queue, DCM_HEAVY_READ_QUEUE).
  size_t heavy_read_queue = 64;
  // A heavy read's deadline from its arrival: still queued → 503, still folding → 503
  // (--heavy-read-timeout, DCM_HEAVY_READ_TIMEOUT). 10 s: an as_of over a day of probes of one
  // provider takes ~0.1 s, of 10k providers' registrations ~1 s (BENCHMARKS.md).
  std::chrono::milliseconds heavy_read_timeout{10000};
  // Watch streams (SPEC §9): at most this many open at once, beyond it 503
  // (--watch-max-streams, DCM_WATCH_MAX_STREAMS); each buffers at most `watch_buffer_bytes` for
  // its reader (--watch-buffer-bytes, DCM_WATCH_BUFFER_BYTES): an events watch half a buffer
  // behind reads the index at its reader's pace, a list watch is cut off. Their product bounds
  // the memory of watches: 2,048 × 128 KiB = 256 MiB. A reader blocked for
  // `watch_stall_timeout` is cut off (--watch-stall-timeout, DCM_WATCH_STALL_TIMEOUT). An event
  // goes out once `watch_settle` passed its time (--watch-settle, DCM_WATCH_SETTLE), so events
  // indexed out of time order still go out in order.
  size_t watch_max_streams = 2048;
  size_t watch_buffer_bytes = 128 * 1024;
  std::chrono::milliseconds watch_settle{250};
  std::chrono::milliseconds watch_stall_timeout{10000};
};

// How `dcm serve` shares its descriptors (SPEC §7: no EMFILE, ever). `reserve` is for RocksDB's
// table files, Kafka's sockets, logs and outbound SP/Policy Manager/issuer calls; the prober
// keeps up to `probe_idle` connections and opens at most `probe_in_flight` more; the API gets
// the rest, less the server's refusal slots.
struct DescriptorBudget {
  uint64_t nofile = 0;
  uint64_t reserve = 0;
  uint64_t probe_idle = 0;       // ProbeClientOptions::max_idle_connections
  uint64_t probe_in_flight = 0;  // --health-check-max-in-flight (0 without probing)
  uint64_t api = 0;              // the most API connections this process can hold
};
inline constexpr uint64_t kMinApiConnections = 64;
// reserve = min(1024, nofile / 4); probe_idle = (nofile - reserve) / 2 when probing; api =
// nofile - reserve - probe_idle - probe_in_flight - refusal_slots, at least kMinApiConnections.
// nofile = 20,000 with 4,096 probes in flight and 256 refusal slots: api = 5,136.
DescriptorBudget SplitDescriptors(uint64_t nofile, bool probing, uint64_t probe_in_flight,
                                  uint64_t refusal_slots);

struct Config {
  // HOST:PORT for the HTTP API (env BIND_ADDRESS). Loopback by default: exposing the API is a
  // deliberate act.
  std::string listen = "127.0.0.1:8080";
  // Where RocksDB keeps projections and their consumed offsets. Empty in dev mode means a fresh
  // temporary directory.
  std::string data_dir = "./data";
  // Writes to the store are refused (projections pause, writes answer 503) while the data dir's
  // filesystem has less free space than this (--min-free-disk-mb, DCM_MIN_FREE_DISK_MB); 0 = no
  // check. It covers a memtable flush (2 x 64 MiB) with room to spare.
  int64_t min_free_disk_mb = 256;
  // SPEC §7 retention gaps: a projection that lost records to retention is not ready (it would
  // serve a registry or history without them) unless the operator accepts the loss
  // (--accept-retention-gaps, DCM_ACCEPT_RETENTION_GAPS). The gap is reported either way.
  bool accept_retention_gaps = false;
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
  // How long a read waits for this instance's projections to reach the writes it acknowledged
  // and the read's ?min_position= before answering 503 (SPEC §7, --read-wait). Below the HTTP
  // server's 30 s handler timeout.
  std::chrono::milliseconds read_wait{5000};
  // SPEC §7: how long a write waits for Kafka to acknowledge its request, and how long any write
  // waits once Kafka is unreachable or stalled, before 503 + Retry-After (100ms..60s).
  std::chrono::milliseconds write_timeout{5000};
  // Kafka consumer-group session timeout for the registrar group, in ms. Failover of the single
  // decider takes about this long. 10 s is a middle ground between quick failover and false
  // alarms on a loaded machine; tests lower it (the mock needs >= 3000).
  int group_session_timeout_ms = 10000;
  // Consumer fetch long-poll in ms. The mock answers empty fetches only after the full wait, so
  // dev mode uses 10; real brokers answer as soon as data arrives, so 100 costs nothing there.
  int fetch_wait_max_ms = 100;
  // Against librdkafka's mock only (embedded or `dcm dev-kafka`): a consumer that received nothing
  // for this long pauses its fetches until this process produces to one of its topics, or this
  // long at most (KafkaOptions::idle_pause_ms, consumers/local_deliveries.h). Idle consumers
  // otherwise poll the mock every few ms: 0.93x CPU per registration (BENCHMARKS.md, issue #16,
  // session 24). 0 = off.
  int mock_idle_pause_ms = 100;
  // Niceness added to the runners of background folds (ProjectionEntry::background: the audit
  // index, providers' and peers' health): under load they yield the cores to the write path, and
  // fold in larger batches (1.03-1.11x registrations/s, 0.92-0.95x CPU per registration on 2
  // cores: BENCHMARKS.md, issue #16, session 19). 0 = off.
  int background_fold_nice = 5;
  // HTTP worker threads (one io_context each). 0 = number of cores.
  int http_threads = 0;
  std::string log_level = "info";
  // Identity of this instance in logs, /admin/info and event `source`s. Default: host:port.
  std::string instance_id;
  HealthCheckConfig health;
  // How long probe events are kept (HEALTH_EVENTS_RETENTION, SPEC §7): `retention.ms` of the
  // probes topic when dcm creates it, and the age past which the audit index drops them. Health
  // transitions and every other event are kept forever. 168h = a week of probes to audit.
  std::chrono::milliseconds health_events_retention{std::chrono::hours(168)};
  InstanceConfig instances;
  AuthConfig auth;
  ApiTlsConfig tls;
  OutboundConfig outbound;
  LimitsConfig limits;
  // Enclave identity, peers and what is offered to them (SPEC §10).
  FederationConfig federation;

  // Whether callers must authenticate (SPEC §6): any auth setting turns it on, also in --dev.
  bool AuthConfigured() const {
    return !auth.jwks_file.empty() || !auth.issuer_url.empty() || !tls.client_ca_file.empty();
  }
};

// Parses a comma-separated list, trimming blanks and dropping empty items.
std::vector<std::string> SplitList(const std::string& text);

// HEALTH_EVENTS_RETENTION: a Go duration of at least 1s ("168h", "2m"); anything else is an
// error naming the setting.
Result<std::chrono::milliseconds> ParseHealthEventsRetention(std::string_view text);

// Checks values that flags alone cannot (startup config errors are fatal, with this message),
// including SPEC §6's secure default: outside --dev, no auth setting and no AUTH_DISABLED=true
// is an error that says what to set.
// The longest --read-wait: below the HTTP server's handler timeout (30 s), which would answer
// first.
inline constexpr std::chrono::milliseconds kMaxReadWait{25000};

Status ValidateConfig(const Config& config);

}  // namespace dcm
