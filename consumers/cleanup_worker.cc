#include "consumers/cleanup_worker.h"

#include "src/common/log.h"
#include "src/common/thread_name.h"

namespace dcm {
namespace {

constexpr char kCleanupActor[] = "dcm/cleanup";  // actor of the cleanup worker's own facts

}  // namespace

CleanupWorker::CleanupWorker(CleanupOptions options, const InstanceView* instances,
                             const RegistryView* registry, const HealthView* health,
                             ServiceProviderApi* sp, FactEmitter* emitter, TaskPool* pool,
                             Metrics* metrics)
    : options_(options),
      instances_(instances),
      registry_(registry),
      health_(health),
      sp_(sp),
      emitter_(emitter),
      pool_(pool),
      metrics_(metrics) {
  queue_depth_ = &metrics_->GetGauge("dcm_cleanup_queue_depth",
                                     "Cleanup records in the partitions this instance owns");
}

CleanupWorker::~CleanupWorker() { Stop(); }

void CleanupWorker::Start() {
  {
    std::lock_guard lock(mu_);
    running_ = true;
  }
  thread_ = NamedThread("cleanup", [this] { Loop(); });
}

void CleanupWorker::Stop() {
  {
    std::lock_guard lock(mu_);
    running_ = false;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void CleanupWorker::Loop() {
  while (true) {
    {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, options_.interval, [&] { return !running_; });
      if (!running_) return;
    }
    RunCycle();
  }
}

void CleanupWorker::RunCycle() {
  const std::set<int32_t> owned = emitter_->Owned();
  if (owned.empty()) {
    queue_depth_->Set(0);
    return;
  }
  auto records = instances_->ListCleanupFor(
      [&](const std::string& root) { return owned.count(emitter_->PartitionOf(root)) > 0; });
  if (!records) {
    Logger("instance-worker")
        ->warn("msg=\"cannot read the cleanup queue\" error=\"{}\"", records.error().message);
    return;
  }
  queue_depth_->Set(static_cast<int64_t>(records->size()));
  size_t submitted = 0;
  // Parking needs no SP call: its facts go out together and are acknowledged together.
  std::vector<FactEmitter::Sent> parked;
  ProviderByName by_name(registry_);
  for (const auto& r : *records) {
    if (r.status == kCleanupFailedStatus) continue;
    if (const std::string peer = PeerOfProviderName(r.provider_name); !peer.empty()) {
      submitted += Submit(r, [this, r, peer] { AttemptOnPeer(r, peer); }) ? 1 : 0;
      continue;
    }
    std::optional<Provider> provider = ProviderOf(r, by_name);
    const HealthStatus health =
        provider ? ProviderHealth(*health_, *provider) : HealthStatus::kPending;
    if (provider && health == HealthStatus::kReady) {
      submitted +=
          Submit(r, [this, r, endpoint = provider->spec.endpoint] { Attempt(r, endpoint); }) ? 1
                                                                                             : 0;
    } else if (r.status != kCleanupPendingProvider) {  // parked already: no retry burned
      if (auto sent = Park(r, provider.has_value(), health)) parked.push_back(std::move(*sent));
    }
  }
  for (auto& sent : parked) (void)emitter_->Acknowledged(std::move(sent));
  if (submitted == 0) return;
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return tasks_ == 0 || !running_; });
}

std::optional<FactEmitter::Sent> CleanupWorker::Park(const CleanupRecord& r, bool known,
                                                     HealthStatus health) {
  CleanupParked parked;
  parked.actor = kCleanupActor;
  parked.instance_id = r.instance_id;
  parked.provider_name = r.provider_name;
  parked.status = kCleanupPendingProvider;
  parked.error = known ? "provider '" + r.provider_name + "' is " + HealthStatusName(health)
                       : "provider '" + r.provider_name + "' is not registered";
  return emitter_->EmitAsync(r.root, std::move(parked));
}

std::optional<Provider> CleanupWorker::ProviderOf(const CleanupRecord& r,
                                                  ProviderByName& by_name) const {
  if (auto by_id = registry_->Get(r.provider_id); by_id && *by_id) return std::move(**by_id);
  return by_name.Find(r.provider_name);
}

std::optional<Provider> CleanupWorker::ProviderByName::Find(const std::string& name) {
  if (!loaded_) {
    loaded_ = true;
    std::string token;
    do {
      auto page = registry_->List({}, token, 1000);
      if (!page) break;  // unreadable: parked this cycle, tried again the next
      for (auto& p : page->providers) providers_.emplace(p.spec.name, std::move(p));
      token = std::move(page->next_page_token);
    } while (!token.empty());
  }
  auto it = providers_.find(name);
  if (it == providers_.end()) return std::nullopt;
  return it->second;
}

