// `dcm serve`: wires one control-plane instance together (SPEC §2) and runs it until SIGTERM.
//
//   Kafka (embedded mock with --dev, or --kafka-brokers)
//     dcm.provider-requests ─▶ Registrar (one owner per cluster) ─▶ dcm.providers
//     dcm.providers ─▶ ProjectionRunner ─▶ RegistryProjection (RocksDB) ─▶ RegistryView ─▶ HTTP
//   HTTP writes ─▶ KafkaCommandBus ─▶ dcm.provider-requests; reply when the outcome is applied.
//   Prober (group-assigned share of providers) ─▶ GET {endpoint}/health ─▶ dcm.health
//     dcm.health ─▶ ProjectionRunner ─▶ HealthProjection ─▶ HealthView ─▶ joined into reads
//   HTTP instance writes ─▶ dcm.instance-requests ─▶ InstanceWorker (owner of the root's
//     partition: policy, SP calls, cleanup) ─▶ dcm.instances ─▶ InstanceProjection ─▶ reads
//   dcm.status (SPs) ─▶ SpStatusProjection ─▶ joined into instance reads
//   every event topic ─▶ ProjectionRunner ─▶ AuditProjection ─▶ /events, history, as_of
//
// This file: the flags and the run (resolve flags ─▶ build the parts ─▶ start them in order ─▶
// wait for SIGTERM, reloading on SIGHUP ─▶ stop them in reverse). The parts and their factories
// are in src/cli/serve_parts.h, the projections in projections/projection_catalog.h.
#include <signal.h>

#include <cstdio>
#include <tuple>

#include "consumers/kafka.h"
#include "src/cli/commands.h"
#include "src/cli/serve_parts.h"
#include "src/common/config.h"
#include "src/common/duration.h"
#include "src/common/log.h"

