#include "consumers/saga_runner.h"

#include <thread>

#include "events/json_read.h"
#include "src/common/log.h"
#include "src/common/reply_summary.h"

namespace dcm {
namespace {

constexpr std::chrono::milliseconds kRetryDelay{1000};  // back-off after Kafka refused a fact

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

}  // namespace

bool Is2xx(int status) { return status >= 200 && status < 300; }

std::string DescribeSpReply(const Result<SpReply>& reply) {
  if (!reply) return reply.error().message;
  return SummarizeReply(reply->http_status, reply->content_type, reply->body);
}

HealthStatus ProviderHealth(const HealthView& health, const Provider& provider) {
  auto record = health.Get(provider.id);
  const HealthRecord* r = record && *record ? &**record : nullptr;
  return EffectiveHealthStatus(r, provider.seq);
}

void CountInstanceOutcome(Metrics* metrics, const std::string& operation,
                          const std::string& result) {
  metrics
      ->GetCounter("dcm_instance_operations_total", "Instance operations by outcome",
                   "operation=\"" + operation + "\",result=\"" + result + "\"")
      .Inc();
}

SagaRunner::SagaRunner(SagaPorts ports, FactEmitter* emitter, const InstanceDecider* decider,
                       TaskPool* pool, Metrics* metrics, const std::atomic<bool>* running)
    : ports_(ports),
      emitter_(emitter),
      decider_(decider),
      pool_(pool),
      metrics_(metrics),
      running_(running) {
  sagas_gauge_ =
      &metrics_->GetGauge("dcm_sagas_in_flight", "Instance operations this instance is running");
  saga_seconds_ = &metrics_->GetHistogram("dcm_instance_operation_seconds",
                                          "Instance operation run time, started to ended");
}

void SagaRunner::Dispatch(Saga saga) {
  if (!Claim(saga)) return;
  pool_->Submit([this, saga = std::move(saga)]() mutable { RunTask(std::move(saga)); });
}

size_t SagaRunner::InFlight() const {
  std::lock_guard lock(mu_);
  return running_sagas_.size();
}

bool SagaRunner::Claim(Saga& saga) {
  std::lock_guard lock(mu_);
  if (running_sagas_.count(saga.started.root)) return false;
  // Still in progress? A saga task folds its outcome before it releases the root, so a saga
  // that ended since it was read is not run again; and it resumes from its latest steps.
  auto current =
      decider_->With([&](const InstanceView& v) { return v.GetSaga(saga.started.root); });
  if (!current || !*current || (*current)->started.request_id != saga.started.request_id) {
    return false;
  }
  saga = std::move(**current);
  running_sagas_.emplace(saga.started.root, saga.started.request_id);
  sagas_gauge_->Set(static_cast<int64_t>(running_sagas_.size()));
  return true;
}

void SagaRunner::Release(const Saga& saga) {
  std::lock_guard lock(mu_);
  auto it = running_sagas_.find(saga.started.root);
  if (it != running_sagas_.end() && it->second == saga.started.request_id) {
    running_sagas_.erase(it);
  }
  if (!saga.placed_resource_id.empty()) pending_load_.erase(saga.placed_resource_id);
  sagas_gauge_->Set(static_cast<int64_t>(running_sagas_.size()));
}

void SagaRunner::RunTask(Saga saga) {
  const auto begun = std::chrono::steady_clock::now();
  Run(saga);
  const bool ended =
      saga.Has(event_type::kOperationCompleted) || saga.Has(event_type::kOperationFailed);
  if (ended) {
    saga_seconds_->Observe(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begun).count());
  } else if (running_->load() && emitter_->Owns(saga.started.root)) {
    // Kafka did not take a fact: back off, then try the remaining steps again (still claimed).
    std::this_thread::sleep_for(kRetryDelay);
    pool_->Submit([this, saga = std::move(saga)]() mutable { RunTask(std::move(saga)); });
    return;
  }
  Release(saga);
}

