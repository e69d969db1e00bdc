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
    std::optional<Provider> provider = ProviderOf(r, by_name);
    const HealthStatus health =
        provider ? ProviderHealth(*health_, *provider) : HealthStatus::kPending;
    if (provider && health == HealthStatus::kReady) {
      submitted += Submit(r, *provider) ? 1 : 0;
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

bool CleanupWorker::Submit(const CleanupRecord& r, const Provider& provider) {
  {
    std::lock_guard lock(mu_);
    if (!cleaning_.insert(r.instance_id).second) return false;
    ++tasks_;
  }
  pool_->Submit([this, r, endpoint = provider.spec.endpoint] {
    Attempt(r, endpoint);
    std::lock_guard lock(mu_);
    cleaning_.erase(r.instance_id);
    if (--tasks_ == 0) cv_.notify_all();
  });
  return true;
}

void CleanupWorker::Attempt(const CleanupRecord& r, const std::string& endpoint) {
  auto reply = sp_->DeleteInstance(endpoint, r.instance_id);
  CleanupAttempted attempt;
  attempt.actor = kCleanupActor;
  attempt.instance_id = r.instance_id;
  attempt.provider_name = r.provider_name;
  attempt.provider_id = r.provider_id;
  attempt.max_retries = options_.max_retries;
  attempt.http_status = reply ? reply->http_status : 0;
  if (reply && (Is2xx(reply->http_status) || reply->http_status == 404)) {
    attempt.outcome = reply->http_status == 404 ? "gone" : "deleted";
    attempt.status = "DELETED";
    attempt.retry_count = r.retry_count;
  } else {
    attempt.outcome = "failed";
    attempt.error = DescribeSpReply(reply);
    attempt.retry_count = r.retry_count + 1;
    attempt.status =
        attempt.retry_count >= options_.max_retries ? kCleanupFailedStatus : kCleanupPending;
  }
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
