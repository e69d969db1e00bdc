// ProviderLoss: referential integrity when a provider goes away (SPEC §8, IS-04's "children go
// with their parent"). A provider removed by expiry (dcm.provider.expired) or by a forced
// deletion takes its live resources with it: each gets a `recover_lost_resource` operation,
// decided and run like any other by the worker that owns the resource's root.
//
//   registry listener: expired | deleted ─▶ live resources on that provider (instance projection)
//     ─▶ recover_lost_resource per resource ─▶ dcm.instance-requests (key: root)
//   worker: resource.lost ─▶ [REHYDRATE_ON_PROVIDER_LOSS: placed on another provider ─▶ created
//     ─▶ the lost one queued for cleanup (PENDING_PROVIDER until its SP is back) ─▶ deleted]
//
// Every instance asks, for every resource it knows of on the provider: the request id derives
// from the removal and the resource, so the decider runs each recovery once however many ask
// (and an instance whose projection lags is covered by the others). Thread-safety: OnChanged is
// called by the registry's listener (one thread at a time).
#pragma once

#include <string>
#include <vector>

#include "consumers/kafka.h"
#include "projections/instance_projection.h"
#include "projections/registry_projection.h"
#include "src/common/clock.h"
#include "src/common/metrics.h"

namespace dcm {

struct ProviderLossOptions {
  std::string requests_topic;  // dcm.instance-requests
  int32_t partitions = 1;      // of requests_topic
  bool rehydrate = false;      // REHYDRATE_ON_PROVIDER_LOSS
  std::string source = "dcm/provider-loss";
};

// A recover_lost_resource request (dcm.instance-requests), asked by `actor` for `reason`; the
// caller names the resource (root, resource, provider). `request_id` derives from what was lost, so
// every asker asks once; with `rehydrate`, the replacement's resource id derives from it too.
InstanceEvent RecoverLostRequest(std::string request_id, std::string actor, std::string reason,
                                 bool rehydrate, int64_t now_ms);

// The recovery requests for `resources` (those on the removed provider `change.id`): pure, so the
// ids are tested without Kafka. Empty unless `change` is an expiry or a deletion. A resource placed
// after the removal is on a later registration of the id, and is not lost.
std::vector<InstanceEvent> LossRequests(const ProviderChange& change,
                                        const std::vector<Resource>& resources, bool rehydrate,
                                        int64_t now_ms);

class ProviderLoss {
 public:
  ProviderLoss(ProviderLossOptions options, const InstanceView* instances, Producer* producer,
               Metrics* metrics, const Clock* clock);

  void OnChanged(const std::vector<ProviderChange>& changes);

 private:
  // The live resources on `provider_id` (an error is logged: nothing is lost then, an expiry has
  // no second chance; docs/operations.md).
  std::vector<Resource> ResourcesOn(const std::string& provider_id) const;

  ProviderLossOptions options_;
  const InstanceView* instances_;
  Producer* producer_;
  const Clock* clock_;
  Counter* lost_ = nullptr;
  Counter* rehydrations_ = nullptr;
  Counter* failures_ = nullptr;
};

}  // namespace dcm