void SagaRunner::Run(Saga& saga) {
  const std::vector<SagaStep> plan = PlanSaga(saga.started);
  if (plan.empty()) {
    Fail(saga, {400, "invalid", "unknown operation '" + saga.started.operation + "'"});
    return;
  }
  for (const SagaStep& step : plan) {
    if (!step.DoneIn(saga) && !RunStep(saga, step)) return;
  }
  Complete(saga);
}

bool SagaRunner::RunStep(Saga& saga, const SagaStep& step) {
  switch (step.kind) {
    case StepKind::kPlace:
      return Place(saga, step);
    case StepKind::kCheckNamedProvider:
      return CheckNamedProvider(saga, step);
    case StepKind::kCreate:
      return CreateOnProvider(saga, step.target);
    case StepKind::kDelete:
      return DeleteOnProvider(saga, step.target, step.mode);
    case StepKind::kRecord:
      return Record(saga, step);
  }
  return false;
}

bool SagaRunner::Place(Saga& saga, const SagaStep& step) {
  std::string intent = step.intent;
  if (!step.old_resource_id.empty()) {
    // The original intent, not today's catalog item: only policy and environment changes apply.
    auto old =
        decider_->With([&](const InstanceView& v) { return v.GetResource(step.old_resource_id); });
    if (!old || !*old) {
      return Fail(saga, {404, "not_found", "resource '" + step.old_resource_id + "' not found"});
    }
    intent = (*old)->intent;
  }
  ResourcePlaced placed;
  placed.resource_id = step.target;
  placed.catalog_item_instance_id = saga.started.catalog_item_instance_id;
  placed.old_resource_id = step.old_resource_id;
  placed.intent = intent;
  // A peer placement begun before a crash goes on where it was (its hold is this saga's).
  if (!saga.reservation_id.empty() || !saga.contract_id.empty()) {
    placed.spec = saga.spec.empty() ? intent : saga.spec;
    return PlaceOnPeer(saga, step, placed, {422, "no_provider", "no provider could take it"});
  }
  std::optional<Result<PolicyDecision>> verdict;
  if (ports_.policy) verdict = ports_.policy->Evaluate(intent);
  const auto candidates = Candidates();
  const PlacementDecision placement =
      DecidePlacement(intent, verdict ? &*verdict : nullptr, candidates);
  placed.spec = placement.spec.empty() ? intent : placement.spec;
  placed.policy = placement.policy;
  if (placement.failure) {
    const std::string& reason = placement.failure->reason;
    // prefer_local (SPEC §10: a rehydration that brings an instance home): local or not at all.
    if (ports_.federation && !saga.started.prefer_local &&
        (reason == "no_provider" || reason == "no_ready_provider") &&
        FederationAllowed(placed.spec)) {
      return PlaceOnPeer(saga, step, placed, *placement.failure);
    }
    return Fail(saga, *placement.failure);
  }
  const Provider& p = placement.chosen->provider;
  {
    std::lock_guard lock(mu_);
    pending_load_[step.target] = p.id;
  }
  saga.placed_resource_id = step.target;
  placed.provider_name = p.spec.name;
  placed.provider_id = p.id;
  placed.service_type = p.spec.service_type;
  if (!Emit(saga, std::move(placed))) return false;
  saga.provider_name = p.spec.name;
  saga.provider_id = p.id;
  saga.spec = placement.spec;
  return true;
}

bool SagaRunner::CheckNamedProvider(Saga& saga, const SagaStep& step) {
  auto provider = ProviderByName(step.target);
  const HealthStatus health =
      provider ? ProviderHealth(*ports_.health, *provider) : HealthStatus::kPending;
  if (auto failure = dcm::CheckNamedProvider(step.target, provider, health)) {
    return Fail(saga, *failure);
  }
  saga.provider_name = provider->spec.name;
  saga.provider_id = provider->id;
  saga.spec = saga.started.spec;
  return true;
}

