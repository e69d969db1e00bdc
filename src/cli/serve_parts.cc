#include "src/cli/serve_parts.h"

#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "consumers/topic_admin.h"
#include "src/cli/commands.h"
#include "src/common/log.h"
#include "src/http/router.h"
#include "src/http/ui_handlers.h"

namespace dcm::cli {
namespace {

std::shared_ptr<spdlog::logger> ServeLogger() {
  static auto logger = Logger("serve");
  return logger;
}

Status SetUpTrustBoundary(ServeParts& parts) {
  const Config& config = parts.config;
  ASSIGN_OR_RETURN(parts.trust, TrustBoundary::Create(config, &SystemClock::Instance()));
  auto logger = ServeLogger();
  if (!parts.trust->authenticator()) {
    if (config.dev) {
      logger->warn("msg=\"dev mode: authentication is off; every caller acts as anonymous\"");
    } else {
      logger->warn(
          "msg=\"AUTH_DISABLED=true: authentication is off; anyone who reaches {} can register, "
          "delete and rehydrate\"",
          config.listen);
    }
  } else {
    logger->info("msg=\"authentication\" mode=\"{}\"", parts.trust->auth_mode());
  }
  logger->info("msg=\"outbound policy\" {}", parts.trust->outbound()->Describe());
  parts.provider_rules = ProviderRules(config.service_types);
  parts.provider_rules.refuse_endpoint_host = [outbound =
                                                   parts.trust->outbound()](std::string_view host) {
    return outbound->CheckLiteralHost(host);
  };
  return OkStatus();
}

// Kafka: the embedded mock in dev mode (its topics created), else the given cluster (topics
// ensured).
Status SetUpKafka(ServeParts& parts) {
  Config& config = parts.config;
  const auto topics = ProjectTopics(config);
  if (config.dev && config.kafka_brokers.empty()) {
    ASSIGN_OR_RETURN(parts.mock, MockCluster::Create(1));
    RETURN_IF_ERROR(parts.mock->CreateTopics(topics));
    config.kafka_brokers = parts.mock->bootstrap();
  }
  if (config.instance_id.empty()) {
    char host[256] = "localhost";
    gethostname(host, sizeof(host) - 1);
    config.instance_id = std::string(host) + "/" + std::to_string(getpid());
  }
  KafkaOptions& kafka = parts.kafka;
  kafka.brokers = config.kafka_brokers;
  kafka.client_id = "dcm-" + config.instance_id;
  kafka.fetch_wait_max_ms = config.fetch_wait_max_ms;
  kafka.session_timeout_ms = config.group_session_timeout_ms;
  if (auto error = AddKafkaProperties(parts.settings.kafka_properties, kafka.extra)) {
    return MakeError(ErrorCode::kInvalidArgument, *error);
  }
  if (parts.mock) return OkStatus();
  return EnsureTopics(kafka, topics, config.topics.ProviderRequests(), config.replication_factor);
}

// The data dir (in --dev without --data-dir a fresh temporary one, removed at stop) and the
// store in it.
Status AddStore(ServeParts& parts) {
  Config& config = parts.config;
  if (parts.settings.temp_data_dir) {
    char pattern[] = "/tmp/dcm-dev-XXXXXX";
    if (!mkdtemp(pattern))
      return MakeError(ErrorCode::kInternal, "cannot create a temporary data dir");
    config.data_dir = pattern;
    parts.components.Add({.name = "temp-data-dir", .stop = [dir = config.data_dir] {
                            std::error_code ec;
                            std::filesystem::remove_all(dir, ec);
                          }});
  }
  std::error_code ec;
  std::filesystem::create_directories(config.data_dir, ec);
  if (ec) {
    return MakeError(ErrorCode::kInternal,
                     "cannot create data dir " + config.data_dir + ": " + ec.message());
  }
  ASSIGN_OR_RETURN(parts.store, Store::Open(config.data_dir + "/state",
                                            StoreOptions{.min_free_bytes = static_cast<uint64_t>(
                                                             config.min_free_disk_mb << 20)}));
  parts.views = std::make_unique<Views>(parts.store.get());
  // Not ready while the disk is below the reserve, a write failed, or a file is corrupt.
  parts.components.Add(
      {.name = "store", .ready = [s = parts.store.get()] { return !s->Problem().has_value(); }});
  return OkStatus();
}

void FlushAtStop(ServeParts& parts, const char* name, Producer* producer) {
  parts.components.Add({.name = name, .stop = [producer] {
                          if (auto flushed = producer->Flush(5000); !flushed) {
                            ServeLogger()->warn("msg=\"producer flush incomplete\" error=\"{}\"",
                                                flushed.error().message);
                          }
                        }});
}

// The shared producer, one for provider commands (HTTP requests) and one for the registrar's
// outcomes (consumers/kafka.h ProviderCommandOptions, ProviderOutcomeOptions).
Status AddProducers(ServeParts& parts) {
  ASSIGN_OR_RETURN(parts.producer, Producer::Create(parts.kafka));
  FlushAtStop(parts, "producer", parts.producer.get());
  ASSIGN_OR_RETURN(parts.command_producer, Producer::Create(ProviderCommandOptions(parts.kafka)));
  FlushAtStop(parts, "command-producer", parts.command_producer.get());
  ASSIGN_OR_RETURN(parts.outcome_producer, Producer::Create(ProviderOutcomeOptions(parts.kafka)));
  FlushAtStop(parts, "outcome-producer", parts.outcome_producer.get());
  // `dcm dev-kafka` is the mock too, in another process: the same short long-poll as --dev.
  parts.on_mock = parts.mock != nullptr;
  if (!parts.mock && parts.settings.mock_fetch_wait_ms > 0 &&
      IsMockCluster(parts.producer->handle(), 5000)) {
    parts.on_mock = true;
    parts.kafka.fetch_wait_max_ms = parts.settings.mock_fetch_wait_ms;
  }
  // Every consumer made from here on pauses while idle (the producers above ignore it).
  if (parts.on_mock) parts.kafka.idle_pause_ms = parts.config.mock_idle_pause_ms;
  return OkStatus();
}

// One runner per catalog entry, each a component with the readiness check projection:NAME.
void AddProjections(ServeParts& parts) {
  const Topics& topics = parts.config.topics;
  parts.projections = BuildProjections(
      ProjectionCatalog(topics),
      ProjectionDeps{.store = parts.store.get(),
                     .topics = &topics,
                     .metrics = &parts.metrics,
                     .provider_waiters = &parts.provider_waiters,
                     .instance_waiters = &parts.instance_waiters,
                     .federation_waiters = &parts.federation_waiters,
                     .health_events_retention = parts.config.health_events_retention,
                     .clock = &SystemClock::Instance()});
  for (size_t i = 0; i < parts.projections.entries.size(); ++i) {
    const ProjectionEntry& entry = parts.projections.entries[i];
    RunnerOptions options{entry.topics.front(), topics.DeadLetter(), parts.kafka};
    options.kafka.take_deliveries = entry.take_deliveries;
    options.applied = &parts.applied_offsets;
    options.more_topics.assign(entry.topics.begin() + 1, entry.topics.end());
    options.expiring_topics = {topics.HealthProbes()};
    if (entry.background) {
      options.nice = parts.config.background_fold_nice;
      options.kafka = MockFetchWaitOptions(options.kafka, parts.on_mock,
                                           parts.settings.mock_background_fetch_wait_ms);
    }
    auto& runner = parts.runners.emplace_back(std::make_unique<ProjectionRunner>(
        options, parts.store.get(), parts.projections.projections[i].get(), parts.producer.get(),
        &parts.metrics));
    parts.components.Add({.name = "projection:" + entry.name,
                          .start = [r = runner.get()] { return r->Start(); },
                          .stop = [r = runner.get()] { r->Stop(); },
                          .ready =
                              [r = runner.get(), accept = parts.config.accept_retention_gaps] {
                                return r->CaughtUp() && r->Healthy() &&
                                       (accept || r->Gaps().Empty());
                              },
                          .detail = [r = runner.get()] { return r->Gaps().Describe(); }});
  }
}

// The prober's HTTP client and its producer. Probe events need no millisecond latency (no answer
// waits for one): 100 ms of linger batches thousands of events a second into ten requests, so
// the three readers of the probes topic fetch ten larger message sets a second per partition
// instead of forty small ones (BENCHMARKS.md, session 21: 0.89x CPU per registration).
Status AddProbeClient(ServeParts& parts) {
  if (!parts.config.health.enabled) return OkStatus();
  KafkaOptions batched = parts.kafka;
  batched.extra.emplace("linger.ms", "100");
  ASSIGN_OR_RETURN(parts.health_producer, Producer::Create(batched));
  FlushAtStop(parts, "health-producer", parts.health_producer.get());
  http::ProbeClientOptions options;
  options.outbound = parts.trust->outbound();
  options.tls = parts.trust->sp_tls();
  options.max_tls_handshakes = static_cast<size_t>(parts.config.health.max_tls_handshakes);
  options.max_idle_connections = parts.descriptors.probe_idle;
  ASSIGN_OR_RETURN(parts.probe_client, http::ProbeClient::Create(options));
  // Stopped after the prober (components stop in reverse): no probe completes into a stopped
  // prober.
  parts.components.Add(
      {.name = "probe-client", .stop = [c = parts.probe_client.get()] { c->Stop(); }});
  return OkStatus();
}

// The SP and Policy Manager clients the instance worker places with.
void AddPlacementClients(ServeParts& parts) {
  const auto& instances = parts.config.instances;
  const auto& trust = *parts.trust;
  parts.sp_api = std::make_unique<http::HttpServiceProviderApi>(
      instances.sp_timeout, http::HttpClientOptions{trust.outbound(), trust.sp_tls()});
  if (!parts.config.federation.peers.empty()) {
    // Peers are operator-configured (SPEC §6): no outbound filter; TLS verified as for SPs.
    parts.federation_api = std::make_unique<http::HttpFederationApi>(
        parts.config.federation.enclave_id, parts.config.federation.peers,
        [v = parts.views.get()](const std::string& peer) {
          auto health = v->peer_health.Get(peer);
          const HealthRecord* record = health && *health ? &**health : nullptr;
          return EffectiveHealthStatus(record, 0) == HealthStatus::kReady;
        },
        instances.sp_timeout, http::HttpClientOptions{nullptr, trust.sp_tls()});
  }
  if (instances.policy_manager_url.empty()) return;
  // Operator-configured: not filtered by the outbound policy, verified like SPs.
  parts.policy = std::make_unique<http::HttpPolicyEngine>(
      instances.policy_manager_url, instances.policy_timeout,
      http::HttpClientOptions{nullptr, trust.sp_tls()});
  ServeLogger()->info("msg=\"placement by the Policy Manager\" url={}",
                      instances.policy_manager_url);
}

// Instances: the worker decides operations on its share of the roots (SPEC §3.3); it waits on the
// runners' applied offsets only when it takes partitions over.
void AddInstanceWorker(ServeParts& parts) {
  const Config& config = parts.config;
  if (!config.instances.worker_enabled) return;
  InstanceWorkerOptions options;
  options.requests_topic = config.topics.InstanceRequests();
  options.instances_topic = config.topics.Instances();
  options.dead_letter_topic = config.topics.DeadLetter();
  options.group_id = config.topics.prefix + "instances";
  options.source = "dcm/instance-worker/" + config.instance_id;
  options.kafka = parts.kafka;
  options.cleanup_interval = config.instances.cleanup_interval;
  options.cleanup_max_retries = config.instances.cleanup_max_retries;
  options.threads = config.instances.worker_threads;
  options.crash_after_fact = parts.settings.crash_after_fact;
  options.federation = parts.federation_api.get();
  options.discovery_timeout = config.federation.discovery_timeout;
  options.hold_ttl = config.federation.hold_ttl;
  options.rehydrate_on_loss = config.instances.rehydrate_on_provider_loss;
  options.repatriate = config.federation.repatriate;
  const Views& v = *parts.views;
  parts.worker = std::make_unique<InstanceWorker>(
      options, parts.store.get(), &parts.applied_offsets, &v.instances, &v.registry, &v.health,
      parts.sp_api.get(), parts.policy.get(), parts.producer.get(), &parts.metrics,
      &SystemClock::Instance());
  parts.components.Add({.name = "instance-worker",
                        .start = [w = parts.worker.get()] { return w->Start(); },
                        .stop = [w = parts.worker.get()] { w->Stop(); },
                        .ready = [w = parts.worker.get()] { return w->Healthy() && w->Joined(); }});
}

void AddRegistrar(ServeParts& parts) {
  const Config& config = parts.config;
  RegistrarOptions options;
  options.requests_topic = config.topics.ProviderRequests();
  options.outcomes_topic = config.topics.Providers();
  options.dead_letter_topic = config.topics.DeadLetter();
  options.group_id = config.topics.prefix + "registrar";
  options.source = "dcm/registrar/" + config.instance_id;
  options.rules = parts.provider_rules;
  options.instances_topic = config.topics.Instances();
  options.live_instances = [v = parts.views.get()](const std::string& provider_id) {
    return v->instances.LiveInstances(provider_id);
  };
  // Its own short long-poll on the mock (~5 % of a core more while idle;
  // kMockRegistrarFetchWaitMs).
  options.kafka =
      MockFetchWaitOptions(parts.kafka, parts.on_mock, parts.settings.mock_registrar_fetch_wait_ms);
  options.applied = &parts.applied_offsets;
  options.take_deliveries = parts.on_mock;
  // Answers without the registry runner's fetch hop (RegistrarOptions::registry).
  options.registry = parts.projections.Find<RegistryProjection>(RegistryProjection::kName);
  parts.registrar = std::make_unique<Registrar>(options, parts.store.get(), &parts.views->registry,
                                                parts.outcome_producer.get(), &parts.metrics,
                                                &SystemClock::Instance());
  parts.components.Add(
      {.name = "registrar",
       .start = [r = parts.registrar.get()] { return r->Start(); },
       .stop = [r = parts.registrar.get()] { r->Stop(); },
       .ready = [r = parts.registrar.get()] { return r->Healthy() && r->Joined(); },
       .detail = [r = parts.registrar.get()] { return r->Gaps().Describe(); }});
}

// The prober probes its group-assigned share of the providers and follows the registry's
// changes (the listener is set before the registry runner starts).
void AddProber(ServeParts& parts) {
  const Config& config = parts.config;
  if (!config.health.enabled) return;
  ProberOptions options;
  options.health_topic = config.topics.Health();
  options.probes_topic = config.topics.HealthProbes();
  options.group_id = config.topics.prefix + "prober";
  options.source = "dcm/prober/" + config.instance_id;
  options.health = config.health;
  options.heartbeat = {config.health.heartbeat_timeout, config.health.heartbeat_record_every,
                       config.health.provider_gc_after};
  options.requests_topic = config.topics.ProviderRequests();
  options.kafka = parts.kafka;
  options.applied = &parts.applied_offsets;
  parts.prober = std::make_unique<Prober>(options, parts.store.get(), &parts.views->registry,
                                          &parts.views->health, parts.probe_client.get(),
                                          parts.health_producer.get(), &parts.metrics,
                                          &SystemClock::Instance());
  parts.projections.Find<RegistryProjection>(RegistryProjection::kName)
      ->AddChangeListener([p = parts.prober.get()](const std::vector<ProviderChange>& changes) {
        p->OnProvidersChanged(changes);
      });
  parts.components.Add({.name = "prober",
                        .start = [p = parts.prober.get()] { return p->Start(); },
                        .stop = [p = parts.prober.get()] { p->Stop(); },
                        .ready = [p = parts.prober.get()] { return p->Healthy() && p->Joined(); }});
}

http::ApiContext BuildApi(const ServeParts& parts);

// Watch streams (SPEC §9): the hub hears the audit index's commits (its feed) and every other
// projection's progress (the applied-offsets observer, in AddReadBarrier). Stopped after the
// HTTP server (components stop in reverse), which first detaches every stream.
void AddWatchHub(ServeParts& parts) {
  const LimitsConfig& limits = parts.config.limits;
  parts.watch_api = std::make_unique<http::ApiContext>(BuildApi(parts));
  const http::ApiContext& api = *parts.watch_api;
  http::WatchSources sources{
      .audit = &parts.views->audit,
      .audit_lag = [r = &parts.Runner(AuditProjection::kName)] { return r->Lag(); },
      .listers = {http::ProviderLister(api), http::CatalogItemInstanceLister(api),
                  http::CleanupQueueLister(api)},
      .clock = &SystemClock::Instance()};
  parts.watch_hub = std::make_unique<http::WatchHub>(
      http::WatchOptions{.max_streams = limits.watch_max_streams,
                         .buffer_bytes = limits.watch_buffer_bytes,
                         .settle = limits.watch_settle,
                         .stall_timeout = limits.watch_stall_timeout},
      std::move(sources), &parts.metrics);
  parts.projections.Find<AuditProjection>(AuditProjection::kName)
      ->SetFeed([hub = parts.watch_hub.get()](
                    std::vector<IndexedEvent> indexed) { hub->Indexed(std::move(indexed)); },
                [hub = parts.watch_hub.get()](int64_t newest_ms) {
                  return hub->WantsIndexed(newest_ms);
                });
  parts.components.Add({.name = "watch-hub",
                        .start =
                            [h = parts.watch_hub.get()] {
                              h->Start();
                              return OkStatus();
                            },
                        .stop = [h = parts.watch_hub.get()] { h->Stop(); }});
}

// Consistent reads (SPEC §7): the barrier hears every batch the runners apply (set before they
// start) and the command buses' acknowledged writes; its thread runs the reads that waited.
void AddReadBarrier(ServeParts& parts) {
  const Topics& topics = parts.config.topics;
  std::vector<ReadBarrier::ProjectionTopics> projections;
  for (const ProjectionEntry& entry : parts.projections.entries) {
    // The projections whose outcomes complete this instance's writes (read_barrier.h).
    std::string completes;
    if (entry.name == RegistryProjection::kName) completes = topics.Providers();
    if (entry.name == InstanceProjection::kName) completes = topics.Instances();
    projections.push_back({entry.name, entry.topics, completes});
  }
  parts.read_barrier =
      std::make_unique<ReadBarrier>(topics.EventTopics(), std::move(projections),
                                    &SystemClock::Instance(), parts.config.read_wait);
  parts.applied_offsets.SetObserver([b = parts.read_barrier.get(), hub = parts.watch_hub.get()](
                                        const std::string& projection, const std::string& topic,
                                        int32_t partition, int64_t next) {
    b->Applied(projection, topic, partition, next);
    if (projection == RegistryProjection::kName || projection == HealthProjection::kName) {
      hub->Changed(http::WatchKind::kProviders);
    } else if (projection == InstanceProjection::kName) {
      hub->Changed(http::WatchKind::kCatalogItemInstances);
      hub->Changed(http::WatchKind::kCleanupQueue);
    }
  });
  parts.consistent_reads = std::make_unique<http::ConsistentReads>(parts.read_barrier.get());
  parts.components.Add({.name = "read-barrier",
                        .start =
                            [b = parts.read_barrier.get()] {
                              b->Start();
                              return OkStatus();
                            },
                        .stop = [b = parts.read_barrier.get()] { b->Stop(); }});
}

// Whether Kafka answers (SPEC §7): its producers' oldest unacknowledged produce, and a metadata
// probe every 2 s. The /readyz check `kafka`; a stalled Kafka fails waiting writes at once.
void AddKafkaMonitor(ServeParts& parts) {
  std::vector<const Producer*> watched = {parts.command_producer.get(),
                                          parts.outcome_producer.get(), parts.producer.get()};
  if (parts.health_producer) watched.push_back(parts.health_producer.get());
  KafkaMonitorOptions options;
  options.stall_after = std::max(std::chrono::milliseconds(1000), parts.config.write_timeout / 2);
  parts.kafka_monitor = std::make_unique<KafkaMonitor>(std::move(watched), options, &parts.metrics);
  parts.components.Add({.name = "kafka",
                        .start =
                            [m = parts.kafka_monitor.get()] {
                              m->Start();
                              return OkStatus();
                            },
                        .stop = [m = parts.kafka_monitor.get()] { m->Stop(); },
                        .ready = [m = parts.kafka_monitor.get()] { return m->Ok(); }});
}

// HTTP writes go to the request topics and answer once their outcome is applied here, or 503
// within --write-timeout when Kafka does not answer.
Status AddCommandBuses(ServeParts& parts) {
  const Config& config = parts.config;
  Producer* producer = parts.producer.get();
  // Provider writes answer within --write-timeout whatever holds them up; instance writes wait
  // for their saga (--operation-timeout) unless Kafka holds them up.
  auto limits = [&parts](std::chrono::milliseconds outcome_timeout, bool bound_outcome) {
    return WriteLimits{outcome_timeout, parts.config.write_timeout,
                       [m = parts.kafka_monitor.get()] { return m->Ok(); }, bound_outcome};
  };
  parts.commands = std::make_unique<KafkaCommandBus>(
      parts.command_producer.get(), &parts.provider_waiters, config.topics.ProviderRequests(),
      config.topics.Providers(), limits(config.decision_timeout, true), &SystemClock::Instance(),
      &parts.metrics);
  ASSIGN_OR_RETURN(
      auto request_partitions,
      TopicPartitionCount(producer->handle(), config.topics.InstanceRequests(), 10000));
  parts.instance_commands = std::make_unique<KafkaCommandBus>(
      producer, &parts.instance_waiters, config.topics.InstanceRequests(),
      config.topics.Instances(), limits(parts.settings.operation_timeout, false),
      &SystemClock::Instance(), &parts.metrics, request_partitions);
  parts.commands->TrackAcknowledged(parts.read_barrier.get());
  parts.instance_commands->TrackAcknowledged(parts.read_barrier.get());
  return OkStatus();
}

// A provider that expires or is force-deleted takes its live resources with it (SPEC §8): every
// instance asks for their recovery (the listener is added before the registry runner starts).
Status AddProviderLoss(ServeParts& parts) {
  const Config& config = parts.config;
  ProviderLossOptions options;
  options.requests_topic = config.topics.InstanceRequests();
  ASSIGN_OR_RETURN(options.partitions,
                   TopicPartitionCount(parts.producer->handle(), options.requests_topic, 10000));
  options.rehydrate = config.instances.rehydrate_on_provider_loss;
  options.source = "dcm/provider-loss/" + config.instance_id;
  parts.provider_loss =
      std::make_unique<ProviderLoss>(options, &parts.views->instances, parts.producer.get(),
                                     &parts.metrics, &SystemClock::Instance());
  parts.projections.Find<RegistryProjection>(RegistryProjection::kName)
      ->AddChangeListener([p = parts.provider_loss.get()](const std::vector<ProviderChange>& c) {
        p->OnChanged(c);
      });
  return OkStatus();
}

http::ApiContext BuildApi(const ServeParts& parts) {
  const Views& v = *parts.views;
  http::ApiContext api{&v.registry,
                       &v.health,
                       parts.commands.get(),
                       &parts.provider_rules,
                       &SystemClock::Instance(),
                       "dcm/http/" + parts.config.instance_id,
                       &v.instances,
                       parts.instance_commands.get(),
                       &v.audit,
                       parts.config.topics};
  api.consistency = parts.consistent_reads.get();
  api.heavy_reads = parts.heavy_reads.get();
  api.watches = parts.watch_hub.get();
  api.federation = parts.federation.get();
  if (parts.prober) {
    api.heartbeat = [p = parts.prober.get()](const Provider& provider, BeatResult result) {
      return p->Beat(provider, result);
    };
  }
  return api;
}

// How the descriptors are shared: the open-files limit (raised to the hard one at start) split
// between a reserve, the prober and the API (SPEC §7: no EMFILE).
void SplitOpenFiles(ServeParts& parts) {
  rlimit limit{};
  uint64_t nofile = 1024;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    nofile = limit.rlim_cur == RLIM_INFINITY ? (1u << 20) : static_cast<uint64_t>(limit.rlim_cur);
  }
  const auto& health = parts.config.health;
  parts.descriptors = SplitDescriptors(
      nofile, health.enabled, static_cast<uint64_t>(health.max_in_flight), http::kRefusalSlots);
}

// Heavy reads run on their own pool, stopped after the HTTP server (components stop in
// reverse).
Status AddHeavyReads(ServeParts& parts) {
  const LimitsConfig& limits = parts.config.limits;
  http::HeavyReadOptions options;
  options.threads = limits.heavy_read_threads > 0
                        ? limits.heavy_read_threads
                        : static_cast<int>(std::max(1u, std::thread::hardware_concurrency() / 2));
  options.queue = limits.heavy_read_queue;
  options.timeout = limits.heavy_read_timeout;
  options.metrics = &parts.metrics;
  ASSIGN_OR_RETURN(parts.heavy_reads, http::HeavyReads::Start(options));
  parts.components.Add(
      {.name = "heavy-reads", .stop = [p = parts.heavy_reads.get()] { p->Stop(); }});
  return OkStatus();
}

// --max-connections, lowered to what the descriptors leave the API.
size_t ConnectionCap(const ServeParts& parts) {
  const DescriptorBudget& d = parts.descriptors;
  const size_t wanted = parts.config.limits.max_connections;
  const size_t cap = std::min<uint64_t>(wanted, d.api);
  auto log = ServeLogger();
  log->info(
      "msg=\"descriptors\" nofile={} reserve={} probe_idle={} probe_in_flight={} api={} "
      "max_connections={} max_connections_per_client={}",
      d.nofile, d.reserve, d.probe_idle, d.probe_in_flight, d.api, cap,
      parts.config.limits.max_connections_per_client);
  if (cap < wanted) {
    log->warn(
        "msg=\"--max-connections lowered to what the open-files limit leaves the API; raise the "
        "hard limit (ulimit -Hn, LimitNOFILE=) to allow more\" wanted={} cap={} nofile={}",
        wanted, cap, d.nofile);
  }
  return cap;
}

// The API and ops server; started last, so /readyz asks every other component.
Status AddHttpServer(ServeParts& parts) {
  const Config& config = parts.config;
  http::ServerOptions options;
  options.threads = config.http_threads > 0
                        ? config.http_threads
                        : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  options.metrics = &parts.metrics;
  options.tls_cert_file = config.tls.cert_file;
  options.tls_key_file = config.tls.key_file;
  options.tls_client_ca_file = config.tls.client_ca_file;
  options.max_connections = ConnectionCap(parts);
  options.max_connections_per_client = config.limits.max_connections_per_client;
  ASSIGN_OR_RETURN(parts.server, http::HttpServer::Create(options));
  // The console (SPEC §9) in front of the API: its static files need no credentials.
  auto handler = http::WithConsole(
      http::MakeRouter(BuildApi(parts), BuildOps(parts),
                       http::AccessContext{parts.trust->authenticator(), config.auth.metrics_public,
                                           &parts.metrics}));
  parts.components.Add({.name = "http",
                        .start = [&parts, handler = std::move(handler)]() -> Status {
                          auto port = parts.server->Listen(parts.config.listen, handler);
                          if (!port) {
                            return MakeError(port.error().code, "--listen " + parts.config.listen +
                                                                    ": " + port.error().message);
                          }
                          parts.port = *port;
                          return OkStatus();
                        },
                        .stop = [s = parts.server.get()] { s->Stop(); }});
  return OkStatus();
}

}  // namespace

