#include "consumers/instance_worker.h"

#include <algorithm>
#include <csignal>
#include <future>

#include "consumers/catch_up.h"
#include "consumers/dead_letter.h"
#include "events/json_read.h"
#include "src/common/log.h"
#include "src/common/reply_summary.h"

namespace dcm {
namespace {

using std::chrono::milliseconds;

constexpr char kOffsetsName[] = "instance-worker";  // this worker's request offsets in the Store
constexpr int kPollMs = 100;
constexpr milliseconds kOwnFactsTimeout{10000};
constexpr size_t kMaxOverlay = 100000;  // writes in the decider's overlay before intake waits
constexpr milliseconds kRetryDelay{1000};
constexpr char kCleanupActor[] = "dcm/cleanup";  // actor of the cleanup worker's own facts

bool Is2xx(int status) { return status >= 200 && status < 300; }

// The SP's `status` from a create reply, upper-cased, sanitized and bounded; PROVISIONING when
// it names none.
std::string ReplyStatus(const std::string& body) {
  auto parsed = ParseJson(body);
  std::string status;
  if (parsed && parsed->is_object())
    status = SanitizeText(StringMember(simdjson::dom::object(*parsed), "status"), 64);
  if (status.empty()) return "PROVISIONING";
  for (auto& c : status) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return status;
}

// A short description of an SP answer for error messages and events: the transport error, or
// SummarizeReply's (bounded, sanitized, never the raw body). A 3xx is a failure like any other
// non-2xx: redirects are never followed.
std::string Describe(const Result<SpReply>& reply) {
  if (!reply) return reply.error().message;
  return SummarizeReply(reply->http_status, reply->content_type, reply->body);
}

}  // namespace

InstanceWorker::InstanceWorker(InstanceWorkerOptions options, Store* store,
                               const AppliedOffsets* applied, const InstanceView* instances,
                               const RegistryView* registry, const HealthView* health,
                               ServiceProviderApi* sp, PolicyEngine* policy, Producer* producer,
                               Metrics* metrics, const Clock* clock)
    : options_(std::move(options)),
      store_(store),
      applied_(applied),
      instances_(instances),
      registry_(registry),
      health_(health),
      sp_(sp),
      policy_(policy),
      producer_(producer),
      metrics_(metrics),
      clock_(clock),
      decider_(store, applied, options_.instances_topic) {
  sagas_gauge_ =
      &metrics_->GetGauge("dcm_sagas_in_flight", "Instance operations this instance is running");
  queue_depth_ = &metrics_->GetGauge("dcm_cleanup_queue_depth",
                                     "Cleanup records in the partitions this instance owns");
  saga_seconds_ = &metrics_->GetHistogram("dcm_instance_operation_seconds",
                                          "Instance operation run time, started to ended");
}

InstanceWorker::~InstanceWorker() { Stop(); }

Status InstanceWorker::Start() {
  ASSIGN_OR_RETURN(partitions_,
                   TopicPartitionCount(producer_->handle(), options_.instances_topic, 10000));
  ASSIGN_OR_RETURN(int request_partitions,
                   TopicPartitionCount(producer_->handle(), options_.requests_topic, 10000));
  if (partitions_ == 0 || request_partitions != partitions_) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "topics " + options_.requests_topic + " and " + options_.instances_topic +
                         " must exist with the same number of partitions (found " +
                         std::to_string(request_partitions) + " and " +
                         std::to_string(partitions_) + ")");
  }
  ASSIGN_OR_RETURN(consumer_, Consumer::Create(options_.kafka, options_.group_id));
  Consumer::Rebalance rebalance;
  rebalance.on_assign = [this](const std::string&, const std::vector<int32_t>& partitions) {
    return OnAssigned(partitions);
  };
  rebalance.on_revoke = [this] { OnRevoked(); };
  RETURN_IF_ERROR(consumer_->Subscribe(options_.requests_topic, std::move(rebalance)));
  running_ = true;
  for (int i = 0; i < std::max(1, options_.threads); ++i) {
    pool_.emplace_back([this] { PoolLoop(); });
  }
  group_thread_ = std::thread([this] { GroupLoop(); });
  cleanup_thread_ = std::thread([this] { CleanupLoop(); });
  return OkStatus();
}

void InstanceWorker::Stop() {
  if (!running_.exchange(false)) return;
  { std::lock_guard lock(mu_); }  // no waiter misses the change between its check and its wait
  work_cv_.notify_all();
  cleanup_cv_.notify_all();
  if (group_thread_.joinable()) group_thread_.join();
  if (cleanup_thread_.joinable()) cleanup_thread_.join();
  for (auto& t : pool_) t.join();
  pool_.clear();
  if (consumer_) consumer_->Close();  // leave the group so the survivors take over at once
}

