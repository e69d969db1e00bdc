#include "consumers/provider_loss.h"

#include "events/provider_events.h"
#include "src/common/log.h"
#include "src/common/uuid.h"

namespace dcm {

InstanceEvent RecoverLostRequest(std::string request_id, std::string actor, std::string reason,
                                 bool rehydrate, int64_t now_ms) {
  InstanceEvent e;
  e.type = event_type::kOperationRequested;
  e.request_id = std::move(request_id);
  e.time_ms = now_ms;
  e.actor = std::move(actor);
  e.operation = OperationName(Operation::kRecoverLostResource);
  e.reason = std::move(reason);
  if (rehydrate) e.new_resource_id = DeterministicUuid("lost-resource:" + e.request_id);
  return e;
}

std::vector<InstanceEvent> LossRequests(const ProviderChange& change,
                                        const std::vector<Resource>& resources, bool rehydrate,
                                        int64_t now_ms) {
  std::vector<InstanceEvent> requests;
  const bool expired = change.removed_by == event_type::kExpired;
  if (!expired && change.removed_by != event_type::kDeleted) return requests;
  for (const Resource& r : resources) {
    // Placed after the removal: on a later registration of the same id (a replayed removal, on an
    // instance that folds the registry from the start, must not take those).
    if (r.provider_id != change.id || r.status == kLostStatus ||
        r.create_time_ms > change.removed_at_ms) {
      continue;
    }
    InstanceEvent e = RecoverLostRequest(
        DeterministicUuid("provider-loss:" + change.request_id + ":" + r.id), "dcm/provider-loss",
        expired ? "provider_expired" : "provider_deleted", rehydrate, now_ms);
    e.root = r.root;
    e.resource_id = r.id;
    e.catalog_item_instance_id = r.catalog_item_instance_id;
    e.provider_name = r.provider_name;
    e.provider_id = r.provider_id;
    requests.push_back(std::move(e));
  }
  return requests;
}

ProviderLoss::ProviderLoss(ProviderLossOptions options, const InstanceView* instances,
                           Producer* producer, Metrics* metrics, const Clock* clock)
    : options_(std::move(options)), instances_(instances), producer_(producer), clock_(clock) {
  lost_ = &metrics->GetCounter(
      "dcm_lost_resources_total",
      "Resources found on an expired or force-deleted provider by this instance (SPEC §8)");
  rehydrations_ = &metrics->GetCounter(
      "dcm_auto_rehydrations_total",
      "Rehydrations of lost resources asked by this instance (REHYDRATE_ON_PROVIDER_LOSS)");
  failures_ = &metrics->GetCounter("dcm_provider_loss_failures_total",
                                   "Lost-resource requests this instance could not produce");
}

std::vector<Resource> ProviderLoss::ResourcesOn(const std::string& provider_id) const {
  std::vector<Resource> on;
  // Most removals (every deregistration, replayed by a fresh instance) host nothing: the live
  // count per provider says so without a scan.
  if (auto live = instances_->LiveInstances(provider_id); live && *live == 0) return on;
  std::string token;
  do {
    auto page = instances_->ListResources(token, 500);
    if (!page) {
      failures_->Inc();
      Logger("provider-loss")
          ->error("msg=\"resources of a lost provider unreadable\" provider={} error=\"{}\"",
                  provider_id, page.error().message);
      return on;
    }
    for (auto& r : page->items) {
      if (r.provider_id == provider_id) on.push_back(std::move(r));
    }
    token = std::move(page->next_page_token);
  } while (!token.empty());
  return on;
}

void ProviderLoss::OnChanged(const std::vector<ProviderChange>& changes) {
  for (const ProviderChange& change : changes) {
    if (change.removed_by != event_type::kExpired && change.removed_by != event_type::kDeleted) {
      continue;
    }
    auto requests =
        LossRequests(change, ResourcesOn(change.id), options_.rehydrate, clock_->NowMillis());
    if (requests.empty()) continue;
    Logger("provider-loss")
        ->warn(
            "msg=\"provider lost with live resources\" provider={} by={} resources={} "
            "rehydrate={}",
            change.id, change.removed_by, requests.size(), options_.rehydrate);
    for (InstanceEvent& request : requests) {
      request.source = options_.source;
      lost_->Inc();
      if (options_.rehydrate) rehydrations_->Inc();
      const CloudEvent event = EncodeInstanceEvent(request);
      producer_->Produce(
          options_.requests_topic, request.root, EncodeCloudEvent(event), {},
          [this, id = request.resource_id](Result<KafkaPosition> delivered) {
            if (delivered) return;
            failures_->Inc();
            Logger("provider-loss")
                ->error("msg=\"lost-resource request not delivered\" resource={} error=\"{}\"", id,
                        delivered.error().message);
          },
          KeyPartition(request.root, options_.partitions));
    }
  }
}

}  // namespace dcm
