#include "projections/projection_catalog.h"

#include "projections/audit_projection.h"
#include "projections/federation_projection.h"
#include "projections/health_projection.h"
#include "projections/instance_projection.h"
#include "projections/registry_projection.h"

namespace dcm {
namespace {

// The live audit index sweeps expired probes (a clock and a window given); rebuilds do not.
std::unique_ptr<Projection> MakeAudit(const ProjectionDeps& d) {
  return std::make_unique<AuditProjection>(d.store, d.topics->Providers(), d.metrics,
                                           AuditRetention{.probes_topic = d.topics->HealthProbes(),
                                                          .window = d.health_events_retention,
                                                          .clock = d.clock});
}

// SPEC §10, provider side: reservations, holds and contracts. Not folded for `as_of`: the audit
// index (time travel's source) does not read dcm.federation yet.
ProjectionEntry FederationEntry(const Topics& topics) {
  return {.name = FederationProjection::kName,
          .prefix = FederationProjection::kPrefix,
          .topics = {topics.Federation()},
          .fold_cost = 1,
          .as_of = false,
          .make =
              [](const ProjectionDeps& d) {
                return std::make_unique<FederationProjection>(d.store, d.federation_waiters,
                                                              d.metrics);
              },
          .expires = nullptr};
}

// Providers' or peers' health (HealthProjection::kProviders, kPeers): transitions (and the
// probes of builds before issue #13) on dcm.health, probes on the probes topic.
ProjectionEntry HealthEntry(const Topics& topics, const HealthFold& fold, double fold_cost,
                            bool as_of) {
  return {.name = fold.name,
          .prefix = fold.prefix,
          .topics = {topics.Health(), topics.HealthProbes()},
          .fold_cost = fold_cost,
          .as_of = as_of,
          .background = true,
          .make =
              [fold](const ProjectionDeps& d) {
                return std::make_unique<HealthProjection>(d.store, d.metrics, fold);
              },
          .expires = &HealthRecordExpires};
}

}  // namespace

std::vector<ProjectionEntry> ProjectionCatalog(const Topics& topics) {
  // Fold costs from `rebuild_bench rebuild --only NAME` on the benchmark log (2026-11-23, before
  // the decoded caches, which cut health and instances alike): µs of fold-thread CPU per event,
  // audit 3.3, health 2.9, instances 16, registry 6, sp-status 1.7.
  return {
      {.name = RegistryProjection::kName,
       .prefix = RegistryProjection::kPrefix,
       .topics = {topics.Providers()},
       .fold_cost = 2,
       .as_of = true,
       .take_deliveries = false,  // p99 24 -> 30 ms at 64 clients (BENCHMARKS.md, session 27)
       .make =
           [](const ProjectionDeps& d) {
             return std::make_unique<RegistryProjection>(d.store, d.provider_waiters, d.metrics);
           },
       .expires = nullptr},
      HealthEntry(topics, HealthProjection::kProviders, /*fold_cost=*/1, /*as_of=*/true),
      // Peer enclaves (SPEC §10): not rendered by any past answer.
      HealthEntry(topics, HealthProjection::kPeers, /*fold_cost=*/0.2, /*as_of=*/false),
      {.name = InstanceProjection::kName,
       .prefix = InstanceProjection::kPrefix,
       .topics = {topics.Instances()},
       .fold_cost = 5,
       .as_of = true,
       .make =
           [](const ProjectionDeps& d) {
             return std::make_unique<InstanceProjection>(d.store, d.instance_waiters, d.metrics);
           },
       .expires = nullptr},
      {.name = SpStatusProjection::kName,
       .prefix = SpStatusProjection::kPrefix,
       .topics = {topics.Status()},
       .fold_cost = 0.5,
       .as_of = true,
       .make =
           [](const ProjectionDeps& d) {
             return std::make_unique<SpStatusProjection>(d.store, d.metrics);
           },
       .expires = nullptr},
      FederationEntry(topics),
      // The audit index reads every event topic (SPEC §3.4).
      {.name = AuditProjection::kName,
       .prefix = AuditProjection::kPrefix,
       .topics = topics.EventTopics(),
       .fold_cost = 1,
       .as_of = false,
       .background = true,
       .make = &MakeAudit,
       .expires = [probes = topics.HealthProbes()](
                      std::string_view key, std::string_view,
                      int64_t cutoff) { return AuditKeyExpires(key, probes, cutoff); }},
  };
}

ProjectionSet BuildProjections(std::vector<ProjectionEntry> entries, const ProjectionDeps& deps) {
  ProjectionSet set;
  set.entries = std::move(entries);
  for (const auto& entry : set.entries) set.projections.push_back(entry.make(deps));
  return set;
}

}  // namespace dcm