const ProjectionRunner& ServeParts::Runner(std::string_view name) const {
  for (size_t i = 0; i < projections.entries.size(); ++i) {
    if (projections.entries[i].name == name) return *runners[i];
  }
  std::abort();  // a broken invariant: every catalog entry has a runner
}

Status BuildServeParts(ServeParts& parts) {
  SplitOpenFiles(parts);
  RETURN_IF_ERROR(SetUpTrustBoundary(parts));
  RETURN_IF_ERROR(SetUpKafka(parts));
  RETURN_IF_ERROR(AddStore(parts));
  RETURN_IF_ERROR(AddProducers(parts));
  AddProjections(parts);
  RETURN_IF_ERROR(AddProbeClient(parts));
  AddPlacementClients(parts);
  AddInstanceWorker(parts);
  AddRegistrar(parts);
  AddProber(parts);
  RETURN_IF_ERROR(AddFederation(parts));
  AddWatchHub(parts);
  AddReadBarrier(parts);
  AddKafkaMonitor(parts);
  RETURN_IF_ERROR(AddCommandBuses(parts));
  AddFederationBus(parts);
  RETURN_IF_ERROR(AddProviderLoss(parts));
  RETURN_IF_ERROR(AddHeavyReads(parts));
  return AddHttpServer(parts);
}

}  // namespace dcm::cli