// ---- ownership and intake -------------------------------------------------------------------

std::map<int32_t, int64_t> InstanceWorker::OnAssigned(const std::vector<int32_t>& partitions) {
  auto logger = Logger("instance-worker");
  // What the previous owner produced must be in the local projection before its sagas resume.
  (void)WaitForCatchUp(*store_, *consumer_, InstanceProjection::kName, options_.instances_topic,
                       partitions, options_.catch_up_timeout, running_, "instance-worker");
  {
    std::unique_lock lock(own_mu_);
    owned_.insert(partitions.begin(), partitions.end());
  }
  const std::set<int32_t> mine(partitions.begin(), partitions.end());
  auto sagas = instances_->ListSagas(
      [&](const std::string& root) { return mine.count(KeyPartition(root, partitions_)) > 0; });
  size_t resumed = 0;
  if (!sagas) {
    logger->error("msg=\"cannot read sagas\" error=\"{}\"", sagas.error().message);
    healthy_ = false;
  } else {
    for (auto& saga : *sagas) {
      if (!Claim(saga)) continue;  // still running here
      logger->info("msg=\"resuming operation\" operation={} root={} request_id={} steps={}",
                   saga.started.operation, saga.started.root, saga.started.request_id,
                   saga.steps.size());
      Dispatch(std::move(saga));
      ++resumed;
    }
  }
  std::map<int32_t, int64_t> offsets;
  auto stored = store_->LoadOffsets(kOffsetsName, options_.requests_topic);
  for (int32_t p : partitions) {
    auto it = stored ? stored->find(p) : std::map<int32_t, int64_t>::iterator();
    offsets[p] = stored && it != stored->end() ? it->second : Consumer::kBeginning;
  }
  joined_ = true;
  logger->info("msg=\"instance partitions assigned\" partitions={} resumed={}", partitions.size(),
               resumed);
  return offsets;
}

void InstanceWorker::OnRevoked() {
  {
    std::unique_lock lock(own_mu_);
    owned_.clear();
  }
  // What this instance produced must be in Kafka before the next owner reads the high watermark
  // (emitters enqueue under own_mu_, so nothing is enqueued after the clear above).
  if (auto flushed = producer_->Flush(10000); !flushed) {
    Logger("instance-worker")
        ->warn("msg=\"flush on revoke incomplete\" error=\"{}\"", flushed.error().message);
  }
  Logger("instance-worker")->info("msg=\"instance partitions revoked\"");
}

void InstanceWorker::GroupLoop() {
  auto logger = Logger("instance-worker");
  while (running_) {
    auto messages = consumer_->ConsumeBatch(options_.batch_size, kPollMs);
    if (!messages) {
      logger->warn("msg=\"request poll failed\" error=\"{}\"", messages.error().message);
      continue;
    }
    if (messages->empty()) continue;
    if (auto status = Intake(*messages); !status) {
      logger->warn("msg=\"request batch not decided; re-reading it\" error=\"{}\"",
                   status.error().message);
      std::map<int32_t, int64_t> first;
      for (const auto& m : *messages) first.emplace(m.partition, m.offset);
      for (auto [p, offset] : first) {
        (void)consumer_->Seek(options_.requests_topic, p, offset);
      }
      std::this_thread::sleep_for(kRetryDelay);
    }
  }
}

Status InstanceWorker::Intake(const std::vector<KafkaMessage>& messages) {
  CompactDecider();
  std::vector<std::future<Status>> dead_letters;
  std::vector<Sent> sent;
  std::vector<Saga> to_run;
  StartedInBatch batch;
  std::map<int32_t, int64_t> next;
  for (const auto& m : messages) {
    {
      std::shared_lock lock(own_mu_);
      if (!owned_.count(m.partition)) continue;
    }
    next[m.partition] = m.offset + 1;
    auto request = DecodeRequest(m);
    if (!request) {
      dead_letters.push_back(DeadLetter(*producer_, options_.dead_letter_topic, m,
                                        "instance-worker", request.error().message, metrics_));
      continue;
    }
    ASSIGN_OR_RETURN(auto decision, decider_.Decide(*request, batch));
    switch (decision.kind) {
      case InstanceDecision::Kind::kDuplicate:
        break;
      case InstanceDecision::Kind::kResume:
        to_run.push_back(std::move(decision.saga));
        break;
      case InstanceDecision::Kind::kFailed:
        CountOutcome(decision.fact.operation, decision.fact.reason);
        sent.push_back(Produce(request->root, std::move(decision.fact)));
        break;
      case InstanceDecision::Kind::kStarted:
        batch[request->root] = request->request_id;
        to_run.push_back(std::move(decision.saga));
        sent.push_back(Produce(request->root, std::move(decision.fact)));
        break;
    }
  }
  Status result = OkStatus();
  for (auto& ack : dead_letters) {
    if (auto status = ack.get(); !status && result) result = status;
  }
  for (auto& s : sent) {
    if (auto status = Fold(s); !status && result) result = status;
  }
  if (result) {
    StoreBatch offsets;
    for (auto [p, offset] : next) {
      store_->PutOffset(offsets, kOffsetsName, options_.requests_topic, p, offset);
    }
    result = store_->Write(offsets);
  }
  // On failure the batch is read again; what was acknowledged is in the decider's state then.
  if (!result) return result;
  for (auto& saga : to_run) {
    if (Claim(saga)) Dispatch(std::move(saga));
  }
  return OkStatus();
}