bool SagaRunner::CreateOnProvider(Saga& saga, const std::string& instance_id) {
  if (!PeerOfProviderName(saga.provider_name).empty()) return CreateOnPeer(saga, instance_id);
  if (saga.Has(event_type::kInstanceCreateFailed)) {  // resumed after the failure was recorded
    return Fail(saga, {502, "create_failed",
                       "provider '" + saga.provider_name + "' did not create instance '" +
                           instance_id + "'"});
  }
  auto provider = ports_.registry->Get(saga.provider_id);
  Result<SpReply> reply = MakeError(
      ErrorCode::kNotFound, "provider '" + saga.provider_name + "' is no longer registered");
  if (provider && *provider)
    reply = ports_.sp->CreateInstance((*provider)->spec.endpoint, instance_id, saga.spec);
  // An SP that already has this id answers 409: the create of an earlier attempt landed.
  const bool created = reply && (Is2xx(reply->http_status) || reply->http_status == 409);
  const int http_status = reply ? reply->http_status : 0;
  if (created) {
    InstanceCreated fact;
    fact.instance_id = instance_id;
    fact.provider_name = saga.provider_name;
    fact.http_status = http_status;
    fact.provider_id = saga.provider_id;
    fact.service_type = (*provider)->spec.service_type;
    fact.spec = saga.spec;
    fact.status = reply->http_status == 409 ? "PROVISIONING" : ReplyStatus(reply->body);
    const bool emitted = Emit(saga, std::move(fact));
    Unreserve(instance_id);  // the state counts it now
    return emitted;
  }
  InstanceCreateFailed fact;
  fact.instance_id = instance_id;
  fact.provider_name = saga.provider_name;
  fact.http_status = http_status;
  fact.error = DescribeSpReply(reply);
  const std::string error = "provider '" + saga.provider_name + "' did not create instance '" +
                            instance_id + "': " + fact.error;
  const bool emitted = Emit(saga, std::move(fact));
  Unreserve(instance_id);
  if (!emitted) return false;
  return Fail(saga, {502, "create_failed", error});
}

bool SagaRunner::DeleteOnProvider(Saga& saga, const std::string& instance_id, DeleteMode mode) {
  auto instance = decider_->With([&](const InstanceView& v) { return v.GetInstance(instance_id); });
  if (!instance) return Fail(saga, {500, "internal", instance.error().message});
  if (!*instance || (*instance)->deleted) return true;  // nothing lives on an SP
  const ServiceTypeInstance& si = **instance;
  if (auto remote = DecodeRemotePlacement(si.placement)) {
    return DeleteOnPeer(saga, si, *remote, mode);
  }
  if (saga.Has(event_type::kInstanceDeleteFailed)) {  // resumed after the failure was recorded
    return Fail(saga, {502, "delete_failed",
                       "provider '" + si.provider_name + "' did not delete instance '" +
                           instance_id + "'"});
  }
  auto provider = ports_.registry->Get(si.provider_id);
  const bool known = provider && *provider;
  // A deferred delete never contacts the SP; kDirectOrQueue queues rather than call a provider
  // that is not Ready.
  bool call = known && mode != DeleteMode::kDeferred;
  if (call && mode == DeleteMode::kDirectOrQueue)
    call = ProviderHealth(*ports_.health, **provider) == HealthStatus::kReady;
  Result<SpReply> reply = MakeError(ErrorCode::kUnavailable,
                                    known ? "not contacted" : "provider is no longer registered");
  if (call) reply = ports_.sp->DeleteInstance((*provider)->spec.endpoint, instance_id);
  if (reply && (Is2xx(reply->http_status) || reply->http_status == 404)) {
    InstanceDeleted deleted;
    deleted.instance_id = instance_id;
    deleted.provider_name = si.provider_name;
    deleted.provider_id = si.provider_id;
    deleted.http_status = reply->http_status;
    return Emit(saga, std::move(deleted));
  }
  if (mode != DeleteMode::kDirect) return Enqueue(saga, si);
  InstanceDeleteFailed failed;
  failed.instance_id = instance_id;
  failed.provider_name = si.provider_name;
  failed.http_status = reply ? reply->http_status : 0;
  failed.error = DescribeSpReply(reply);
  const std::string error = "provider '" + si.provider_name + "' did not delete instance '" +
                            instance_id + "': " + failed.error +
                            " (DELETE ?deferred=true queues it for cleanup)";
  if (!Emit(saga, std::move(failed))) return false;
  return Fail(saga, {502, "delete_failed", error});
}

