// The parts of one `dcm serve` (SPEC §2) and the factories that build them. BuildServeParts
// calls one small factory per piece, in this order; each adds its Component (components.h), so
// the pieces start in this order and stop in reverse:
//
//   data dir (a temporary one in --dev: removed at stop) ─▶ store
//   producer (flushed at stop)
//   projection runners, one per ProjectionCatalog entry (projections/projection_catalog.h)
//   probe client + its batched producer        (--health-check)
//   instance worker (policy, SP calls, cleanup) (--instance-worker)
//   registrar
//   prober                                      (--health-check)
//   federation: context, peer probe client + peer prober (SPEC §10; serve_federation.cc)
//   read barrier (consistent reads: waiting reads run on its thread)
//   Kafka monitor (the /readyz check `kafka`; writes answer 503 while Kafka is stalled)
//   command buses (provider and instance writes)
//   heavy-read pool (as_of, filtered scans off the I/O threads; stopped after the HTTP server)
//   HTTP server (API + ops: /readyz asks every component with a check)
//
// Kafka (the embedded mock in --dev, else the given cluster, topics ensured) and the trust
// boundary (SPEC §6) come first and have nothing to start.
//
// Lifetime: ServeParts owns everything; members are declared in construction order, so they are
// destroyed in reverse (the components, declared last, are stopped first). Not thread-safe:
// built, started and stopped on serve's main thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "consumers/command_bus.h"
#include "consumers/federation_worker.h"
#include "consumers/instance_worker.h"
#include "consumers/kafka_monitor.h"
#include "consumers/mock_cluster.h"
#include "consumers/peer_prober.h"
#include "consumers/prober.h"
#include "consumers/projection_runner.h"
#include "consumers/provider_loss.h"
#include "consumers/registrar.h"
#include "projections/applied_offsets.h"
#include "projections/audit_projection.h"
#include "projections/federation_capacity.h"
#include "projections/health_projection.h"
#include "projections/instance_projection.h"
#include "projections/outcome_waiters.h"
#include "projections/projection_catalog.h"
#include "projections/read_barrier.h"
#include "projections/registry_projection.h"
#include "src/cli/components.h"
#include "src/cli/trust_boundary.h"
#include "src/common/config.h"
#include "src/common/metrics.h"
#include "src/http/consistent_reads.h"
#include "src/http/federation_client.h"
#include "src/http/federation_handlers.h"
#include "src/http/federation_relay.h"
#include "src/http/heavy_reads.h"
#include "src/http/ops_handlers.h"
#include "src/http/placement_clients.h"
#include "src/http/probe_client.h"
#include "src/http/server.h"
#include "src/http/watch_handlers.h"
#include "src/http/watch_hub.h"

namespace dcm::cli {

// What serve's flags resolve to (src/cli/serve.cc).
struct ServeSettings {
  Config config;
  std::chrono::milliseconds operation_timeout{0};  // instance writes wait this long for outcomes
  std::string crash_after_fact;                    // test hook, see InstanceWorkerOptions
  std::vector<std::string> kafka_properties;       // librdkafka key=value, for every client
  bool temp_data_dir = false;                      // --dev without --data-dir
  // > 0: the long-poll to use when the brokers turn out to be librdkafka's mock (`dcm dev-kafka`,
  // which answers an empty fetch only after the whole wait); 0: keep the configured one.
  int mock_fetch_wait_ms = 0;
  // > 0: the registrar's long-poll on the mock, embedded or `dcm dev-kafka`
  // (MockFetchWaitOptions, consumers/kafka.h); 0: the same as every consumer's.
  int mock_registrar_fetch_wait_ms = 0;
  // > 0: the background folds' long-poll on the mock (ProjectionEntry::background; no write's
  // answer waits for them); 0: the same as every consumer's.
  int mock_background_fetch_wait_ms = 0;
};

// The read side every consumer and handler queries, over the one store.
struct Views {
  explicit Views(Store* store)
      : registry(store),
        health(store),
        peer_health(store, HealthProjection::kPeerPrefix),
        instances(store),
        audit(store),
        federation(store) {}
  RegistryView registry;
  HealthView health;
  HealthView peer_health;  // SPEC §10: the peer enclaves' records
  InstanceView instances;
  AuditView audit;
  FederationView federation;  // SPEC §10: the provider side's reservations and contracts
};

struct ServeParts {
  explicit ServeParts(ServeSettings s) : settings(std::move(s)), config(settings.config) {}