Result<InstanceEvent> InstanceWorker::DecodeRequest(const KafkaMessage& m) {
  ASSIGN_OR_RETURN(auto event, DecodeCloudEvent(m.value));
  ASSIGN_OR_RETURN(auto request, DecodeInstanceEvent(event));
  if (request.type != event_type::kOperationRequested) {
    return MakeError(ErrorCode::kCorruption, "not a request: " + request.type);
  }
  return request;
}

void InstanceWorker::CompactDecider() {
  if (decider_.Compact() || decider_.OverlaySize() < kMaxOverlay) return;
  // Far ahead of the local projection: let it catch up rather than grow the overlay.
  if (!decider_.CompactBy(std::chrono::steady_clock::now() + kOwnFactsTimeout,
                          [this] { return running_.load(); })) {
    Logger("instance-worker")->warn("msg=\"projection behind this worker's facts\"");
  }
}

bool InstanceWorker::Claim(Saga& saga) {
  std::lock_guard lock(mu_);
  if (running_sagas_.count(saga.started.root)) return false;
  // Still in progress? A saga task folds its outcome before it releases the root, so a saga
  // that ended since it was read is not run again; and it resumes from its latest steps.
  auto current = decider_.With([&](const InstanceView& v) { return v.GetSaga(saga.started.root); });
  if (!current || !*current || (*current)->started.request_id != saga.started.request_id) {
    return false;
  }
  saga = std::move(**current);
  running_sagas_.emplace(saga.started.root, saga.started.request_id);
  sagas_gauge_->Set(static_cast<int64_t>(running_sagas_.size()));
  return true;
}

void InstanceWorker::Release(const Saga& saga) {
  std::lock_guard lock(mu_);
  auto it = running_sagas_.find(saga.started.root);
  if (it != running_sagas_.end() && it->second == saga.started.request_id) {
    running_sagas_.erase(it);
  }
  if (!saga.placed_resource_id.empty()) pending_load_.erase(saga.placed_resource_id);
  sagas_gauge_->Set(static_cast<int64_t>(running_sagas_.size()));
}

// ---- the saga pool ------------------------------------------------------------------------

void InstanceWorker::Dispatch(Saga saga) {
  Submit([this, saga = std::move(saga)]() mutable { RunSagaTask(std::move(saga)); });
}

void InstanceWorker::Submit(std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(task));
  }
  work_cv_.notify_one();
}

