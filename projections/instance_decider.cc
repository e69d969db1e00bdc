#include "projections/instance_decider.h"

#include <mutex>

#include "projections/instance_fold.h"
#include "projections/instance_records.h"
#include "src/common/log.h"

namespace dcm {
namespace {

using Kind = InstanceDecision::Kind;

InstanceDecision Failed(const InstanceEvent& request, int status, const char* reason,
                        std::string error) {
  return {
      Kind::kFailed, ToInstanceEvent(FailureFact(request, {status, reason, std::move(error)})), {}};
}

// The request as its operation_started (every parameter carried on).
InstanceDecision Started(const InstanceEvent& request) {
  InstanceDecision d{Kind::kStarted, request, {}};
  d.fact.event_id.clear();
  d.fact.source.clear();
  d.fact.subject.clear();
  d.fact.type = event_type::kOperationStarted;
  return d;
}

// The rules of one operation over the state (`s`), for a request that is not a duplicate and
// whose root is free.
class Rules {
 public:
  Rules(const InstanceView& s, const InstanceEvent& request) : s_(s), r_(request) {}

  InstanceDecision Decide(Operation op) const {
    switch (op) {
      case Operation::kCreateCatalogItemInstance:
        return CreateCatalogItemInstance();
      case Operation::kCreateResource:
        return CreateNew(r_.resource_id, "resource");
      case Operation::kCreateServiceTypeInstance:
        return CreateNew(r_.instance_id, "instance");
      case Operation::kDeleteCatalogItemInstance:
      case Operation::kRehydrateCatalogItemInstance:
        return OnCatalogItemInstance(op);
      case Operation::kDeleteResource:
      case Operation::kRehydrateResource:
        return OnResource(op);
      case Operation::kDeleteServiceTypeInstance:
        return DeleteServiceTypeInstance();
      case Operation::kRetryCleanup:
        return RetryCleanup();
      case Operation::kRecoverLostResource:
        // The lost resource must still exist; with a new resource id it is rehydrated, with the
        // same rules as a rehydration, else only marked LOST.
        return OnResource(r_.new_resource_id.empty() ? Operation::kDeleteResource
                                                     : Operation::kRehydrateResource);
    }
    return Failed(r_, 400, "invalid", "unknown operation");
  }

  // The first read of the state that failed: the decision is then not taken (the worker reads
  // the request again; an early HTTP check answers the error).
  const std::optional<Error>& read_error() const { return read_error_; }

 private:
  // True (and the error kept) when `read` failed: the caller stops deciding.
  template <class T>
  bool Unreadable(const Result<T>& read) const {
    if (!read && !read_error_) read_error_ = read.error();
    return !read;
  }

  // An id that is free for a new resource/instance: neither a resource nor an instance uses it
  // (unreadable: the rules stop, read_error says why).
  bool IdTaken(const std::string& id) const {
    auto r = s_.GetResource(id);
    auto i = s_.GetInstance(id);
    return Unreadable(r) || Unreadable(i) || r->has_value() || i->has_value();
  }

  InstanceDecision CreateCatalogItemInstance() const {
    auto cii = s_.GetCatalogItemInstance(r_.catalog_item_instance_id);
    if (Unreadable(cii) || *cii) {
      return Failed(r_, 409, "conflict",
                    "catalog item instance '" + r_.catalog_item_instance_id + "' already exists");
    }
    if (IdTaken(r_.resource_id)) {
      return Failed(r_, 409, "conflict", "resource id '" + r_.resource_id + "' is taken");
    }
    return Started(r_);
  }

  InstanceDecision CreateNew(const std::string& id, const char* what) const {
    if (IdTaken(id)) {
      return Failed(r_, 409, "conflict", std::string(what) + " '" + id + "' already exists");
    }
    return Started(r_);
  }

