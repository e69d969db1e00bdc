// `dcm serve`: wires one control-plane instance together (SPEC §2) and runs it until SIGTERM.
//
//   Kafka (embedded mock with --dev, or --kafka-brokers)
//     dcm.provider-requests ─▶ Registrar (one owner per cluster) ─▶ dcm.providers
//     dcm.providers ─▶ ProjectionRunner ─▶ RegistryProjection (RocksDB) ─▶ RegistryView ─▶ HTTP
//   HTTP writes ─▶ KafkaCommandBus ─▶ dcm.provider-requests; reply when the outcome is applied.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "consumers/command_bus.h"
#include "consumers/mock_cluster.h"
#include "consumers/projection_runner.h"
#include "consumers/registrar.h"
#include "consumers/topic_admin.h"
#include "src/cli/commands.h"
#include "src/common/config.h"
#include "src/common/duration.h"
#include "src/common/log.h"
#include "src/http/router.h"
#include "src/http/server.h"

namespace dcm::cli {
namespace {

struct ServeFlags {
  Config config;
  std::string service_types;
  std::string decision_timeout = "10s";
  std::vector<std::string> kafka_properties;  // librdkafka key=value, for every client
  bool data_dir_given = false;
  bool fetch_wait_given = false;
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
  if (!flags.service_types.empty()) config.service_types = SplitList(flags.service_types);
  auto timeout = ParseGoDuration(flags.decision_timeout);
  if (!timeout) return Fail("--decision-timeout: " + timeout.error().message);
  config.decision_timeout = *timeout;
  if (auto status = ValidateConfig(config); !status) return Fail(status.error().message);

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
  for (const auto& property : flags.kafka_properties) {
    const auto eq = property.find('=');
    if (eq == std::string::npos || eq == 0) {
      return Fail("--kafka-property must be key=value, got '" + property + "'");
    }
    kafka.extra[property.substr(0, eq)] = property.substr(eq + 1);
  }
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

  Metrics metrics;
  OutcomeWaiters waiters;
  RegistryProjection registry(store->get(), &waiters, &metrics);
  RegistryView registry_view(store->get());
  ProjectionRunner registry_runner(
      RunnerOptions{config.topics.Providers(), config.topics.DeadLetter(), kafka}, store->get(),
      &registry, producer->get(), &metrics);
  if (auto status = registry_runner.Start(); !status) return Fail(status.error().message);

  RegistrarOptions registrar_options;
  registrar_options.requests_topic = config.topics.ProviderRequests();
  registrar_options.outcomes_topic = config.topics.Providers();
  registrar_options.dead_letter_topic = config.topics.DeadLetter();
  registrar_options.group_id = config.topics.prefix + "registrar";
  registrar_options.source = "dcm/registrar/" + config.instance_id;
  registrar_options.service_types = config.service_types;
  registrar_options.kafka = kafka;
  Registrar registrar(registrar_options, store->get(), &registry_view, producer->get(), &metrics,
                      &SystemClock::Instance());
  if (auto status = registrar.Start(); !status) return Fail(status.error().message);

  KafkaCommandBus commands(producer->get(), &waiters, config.topics.ProviderRequests(),
                           config.topics.Providers(), config.decision_timeout,
                           &SystemClock::Instance(), &metrics);

  http::ApiContext api{&registry_view, &commands, &config.service_types, &SystemClock::Instance(),
                       "dcm/http/" + config.instance_id};
  http::OpsContext ops;
  ops.metrics = &metrics;
  ops.checks = {
      {"projection:registry",
       [&] { return registry_runner.CaughtUp() && registry_runner.Healthy(); }},
      {"registrar", [&] { return registrar.Healthy(); }},
  };
  ops.info = http::AdminInfo{DCM_VERSION,
                             config.instance_id,
                             config.kafka_brokers,
                             config.dev,
                             {},
                             {"http", "registry", "registrar"},
                             config.data_dir};
  for (const auto& t : topics) ops.info.topics.push_back(t.name);
  ops.live_info = [&](JsonWriter& w) {
    w.Field("registrar_owner", registrar.IsOwner());
    w.Field("registry_lag", registry_runner.Lag());
    w.Field("registry_events_applied", static_cast<int64_t>(registry_runner.Applied()));
  };

  ops.projections = [&](JsonWriter& w) {
    auto digest = (*store)->Digest(RegistryProjection::kPrefix);
    w.BeginObject();
    w.Field("name", RegistryProjection::kName);
    w.Field("topic", config.topics.Providers());
    w.Field("digest", digest ? *digest : "error: " + digest.error().message);
    w.Field("applied", static_cast<int64_t>(registry_runner.Applied()));
    w.Field("lag", registry_runner.Lag());
    w.Field("caught_up", registry_runner.CaughtUp());
    w.EndObject();
  };

  http::ServerOptions server_options;
  server_options.threads =
      config.http_threads > 0 ? config.http_threads
                              : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  server_options.metrics = &metrics;
  auto server = http::HttpServer::Create(server_options);
  if (!server) return Fail(server.error().message);
  auto port = (*server)->Listen(config.listen, http::MakeRouter(api, ops));
  if (!port) return Fail("--listen " + config.listen + ": " + port.error().message);
  const std::string host = config.listen.substr(0, config.listen.rfind(':'));

  printf("dcm serve listening on http://%s:%u\n", host.c_str(), *port);
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

  const int sig = wait_for_signal();
  logger->info("msg=\"shutting down\" signal={}", sig);
  (*server)->Stop();
  registrar.Stop();
  registry_runner.Stop();
  if (auto flushed = (*producer)->Flush(5000); !flushed) {
    logger->warn("msg=\"producer flush incomplete\" error=\"{}\"", flushed.error().message);
  }
  if (!temp_dir.empty()) std::filesystem::remove_all(temp_dir, ec);
  return 0;
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
