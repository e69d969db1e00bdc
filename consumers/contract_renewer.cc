#include "consumers/contract_renewer.h"

#include <algorithm>
#include <cstdint>

#include "consumers/provider_loss.h"
#include "consumers/saga_runner.h"
#include "src/common/log.h"
#include "src/common/thread_name.h"
#include "src/common/uuid.h"

namespace dcm {
namespace {

bool Ended(const PeerAnswer& answer) {
  return answer.http_status == 404 || answer.http_status == 410;
}

}  // namespace

InstanceEvent ContractLossRequest(const ServiceTypeInstance& instance,
                                  const RemotePlacement& remote, const PeerAnswer& answer,
                                  bool rehydrate, int64_t now_ms) {
  const bool missing = answer.reason.empty() || answer.http_status == 404;
  InstanceEvent e = RecoverLostRequest(
      DeterministicUuid("contract-loss:" + remote.peer + ":" + remote.contract_id),
      "dcm/contract-renewer", "contract_" + (missing ? std::string("missing") : answer.reason),
      rehydrate, now_ms);
  e.root = instance.root;
  e.resource_id = instance.id;
  e.provider_name = instance.provider_name;
  e.provider_id = instance.provider_id;
  return e;
}

std::optional<InstanceEvent> RepatriationRequest(const Resource& resource,
                                                 const RemotePlacement& remote,
                                                 const std::vector<PlacementCandidate>& candidates,
                                                 int64_t bucket, int64_t now_ms) {
  if (ChooseProvider(resource.intent, candidates).failure != PlacementFailure::kNone) {
    return std::nullopt;
  }
  InstanceEvent e;
  e.type = event_type::kOperationRequested;
  e.request_id = DeterministicUuid("repatriate:" + remote.peer + ":" + remote.contract_id + ":" +
                                   std::to_string(bucket));
  e.time_ms = now_ms;
  e.actor = "dcm/contract-renewer";
  e.operation = OperationName(Operation::kRehydrateResource);
  e.root = resource.root;
  e.resource_id = resource.id;
  e.new_resource_id = DeterministicUuid("repatriated:" + e.request_id);
  e.prefer_local = true;
  return e;
}

ContractRenewer::ContractRenewer(ContractRenewerOptions options, const InstanceView* instances,
                                 FederationApi* federation, FactEmitter* emitter, Metrics* metrics,
                                 const Clock* clock)
    : options_(std::move(options)),
      instances_(instances),
      federation_(federation),
      emitter_(emitter),
      metrics_(metrics),
      clock_(clock) {}

ContractRenewer::~ContractRenewer() { Stop(); }

void ContractRenewer::Start() {
  std::lock_guard lock(mu_);
  if (running_) return;
  running_ = true;
  thread_ = NamedThread("renewer", [this] {
    std::unique_lock lock(mu_);
    while (running_) {
      lock.unlock();
      Tick();
      lock.lock();
      wake_.wait_for(lock, options_.tick, [&] { return !running_; });
    }
  });
}

void ContractRenewer::Stop() {
  {
    std::lock_guard lock(mu_);
    running_ = false;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ContractRenewer::Tick() {
  const std::set<int32_t> owned = emitter_->Owned();
  auto instances = instances_->ListPeerInstancesFor(
      [&](const std::string& root) { return owned.count(emitter_->PartitionOf(root)) > 0; });
  if (!instances) {
    Logger("contract-renewer")
        ->warn("msg=\"cannot read the peer instances\" error=\"{}\"", instances.error().message);
    return;
  }
  std::map<std::string, Lease> next;  // instances gone (deleted, or not owned now) drop out
  const int64_t now = clock_->NowMillis();
  unreachable_.clear();
  candidates_.reset();
  for (const ServiceTypeInstance& instance : *instances) {
    auto remote = DecodeRemotePlacement(instance.placement);
    if (!remote) continue;
    auto known = leases_.find(instance.id);
    Lease lease = known == leases_.end() ? Lease{} : known->second;
    // A peer that did not answer this tick is not asked again until the next one: its timeouts
    // must not hold up the renewals of other peers' contracts.
    if (!lease.lost && now >= lease.due_ms && !unreachable_.count(remote->peer)) {
      // Read only when due: a LOST resource (found by this instance or an earlier owner) waits
      // for its recovery, and one queued for cleanup for its contract's end: neither is renewed.
      auto resource = instances_->GetResource(instance.id);
      auto queued = instances_->GetCleanup(instance.id);
      lease.lost =
          (resource && *resource && (*resource)->status == kLostStatus) || (queued && *queued);
      if (!lease.lost) lease = Renew(instance, *remote, now);
    }
    if (options_.repatriate && !lease.lost && now >= lease.repatriate_due_ms) {
      lease.repatriate_due_ms = now + options_.repatriate_interval.count();
      MaybeRepatriate(instance, *remote, now);
    }
    next[instance.id] = lease;
  }
  leases_ = std::move(next);
}

ContractRenewer::Lease ContractRenewer::Renew(const ServiceTypeInstance& instance,
                                              const RemotePlacement& remote, int64_t now) {
  auto answer = federation_->Renew(remote.peer, remote.contract_id);
  Lease lease;  // due now: asked again next tick unless renewed or lost
  // A 2xx without the new lease's end is a bad answer: tried again, never recorded.
  if (answer && Is2xx(answer->http_status) && answer->expires_at_ms > 0) {
    RemoteFact renewed = FactAbout(instance, remote, answer->http_status);
    renewed.expires_at_ms = answer->expires_at_ms;
    if (!emitter_->Emit(instance.root, RemoteContractRenewed{renewed})) return lease;
    // Renewed again when a third of the lease is left.
    const int64_t left = std::max<int64_t>(0, answer->expires_at_ms - now);
    lease.due_ms = now + std::min<int64_t>(left * 2 / 3, options_.max_renew_interval.count());
    Count(remote.peer, "renewed");
    return lease;
  }
  if (answer && Ended(*answer)) {
    lease.lost = Lost(instance, remote, *answer);
    return lease;
  }
  if (!answer) unreachable_.insert(remote.peer);
  Count(remote.peer, "failed");
  Logger("contract-renewer")
      ->warn("msg=\"contract not renewed; trying again\" peer={} contract_id={} error=\"{}\"",
             remote.peer, remote.contract_id,
             answer ? "answered " + std::to_string(answer->http_status) + ": " + answer->detail
                    : answer.error().message);
  return lease;
}

bool ContractRenewer::Lost(const ServiceTypeInstance& instance, const RemotePlacement& remote,
                           const PeerAnswer& answer) {
  RemoteFact ended = FactAbout(instance, remote, answer.http_status);
  ended.reason = answer.reason.empty() ? "not_found" : answer.reason;
  ended.error = answer.detail;
  const bool revoked = answer.reason == "revoked";
  const bool emitted = revoked ? emitter_->Emit(instance.root, RemoteContractRevoked{ended})
                               : emitter_->Emit(instance.root, RemoteContractExpired{ended});
  if (!emitted) return false;  // asked again next tick
  Logger("contract-renewer")
      ->warn(
          "msg=\"contract lost: its resource is LOST\" peer={} contract_id={} resource={} "
          "reason={} rehydrate={}",
          remote.peer, remote.contract_id, instance.id, ended.reason, options_.rehydrate);
  InstanceEvent request =
      ContractLossRequest(instance, remote, answer, options_.rehydrate, clock_->NowMillis());
  request.source = options_.source;
  options_.submit(request);
  Count(remote.peer, revoked ? "revoked" : "expired");
  return true;
}

RemoteFact ContractRenewer::FactAbout(const ServiceTypeInstance& instance,
                                      const RemotePlacement& remote, int http_status) const {
  RemoteFact fact;
  fact.actor = options_.source;
  fact.resource_id = instance.id;
  fact.peer = remote.peer;
  fact.contract_id = remote.contract_id;
  fact.http_status = http_status;
  return fact;
}

void ContractRenewer::MaybeRepatriate(const ServiceTypeInstance& instance,
                                      const RemotePlacement& remote, int64_t now) {
  auto resource = instances_->GetResource(instance.id);
  if (!resource || !*resource || (*resource)->status == kLostStatus) return;
  auto queued = instances_->GetCleanup(instance.id);
  if (!queued || *queued) return;  // on its way out already
  const int64_t interval = std::max<int64_t>(1, options_.repatriate_interval.count());
  auto request = RepatriationRequest(**resource, remote, LocalCandidates(), now / interval, now);
  if (!request) return;
  request->source = options_.source;
  Logger("contract-renewer")
      ->info(
          "msg=\"repatriating\" peer={} contract_id={} resource={} new_resource={} "
          "request_id={}",
          remote.peer, remote.contract_id, instance.id, request->new_resource_id,
          request->request_id);
  options_.submit(*request);
  metrics_
      ->GetCounter("dcm_federation_repatriations_total",
                   "Peer instances asked to come home (FEDERATION_REPATRIATE) by peer",
                   "peer=\"" + remote.peer + "\"")
      .Inc();
}

const std::vector<PlacementCandidate>& ContractRenewer::LocalCandidates() {
  if (candidates_) return *candidates_;
  candidates_.emplace();
  if (!options_.registry || !options_.health) return *candidates_;
  auto page = options_.registry->List(ProviderFilter{}, "", SIZE_MAX);
  if (!page) {
    Logger("contract-renewer")
        ->warn("msg=\"cannot read the registry\" error=\"{}\"", page.error().message);
    return *candidates_;
  }
  for (auto& p : page->providers) {
    PlacementCandidate c;
    c.health = ProviderHealth(*options_.health, p);
    c.provider = std::move(p);
    candidates_->push_back(std::move(c));
  }
  return *candidates_;
}

void ContractRenewer::Count(const std::string& peer, const char* outcome) {
  metrics_
      ->GetCounter("dcm_federation_renewals_total",
                   "Contract renewals with peer enclaves by peer and outcome",
                   "peer=\"" + peer + "\",outcome=\"" + outcome + "\"")
      .Inc();
}

}  // namespace dcm