namespace dcm::cli {
namespace {

struct ServeFlags {
  Config config;
  std::string service_types;
  std::string decision_timeout = "10s";
  std::string read_wait = "5s";  // SPEC §7 consistent reads
  std::string write_timeout = "5s";
  // HEALTH_CHECK_* durations, Go syntax (SPEC §2).
  std::string health_interval = "10s";
  std::string health_timeout = "5s";
  std::string health_base_backoff = "10s";
  std::string health_max_backoff = "5m";
  std::string health_events_retention = "168h";  // SPEC §7
  std::string heartbeat_timeout = "12s";         // SPEC §8
  std::string heartbeat_record_every = "1m";
  std::string provider_gc_after = "0";  // off
  // Instances (SPEC §2, §3.3).
  std::string operation_timeout = "30s";
  std::string cleanup_interval = "1m";
  std::string policy_timeout = "5s";
  std::string sp_timeout = "10s";
  std::string crash_after_fact;               // test hook, see InstanceWorkerOptions
  std::vector<std::string> kafka_properties;  // librdkafka key=value, for every client
  bool data_dir_given = false;
  bool fetch_wait_given = false;
  // SPEC §6.
  std::string jwks_refresh_interval = "5m";
  std::string jwks_min_refresh_interval = "10s";
  std::string outbound_allow;
  std::string outbound_deny;
  // SPEC §7.
  std::string heavy_read_timeout = "10s";
  std::string watch_settle = "250ms";  // SPEC §9
  std::string watch_stall_timeout = "10s";
  // SPEC §10.
  std::string federation_peers;
  std::string federation_export;
  std::string federation_price = "0 EUR/hour";
  std::string federation_flavor_ttl = "30s";
  std::string federation_contract_ttl = "10m";
  std::string federation_discovery_timeout = "2s";
  std::string federation_hold_ttl = "30s";
};

int Fail(const std::string& message) {
  fprintf(stderr, "dcm serve: %s\n", message.c_str());
  return 1;
}

// Parses every Go-syntax duration flag into its config field.
Status ParseDurations(const ServeFlags& flags, ServeSettings& settings) {
  Config& config = settings.config;
  for (auto [text, out, name] :
       {std::tuple{&flags.decision_timeout, &config.decision_timeout, "--decision-timeout"},
        std::tuple{&flags.read_wait, &config.read_wait, "--read-wait"},
        std::tuple{&flags.write_timeout, &config.write_timeout, "--write-timeout"},
        std::tuple{&flags.health_interval, &config.health.interval, "HEALTH_CHECK_INTERVAL"},
        std::tuple{&flags.health_timeout, &config.health.timeout, "HEALTH_CHECK_TIMEOUT"},
        std::tuple{&flags.health_base_backoff, &config.health.base_backoff,
                   "HEALTH_CHECK_BASE_BACKOFF_INTERVAL"},
        std::tuple{&flags.health_max_backoff, &config.health.max_backoff,
                   "HEALTH_CHECK_MAX_BACKOFF_INTERVAL"},
        std::tuple{&flags.heartbeat_timeout, &config.health.heartbeat_timeout, "HEARTBEAT_TIMEOUT"},
        std::tuple{&flags.heartbeat_record_every, &config.health.heartbeat_record_every,
                   "HEARTBEAT_RECORD_EVERY"},
        std::tuple{&flags.provider_gc_after, &config.health.provider_gc_after, "PROVIDER_GC_AFTER"},
        std::tuple{&flags.operation_timeout, &settings.operation_timeout, "--operation-timeout"},
        std::tuple{&flags.cleanup_interval, &config.instances.cleanup_interval, "CLEANUP_INTERVAL"},
        std::tuple{&flags.policy_timeout, &config.instances.policy_timeout, "--policy-timeout"},
        std::tuple{&flags.sp_timeout, &config.instances.sp_timeout, "--sp-timeout"},
        std::tuple{&flags.jwks_refresh_interval, &config.auth.refresh_interval,
                   "AUTH_JWKS_REFRESH_INTERVAL"},
        std::tuple{&flags.jwks_min_refresh_interval, &config.auth.min_refresh_interval,
                   "AUTH_JWKS_MIN_REFRESH_INTERVAL"},
        std::tuple{&flags.heavy_read_timeout, &config.limits.heavy_read_timeout,
                   "--heavy-read-timeout"},
        std::tuple{&flags.watch_settle, &config.limits.watch_settle, "--watch-settle"},
        std::tuple{&flags.watch_stall_timeout, &config.limits.watch_stall_timeout,
                   "--watch-stall-timeout"},
        std::tuple{&flags.federation_flavor_ttl, &config.federation.flavor_ttl,
                   "FEDERATION_FLAVOR_TTL"},
        std::tuple{&flags.federation_contract_ttl, &config.federation.contract_ttl,
                   "FEDERATION_CONTRACT_TTL"},
        std::tuple{&flags.federation_discovery_timeout, &config.federation.discovery_timeout,
                   "FEDERATION_DISCOVERY_TIMEOUT"},
        std::tuple{&flags.federation_hold_ttl, &config.federation.hold_ttl,
                   "FEDERATION_HOLD_TTL"}}) {
    auto parsed = ParseGoDuration(*text);
    if (!parsed)
      return MakeError(parsed.error().code, std::string(name) + ": " + parsed.error().message);
    *out = *parsed;
  }
  return OkStatus();
}

// SPEC §10: the enclave id (default: the host name), the peers and the offer.
Status ResolveFederation(const ServeFlags& flags, FederationConfig& federation) {
  federation.enclave_id = ResolveEnclaveId(federation.enclave_id);
  ASSIGN_OR_RETURN(federation.peers,
                   ParseFederationPeers(flags.federation_peers, federation.enclave_id));
  federation.export_service_types = SplitList(flags.federation_export);
  ASSIGN_OR_RETURN(federation.price, ParseFederationPrice(flags.federation_price));
  return OkStatus();
}

// The flags as settings: lists split, durations parsed, dev defaults applied, config validated.
Result<ServeSettings> ResolveFlags(const ServeFlags& flags) {
  ServeSettings settings{.config = flags.config,
                         .crash_after_fact = flags.crash_after_fact,
                         .kafka_properties = flags.kafka_properties};
  Config& config = settings.config;
  if (!flags.service_types.empty()) config.service_types = SplitList(flags.service_types);
  config.outbound.allow_cidrs = SplitList(flags.outbound_allow);
  config.outbound.deny_cidrs = SplitList(flags.outbound_deny);
  RETURN_IF_ERROR(ParseDurations(flags, settings));
  RETURN_IF_ERROR(ResolveFederation(flags, config.federation));
  ASSIGN_OR_RETURN(config.health_events_retention,
                   ParseHealthEventsRetention(flags.health_events_retention));
  RETURN_IF_ERROR(ValidateConfig(config));
  if (config.dev && config.kafka_brokers.empty() && !flags.fetch_wait_given) {
    // The mock answers an empty fetch only after the full long-poll, so every consumer hop costs
    // up to this much latency (../shared/KAFKA-NOTES.md). Short polls are cheap on loopback.
    config.fetch_wait_max_ms = kMockFetchWaitMs;
  }
  if (!flags.fetch_wait_given) {
    settings.mock_fetch_wait_ms = kMockFetchWaitMs;
    settings.mock_registrar_fetch_wait_ms = kMockRegistrarFetchWaitMs;
    settings.mock_background_fetch_wait_ms = kMockBackgroundFetchWaitMs;
  }
  settings.temp_data_dir = config.dev && !flags.data_dir_given;
  return settings;
}

void PrintServing(const ServeParts& parts) {
  const Config& config = parts.config;
  const std::string host = config.listen.substr(0, config.listen.rfind(':'));
  printf("dcm serve listening on %s://%s:%u\n", config.tls.enabled() ? "https" : "http",
         host.c_str(), parts.port);
  printf("kafka bootstrap servers: %s\n", config.kafka_brokers.c_str());
  if (config.dev) {
    printf(
        "dev mode: events are held in memory by the embedded Kafka cluster and are lost on "
        "exit; data dir %s\n",
        config.data_dir.c_str());
  }
  fflush(stdout);
  Logger("serve")->info("msg=\"serving\" listen={}:{} kafka={} data_dir={} dev={}", host,
                        parts.port, config.kafka_brokers, config.data_dir, config.dev);
}

// Serves until SIGTERM or SIGINT; SIGHUP reloads certificates and keys and keeps serving.
int WaitForTermination(ServeParts& parts, const std::function<int()>& wait_for_signal) {
  auto logger = Logger("serve");
  int sig = 0;
  while ((sig = wait_for_signal()) == SIGHUP) {
    logger->info("msg=\"SIGHUP: reloading the TLS certificate and the JWKS file\"");
    if (auto reloaded = parts.server->ReloadTls(); !reloaded) {
      logger->error("msg=\"TLS reload failed; still serving the old certificate\" error=\"{}\"",
                    reloaded.error().message);
    }
    if (auto reloaded = parts.trust->Reload(); !reloaded) {
      logger->error("msg=\"JWKS reload failed; still using the old keys\" error=\"{}\"",
                    reloaded.error().message);
    }
  }
  return sig;
}

int RunServe(const ServeFlags& flags) {
  auto wait_for_signal = BlockTerminationSignals();
  InitLogging(flags.config.log_level);
  auto logger = Logger("serve");
  // The prober keeps a connection per provider it probes (src/http/probe_client.h sizes its
  // pool from this limit).
  const auto [soft_files, hard_files] = RaiseOpenFilesLimit();
  logger->info("msg=\"open files limit\" soft={} hard={}", soft_files, hard_files);
  auto settings = ResolveFlags(flags);
  if (!settings) return Fail(settings.error().message);
  ServeParts parts(std::move(*settings));
  if (auto built = BuildServeParts(parts); !built) return Fail(built.error().message);
  if (auto started = parts.components.StartAll(); !started) {
    return Fail(started.error().message);
  }
  PrintServing(parts);
  const int sig = WaitForTermination(parts, wait_for_signal);
  logger->info("msg=\"shutting down\" signal={}", sig);
  parts.components.StopAll();
  return 0;
}

// SPEC §6: authentication, TLS on the API, and the outbound policy.
void RegisterTrustBoundaryFlags(CLI::App* cmd, ServeFlags& flags) {
  Config& c = flags.config;
  cmd->add_flag("--auth-disabled", c.auth.disabled,
                "Run without authentication outside --dev (explicit opt-out; logged)")
      ->envname("AUTH_DISABLED");
  cmd->add_option("--auth-jwks-file", c.auth.jwks_file,
                  "JWKS document verifying bearer tokens (re-read on SIGHUP)")
      ->envname("AUTH_JWKS_FILE");
  cmd->add_option("--auth-issuer-url", c.auth.issuer_url,
                  "OIDC issuer: tokens' iss; its discovery document gives the keys")
      ->envname("AUTH_ISSUER_URL");
  cmd->add_option("--auth-issuer-ca-file", c.auth.issuer_ca_file,
                  "PEM CA bundle verifying an https issuer (default: system trust store)")
      ->envname("AUTH_ISSUER_CA_FILE");
  cmd->add_option("--auth-jwks-refresh-interval", flags.jwks_refresh_interval,
                  "Between refreshes of the issuer's keys")
      ->envname("AUTH_JWKS_REFRESH_INTERVAL")
      ->capture_default_str();
  cmd->add_option("--auth-jwks-min-refresh-interval", flags.jwks_min_refresh_interval,
                  "At most one key refresh per this interval (an unknown kid asks for one)")
      ->envname("AUTH_JWKS_MIN_REFRESH_INTERVAL")
      ->capture_default_str();
  cmd->add_option("--auth-jwt-audience", c.auth.audience, "Tokens' aud must contain this")
      ->envname("AUTH_JWT_AUDIENCE");
  cmd->add_option("--auth-roles-claim", c.auth.roles_claim,
                  "Claim holding the roles (dotted path; realm_access.roles is read too)")
      ->envname("AUTH_ROLES_CLAIM")
      ->capture_default_str();
  cmd->add_option("--admin-subject", c.auth.admin_subject, "A sub that is always dcm-admin")
      ->envname("DCM_ADMIN_SUBJECT");
  cmd->add_option("--auth-cert-roles", c.auth.cert_roles,
                  "Client certificate subjects to roles: subject=role,role;...")
      ->envname("AUTH_CERT_ROLES");
  cmd->add_flag("--metrics-public", c.auth.metrics_public, "Serve /metrics without credentials")
      ->envname("METRICS_PUBLIC");
  cmd->add_option("--tls-cert-file", c.tls.cert_file, "Serve HTTPS with this PEM certificate")
      ->envname("TLS_CERT_FILE");
  cmd->add_option("--tls-key-file", c.tls.key_file, "The certificate's PEM private key")
      ->envname("TLS_KEY_FILE");
  cmd->add_option("--tls-client-ca-file", c.tls.client_ca_file,
                  "Verify client certificates with this CA (mTLS; subjects act via "
                  "AUTH_CERT_ROLES)")
      ->envname("TLS_CLIENT_CA_FILE");
  cmd->add_option("--outbound-allow-cidrs", flags.outbound_allow,
                  "CIDRs SP endpoints may resolve to despite the default deny (comma-separated)")
      ->envname("OUTBOUND_ALLOW_CIDRS");
  cmd->add_option("--outbound-deny-cidrs", flags.outbound_deny,
                  "CIDRs SP endpoints may never resolve to (comma-separated)")
      ->envname("OUTBOUND_DENY_CIDRS");
  cmd->add_option("--sp-client-cert-file", c.outbound.sp_client_cert_file,
                  "Client certificate presented to SPs (probes and instance calls)")
      ->envname("SP_CLIENT_CERT_FILE");
  cmd->add_option("--sp-client-key-file", c.outbound.sp_client_key_file,
                  "The SP client certificate's private key")
      ->envname("SP_CLIENT_KEY_FILE");
}

// Local faults and retention gaps (SPEC §7).
void RegisterFaultFlags(CLI::App* cmd, ServeFlags& flags) {
  Config& c = flags.config;
  cmd->add_option("--min-free-disk-mb", c.min_free_disk_mb,
                  "Refuse store writes below this much free disk under --data-dir (0: off)")
      ->envname("DCM_MIN_FREE_DISK_MB")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30))
      ->capture_default_str();
  cmd->add_flag("--accept-retention-gaps", c.accept_retention_gaps,
                "Report ready although a projection lost records to the log's retention (the "
                "gap is still logged, counted and shown by /readyz)")
      ->envname("DCM_ACCEPT_RETENTION_GAPS");
}

