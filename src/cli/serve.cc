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
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <tuple>

#include "consumers/command_bus.h"
#include "consumers/instance_worker.h"
#include "consumers/mock_cluster.h"
#include "consumers/prober.h"
#include "consumers/projection_runner.h"
#include "consumers/registrar.h"
#include "consumers/topic_admin.h"
#include "src/cli/commands.h"
#include "src/cli/trust_boundary.h"
#include "src/common/config.h"
#include "src/common/duration.h"
#include "src/common/log.h"
#include "src/http/placement_clients.h"
#include "src/http/probe_client.h"
#include "src/http/router.h"
#include "src/http/server.h"

namespace dcm::cli {
namespace {

struct ServeFlags {
  Config config;
  std::string service_types;
  std::string decision_timeout = "10s";
  // HEALTH_CHECK_* durations, Go syntax (SPEC §2).
  std::string health_interval = "10s";
  std::string health_timeout = "5s";
  std::string health_base_backoff = "10s";
  std::string health_max_backoff = "5m";
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
};

// Consumer long-poll on the embedded mock, in ms (see RunServe).
constexpr int kDevFetchWaitMs = 5;

int Fail(const std::string& message) {
  fprintf(stderr, "dcm serve: %s\n", message.c_str());
  return 1;
}

int RunServe(ServeFlags flags) {
  auto wait_for_signal = BlockTerminationSignals();
  Config& config = flags.config;
  InitLogging(config.log_level);
  auto logger = Logger("serve");
  // The prober keeps a connection per provider it probes (src/http/probe_client.h sizes its
  // pool from this limit).
  const auto [soft_files, hard_files] = RaiseOpenFilesLimit();
  logger->info("msg=\"open files limit\" soft={} hard={}", soft_files, hard_files);
  if (!flags.service_types.empty()) config.service_types = SplitList(flags.service_types);
  config.outbound.allow_cidrs = SplitList(flags.outbound_allow);
  config.outbound.deny_cidrs = SplitList(flags.outbound_deny);
  auto timeout = ParseGoDuration(flags.decision_timeout);
  if (!timeout) return Fail("--decision-timeout: " + timeout.error().message);
  config.decision_timeout = *timeout;
  std::chrono::milliseconds operation_timeout{0};
  for (auto [text, out, name] :
       {std::tuple{&flags.health_interval, &config.health.interval, "HEALTH_CHECK_INTERVAL"},
        std::tuple{&flags.health_timeout, &config.health.timeout, "HEALTH_CHECK_TIMEOUT"},
        std::tuple{&flags.health_base_backoff, &config.health.base_backoff,
                   "HEALTH_CHECK_BASE_BACKOFF_INTERVAL"},
        std::tuple{&flags.health_max_backoff, &config.health.max_backoff,
                   "HEALTH_CHECK_MAX_BACKOFF_INTERVAL"},
        std::tuple{&flags.operation_timeout, &operation_timeout, "--operation-timeout"},
        std::tuple{&flags.cleanup_interval, &config.instances.cleanup_interval, "CLEANUP_INTERVAL"},
        std::tuple{&flags.policy_timeout, &config.instances.policy_timeout, "--policy-timeout"},
        std::tuple{&flags.sp_timeout, &config.instances.sp_timeout, "--sp-timeout"},
        std::tuple{&flags.jwks_refresh_interval, &config.auth.refresh_interval,
                   "AUTH_JWKS_REFRESH_INTERVAL"},
        std::tuple{&flags.jwks_min_refresh_interval, &config.auth.min_refresh_interval,
                   "AUTH_JWKS_MIN_REFRESH_INTERVAL"}}) {
    auto parsed = ParseGoDuration(*text);
    if (!parsed) return Fail(std::string(name) + ": " + parsed.error().message);
    *out = *parsed;
  }
  if (auto status = ValidateConfig(config); !status) return Fail(status.error().message);
  auto trust_created = TrustBoundary::Create(config, &SystemClock::Instance());
  if (!trust_created) return Fail(trust_created.error().message);
  const std::unique_ptr<TrustBoundary> trust = std::move(*trust_created);
  if (!trust->authenticator()) {
    if (config.dev) {
      logger->warn("msg=\"dev mode: authentication is off; every caller acts as anonymous\"");
    } else {
      logger->warn(
          "msg=\"AUTH_DISABLED=true: authentication is off; anyone who reaches {} can register, "
          "delete and rehydrate\"",
          config.listen);
    }
  } else {
    logger->info("msg=\"authentication\" mode=\"{}\"", trust->auth_mode());
  }
  logger->info("msg=\"outbound policy\" {}", trust->outbound()->Describe());

  ProviderRules provider_rules(config.service_types);
  provider_rules.refuse_endpoint_host = [outbound = trust->outbound()](std::string_view host) {
    return outbound->CheckLiteralHost(host);
  };

  // Kafka: the embedded mock in dev mode, else the given cluster.
  std::unique_ptr<MockCluster> mock;
  const auto topics = ProjectTopics(config);
  if (config.dev && config.kafka_brokers.empty()) {
    auto created = MockCluster::Create(1);
    if (!created) return Fail(created.error().message);
    mock = std::move(*created);
    if (auto status = mock->CreateTopics(topics); !status) return Fail(status.error().message);
    config.kafka_brokers = mock->bootstrap();
    // The mock answers an empty fetch only after the full long-poll, so every consumer hop costs
    // up to this much latency (../shared/KAFKA-NOTES.md). Short polls are cheap on loopback.
    if (!flags.fetch_wait_given) config.fetch_wait_max_ms = kDevFetchWaitMs;
  }
  std::string temp_dir;
  if (config.dev && !flags.data_dir_given) {
    char pattern[] = "/tmp/dcm-dev-XXXXXX";
    if (!mkdtemp(pattern)) return Fail("cannot create a temporary data dir");
    temp_dir = pattern;
    config.data_dir = temp_dir;
  }
  if (config.instance_id.empty()) {
    char host[256] = "localhost";
    gethostname(host, sizeof(host) - 1);
    config.instance_id = std::string(host) + "/" + std::to_string(getpid());
  }
  KafkaOptions kafka;
  kafka.brokers = config.kafka_brokers;
  kafka.client_id = "dcm-" + config.instance_id;
  kafka.fetch_wait_max_ms = config.fetch_wait_max_ms;
  kafka.session_timeout_ms = config.group_session_timeout_ms;
  if (auto error = AddKafkaProperties(flags.kafka_properties, kafka.extra)) return Fail(*error);
  if (!mock) {
    if (auto status = EnsureTopics(kafka, topics, config.topics.ProviderRequests(),
                                   config.replication_factor);
        !status) {
      return Fail(status.error().message);
    }
  }

  std::error_code ec;
  std::filesystem::create_directories(config.data_dir, ec);
  if (ec) return Fail("cannot create data dir " + config.data_dir + ": " + ec.message());
  auto store = Store::Open(config.data_dir + "/state");
  if (!store) return Fail(store.error().message);
  auto producer = Producer::Create(kafka);
  if (!producer) return Fail(producer.error().message);
  auto command_producer = Producer::Create(ProviderCommandOptions(kafka));  // consumers/kafka.h
  if (!command_producer) return Fail(command_producer.error().message);
  // `dcm dev-kafka` is the mock too, in another process: the same short long-poll as above.
  if (!mock && !flags.fetch_wait_given && IsMockCluster((*producer)->handle(), 5000)) {
    kafka.fetch_wait_max_ms = kDevFetchWaitMs;
  }

  Metrics metrics;
  OutcomeWaiters waiters;
  RegistryProjection registry(store->get(), &waiters, &metrics);
  RegistryView registry_view(store->get());
  ProjectionRunner registry_runner(
      RunnerOptions{config.topics.Providers(), config.topics.DeadLetter(), kafka}, store->get(),
      &registry, producer->get(), &metrics);
  HealthProjection health(store->get(), &metrics);
  HealthView health_view(store->get());
  ProjectionRunner health_runner(
      RunnerOptions{config.topics.Health(), config.topics.DeadLetter(), kafka}, store->get(),
      &health, producer->get(), &metrics);

  OutcomeWaiters instance_waiters;
  InstanceProjection instances(store->get(), &instance_waiters, &metrics);
  InstanceView instance_view(store->get());
  ProjectionRunner instance_runner(
      RunnerOptions{config.topics.Instances(), config.topics.DeadLetter(), kafka}, store->get(),
      &instances, producer->get(), &metrics);
  SpStatusProjection sp_status(store->get(), &metrics);
  ProjectionRunner sp_status_runner(
      RunnerOptions{config.topics.Status(), config.topics.DeadLetter(), kafka}, store->get(),
      &sp_status, producer->get(), &metrics);

  // The audit index reads every event topic (SPEC §3.4).
  AuditProjection audit(store->get(), config.topics.Providers(), &metrics);
  AuditView audit_view(store->get());
  const auto event_topics = config.topics.EventTopics();
  RunnerOptions audit_options{event_topics.front(), config.topics.DeadLetter(), kafka};
  audit_options.more_topics.assign(event_topics.begin() + 1, event_topics.end());
  ProjectionRunner audit_runner(audit_options, store->get(), &audit, producer->get(), &metrics);

  // The prober follows the registry, so it exists before the registry runner starts.
  std::unique_ptr<http::ProbeClient> probe_client;
  std::unique_ptr<Producer> health_producer;
  std::unique_ptr<Prober> prober;
  if (config.health.enabled) {
    // Probe events need no millisecond latency: a longer linger batches ~1,000 events/s into a
    // few requests instead of hundreds (BENCHMARKS.md: the broker thread's CPU halves).
    KafkaOptions batched = kafka;
    batched.extra.emplace("linger.ms", "25");
    auto created = Producer::Create(batched);
    if (!created) return Fail(created.error().message);
    health_producer = std::move(*created);
    http::ProbeClientOptions client_options;
    client_options.outbound = trust->outbound();
    client_options.tls = trust->sp_tls();
    client_options.max_tls_handshakes = static_cast<size_t>(config.health.max_tls_handshakes);
    auto client = http::ProbeClient::Create(client_options);
    if (!client) return Fail(client.error().message);
    probe_client = std::move(*client);
    ProberOptions prober_options;
    prober_options.health_topic = config.topics.Health();
    prober_options.group_id = config.topics.prefix + "prober";
    prober_options.source = "dcm/prober/" + config.instance_id;
    prober_options.health = config.health;
    prober_options.kafka = kafka;
    prober = std::make_unique<Prober>(prober_options, store->get(), &registry_view, &health_view,
                                      probe_client.get(), health_producer.get(), &metrics,
                                      &SystemClock::Instance());
    registry.SetChangeListener([p = prober.get()](const std::vector<ProviderChange>& changes) {
      p->OnProvidersChanged(changes);
    });
  }
  if (auto status = registry_runner.Start(); !status) return Fail(status.error().message);
  if (auto status = health_runner.Start(); !status) return Fail(status.error().message);

  // Instances: the worker decides operations on its share of the roots (SPEC §3.3).
  http::HttpServiceProviderApi sp_api(config.instances.sp_timeout,
                                      http::HttpClientOptions{trust->outbound(), trust->sp_tls()});
  std::unique_ptr<http::HttpPolicyEngine> policy;
  if (!config.instances.policy_manager_url.empty()) {
    // Operator-configured: not filtered by the outbound policy, verified like SPs.
    policy = std::make_unique<http::HttpPolicyEngine>(
        config.instances.policy_manager_url, config.instances.policy_timeout,
        http::HttpClientOptions{nullptr, trust->sp_tls()});
    logger->info("msg=\"placement by the Policy Manager\" url={}",
                 config.instances.policy_manager_url);
  }
  std::unique_ptr<InstanceWorker> worker;
  if (config.instances.worker_enabled) {
    InstanceWorkerOptions worker_options;
    worker_options.requests_topic = config.topics.InstanceRequests();
    worker_options.instances_topic = config.topics.Instances();
    worker_options.dead_letter_topic = config.topics.DeadLetter();
    worker_options.group_id = config.topics.prefix + "instances";
    worker_options.source = "dcm/instance-worker/" + config.instance_id;
    worker_options.kafka = kafka;
    worker_options.cleanup_interval = config.instances.cleanup_interval;
    worker_options.cleanup_max_retries = config.instances.cleanup_max_retries;
    worker_options.threads = config.instances.worker_threads;
    worker_options.crash_after_fact = flags.crash_after_fact;
    worker = std::make_unique<InstanceWorker>(worker_options, store->get(), &instance_view,
                                              &registry_view, &health_view, &sp_api, policy.get(),
                                              producer->get(), &metrics, &SystemClock::Instance());
    instances.SetListener(
        [w = worker.get()](const std::vector<InstanceEvent>& facts) { w->OnFactsApplied(facts); });
  }
  if (auto status = instance_runner.Start(); !status) return Fail(status.error().message);
  if (auto status = sp_status_runner.Start(); !status) return Fail(status.error().message);
  if (auto status = audit_runner.Start(); !status) return Fail(status.error().message);
  if (worker) {
    if (auto status = worker->Start(); !status) return Fail(status.error().message);
  }

  RegistrarOptions registrar_options;
  registrar_options.requests_topic = config.topics.ProviderRequests();
  registrar_options.outcomes_topic = config.topics.Providers();
  registrar_options.dead_letter_topic = config.topics.DeadLetter();
  registrar_options.group_id = config.topics.prefix + "registrar";
  registrar_options.source = "dcm/registrar/" + config.instance_id;
  registrar_options.rules = provider_rules;
  registrar_options.instances_topic = config.topics.Instances();
  registrar_options.live_instances = [&instance_view](const std::string& provider_id) {
    return instance_view.LiveInstances(provider_id);
  };
  registrar_options.kafka = kafka;
  registrar_options.registry = &registry;  // answers without the registry runner's fetch hop
  Registrar registrar(registrar_options, store->get(), &registry_view, command_producer->get(),
                      &metrics, &SystemClock::Instance());
  if (auto status = registrar.Start(); !status) return Fail(status.error().message);
  if (prober) {
    if (auto status = prober->Start(); !status) return Fail(status.error().message);
  }

  KafkaCommandBus commands(command_producer->get(), &waiters, config.topics.ProviderRequests(),
                           config.topics.Providers(), config.decision_timeout,
                           &SystemClock::Instance(), &metrics);

  auto request_partitions =
      TopicPartitionCount(producer->get()->handle(), config.topics.InstanceRequests(), 10000);
  if (!request_partitions) return Fail(request_partitions.error().message);
  KafkaCommandBus instance_commands(producer->get(), &instance_waiters,
                                    config.topics.InstanceRequests(), config.topics.Instances(),
                                    operation_timeout, &SystemClock::Instance(), &metrics,
                                    *request_partitions);

  http::ApiContext api{&registry_view,
                       &health_view,
                       &commands,
                       &provider_rules,
                       &SystemClock::Instance(),
                       "dcm/http/" + config.instance_id,
                       &instance_view,
                       &instance_commands,
                       &audit_view,
                       FoldTopics{config.topics.Providers(), config.topics.Health(),
                                  config.topics.Instances(), config.topics.Status()}};
  http::OpsContext ops;
  ops.metrics = &metrics;
  ops.checks = {
      {"projection:registry",
       [&] { return registry_runner.CaughtUp() && registry_runner.Healthy(); }},
      {"projection:health", [&] { return health_runner.CaughtUp() && health_runner.Healthy(); }},
      {"registrar", [&] { return registrar.Healthy(); }},
      {"projection:instances",
       [&] { return instance_runner.CaughtUp() && instance_runner.Healthy(); }},
      {"projection:sp-status",
       [&] { return sp_status_runner.CaughtUp() && sp_status_runner.Healthy(); }},
      {"projection:audit", [&] { return audit_runner.CaughtUp() && audit_runner.Healthy(); }},
  };
  if (worker) {
    ops.checks.push_back(
        {"instance-worker", [&] { return worker->Healthy() && worker->Joined(); }});
  }
  if (prober) {
    ops.checks.push_back({"prober", [&] { return prober->Healthy() && prober->Joined(); }});
  }
  ops.info = http::AdminInfo{DCM_VERSION,
                             config.instance_id,
                             config.kafka_brokers,
                             config.dev,
                             {},
                             {"http", "registry", "registrar", "health", "instances", "audit"},
                             config.data_dir};
  for (const auto& t : topics) ops.info.topics.push_back(t.name);
  if (prober) ops.info.components.push_back("prober");
  if (worker) ops.info.components.push_back("instance-worker");
  ops.live_info = [&](JsonWriter& w) {
    w.Field("registrar_owner", registrar.IsOwner());
    w.Field("registry_lag", registry_runner.Lag());
    w.Field("registry_events_applied", static_cast<int64_t>(registry_runner.Applied()));
    w.Field("health_lag", health_runner.Lag());
    w.Field("instances_lag", instance_runner.Lag());
    w.Field("audit_lag", audit_runner.Lag());
    w.Field("policy", policy ? "policy_manager" : "builtin");
    w.Field("auth", trust->authenticator() ? trust->auth_mode() : "disabled");
    w.Field("api_tls", !config.tls.enabled()               ? "off"
                       : config.tls.client_ca_file.empty() ? "on"
                                                           : "on, client certificates");
    w.Field("outbound_policy", trust->outbound()->Describe());
    if (worker) {
      w.Field("sagas_in_flight", static_cast<int64_t>(worker->SagasInFlight()));
      w.Key("instance_partitions");
      w.BeginArray();
      for (int32_t p : worker->OwnedPartitions()) w.Int(p);
      w.EndArray();
    }
    if (prober) {
      w.Field("prober_providers", static_cast<int64_t>(prober->OwnedProviders()));
      w.Key("prober_partitions");
      w.BeginArray();
      for (int32_t p : prober->OwnedPartitions()) w.Int(p);
      w.EndArray();
    }
  };

  ops.projections = [&](JsonWriter& w) {
    auto describe = [&](const char* name, const char* prefix, const std::string& topic,
                        const ProjectionRunner& runner) {
      auto digest = (*store)->Digest(prefix);
      w.BeginObject();
      w.Field("name", name);
      w.Field("topic", topic);
      w.Field("digest", digest ? *digest : "error: " + digest.error().message);
      w.Field("applied", static_cast<int64_t>(runner.Applied()));
      w.Field("lag", runner.Lag());
      w.Field("caught_up", runner.CaughtUp());
      w.EndObject();
    };
    describe(RegistryProjection::kName, RegistryProjection::kPrefix, config.topics.Providers(),
             registry_runner);
    describe(HealthProjection::kName, HealthProjection::kPrefix, config.topics.Health(),
             health_runner);
    describe(InstanceProjection::kName, InstanceProjection::kPrefix, config.topics.Instances(),
             instance_runner);
    describe(SpStatusProjection::kName, SpStatusProjection::kPrefix, config.topics.Status(),
             sp_status_runner);
    describe(AuditProjection::kName, AuditProjection::kPrefix, "*", audit_runner);
  };

  http::ServerOptions server_options;
  server_options.threads =
      config.http_threads > 0 ? config.http_threads
                              : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  server_options.metrics = &metrics;
  server_options.tls_cert_file = config.tls.cert_file;
  server_options.tls_key_file = config.tls.key_file;
  server_options.tls_client_ca_file = config.tls.client_ca_file;
  auto server = http::HttpServer::Create(server_options);
  if (!server) return Fail(server.error().message);
  auto port = (*server)->Listen(
      config.listen, http::MakeRouter(api, ops,
                                      http::AccessContext{trust->authenticator(),
                                                          config.auth.metrics_public, &metrics}));
  if (!port) return Fail("--listen " + config.listen + ": " + port.error().message);
  const std::string host = config.listen.substr(0, config.listen.rfind(':'));

  printf("dcm serve listening on %s://%s:%u\n", config.tls.enabled() ? "https" : "http",
         host.c_str(), *port);
  printf("kafka bootstrap servers: %s\n", config.kafka_brokers.c_str());
  if (config.dev) {
    printf(
        "dev mode: events are held in memory by the embedded Kafka cluster and are lost on "
        "exit; data dir %s\n",
        config.data_dir.c_str());
  }
  fflush(stdout);
  logger->info("msg=\"serving\" listen={}:{} kafka={} data_dir={} dev={}", host, *port,
               config.kafka_brokers, config.data_dir, config.dev);

  int sig = 0;
  while ((sig = wait_for_signal()) == SIGHUP) {  // reload certificates and keys, keep serving
    logger->info("msg=\"SIGHUP: reloading the TLS certificate and the JWKS file\"");
    if (auto reloaded = (*server)->ReloadTls(); !reloaded) {
      logger->error("msg=\"TLS reload failed; still serving the old certificate\" error=\"{}\"",
                    reloaded.error().message);
    }
    if (auto reloaded = trust->Reload(); !reloaded) {
      logger->error("msg=\"JWKS reload failed; still using the old keys\" error=\"{}\"",
                    reloaded.error().message);
    }
  }
  logger->info("msg=\"shutting down\" signal={}", sig);
  (*server)->Stop();
  if (prober) prober->Stop();
  if (probe_client) probe_client->Stop();  // no probe completes into a stopped prober
  if (worker) worker->Stop();
  registrar.Stop();
  registry_runner.Stop();
  health_runner.Stop();
  instance_runner.Stop();
  sp_status_runner.Stop();
  audit_runner.Stop();
  for (Producer* p : {producer->get(), command_producer->get(), health_producer.get()}) {
    if (!p) continue;
    if (auto flushed = p->Flush(5000); !flushed) {
      logger->warn("msg=\"producer flush incomplete\" error=\"{}\"", flushed.error().message);
    }
  }
  if (!temp_dir.empty()) std::filesystem::remove_all(temp_dir, ec);
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

}  // namespace

void RegisterServeCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<ServeFlags>();
  Config& c = flags->config;
  CLI::App* cmd = app.add_subcommand("serve", "Run a control-plane instance");
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
  cmd->add_option("--partitions", c.partitions, "Partitions of entity topics created at start")
      ->envname("DCM_PARTITIONS")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--replication-factor", c.replication_factor,
                  "Replication factor of topics created at start (real brokers)")
      ->envname("DCM_REPLICATION_FACTOR")
      ->capture_default_str();
  cmd->add_option("--service-types", flags->service_types,
                  "Admin-predefined service types, comma-separated")
      ->envname("SERVICE_TYPES");
  cmd->add_option("--decision-timeout", flags->decision_timeout,
                  "How long a write waits for its outcome before answering 503")
      ->envname("DCM_DECISION_TIMEOUT")
      ->capture_default_str();
  cmd->add_option("--session-timeout-ms", c.group_session_timeout_ms,
                  "Consumer-group session timeout: registrar failover time")
      ->envname("DCM_SESSION_TIMEOUT_MS")
      ->check(CLI::Range(1000, 300000))
      ->capture_default_str();
  cmd->add_option("--fetch-wait-max-ms", c.fetch_wait_max_ms,
                  "Consumer long-poll; use 10 against the embedded mock cluster")
      ->envname("DCM_FETCH_WAIT_MAX_MS")
      ->check(CLI::Range(1, 5000))
      ->capture_default_str();
  cmd->add_option("--kafka-property", flags->kafka_properties,
                  "librdkafka property key=value for every Kafka client (repeatable; e.g. "
                  "security.protocol=SASL_SSL)")
      ->envname("DCM_KAFKA_PROPERTIES")
      ->delimiter(',');
  cmd->add_option("--http-threads", c.http_threads, "HTTP threads (0 = one per core)")
      ->envname("DCM_HTTP_THREADS")
      ->capture_default_str();
  cmd->add_option("--instance-id", c.instance_id, "Name of this instance (default host/pid)")
      ->envname("DCM_INSTANCE_ID");
  cmd->add_option("--health-check-interval", flags->health_interval,
                  "Between probes of one provider (jittered ±10%)")
      ->envname("HEALTH_CHECK_INTERVAL")
      ->capture_default_str();
  cmd->add_option("--health-check-timeout", flags->health_timeout, "One probe as a whole")
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
  cmd->add_option("--health-check-base-backoff-interval", flags->health_base_backoff,
                  "First probe delay once Unavailable; doubles per failure")
      ->envname("HEALTH_CHECK_BASE_BACKOFF_INTERVAL")
      ->capture_default_str();
  cmd->add_option("--health-check-max-backoff-interval", flags->health_max_backoff,
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
  cmd->add_flag("--health-check,!--no-health-check", c.health.enabled,
                "Probe providers from this instance (--no-health-check: only serve health states)")
      ->envname("HEALTH_CHECK_ENABLED");
  cmd->add_option("--operation-timeout", flags->operation_timeout,
                  "How long an instance operation (policy, SP calls) may take before 503")
      ->envname("DCM_OPERATION_TIMEOUT")
      ->capture_default_str();
  cmd->add_option("--cleanup-interval", flags->cleanup_interval,
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
  cmd->add_option("--policy-timeout", flags->policy_timeout, "One Policy Manager call")
      ->envname("DCM_POLICY_TIMEOUT")
      ->capture_default_str();
  cmd->add_option("--sp-timeout", flags->sp_timeout, "One SP create or delete call")
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
  cmd->add_option("--test-crash-after-fact", flags->crash_after_fact,
                  "Test hook: SIGKILL this process after emitting a fact of this type")
      ->envname("DCM_TEST_CRASH_AFTER_FACT")
      ->group("");  // hidden
  RegisterTrustBoundaryFlags(cmd, *flags);
  cmd->add_option("--log-level", c.log_level, "debug, info, warn or error")
      ->envname("DCM_LOG_LEVEL")
      ->capture_default_str();
  cmd->callback([flags, exit_code, cmd] {
    flags->data_dir_given = cmd->count("--data-dir") > 0;
    flags->fetch_wait_given = cmd->count("--fetch-wait-max-ms") > 0;
    *exit_code = RunServe(*flags);
  });
}

}  // namespace dcm::cli