bool CleanupWorker::Submit(const CleanupRecord& r, std::function<void()> attempt) {
  {
    std::lock_guard lock(mu_);
    if (!cleaning_.insert(r.instance_id).second) return false;
    ++tasks_;
  }
  pool_->Submit([this, id = r.instance_id, attempt = std::move(attempt)] {
    attempt();
    std::lock_guard lock(mu_);
    cleaning_.erase(id);
    if (--tasks_ == 0) cv_.notify_all();
  });
  return true;
}

CleanupAttempted CleanupWorker::AttemptOf(const CleanupRecord& r, int http_status) const {
  CleanupAttempted attempt;
  attempt.actor = kCleanupActor;
  attempt.instance_id = r.instance_id;
  attempt.provider_name = r.provider_name;
  attempt.provider_id = r.provider_id;
  attempt.max_retries = options_.max_retries;
  attempt.http_status = http_status;
  attempt.retry_count = r.retry_count;
  attempt.status = "DELETED";
  return attempt;
}

void CleanupWorker::Failed(const CleanupRecord& r, CleanupAttempted& attempt,
                           std::string error) const {
  attempt.outcome = "failed";
  attempt.error = std::move(error);
  attempt.retry_count = r.retry_count + 1;
  attempt.status =
      attempt.retry_count >= options_.max_retries ? kCleanupFailedStatus : kCleanupPending;
}

void CleanupWorker::Attempt(const CleanupRecord& r, const std::string& endpoint) {
  auto reply = sp_->DeleteInstance(endpoint, r.instance_id);
  CleanupAttempted attempt = AttemptOf(r, reply ? reply->http_status : 0);
  if (reply && (Is2xx(reply->http_status) || reply->http_status == 404)) {
    attempt.outcome = reply->http_status == 404 ? "gone" : "deleted";
  } else {
    Failed(r, attempt, DescribeSpReply(reply));
  }
  Finish(r, std::move(attempt));
}

void CleanupWorker::AttemptOnPeer(const CleanupRecord& r, const std::string& peer) {
  auto instance = instances_->GetInstance(r.instance_id);
  std::optional<RemotePlacement> remote;
  if (instance && *instance) remote = DecodeRemotePlacement((**instance).placement);
  Result<PeerAnswer> answer = MakeError(ErrorCode::kUnavailable, "no peers configured");
  if (!remote) {  // no contract recorded: nothing there to end
    answer = PeerAnswer();
    answer->http_status = 404;
  } else if (options_.federation) {
    answer = options_.federation->Terminate(peer, remote->contract_id);
  }
  if (!answer) {  // the peer is not there to ask: parked, as for an SP that is not Ready
    CleanupParked parked;
    parked.actor = kCleanupActor;
    parked.instance_id = r.instance_id;
    parked.provider_name = r.provider_name;
    parked.status = kCleanupPendingProvider;
    parked.error = "peer '" + peer + "' did not answer: " + answer.error().message;
    emitter_->Emit(r.root, parked);
    return;
  }
  const int status = answer->http_status;
  CleanupAttempted attempt = AttemptOf(r, status);
  if (Is2xx(status) || status == 404 || status == 410) {
    if (remote) {
      RemoteFact ended;
      ended.actor = kCleanupActor;
      ended.resource_id = r.instance_id;
      ended.peer = peer;
      ended.contract_id = remote->contract_id;
      ended.http_status = status;
      if (!emitter_->Emit(r.root, RemoteContractTerminated{ended})) return;
    }
    attempt.outcome = Is2xx(status) ? "deleted" : "gone";
  } else {
    Failed(r, attempt,
           "peer '" + peer + "' answered " + std::to_string(status) + ": " + answer->detail);
  }
  Finish(r, std::move(attempt));
}

void CleanupWorker::Finish(const CleanupRecord& r, CleanupAttempted attempt) {
  metrics_
      ->GetCounter("dcm_cleanup_attempts_total", "Deferred-delete attempts by outcome",
                   "outcome=\"" + attempt.outcome + "\"")
      .Inc();
  if (!emitter_->Emit(r.root, attempt)) return;
  if (attempt.status == kCleanupFailedStatus) Alert(r, attempt);
}

// The last retry failed: the record is FAILED until an operator retries it.
void CleanupWorker::Alert(const CleanupRecord& r, const CleanupAttempted& attempt) {
  CleanupFailed alert;
  alert.actor = kCleanupActor;
  alert.instance_id = r.instance_id;
  alert.provider_name = r.provider_name;
  alert.retry_count = attempt.retry_count;
  alert.max_retries = attempt.max_retries;
  alert.error = attempt.error;
  Logger("instance-worker")
      ->warn(
          "msg=\"cleanup FAILED; needs an operator (POST /cleanup-queue/{}:retry)\" "
          "instance_id={} provider={} retries={} error=\"{}\"",
          r.instance_id, r.instance_id, r.provider_name, alert.retry_count, alert.error);
  emitter_->Emit(r.root, alert);
}

}  // namespace dcm