// Kafka, the store, the HTTP API.
void RegisterCoreFlags(CLI::App* cmd, ServeFlags& flags) {
  Config& c = flags.config;
  cmd->add_flag("--dev", c.dev,
                "Run on an embedded in-memory Kafka cluster (events are lost on exit)");
  cmd->add_option("--listen", c.listen, "HTTP listen address HOST:PORT")
      ->envname("BIND_ADDRESS")
      ->capture_default_str();
  cmd->add_option("--data-dir", c.data_dir,
                  "RocksDB projections and their offsets (dev: a fresh temporary dir)")
      ->capture_default_str();
  cmd->add_option("--kafka-brokers", c.kafka_brokers, "Kafka bootstrap servers host:port,...")
      ->envname("KAFKA_BROKERS");
  cmd->add_option("--topic-prefix", c.topics.prefix, "Prefix of every topic name")
      ->envname("DCM_TOPIC_PREFIX")
      ->capture_default_str();
  cmd->add_option("--partitions", c.partitions,
                  "Partitions of entity topics created at start (the two provider topics get 1)")
      ->envname("DCM_PARTITIONS")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--replication-factor", c.replication_factor,
                  "Replication factor of topics created at start (real brokers)")
      ->envname("DCM_REPLICATION_FACTOR")
      ->capture_default_str();
  cmd->add_option("--service-types", flags.service_types,
                  "Admin-predefined service types, comma-separated")
      ->envname("SERVICE_TYPES");
  cmd->add_option("--decision-timeout", flags.decision_timeout,
                  "How long a write waits for its outcome before answering 503")
      ->envname("DCM_DECISION_TIMEOUT")
      ->capture_default_str();
  cmd->add_option("--kafka-property", flags.kafka_properties,
                  "librdkafka property key=value for every Kafka client (repeatable; e.g. "
                  "security.protocol=SASL_SSL)")
      ->envname("DCM_KAFKA_PROPERTIES")
      ->delimiter(',');
  cmd->add_option("--http-threads", c.http_threads, "HTTP threads (0 = one per core)")
      ->envname("DCM_HTTP_THREADS")
      ->capture_default_str();
  cmd->add_option("--instance-id", c.instance_id, "Name of this instance (default host/pid)")
      ->envname("DCM_INSTANCE_ID");
}