  ServeSettings settings;
  Config& config;  // settings.config, completed by the factories (brokers, data dir, id)
  std::unique_ptr<TrustBoundary> trust;
  ProviderRules provider_rules;
  std::unique_ptr<MockCluster> mock;
  bool on_mock = false;  // the brokers are librdkafka's mock: embedded, or `dcm dev-kafka`
  KafkaOptions kafka;
  std::unique_ptr<Store> store;
  std::unique_ptr<Producer> producer;
  std::unique_ptr<Producer> command_producer;  // provider and federation commands (SPEC §10)
  std::unique_ptr<Producer> outcome_producer;  // the registrar's outcomes (ProviderOutcomeOptions)
  Metrics metrics;
  OutcomeWaiters provider_waiters;
  OutcomeWaiters instance_waiters;
  OutcomeWaiters federation_waiters;  // peer API calls (SPEC §10), completed by `federation`
  AppliedOffsets applied_offsets;     // the runners' progress, for consumers that wait on it
  ProjectionSet projections;          // the catalog's, in its order
  std::vector<std::unique_ptr<ProjectionRunner>> runners;  // runners[i] folds projections[i]
  std::unique_ptr<Views> views;
  std::unique_ptr<Producer> health_producer;
  std::unique_ptr<http::ProbeClient> probe_client;
  std::unique_ptr<http::HttpServiceProviderApi> sp_api;
  std::unique_ptr<http::HttpFederationApi> federation_api;  // with FEDERATION_PEERS
  std::unique_ptr<http::HttpPolicyEngine> policy;           // null: the built-in placement policy
  std::unique_ptr<InstanceWorker> worker;
  std::unique_ptr<Registrar> registrar;
  std::unique_ptr<FederationWorker> federation_worker;  // null unless AddFederationDecider ran
  std::unique_ptr<ContractPlacer> contract_placer;      // the federation worker's
  std::unique_ptr<Prober> prober;
  std::unique_ptr<ProviderLoss> provider_loss;
  // Federation (SPEC §10, src/cli/serve_federation.cc): what the peer API reads, and the peers'
  // prober (with its own unfiltered probe client: peers are operator-configured).
  std::unique_ptr<http::FederationContext> federation;
  std::unique_ptr<FederationHolds> federation_holds;        // what GET /flavors subtracts
  std::unique_ptr<KafkaCommandBus> federation_commands;     // peer API -> federation-requests
  std::unique_ptr<http::FederationRelay> federation_relay;  // FEDERATION_FORWARD (a supernode)
  std::unique_ptr<http::ProbeClient> peer_probe_client;
  std::unique_ptr<PeerProber> peer_prober;
  std::unique_ptr<ReadBarrier> read_barrier;  // SPEC §7: what reads wait for
  std::unique_ptr<http::ConsistentReads> consistent_reads;
  std::unique_ptr<KafkaMonitor> kafka_monitor;
  std::unique_ptr<KafkaCommandBus> commands;
  std::unique_ptr<KafkaCommandBus> instance_commands;
  DescriptorBudget descriptors;  // from the open-files limit at build (SPEC §7)
  std::unique_ptr<http::HeavyReads> heavy_reads;
  std::unique_ptr<http::ApiContext> watch_api;  // what the watch hub's listers render with
  std::unique_ptr<http::WatchHub> watch_hub;    // SPEC §9
  std::unique_ptr<http::HttpServer> server;
  uint16_t port = 0;  // bound once the HTTP component started
  Components components;

  // The runner of the catalog entry `name` (it exists: every entry has one).
  const ProjectionRunner& Runner(std::string_view name) const;
};

// Builds every part and adds its component; nothing is started. The error is the one to print.
Status BuildServeParts(ServeParts& parts);

// SPEC §10, provider side (src/cli/serve_federation.cc): the FederationWorker that decides
// dcm.federation-requests in total order, and its sweeper, as the component "federation-decider".
// Call it from BuildServeParts, after AddProducers and before the components start, only when
// this enclave exports flavours (an enclave id and FEDERATION_EXPORT_SERVICE_TYPES are set):
// `capacity` is the flavour derivation's instances available before holds and contracts.
// `placer` (may be null) keeps the contracts' instances in step.
void AddFederationDecider(ServeParts& parts, FederationPolicy policy, FlavorCapacity capacity,
                          ContractPlacer* placer);

// Federation (SPEC §10): the federation context and, with peers and --health-check, the peer
// prober, which probes the peers whose dcm.health partition the prober group gave this instance
// (src/cli/serve_federation.cc). After the prober, before the HTTP server.
Status AddFederation(ServeParts& parts);

// The peer API's bus to dcm.federation-requests, in an enclave that exports flavours. After
// AddCommandBuses (it shares their write limits and Kafka monitor).
void AddFederationBus(ServeParts& parts);

// /healthz, /readyz, /metrics, /admin/info and /admin/projections over the parts
// (src/cli/serve_ops.cc).
http::OpsContext BuildOps(ServeParts& parts);

}  // namespace dcm::cli