bool SagaRunner::Enqueue(Saga& saga, const ServiceTypeInstance& si) {
  CleanupEnqueued queued;
  queued.instance_id = si.id;
  queued.provider_name = si.provider_name;
  queued.provider_id = si.provider_id;
  queued.service_type = si.service_type;
  queued.requested_at_ms = ports_.clock->NowMillis();
  return Emit(saga, std::move(queued));
}

bool SagaRunner::Record(Saga& saga, const SagaStep& step) {
  InstanceFact fact = step.fact;
  if (step.with_provider) {
    std::visit(
        [&](auto& f) {
          if constexpr (requires { f.provider_name; }) f.provider_name = saga.provider_name;
        },
        fact);
  }
  return Emit(saga, std::move(fact));
}

bool SagaRunner::Fail(Saga& saga, const OperationFailure& failure) {
  Logger("instance-worker")
      ->info("msg=\"operation failed\" operation={} root={} status={} reason={} error=\"{}\"",
             saga.started.operation, saga.started.root, failure.http_status, failure.reason,
             failure.error);
  CountInstanceOutcome(metrics_, saga.started.operation, failure.reason);
  Emit(saga, FailureFact(saga.started, failure));
  return false;
}

bool SagaRunner::Complete(Saga& saga) {
  if (!Emit(saga, CompletionOf(saga))) return false;
  CountInstanceOutcome(metrics_, saga.started.operation, "completed");
  return true;
}

bool SagaRunner::Emit(Saga& saga, InstanceFact fact) {
  InstanceEnvelope& envelope = EnvelopeOf(fact);
  envelope.request_id = saga.started.request_id;
  envelope.actor = saga.started.actor;
  const std::string type = TypeOf(fact);
  if (!emitter_->Emit(saga.started.root, std::move(fact))) return false;
  saga.steps.push_back(type);
  return true;
}

void SagaRunner::Unreserve(const std::string& resource_id) {
  std::lock_guard lock(mu_);
  pending_load_.erase(resource_id);
}

std::vector<PlacementCandidate> SagaRunner::Candidates() {
  std::map<std::string, int64_t> pending;
  {
    std::lock_guard lock(mu_);
    for (const auto& [resource, provider] : pending_load_) ++pending[provider];
  }
  std::vector<PlacementCandidate> out;
  auto page = ports_.registry->List(ProviderFilter{}, "", SIZE_MAX);
  if (!page) {
    Logger("instance-worker")
        ->warn("msg=\"cannot read the registry\" error=\"{}\"", page.error().message);
    return out;
  }
  out.reserve(page->providers.size());
  for (auto& p : page->providers) {
    PlacementCandidate c;
    c.health = ProviderHealth(*ports_.health, p);
    auto live = decider_->With([&](const InstanceView& v) { return v.LiveInstances(p.id); });
    c.live_instances = (live ? *live : 0) + pending[p.id];
    c.provider = std::move(p);
    out.push_back(std::move(c));
  }
  return out;
}

std::optional<Provider> SagaRunner::ProviderByName(const std::string& name) {
  ProviderFilter filter;
  filter.accept = [&](const Provider& p) { return p.spec.name == name; };
  auto page = ports_.registry->List(filter, "", 1);
  if (!page || page->providers.empty()) return std::nullopt;
  return page->providers.front();
}

}  // namespace dcm