// How the Kafka consumers poll and fold.
void RegisterConsumerFlags(CLI::App* cmd, ServeFlags& flags) {
  Config& c = flags.config;
  cmd->add_option("--session-timeout-ms", c.group_session_timeout_ms,
                  "Consumer-group session timeout: registrar failover time")
      ->envname("DCM_SESSION_TIMEOUT_MS")
      ->check(CLI::Range(1000, 300000))
      ->capture_default_str();
  cmd->add_option("--fetch-wait-max-ms", c.fetch_wait_max_ms,
                  "Consumer long-poll (not given, on the mock: 5; registrar 1; audit, health 20)")
      ->envname("DCM_FETCH_WAIT_MAX_MS")
      ->check(CLI::Range(1, 5000))
      ->capture_default_str();
  cmd->add_option("--mock-idle-pause-ms", c.mock_idle_pause_ms,
                  "On the mock: idle runners fetch after a local write or this long (0 = off)")
      ->envname("DCM_MOCK_IDLE_PAUSE_MS")
      ->check(CLI::Range(0, 60000))
      ->capture_default_str();
  cmd->add_option("--background-fold-nice", c.background_fold_nice,
                  "Niceness added to the audit and health folds' threads, so that writes come "
                  "first on busy cores (0 = off)")
      ->envname("DCM_BACKGROUND_FOLD_NICE")
      ->check(CLI::Range(0, 19))
      ->capture_default_str();
}