  InstanceDecision OnCatalogItemInstance(Operation op) const {
    auto cii = s_.GetCatalogItemInstance(r_.catalog_item_instance_id);
    if (Unreadable(cii) || !*cii) {
      return Failed(r_, 404, "not_found",
                    "catalog item instance '" + r_.catalog_item_instance_id + "' not found");
    }
    InstanceDecision d = Started(r_);
    const std::string& current = (*cii)->resource_id;
    if (op == Operation::kDeleteCatalogItemInstance) {
      d.fact.resource_id = current;
      return d;
    }
    if (IdTaken(r_.new_resource_id)) {
      return Failed(r_, 409, "conflict", "resource id '" + r_.new_resource_id + "' is taken");
    }
    // The request names the resource it meant to replace; another rehydration may have
    // replaced it since (concurrent rehydrations: exactly one proceeds).
    if (!r_.old_resource_id.empty() && r_.old_resource_id != current) {
      return Failed(r_, 409, "conflict",
                    "catalog item instance '" + r_.catalog_item_instance_id +
                        "' was rehydrated meanwhile (resource " + r_.old_resource_id + " is now " +
                        current + ")");
    }
    d.fact.old_resource_id = current;
    return d;
  }

  InstanceDecision OnResource(Operation op) const {
    auto resource = s_.GetResource(r_.resource_id);
    if (Unreadable(resource) || !*resource) {
      return Failed(r_, 404, "not_found", "resource '" + r_.resource_id + "' not found");
    }
    InstanceDecision d = Started(r_);
    if (op == Operation::kDeleteResource) return d;
    if (IdTaken(r_.new_resource_id)) {
      return Failed(r_, 409, "conflict", "resource id '" + r_.new_resource_id + "' is taken");
    }
    d.fact.old_resource_id = r_.resource_id;
    // The catalog's reference moves along only if it points at this resource.
    d.fact.catalog_item_instance_id.clear();
    const auto& cii_id = (*resource)->catalog_item_instance_id;
    if (cii_id.empty()) return d;
    auto cii = s_.GetCatalogItemInstance(cii_id);
    if (cii && *cii && (*cii)->resource_id == r_.resource_id) {
      d.fact.catalog_item_instance_id = cii_id;
    }
    return d;
  }

  InstanceDecision DeleteServiceTypeInstance() const {
    auto instance = s_.GetInstance(r_.instance_id);
    if (Unreadable(instance) || !*instance || (*instance)->deleted) {
      return Failed(r_, 404, "not_found", "instance '" + r_.instance_id + "' not found");
    }
    return Started(r_);
  }

  InstanceDecision RetryCleanup() const {
    auto record = s_.GetCleanup(r_.instance_id);
    if (Unreadable(record) || !*record) {
      return Failed(r_, 404, "not_found",
                    "no cleanup record for instance '" + r_.instance_id + "'");
    }
    if ((*record)->status != kCleanupFailedStatus) {
      return Failed(
          r_, 409, "conflict",
          "cleanup record '" + r_.instance_id + "' is " + (*record)->status + ", not FAILED");
    }
    return Started(r_);
  }