void InstanceWorker::PoolLoop() {
  while (true) {
    std::function<void()> task;
    {
      std::unique_lock lock(mu_);
      work_cv_.wait(lock, [&] { return !running_ || !queue_.empty(); });
      if (!running_) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

void InstanceWorker::RunSagaTask(Saga saga) {
  const auto begun = std::chrono::steady_clock::now();
  RunSaga(saga);
  const bool ended =
      saga.Has(event_type::kOperationCompleted) || saga.Has(event_type::kOperationFailed);
  if (ended) {
    saga_seconds_->Observe(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begun).count());
  } else if (running_ && OwnsRoot(saga.started.root)) {
    // Kafka did not take a fact: back off, then try the remaining steps again.
    std::this_thread::sleep_for(kRetryDelay);
    Dispatch(std::move(saga));
    return;
  }
  Release(saga);
}

void InstanceWorker::RunSaga(Saga& saga) {
  const InstanceEvent& s = saga.started;
  auto op = ParseOperation(s.operation);
  if (!op) {
    Fail(saga, {400, "invalid", "unknown operation '" + s.operation + "'"});
    return;
  }
  InstanceEvent result;
  switch (*op) {
    case Operation::kCreateCatalogItemInstance:
    case Operation::kCreateResource: {
      if (!saga.Has(event_type::kResourcePlaced) && !Place(saga, s.resource_id, s.spec, "")) {
        return;
      }
      if (!saga.Has(event_type::kInstanceCreated) && !CreateOnProvider(saga, s.resource_id)) {
        return;
      }
      if (*op == Operation::kCreateCatalogItemInstance &&
          !saga.Has(event_type::kCatalogItemInstanceCreated)) {
        InstanceEvent created;
        created.type = event_type::kCatalogItemInstanceCreated;
        created.catalog_item_instance_id = s.catalog_item_instance_id;
        created.resource_id = s.resource_id;
        created.spec = s.spec;
        created.display_name = s.display_name;
        created.provider_name = saga.provider_name;
        if (!Emit(saga, std::move(created))) return;
      }
      result.resource_id = s.resource_id;
      result.catalog_item_instance_id = s.catalog_item_instance_id;
      result.provider_name = saga.provider_name;
      break;
    }
    case Operation::kDeleteCatalogItemInstance:
    case Operation::kDeleteResource: {
      if (!saga.Has(event_type::kInstanceDeleted) && !saga.Has(event_type::kCleanupEnqueued) &&
          !DeleteOnProvider(saga, s.resource_id, DeleteMode::kDirectOrQueue)) {
        return;
      }
      if (!saga.Has(event_type::kResourceDeleted)) {
        InstanceEvent deleted;
        deleted.type = event_type::kResourceDeleted;
        deleted.resource_id = s.resource_id;
        deleted.reason = "deleted";
        if (!Emit(saga, std::move(deleted))) return;
      }
      if (*op == Operation::kDeleteCatalogItemInstance &&
          !saga.Has(event_type::kCatalogItemInstanceDeleted)) {
        InstanceEvent deleted;
        deleted.type = event_type::kCatalogItemInstanceDeleted;
        deleted.catalog_item_instance_id = s.catalog_item_instance_id;
        deleted.resource_id = s.resource_id;
        if (!Emit(saga, std::move(deleted))) return;
      }
      result.resource_id = s.resource_id;
      result.catalog_item_instance_id = s.catalog_item_instance_id;
      break;
    }
    case Operation::kRehydrateCatalogItemInstance:
    case Operation::kRehydrateResource:
      if (!Rehydrate(saga)) return;
      result.resource_id = s.new_resource_id;
      result.old_resource_id = s.old_resource_id;
      result.new_resource_id = s.new_resource_id;
      result.catalog_item_instance_id = s.catalog_item_instance_id;
      result.provider_name = saga.provider_name;
      break;
    case Operation::kCreateServiceTypeInstance: {
      auto provider = ProviderByName(s.provider_name);
      const HealthStatus health = provider ? HealthOf(*provider) : HealthStatus::kPending;
      if (auto failure = CheckNamedProvider(s.provider_name, provider, health)) {
        Fail(saga, *failure);
        return;
      }
      saga.provider_name = provider->spec.name;
      saga.provider_id = provider->id;
      saga.spec = s.spec;
      if (!saga.Has(event_type::kInstanceCreated) && !CreateOnProvider(saga, s.instance_id)) {
        return;
      }
      result.instance_id = s.instance_id;
      result.provider_name = saga.provider_name;
      break;
    }
    case Operation::kDeleteServiceTypeInstance:
      if (!saga.Has(event_type::kInstanceDeleted) && !saga.Has(event_type::kCleanupEnqueued) &&
          !DeleteOnProvider(saga, s.instance_id,
                            s.deferred ? DeleteMode::kDeferred : DeleteMode::kDirect)) {
        return;
      }
      result.instance_id = s.instance_id;
      break;
    case Operation::kRetryCleanup:
      if (!saga.Has(event_type::kCleanupRetried)) {
        InstanceEvent retried;
        retried.type = event_type::kCleanupRetried;
        retried.instance_id = s.instance_id;
        if (!Emit(saga, std::move(retried))) return;
      }
      result.instance_id = s.instance_id;
      break;
  }
  Complete(saga, std::move(result));
}

bool InstanceWorker::Place(Saga& saga, const std::string& resource_id, const std::string& intent,
                           const std::string& old_resource_id) {
  std::optional<Result<PolicyDecision>> verdict;
  if (policy_) verdict = policy_->Evaluate(intent);
  const auto candidates = Candidates();
  const PlacementDecision placement =
      DecidePlacement(intent, verdict ? &*verdict : nullptr, candidates);
  if (placement.failure) return Fail(saga, *placement.failure);
  const Provider& p = placement.chosen->provider;
  {
    std::lock_guard lock(mu_);
    pending_load_[resource_id] = p.id;
  }
  saga.placed_resource_id = resource_id;
  InstanceEvent placed;
  placed.type = event_type::kResourcePlaced;
  placed.resource_id = resource_id;
  placed.catalog_item_instance_id = saga.started.catalog_item_instance_id;
  placed.old_resource_id = old_resource_id;
  placed.provider_name = p.spec.name;
  placed.provider_id = p.id;
  placed.service_type = p.spec.service_type;
  placed.intent = intent;
  placed.spec = placement.spec;
  placed.policy = placement.policy;
  if (!Emit(saga, std::move(placed))) return false;
  saga.provider_name = p.spec.name;
  saga.provider_id = p.id;
  saga.spec = placement.spec;
  return true;
}

bool InstanceWorker::CreateOnProvider(Saga& saga, const std::string& instance_id) {
  if (saga.Has(event_type::kInstanceCreateFailed)) {  // resumed after the failure was recorded
    return Fail(saga, {502, "create_failed",
                       "provider '" + saga.provider_name + "' did not create instance '" +
                           instance_id + "'"});
  }
  auto provider = registry_->Get(saga.provider_id);
  Result<SpReply> reply = MakeError(
      ErrorCode::kNotFound, "provider '" + saga.provider_name + "' is no longer registered");
  if (provider && *provider)
    reply = sp_->CreateInstance((*provider)->spec.endpoint, instance_id, saga.spec);
  // An SP that already has this id answers 409: the create of an earlier attempt landed.
  const bool created = reply && (Is2xx(reply->http_status) || reply->http_status == 409);
  InstanceEvent fact;
  fact.instance_id = instance_id;
  fact.provider_name = saga.provider_name;
  fact.http_status = reply ? reply->http_status : 0;
  if (created) {
    fact.type = event_type::kInstanceCreated;
    fact.provider_id = saga.provider_id;
    fact.service_type = (*provider)->spec.service_type;
    fact.spec = saga.spec;
    fact.status = reply->http_status == 409 ? "PROVISIONING" : ReplyStatus(reply->body);
    const bool emitted = Emit(saga, std::move(fact));
    Unreserve(instance_id);  // the state counts it now
    return emitted;
  }
  fact.type = event_type::kInstanceCreateFailed;
  fact.error = Describe(reply);
  const std::string error = "provider '" + saga.provider_name + "' did not create instance '" +
                            instance_id + "': " + fact.error;
  const bool emitted = Emit(saga, std::move(fact));
  Unreserve(instance_id);
  if (!emitted) return false;
  return Fail(saga, {502, "create_failed", error});
}

bool InstanceWorker::DeleteOnProvider(Saga& saga, const std::string& instance_id, DeleteMode mode) {
  auto instance = decider_.With([&](const InstanceView& v) { return v.GetInstance(instance_id); });
  if (!instance) return Fail(saga, {500, "internal", instance.error().message});
  if (!*instance || (*instance)->deleted) return true;  // nothing lives on an SP
  const ServiceTypeInstance& si = **instance;
  if (saga.Has(event_type::kInstanceDeleteFailed)) {  // resumed after the failure was recorded
    return Fail(saga, {502, "delete_failed",
                       "provider '" + si.provider_name + "' did not delete instance '" +
                           instance_id + "'"});
  }
  auto provider = registry_->Get(si.provider_id);
  const bool known = provider && *provider;
  // A deferred delete never contacts the SP; kDirectOrQueue queues rather than call a provider
  // that is not Ready.
  bool call = known && mode != DeleteMode::kDeferred;
  if (call && mode == DeleteMode::kDirectOrQueue)
    call = HealthOf(**provider) == HealthStatus::kReady;
  Result<SpReply> reply = MakeError(ErrorCode::kUnavailable,
                                    known ? "not contacted" : "provider is no longer registered");
  if (call) reply = sp_->DeleteInstance((*provider)->spec.endpoint, instance_id);
  if (reply && (Is2xx(reply->http_status) || reply->http_status == 404)) {
    InstanceEvent deleted;
    deleted.type = event_type::kInstanceDeleted;
    deleted.instance_id = instance_id;
    deleted.provider_name = si.provider_name;
    deleted.provider_id = si.provider_id;
    deleted.http_status = reply->http_status;
    return Emit(saga, std::move(deleted));
  }
  if (mode != DeleteMode::kDirect) {
    InstanceEvent queued;
    queued.type = event_type::kCleanupEnqueued;
    queued.instance_id = instance_id;
    queued.provider_name = si.provider_name;
    queued.provider_id = si.provider_id;
    queued.service_type = si.service_type;
    queued.requested_at_ms = clock_->NowMillis();
    return Emit(saga, std::move(queued));
  }
  InstanceEvent failed;
  failed.type = event_type::kInstanceDeleteFailed;
  failed.instance_id = instance_id;
  failed.provider_name = si.provider_name;
  failed.http_status = reply ? reply->http_status : 0;
  failed.error = Describe(reply);
  const std::string error = "provider '" + si.provider_name + "' did not delete instance '" +
                            instance_id + "': " + failed.error +
                            " (DELETE ?deferred=true queues it for cleanup)";
  if (!Emit(saga, std::move(failed))) return false;
  return Fail(saga, {502, "delete_failed", error});
}

bool InstanceWorker::Rehydrate(Saga& saga) {
  const InstanceEvent& s = saga.started;
  if (!saga.Has(event_type::kResourcePlaced)) {
    auto old =
        decider_.With([&](const InstanceView& v) { return v.GetResource(s.old_resource_id); });
    if (!old || !*old) {
      return Fail(saga, {404, "not_found", "resource '" + s.old_resource_id + "' not found"});
    }
    // The original intent, not today's catalog item: only policy and environment changes apply.
    if (!Place(saga, s.new_resource_id, (*old)->intent, s.old_resource_id)) return false;
  }
  if (!saga.Has(event_type::kInstanceCreated) && !CreateOnProvider(saga, s.new_resource_id)) {
    return false;
  }
  // Create before delete: the old resource is deleted with deferred=true (queued, the SP is not
  // contacted) only once the new one is accepted.
  if (!saga.Has(event_type::kCleanupEnqueued) &&
      !DeleteOnProvider(saga, s.old_resource_id, DeleteMode::kDeferred)) {
    return false;
  }
  if (!saga.Has(event_type::kResourceDeleted)) {
    InstanceEvent deleted;
    deleted.type = event_type::kResourceDeleted;
    deleted.resource_id = s.old_resource_id;
    deleted.reason = "rehydrated";
    if (!Emit(saga, std::move(deleted))) return false;
  }
  if (!s.catalog_item_instance_id.empty() &&
      !saga.Has(event_type::kCatalogItemInstanceRehydrated)) {
    InstanceEvent moved;
    moved.type = event_type::kCatalogItemInstanceRehydrated;
    moved.catalog_item_instance_id = s.catalog_item_instance_id;
    moved.old_resource_id = s.old_resource_id;
    moved.new_resource_id = s.new_resource_id;
    moved.provider_name = saga.provider_name;
    if (!Emit(saga, std::move(moved))) return false;
  }
  return true;
}

bool InstanceWorker::Fail(Saga& saga, const OperationFailure& failure) {
  InstanceEvent failed = FailureFact(saga.started, failure);
  Logger("instance-worker")
      ->info("msg=\"operation failed\" operation={} root={} status={} reason={} error=\"{}\"",
             saga.started.operation, saga.started.root, failure.http_status, failure.reason,
             failure.error);
  CountOutcome(saga.started.operation, failure.reason);
  Emit(saga, std::move(failed));
  return false;
}

bool InstanceWorker::Complete(Saga& saga, InstanceEvent result) {
  result.type = event_type::kOperationCompleted;
  result.operation = saga.started.operation;
  if (!Emit(saga, std::move(result))) return false;
  CountOutcome(saga.started.operation, "completed");
  return true;
}

void InstanceWorker::CountOutcome(const std::string& operation, const std::string& result) {
  metrics_
      ->GetCounter("dcm_instance_operations_total", "Instance operations by outcome",
                   "operation=\"" + operation + "\",result=\"" + result + "\"")
      .Inc();
}

// ---- emitting facts -----------------------------------------------------------------------

InstanceWorker::Sent InstanceWorker::Produce(const std::string& root, InstanceEvent fact) {
  fact.root = root;
  fact.source = options_.source;
  fact.time_ms = clock_->NowMillis();
  auto promise = std::make_shared<std::promise<Result<KafkaPosition>>>();
  Sent sent{promise->get_future(), std::move(fact)};
  producer_->Produce(
      options_.instances_topic, root, EncodeCloudEvent(EncodeInstanceEvent(sent.fact)),
      {{"content-type", std::string(kCloudEventsContentType)}},
      [promise](Result<KafkaPosition> delivered) { promise->set_value(std::move(delivered)); },
      KeyPartition(root, partitions_));
  return sent;
}

Status InstanceWorker::Fold(Sent& sent) {
  auto delivered = sent.ack.get();
  if (!delivered) return tl::unexpected(delivered.error());
  if (auto folded = decider_.Apply(sent.fact, delivered->partition, delivered->offset); !folded) {
    Logger("instance-worker")
        ->error("msg=\"own fact not applied to the decision state\" type={} error=\"{}\"",
                sent.fact.type, folded.error().message);
    healthy_ = false;
  }
  return OkStatus();
}

std::optional<InstanceWorker::Sent> InstanceWorker::EmitAsync(const std::string& root,
                                                              const InstanceEvent& fact) {
  std::shared_lock lock(own_mu_);
  if (!owned_.count(KeyPartition(root, partitions_))) return std::nullopt;
  return Produce(root, fact);
}

bool InstanceWorker::Acknowledged(Sent sent) {
  if (auto status = Fold(sent); !status) {
    Logger("instance-worker")
        ->warn("msg=\"fact not acknowledged\" type={} root={} error=\"{}\"", sent.fact.type,
               sent.fact.root, status.error().message);
    return false;
  }
  if (!options_.crash_after_fact.empty() && sent.fact.type == options_.crash_after_fact) {
    Logger("instance-worker")->warn("msg=\"crash injection: SIGKILL after {}\"", sent.fact.type);
    raise(SIGKILL);
  }
  return true;
}

bool InstanceWorker::EmitFact(const std::string& root, InstanceEvent fact) {
  auto sent = EmitAsync(root, fact);
  return sent && Acknowledged(std::move(*sent));
}

bool InstanceWorker::Emit(Saga& saga, InstanceEvent fact) {
  fact.request_id = saga.started.request_id;
  fact.actor = saga.started.actor;
  const std::string type = fact.type;
  if (!EmitFact(saga.started.root, std::move(fact))) return false;
  saga.steps.push_back(type);
  return true;
}

bool InstanceWorker::OwnsRoot(const std::string& root) const {
  std::shared_lock lock(own_mu_);
  return owned_.count(KeyPartition(root, partitions_)) > 0;
}

void InstanceWorker::Unreserve(const std::string& resource_id) {
  std::lock_guard lock(mu_);
  pending_load_.erase(resource_id);
}

// ---- providers ----------------------------------------------------------------------------

HealthStatus InstanceWorker::HealthOf(const Provider& provider) const {
  auto record = health_->Get(provider.id);
  const HealthRecord* r = record && *record ? &**record : nullptr;
  return EffectiveHealthStatus(r, provider.seq);
}

std::vector<PlacementCandidate> InstanceWorker::Candidates() {
  std::map<std::string, int64_t> pending;
  {
    std::lock_guard lock(mu_);
    for (const auto& [resource, provider] : pending_load_) ++pending[provider];
  }
  std::vector<PlacementCandidate> out;
  auto page = registry_->List(ProviderFilter{}, "", SIZE_MAX);
  if (!page) {
    Logger("instance-worker")
        ->warn("msg=\"cannot read the registry\" error=\"{}\"", page.error().message);
    return out;
  }
  out.reserve(page->providers.size());
  for (auto& p : page->providers) {
    PlacementCandidate c;
    c.health = HealthOf(p);
    auto live = decider_.With([&](const InstanceView& v) { return v.LiveInstances(p.id); });
    c.live_instances = (live ? *live : 0) + pending[p.id];
    c.provider = std::move(p);
    out.push_back(std::move(c));
  }
  return out;
}

std::optional<Provider> InstanceWorker::ProviderByName(const std::string& name) {
  ProviderFilter filter;
  filter.accept = [&](const Provider& p) { return p.spec.name == name; };
  auto page = registry_->List(filter, "", 1);
  if (!page || page->providers.empty()) return std::nullopt;
  return page->providers.front();
}

// ---- cleanup ------------------------------------------------------------------------------

void InstanceWorker::CleanupLoop() {
  while (running_) {
    {
      std::unique_lock lock(mu_);
      cleanup_cv_.wait_for(lock, options_.cleanup_interval, [&] { return !running_.load(); });
    }
    if (!running_) return;
    RunCleanupCycle();
  }
}

void InstanceWorker::RunCleanupCycle() {
  std::set<int32_t> owned;
  {
    std::shared_lock lock(own_mu_);
    owned = owned_;
  }
  if (owned.empty()) {
    queue_depth_->Set(0);
    return;
  }
  auto records = instances_->ListCleanupFor(
      [&](const std::string& root) { return owned.count(KeyPartition(root, partitions_)) > 0; });
  if (!records) {
    Logger("instance-worker")
        ->warn("msg=\"cannot read the cleanup queue\" error=\"{}\"", records.error().message);
    return;
  }
  queue_depth_->Set(static_cast<int64_t>(records->size()));
  size_t submitted = 0;
  // Parking needs no SP call: its facts go out together and are acknowledged together.
  std::vector<Sent> parked_acks;
  for (const auto& r : *records) {
    if (r.status == kCleanupFailedStatus) continue;
    auto provider = registry_->Get(r.provider_id);
    const bool known = provider && *provider;
    const HealthStatus health = known ? HealthOf(**provider) : HealthStatus::kPending;
    if (!known || health != HealthStatus::kReady) {
      if (r.status == kCleanupPendingProvider) continue;  // parked already: no retry burned
      InstanceEvent parked;
      parked.actor = kCleanupActor;
      parked.type = event_type::kCleanupParked;
      parked.instance_id = r.instance_id;
      parked.provider_name = r.provider_name;
      parked.status = kCleanupPendingProvider;
      parked.error = known ? "provider '" + r.provider_name + "' is " + HealthStatusName(health)
                           : "provider '" + r.provider_name + "' is not registered";
      parked.root = r.root;
      if (auto sent = EmitAsync(r.root, parked)) parked_acks.push_back(std::move(*sent));
      continue;
    }
    {
      std::lock_guard lock(mu_);
      if (!cleaning_.insert(r.instance_id).second) continue;
      ++cleanup_tasks_;
    }
    Submit([this, r] {
      CleanupOne(r);
      std::lock_guard lock(mu_);
      cleaning_.erase(r.instance_id);
      if (--cleanup_tasks_ == 0) cleanup_cv_.notify_all();
    });
    ++submitted;
  }
  for (auto& sent : parked_acks) (void)Acknowledged(std::move(sent));
  if (submitted == 0) return;
  std::unique_lock lock(mu_);
  cleanup_cv_.wait(lock, [&] { return cleanup_tasks_ == 0 || !running_; });
}

void InstanceWorker::CleanupOne(const CleanupRecord& r) {
  auto provider = registry_->Get(r.provider_id);
  if (!provider || !*provider) return;  // deregistered meanwhile: parked next cycle
  auto reply = sp_->DeleteInstance((*provider)->spec.endpoint, r.instance_id);
  InstanceEvent attempt;
  attempt.actor = kCleanupActor;
  attempt.type = event_type::kCleanupAttempted;
  attempt.instance_id = r.instance_id;
  attempt.provider_name = r.provider_name;
  attempt.provider_id = r.provider_id;
  attempt.max_retries = options_.cleanup_max_retries;
  attempt.http_status = reply ? reply->http_status : 0;
  if (reply && (Is2xx(reply->http_status) || reply->http_status == 404)) {
    attempt.outcome = reply->http_status == 404 ? "gone" : "deleted";
    attempt.status = "DELETED";
    attempt.retry_count = r.retry_count;
  } else {
    attempt.outcome = "failed";
    attempt.error = Describe(reply);
    attempt.retry_count = r.retry_count + 1;
    attempt.status = attempt.retry_count >= options_.cleanup_max_retries ? kCleanupFailedStatus
                                                                         : kCleanupPending;
  }
  metrics_
      ->GetCounter("dcm_cleanup_attempts_total", "Deferred-delete attempts by outcome",
                   "outcome=\"" + attempt.outcome + "\"")
      .Inc();
  const bool failed_for_good = attempt.status == kCleanupFailedStatus;
  InstanceEvent alert;
  alert.actor = kCleanupActor;
  if (failed_for_good) {
    alert.type = event_type::kCleanupFailed;
    alert.instance_id = r.instance_id;
    alert.provider_name = r.provider_name;
    alert.retry_count = attempt.retry_count;
    alert.max_retries = attempt.max_retries;
    alert.error = attempt.error;
  }
  if (!EmitFact(r.root, std::move(attempt)) || !failed_for_good) return;
  Logger("instance-worker")
      ->warn(
          "msg=\"cleanup FAILED; needs an operator (POST /cleanup-queue/{}:retry)\" "
          "instance_id={} provider={} retries={} error=\"{}\"",
          r.instance_id, r.instance_id, r.provider_name, alert.retry_count, alert.error);
  EmitFact(r.root, std::move(alert));
}

std::vector<int32_t> InstanceWorker::OwnedPartitions() const {
  std::shared_lock lock(own_mu_);
  return {owned_.begin(), owned_.end()};
}

size_t InstanceWorker::SagasInFlight() const {
  std::lock_guard lock(mu_);
  return running_sagas_.size();
}

}  // namespace dcm