// Bounded per-request cost and the waits of reads and writes (SPEC §7).
void RegisterLimitFlags(CLI::App* cmd, ServeFlags& flags) {
  cmd->add_option("--read-wait", flags.read_wait,
                  "How long a read waits for this instance to reach its acknowledged writes and "
                  "?min_position= before answering 503 (0..25s)")
      ->envname("DCM_READ_WAIT")
      ->capture_default_str();
  cmd->add_option("--write-timeout", flags.write_timeout,
                  "How long a write waits for Kafka's acknowledgement (and any wait once Kafka is "
                  "unreachable or stalled) before answering 503 with Retry-After")
      ->envname("DCM_WRITE_TIMEOUT")
      ->capture_default_str();
  LimitsConfig& l = flags.config.limits;
  cmd->add_option("--max-connections", l.max_connections,
                  "Open API connections; beyond it 503 (lowered to what the open-files limit "
                  "leaves)")
      ->envname("DCM_MAX_CONNECTIONS")
      ->check(CLI::Range(1, 10000000))
      ->capture_default_str();
  cmd->add_option("--max-connections-per-client", l.max_connections_per_client,
                  "Open API connections from one client address; beyond it 503 (0 = no cap)")
      ->envname("DCM_MAX_CONNECTIONS_PER_CLIENT")
      ->capture_default_str();
  cmd->add_option("--heavy-read-threads", l.heavy_read_threads,
                  "Threads for heavy reads (as_of, filtered scans); 0 = half the cores")
      ->envname("DCM_HEAVY_READ_THREADS")
      ->check(CLI::Range(0, 256))
      ->capture_default_str();
  cmd->add_option("--heavy-read-queue", l.heavy_read_queue,
                  "Heavy reads waiting for a thread; beyond it 503")
      ->envname("DCM_HEAVY_READ_QUEUE")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  cmd->add_option("--heavy-read-timeout", flags.heavy_read_timeout,
                  "A heavy read still queued or folding after this answers 503")
      ->envname("DCM_HEAVY_READ_TIMEOUT")
      ->capture_default_str();
  // Watch streams (SPEC §9).
  cmd->add_option("--watch-max-streams", l.watch_max_streams,
                  "Open watch streams (?watch=true); beyond it 503")
      ->envname("DCM_WATCH_MAX_STREAMS")
      ->capture_default_str();
  cmd->add_option("--watch-buffer-bytes", l.watch_buffer_bytes,
                  "Bytes a watch stream buffers for its reader (an events watch half a buffer "
                  "behind reads the index at its reader's pace; a list watch is cut off)")
      ->envname("DCM_WATCH_BUFFER_BYTES")
      ->capture_default_str();
  cmd->add_option("--watch-settle", flags.watch_settle,
                  "An event goes out to /events watchers once this passed its time (so events "
                  "indexed out of time order go out in order)")
      ->envname("DCM_WATCH_SETTLE")
      ->capture_default_str();
  cmd->add_option("--watch-stall-timeout", flags.watch_stall_timeout,
                  "A watch whose reader reads nothing for this long while data waits is cut off")
      ->envname("DCM_WATCH_STALL_TIMEOUT")
      ->capture_default_str();
}