  const InstanceView& s_;
  const InstanceEvent& r_;
  mutable std::optional<Error> read_error_;
};

InstanceDecision Busy(const InstanceEvent& request, const std::string& other_request) {
  return Failed(request, 409, "conflict",
                "another operation (request " + other_request + ") is in progress on " +
                    request.root + "; retry when it has finished");
}

// The decision on `request` against the state `s` (pure: reads only).
Result<InstanceDecision> DecideRequest(const InstanceView& s, const InstanceEvent& request,
                                       const StartedInBatch& batch) {
  ASSIGN_OR_RETURN(auto outcome, s.RequestOutcome(request.request_id));
  if (outcome) return InstanceDecision{};  // decided before (a duplicate)
  ASSIGN_OR_RETURN(auto saga, s.GetSaga(request.root));
  if (saga && saga->started.request_id == request.request_id) {
    return InstanceDecision{Kind::kResume, {}, std::move(*saga)};
  }
  auto in_batch = batch.find(request.root);
  if (in_batch != batch.end() && in_batch->second == request.request_id) {
    return InstanceDecision{};  // a copy within the batch
  }
  if (saga) return Busy(request, saga->started.request_id);
  if (in_batch != batch.end()) return Busy(request, in_batch->second);
  return CheckOperation(s, request);
}

PlacementDecision Failure(int status, const char* reason, std::string error) {
  PlacementDecision d;
  d.failure = OperationFailure{status, reason, std::move(error)};
  return d;
}

}  // namespace

Result<InstanceDecision> CheckOperation(const InstanceView& state, const InstanceEvent& request) {
  auto op = ParseOperation(request.operation);
  if (!op) return Failed(request, 400, "invalid", "unknown operation '" + request.operation + "'");
  const Rules rules(state, request);
  InstanceDecision d = rules.Decide(*op);
  if (rules.read_error()) return tl::unexpected(*rules.read_error());
  if (d.kind == Kind::kStarted) d.saga.started = d.fact;
  return d;
}

OperationFailed FailureFact(const InstanceEvent& request, const OperationFailure& failure) {
  OperationFailed f;
  f.actor = request.actor;
  f.request_id = request.request_id;
  f.root = request.root;
  f.operation = request.operation;
  f.http_status = failure.http_status;
  f.reason = failure.reason;
  f.error = failure.error;
  return f;
}

PlacementDecision DecidePlacement(const std::string& intent, const Result<PolicyDecision>* verdict,
                                  const std::vector<PlacementCandidate>& candidates) {
  PlacementDecision d;
  d.spec = intent;
  d.policy = verdict ? "policy_manager" : "builtin";
  std::string selected;
  if (verdict) {
    if (!*verdict) {
      return Failure(503, "policy_unavailable", "policy manager: " + verdict->error().message);
    }
    const PolicyDecision& v = **verdict;
    if (v.verdict == PolicyDecision::Verdict::kRejected) {
      return Failure(406, "policy_rejected", "policy rejected the request: " + v.detail);
    }
    if (v.verdict == PolicyDecision::Verdict::kConflict) {
      return Failure(409, "policy_conflict", "policy conflict: " + v.detail);
    }
    if (!v.spec.empty()) d.spec = v.spec;
    selected = v.selected_provider;
  }
  const PlacementChoice choice = selected.empty()
                                     ? ChooseProvider(d.spec, candidates)
                                     : CheckSelectedProvider(d.spec, selected, candidates);
  switch (choice.failure) {
    case PlacementFailure::kNone:
      d.chosen = choice.chosen;
      return d;
    case PlacementFailure::kNoProvider:
      return Failure(422, "no_provider", choice.detail);
    case PlacementFailure::kNotReady:
      return Failure(503, "no_ready_provider", choice.detail);
    case PlacementFailure::kBadSpec:
      return Failure(400, "invalid_spec", choice.detail);
  }
  return Failure(500, "internal", "unknown placement failure");
}

std::optional<OperationFailure> CheckNamedProvider(const std::string& name,
                                                   const std::optional<Provider>& provider,
                                                   HealthStatus health) {
  if (!provider) {
    return OperationFailure{422, "provider_not_found", "provider '" + name + "' not found"};
  }
  if (health != HealthStatus::kReady) {
    return OperationFailure{
        503, "provider_not_ready",
        "provider '" + name + "' is " + std::string(HealthStatusName(health)) + ", not Ready"};
  }
  return std::nullopt;
}

InstanceDecider::InstanceDecider(const Store* store, const AppliedOffsets* applied,
                                 std::string topic)
    : store_(store),
      applied_(applied),
      topic_(std::move(topic)),
      view_(store, &overlay_),
      sagas_(&instance_records::DecodeSaga, 1000) {}

Status InstanceDecider::Apply(const InstanceFact& fact, int32_t partition, int64_t offset) {
  std::unique_lock lock(mu_);
  if (auto folded = FoldInstanceFact(store_, overlay_, sagas_, fact); !folded) {
    return MakeError(ErrorCode::kInternal, "own fact not foldable: " + folded.error().message);
  }
  facts_.push_back({partition, offset, fact});
  return OkStatus();
}

Result<InstanceDecision> InstanceDecider::Decide(const InstanceEvent& request,
                                                 const StartedInBatch& batch) const {
  std::shared_lock lock(mu_);
  return DecideRequest(view_, request, batch);
}

namespace {
// Facts in the overlay before a compaction folds the unapplied ones again: the projection lags
// its worker by a roughly constant number of facts, so the larger the overlay, the smaller the
// share of it folded a second time.
constexpr size_t kRefoldAt = 1024;
}  // namespace

bool InstanceDecider::Compact(bool force) {
  std::lock_guard compacting(compact_mu_);
  // Which facts the projection has applied, on the list as it is now (Apply may append
  // meanwhile; nothing else changes it while this holds compact_mu_).
  std::vector<OwnFact> unapplied;
  size_t listed = 0;
  {
    std::shared_lock lock(mu_);
    if (facts_.empty()) return true;
    listed = facts_.size();
    for (size_t i = 0; i < listed; ++i) {
      const OwnFact& f = facts_[i];
      if (applied_->Next(InstanceProjection::kName, topic_, f.partition) <= f.offset) {
        unapplied.push_back(f);
      }
    }
  }
  // Rebuild when every fact is applied (the overlay just goes), when forced (a takeover: the
  // overlay must not hide what the projection applied since), or when the overlay holds
  // kRefoldAt facts and at least half of them can go (a rebuild folds the rest again).
  if (unapplied.size() == listed) return false;  // nothing to drop
  if (!force && !unapplied.empty() && (listed < kRefoldAt || unapplied.size() * 2 > listed)) {
    return false;
  }
  // The store holds the applied facts now; the others are folded again over it, in the order
  // they were acknowledged (a root's facts share a partition, so per key that is offset order; a
  // fact the projection applies meanwhile folds idempotently). Built without the lock, so the
  // sagas' reads and Apply do not wait for it (a rebuild of thousands of facts takes ms).
  StoreBatch rebuilt;
  DecodedCache<Saga> sagas(&instance_records::DecodeSaga, 1000);
  for (const auto& f : unapplied) Refold(rebuilt, sagas, f.fact);
  std::unique_lock lock(mu_);
  for (size_t i = listed; i < facts_.size(); ++i) {  // acknowledged while it was being built
    Refold(rebuilt, sagas, facts_[i].fact);
    unapplied.push_back(std::move(facts_[i]));
  }
  overlay_ = std::move(rebuilt);
  facts_ = std::move(unapplied);
  return facts_.empty();
}

void InstanceDecider::Refold(StoreBatch& overlay, DecodedCache<Saga>& sagas,
                             const InstanceFact& fact) const {
  if (auto folded = FoldInstanceFact(store_, overlay, sagas, fact); !folded) {
    Logger("instance-worker")
        ->error("msg=\"own fact not refolded\" type={} error=\"{}\"", TypeOf(fact),
                folded.error().message);
  }
}

bool InstanceDecider::CompactBy(AppliedOffsets::Deadline deadline,
                                const std::function<bool()>& keep_waiting) {
  std::map<int32_t, int64_t> targets;
  {
    std::shared_lock lock(mu_);
    for (const auto& f : facts_) {
      auto& target = targets[f.partition];
      target = std::max(target, f.offset + 1);
    }
  }
  (void)applied_->WaitFor(InstanceProjection::kName, topic_, targets, deadline, keep_waiting);
  return Compact();
}

size_t InstanceDecider::OverlaySize() const {
  std::shared_lock lock(mu_);
  return overlay_.Count();
}

}  // namespace dcm
