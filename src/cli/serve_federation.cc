// The federation parts of `dcm serve` (SPEC §10): the context the peer API and /peers read, the
// peer prober (consumers/peer_prober.h), and, in an enclave that exports flavours, the provider
// side: the reservation decider (consumers/federation_worker.h) and the peer API's bus to it.
#include "consumers/topic_admin.h"
#include "src/cli/serve_parts.h"
#include "src/common/log.h"

namespace dcm::cli {
namespace {

// Whether every /readyz check passes: what GET /federation/v1alpha1/health tells peers.
std::function<bool()> AllReady(const Components* components) {
  return [components] {
    for (const auto& check : components->Checks()) {
      if (!check.ready()) return false;
    }
    return true;
  };
}

void AddFederationContext(ServeParts& parts) {
  const FederationConfig& f = parts.config.federation;
  auto ctx = std::make_unique<http::FederationContext>();
  ctx->flavors = FlavorOptions{f.enclave_id, f.export_service_types, f.price, f.flavor_ttl};
  ctx->peers = f.peers;
  ctx->registry = &parts.views->registry;
  ctx->health = &parts.views->health;
  ctx->instances = &parts.views->instances;
  ctx->peer_health = &parts.views->peer_health;
  ctx->reservations = &parts.views->federation;
  parts.federation_holds =
      std::make_unique<FederationHolds>(parts.store.get(), &parts.views->instances);
  ctx->holds = parts.federation_holds.get();
  ctx->source = "dcm/federation-api/" + parts.config.instance_id;
  ctx->clock = &SystemClock::Instance();
  ctx->ready = AllReady(&parts.components);
  parts.federation = std::move(ctx);
}

// Peers are operator-configured (SPEC §6): no outbound filter; TLS verified as for SPs, with the
// SP client certificate (if any) presented to peers too.
Status AddPeerProbeClient(ServeParts& parts) {
  http::ProbeClientOptions options;
  options.tls = parts.trust->sp_tls();
  options.max_idle_connections = parts.config.federation.peers.size();
  ASSIGN_OR_RETURN(parts.peer_probe_client, http::ProbeClient::Create(options));
  parts.components.Add(
      {.name = "peer-probe-client", .stop = [c = parts.peer_probe_client.get()] { c->Stop(); }});
  return OkStatus();
}

// How a contract's instance operation ended (the placer asks again while it is not done).
void LogContractOperation(Result<CloudEvent> outcome) {
  auto logger = Logger("contract-placer");
  if (!outcome) {
    return logger->warn("msg=\"contract instance operation not answered\" error=\"{}\"",
                        outcome.error().message);
  }
  auto decoded = DecodeInstanceEvent(*outcome);
  if (decoded && decoded->type == event_type::kOperationFailed) {
    logger->warn("msg=\"contract instance operation failed\" root={} reason={} error=\"{}\"",
                 decoded->root, decoded->reason, decoded->error);
  }
}

// Whether this enclave decides reservations: it exports flavours, or forwards (which reservation
// went to which peer is decided too).
bool Decides(const Config& config) {
  return !config.federation.export_service_types.empty() || config.federation.forward;
}

// FEDERATION_FORWARD: the supernode's relay, over the consumer side's peer client.
void AddRelay(ServeParts& parts) {
  const FederationConfig& f = parts.config.federation;
  http::FederationRelayOptions options;
  options.enclave_id = f.enclave_id;
  options.discovery_timeout = f.discovery_timeout;
  options.call_timeout = parts.config.instances.sp_timeout;
  parts.federation_relay = std::make_unique<http::FederationRelay>(
      options, parts.federation_api.get(), &parts.metrics, &SystemClock::Instance());
  parts.federation->forwarder = parts.federation_relay.get();
  parts.components.Add({.name = "federation-relay",
                        .start =
                            [r = parts.federation_relay.get()] {
                              r->Start();
                              return OkStatus();
                            },
                        .stop = [r = parts.federation_relay.get()] { r->Stop(); }});
}

// The reservation decider, its capacity read from the flavours (projections/flavors.h). Its
// request topic must have one partition: the total order is what keeps two buyers off one slot.
Status AddProviderSide(ServeParts& parts) {
  const FederationConfig& f = parts.config.federation;
  const std::string& requests = parts.config.topics.FederationRequests();
  ASSIGN_OR_RETURN(const int partitions,
                   TopicPartitionCount(parts.command_producer->handle(), requests, 10000));
  if (partitions != 1) {
    return MakeError(ErrorCode::kInvalidArgument,
                     requests + " has " + std::to_string(partitions) +
                         " partitions; the federation decider needs exactly 1 (its total order "
                         "keeps two peers off one slot): recreate it with one partition");
  }
  FederationPolicy policy;
  policy.enclave_id = f.enclave_id;
  policy.contract_ttl_ms = f.contract_ttl.count();
  FlavorSources sources{&parts.views->registry, &parts.views->health, &parts.views->instances,
                        parts.federation->flavors};
  const FederationState decided(parts.store.get(), FederationDecider::kRoot);
  parts.contract_placer = std::make_unique<ContractPlacer>(
      ContractPlacerOptions{.source = "dcm/federation/" + parts.config.instance_id,
                            .submit =
                                [&parts](const CloudEvent& request) {
                                  parts.instance_commands->Submit(request, LogContractOperation);
                                }},
      decided, &parts.views->instances, &parts.metrics);
  AddFederationDecider(parts, std::move(policy),
                       FlavorCapacityFrom(std::move(sources), decided, &SystemClock::Instance()),
                       parts.contract_placer.get());
  return OkStatus();
}

}  // namespace

void AddFederationBus(ServeParts& parts) {
  if (!Decides(parts.config)) return;
  const Config& config = parts.config;
  parts.federation_commands = std::make_unique<KafkaCommandBus>(
      parts.command_producer.get(), &parts.federation_waiters, config.topics.FederationRequests(),
      config.topics.Federation(),
      WriteLimits{config.decision_timeout, config.write_timeout,
                  [m = parts.kafka_monitor.get()] { return m->Ok(); }, true},
      &SystemClock::Instance(), &parts.metrics);
  parts.federation_commands->TrackAcknowledged(parts.read_barrier.get());
  parts.federation->requests = parts.federation_commands.get();
}

Status AddFederation(ServeParts& parts) {
  const Config& config = parts.config;
  AddFederationContext(parts);
  Logger("serve")->info(
      "msg=\"federation\" enclave_id={} peers={} exported_service_types={} forward={} "
      "repatriate={}",
      config.federation.enclave_id, config.federation.peers.size(),
      config.federation.export_service_types.size(), config.federation.forward,
      config.federation.repatriate);
  if (Decides(config)) RETURN_IF_ERROR(AddProviderSide(parts));
  if (config.federation.forward && parts.federation_api) AddRelay(parts);
  if (config.federation.peers.empty() || !parts.prober) return OkStatus();
  RETURN_IF_ERROR(AddPeerProbeClient(parts));
  PeerProberOptions options;
  options.peers = config.federation.peers;
  options.health_topic = config.topics.Health();
  options.probes_topic = config.topics.HealthProbes();
  options.source = "dcm/peer-prober/" + config.instance_id;
  options.health = config.health;
  ASSIGN_OR_RETURN(options.partitions, TopicPartitionCount(parts.health_producer->handle(),
                                                           options.health_topic, 10000));
  options.owned_partitions = [p = parts.prober.get()] { return p->OwnedPartitions(); };
  options.emit = [producer = parts.health_producer.get(), n = options.partitions](
                     const std::string& topic, const CloudEvent& event) {
    producer->Produce(
        topic, event.subject, EncodeCloudEvent(event), {},
        [](Result<KafkaPosition> delivered) {
          if (!delivered) {
            Logger("peer-prober")
                ->warn("msg=\"peer health event not delivered\" error=\"{}\"",
                       delivered.error().message);
          }
        },
        KeyPartition(event.subject, n));
  };
  parts.peer_prober = std::make_unique<PeerProber>(std::move(options), &parts.views->peer_health,
                                                   parts.peer_probe_client.get(), &parts.metrics,
                                                   &SystemClock::Instance());
  parts.components.Add({.name = "peer-prober",
                        .start =
                            [p = parts.peer_prober.get()] {
                              p->Start();
                              return OkStatus();
                            },
                        .stop = [p = parts.peer_prober.get()] { p->Stop(); }});
  return OkStatus();
}

void AddFederationDecider(ServeParts& parts, FederationPolicy policy, FlavorCapacity capacity,
                          ContractPlacer* placer) {
  const Config& config = parts.config;
  FederationWorkerOptions options;
  options.requests_topic = config.topics.FederationRequests();
  options.outcomes_topic = config.topics.Federation();
  options.dead_letter_topic = config.topics.DeadLetter();
  options.group_id = config.topics.prefix + "federation";
  options.source = "dcm/federation/" + config.instance_id;
  options.kafka = parts.kafka;
  options.policy = std::move(policy);
  options.capacity = std::move(capacity);
  options.placer = placer;
  // One request in flight, like the registrar's outcomes: a reservation's outcomes stay in order.
  parts.federation_worker =
      std::make_unique<FederationWorker>(options, parts.store.get(), parts.command_producer.get(),
                                         &parts.metrics, &SystemClock::Instance());
  parts.components.Add({.name = "federation-decider",
                        .start = [w = parts.federation_worker.get()] { return w->Start(); },
                        .stop = [w = parts.federation_worker.get()] { w->Stop(); },
                        .ready = [w = parts.federation_worker.get()] { return w->Healthy(); }});
}

}  // namespace dcm::cli