// Liveness by heartbeat (SPEC §8).
void RegisterHeartbeatFlags(CLI::App* cmd, ServeFlags& flags) {
  cmd->add_option("--heartbeat-timeout", flags.heartbeat_timeout,
                  "A heartbeat provider without a beat for this long is Unavailable "
                  "(heartbeat_expired)")
      ->envname("HEARTBEAT_TIMEOUT")
      ->capture_default_str();
  cmd->add_option("--heartbeat-record-every", flags.heartbeat_record_every,
                  "At least one 'still beating' event per heartbeat provider this often")
      ->envname("HEARTBEAT_RECORD_EVERY")
      ->capture_default_str();
  cmd->add_option("--provider-gc-after", flags.provider_gc_after,
                  "Remove a heartbeat provider silent this long (dcm.provider.expired); 0: never")
      ->envname("PROVIDER_GC_AFTER")
      ->capture_default_str();
  cmd->add_flag("--rehydrate-on-provider-loss", flags.config.instances.rehydrate_on_provider_loss,
                "Rehydrate the resources of an expired or force-deleted provider elsewhere")
      ->envname("REHYDRATE_ON_PROVIDER_LOSS");
}

// Active health probing (SPEC §2, §3.2).
void RegisterHealthCheckFlags(CLI::App* cmd, ServeFlags& flags) {
  Config& c = flags.config;
  cmd->add_option("--health-check-interval", flags.health_interval,
                  "Between probes of one provider (jittered ±10%)")
      ->envname("HEALTH_CHECK_INTERVAL")
      ->capture_default_str();
  cmd->add_option("--health-check-timeout", flags.health_timeout, "One probe as a whole")
      ->envname("HEALTH_CHECK_TIMEOUT")
      ->capture_default_str();
  cmd->add_option("--health-check-max-consecutive-failures", c.health.max_consecutive_failures,
                  "Consecutive failed probes that make a provider Unavailable")
      ->envname("HEALTH_CHECK_MAX_CONSECUTIVE_FAILURES")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--health-check-success-threshold", c.health.success_threshold,
                  "Consecutive healthy probes that make a provider Ready (hysteresis)")
      ->envname("HEALTH_CHECK_SUCCESS_THRESHOLD")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--health-check-base-backoff-interval", flags.health_base_backoff,
                  "First probe delay once Unavailable; doubles per failure")
      ->envname("HEALTH_CHECK_BASE_BACKOFF_INTERVAL")
      ->capture_default_str();
  cmd->add_option("--health-check-max-backoff-interval", flags.health_max_backoff,
                  "Longest probe delay while Unavailable")
      ->envname("HEALTH_CHECK_MAX_BACKOFF_INTERVAL")
      ->capture_default_str();
  cmd->add_option("--health-check-ca-file", c.health.ca_file,
                  "PEM CA bundle for https provider endpoints (default: system trust store)")
      ->envname("HEALTH_CHECK_CA_FILE");
  cmd->add_flag("--health-check-insecure-skip-verify", c.health.insecure_skip_verify,
                "Do not verify provider TLS certificates (explicit opt-in)")
      ->envname("HEALTH_CHECK_INSECURE_SKIP_VERIFY");
  cmd->add_option("--health-check-max-in-flight", c.health.max_in_flight,
                  "Probes awaiting an answer at once")
      ->envname("HEALTH_CHECK_MAX_IN_FLIGHT")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  cmd->add_option("--health-check-max-tls-handshakes", c.health.max_tls_handshakes,
                  "Simultaneous TLS handshakes of the prober")
      ->envname("HEALTH_CHECK_MAX_TLS_HANDSHAKES")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd->add_option("--health-events-retention", flags.health_events_retention,
                  "How long probe events are kept (Kafka topic <prefix>health-probes, audit "
                  "index); transitions are kept forever")
      ->envname("HEALTH_EVENTS_RETENTION")
      ->capture_default_str();
  cmd->add_flag("--health-check,!--no-health-check", c.health.enabled,
                "Probe providers from this instance (--no-health-check: only serve health states)")
      ->envname("HEALTH_CHECK_ENABLED");
}

