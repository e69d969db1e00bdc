// The ops endpoints of `dcm serve` over its parts (SPEC §3.5): readiness from the components,
// /admin/info, and /admin/projections from the ProjectionCatalog.
#include "consumers/topic_admin.h"
#include "src/cli/serve_parts.h"

namespace dcm::cli {
namespace {

http::AdminInfo BuildAdminInfo(const ServeParts& parts) {
  const Config& config = parts.config;
  http::AdminInfo info{DCM_VERSION,
                       config.instance_id,
                       config.kafka_brokers,
                       config.dev,
                       {},
                       {"http", "registry", "registrar", "health", "instances", "audit"},
                       config.data_dir};
  for (const auto& t : ProjectTopics(config)) info.topics.push_back(t.name);
  if (parts.prober) info.components.push_back("prober");
  if (parts.worker) info.components.push_back("instance-worker");
  return info;
}

void WritePartitions(JsonWriter& w, const char* key, const std::vector<int32_t>& partitions) {
  w.Key(key);
  w.BeginArray();
  for (int32_t p : partitions) w.Int(p);
  w.EndArray();
}

// Live facts of /admin/info. The per-projection lags here predate /admin/projections, which has
// every projection's.
void WriteLiveInfo(const ServeParts& parts, JsonWriter& w) {
  const Config& config = parts.config;
  const auto& registry = parts.Runner(RegistryProjection::kName);
  w.Field("registrar_owner", parts.registrar->IsOwner());
  w.Field("registry_lag", registry.Lag());
  w.Field("registry_events_applied", static_cast<int64_t>(registry.Applied()));
  w.Field("health_lag", parts.Runner(HealthProjection::kName).Lag());
  w.Field("instances_lag", parts.Runner(InstanceProjection::kName).Lag());
  w.Field("audit_lag", parts.Runner(AuditProjection::kName).Lag());
  const KafkaVerdict kafka = parts.kafka_monitor->Verdict();
  w.Field("kafka", kafka.ok ? "ok" : kafka.reason);  // the /readyz check `kafka`, explained
  w.Field("policy", parts.policy ? "policy_manager" : "builtin");
  w.Field("auth", parts.trust->authenticator() ? parts.trust->auth_mode() : "disabled");
  w.Field("api_tls", !config.tls.enabled()               ? "off"
                     : config.tls.client_ca_file.empty() ? "on"
                                                         : "on, client certificates");
  w.Field("outbound_policy", parts.trust->outbound()->Describe());
  if (parts.worker) {
    w.Field("sagas_in_flight", static_cast<int64_t>(parts.worker->SagasInFlight()));
    WritePartitions(w, "instance_partitions", parts.worker->OwnedPartitions());
  }
  if (parts.prober) {
    w.Field("prober_providers", static_cast<int64_t>(parts.prober->OwnedProviders()));
    WritePartitions(w, "prober_partitions", parts.prober->OwnedPartitions());
  }
}

// /admin/projections: each catalog entry's digest (SPEC §5.4) and its runner's progress.
void WriteProjections(const ServeParts& parts, JsonWriter& w) {
  for (size_t i = 0; i < parts.projections.entries.size(); ++i) {
    const ProjectionEntry& entry = parts.projections.entries[i];
    const ProjectionRunner& runner = *parts.runners[i];
    auto digest = parts.store->Digest(entry.prefix);
    w.BeginObject();
    w.Field("name", entry.name);
    w.Field("topic", entry.TopicLabel());
    w.Field("digest", digest ? *digest : "error: " + digest.error().message);
    w.Field("applied", static_cast<int64_t>(runner.Applied()));
    w.Field("lag", runner.Lag());
    w.Field("caught_up", runner.CaughtUp());
    w.EndObject();
  }
}

}  // namespace

http::OpsContext BuildOps(ServeParts& parts) {
  http::OpsContext ops;
  ops.metrics = &parts.metrics;
  ops.checks = parts.components.Checks();
  ops.info = BuildAdminInfo(parts);
  ops.live_info = [&parts](JsonWriter& w) { WriteLiveInfo(parts, w); };
  ops.projections = [&parts](JsonWriter& w) { WriteProjections(parts, w); };
  if (parts.prober) {
    ops.heartbeat_providers = [&parts] { return parts.prober->HeartbeatProviders(); };
  }
  return ops;
}

}  // namespace dcm::cli