// Instances (SPEC §2, §3.3).
void RegisterInstanceFlags(CLI::App* cmd, ServeFlags& flags) {
  Config& c = flags.config;
  cmd->add_option("--operation-timeout", flags.operation_timeout,
                  "How long an instance operation (policy, SP calls) may take before 503")
      ->envname("DCM_OPERATION_TIMEOUT")
      ->capture_default_str();
  cmd->add_option("--cleanup-interval", flags.cleanup_interval,
                  "Between cleanup cycles of deferred deletes")
      ->envname("CLEANUP_INTERVAL")
      ->capture_default_str();
  cmd->add_option("--cleanup-max-retries", c.instances.cleanup_max_retries,
                  "Failed deletes before a cleanup record is FAILED")
      ->envname("CLEANUP_MAX_RETRIES")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--policy-manager-evaluation-url", c.instances.policy_manager_url,
                  "DCM Policy Manager evaluateRequest URL (default: the built-in policy)")
      ->envname("POLICY_MANAGER_EVALUATION_URL");
  cmd->add_option("--policy-timeout", flags.policy_timeout, "One Policy Manager call")
      ->envname("DCM_POLICY_TIMEOUT")
      ->capture_default_str();
  cmd->add_option("--sp-timeout", flags.sp_timeout, "One SP create or delete call")
      ->envname("DCM_SP_TIMEOUT")
      ->capture_default_str();
  cmd->add_option("--instance-worker-threads", c.instances.worker_threads,
                  "Instance operations and cleanup attempts running at once")
      ->envname("DCM_INSTANCE_WORKER_THREADS")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_flag("--instance-worker,!--no-instance-worker", c.instances.worker_enabled,
                "Decide instance operations and run cleanup on this instance")
      ->envname("DCM_INSTANCE_WORKER_ENABLED");
  cmd->add_option("--test-crash-after-fact", flags.crash_after_fact,
                  "Test hook: SIGKILL this process after emitting a fact of this type "
                  "('SIGSTOP:<type>': stop it there instead, until SIGCONT)")
      ->envname("DCM_TEST_CRASH_AFTER_FACT")
      ->group("");  // hidden
}

// Federation across enclaves (SPEC §10).
void RegisterFederationFlags(CLI::App* cmd, ServeFlags& flags) {
  cmd->add_option("--enclave-id", flags.config.federation.enclave_id,
                  "This enclave's id, as peers know it (default: the host name)")
      ->envname("DCM_ENCLAVE_ID");
  cmd->add_option("--federation-peers", flags.federation_peers,
                  "Peer enclaves id=url,... (probed; operator-configured, so not filtered by the "
                  "outbound policy)")
      ->envname("FEDERATION_PEERS");
  cmd->add_option("--federation-export-service-types", flags.federation_export,
                  "Service types offered to peers as flavours, comma-separated (default none)")
      ->envname("FEDERATION_EXPORT_SERVICE_TYPES");
  cmd->add_option("--federation-price", flags.federation_price,
                  "Price on every flavour: '<amount> <currency>/<period>'")
      ->envname("FEDERATION_PRICE")
      ->capture_default_str();
  cmd->add_option("--federation-flavor-ttl", flags.federation_flavor_ttl,
                  "A listed flavour is valid this long (expires_at)")
      ->envname("FEDERATION_FLAVOR_TTL")
      ->capture_default_str();
  cmd->add_option("--federation-contract-ttl", flags.federation_contract_ttl,
                  "A signed or renewed contract's lease; the consumer renews it before its end")
      ->envname("FEDERATION_CONTRACT_TTL")
      ->capture_default_str();
  cmd->add_option("--federation-discovery-timeout", flags.federation_discovery_timeout,
                  "How long a placement asks the Ready peers for flavours; a slower peer is "
                  "skipped")
      ->envname("FEDERATION_DISCOVERY_TIMEOUT")
      ->capture_default_str();
  cmd->add_flag("--federation-forward", flags.config.federation.forward,
                "Forward peers' flavours and the calls for them (a supernode)")
      ->envname("FEDERATION_FORWARD");
  cmd->add_flag("--federation-repatriate", flags.config.federation.repatriate,
                "Bring instances placed on peers home once a local Ready provider can take them")
      ->envname("FEDERATION_REPATRIATE");
  cmd->add_option("--federation-hold-ttl", flags.federation_hold_ttl,
                  "The hold a placement asks a peer for (it confirms at once)")
      ->envname("FEDERATION_HOLD_TTL")
      ->capture_default_str();
}

}  // namespace

void RegisterServeCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<ServeFlags>();
  CLI::App* cmd = app.add_subcommand("serve", "Run a control-plane instance");
  RegisterCoreFlags(cmd, *flags);
  RegisterConsumerFlags(cmd, *flags);
  RegisterHealthCheckFlags(cmd, *flags);
  RegisterHeartbeatFlags(cmd, *flags);
  RegisterInstanceFlags(cmd, *flags);
  RegisterTrustBoundaryFlags(cmd, *flags);
  RegisterLimitFlags(cmd, *flags);
  RegisterFaultFlags(cmd, *flags);
  RegisterFederationFlags(cmd, *flags);
  cmd->add_option("--log-level", flags->config.log_level, "debug, info, warn or error")
      ->envname("DCM_LOG_LEVEL")
      ->capture_default_str();
  cmd->callback([flags, exit_code, cmd] {
    flags->data_dir_given = cmd->count("--data-dir") > 0;
    flags->fetch_wait_given = cmd->count("--fetch-wait-max-ms") > 0;
    *exit_code = RunServe(*flags);
  });
}

}  // namespace dcm::cli
