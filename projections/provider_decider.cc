#include "projections/provider_decider.h"

#include "src/common/principal.h"
#include "src/common/time_format.h"
#include "src/common/uuid.h"

namespace dcm {
namespace {

std::string IdKey(std::string_view id) { return "dec/id/" + std::string(id); }
std::string NameKey(std::string_view name) { return "dec/name/" + std::string(name); }
std::string RequestKey(std::string_view id) { return "dec/req/" + std::string(id); }

ProviderOutcome Rejected(ProviderOutcome o, int status, std::string detail) {
  o.kind = OutcomeKind::kRejected;
  o.status = status;
  o.detail = std::move(detail);
  return o;
}

// SPEC §6: an owner-scoped actor acts only on the providers it owns.
bool MayChange(const ProviderRequest& r, const Provider& p) {
  return !r.owner_scoped || (!p.owner.empty() && p.owner == r.actor);
}

ProviderOutcome NotOwner(ProviderOutcome o, const ProviderRequest& r, const Provider& p) {
  return Rejected(
      std::move(o), 403,
      "provider '" + p.spec.name + "' (id '" + p.id + "') is not owned by '" + r.actor + "'");
}

// The owner a new provider gets: its registration's actor, unless that is nobody in particular.
std::string OwnerOf(const std::string& actor) {
  return actor == kAnonymousActor ? std::string() : actor;
}

ProviderOutcome Conflict(ProviderOutcome o, const Provider& holder, std::string detail) {
  o.conflict = ConflictRef{holder.id, holder.spec.name};
  return Rejected(std::move(o), 409, std::move(detail));
}

}  // namespace

Result<bool> ProviderDecider::AlreadyDecided(const std::string& request_id,
                                             const StoreBatch& batch) const {
  ASSIGN_OR_RETURN(auto record, store_->Get(RequestKey(request_id), &batch));
  return record.has_value();
}

Result<std::optional<Provider>> ProviderDecider::ById(const std::string& id,
                                                      const StoreBatch& batch) const {
  ASSIGN_OR_RETURN(auto record, store_->Get(IdKey(id), &batch));
  if (!record) return std::optional<Provider>();
  ASSIGN_OR_RETURN(auto provider, DecodeProvider(*record));
  return std::optional<Provider>(std::move(provider));
}

Result<std::optional<std::string>> ProviderDecider::IdByName(const std::string& name,
                                                             const StoreBatch& batch) const {
  return store_->Get(NameKey(name), &batch);
}

Result<std::optional<Provider>> ProviderDecider::ByName(const std::string& name,
                                                        const StoreBatch& batch) const {
  ASSIGN_OR_RETURN(auto id, IdByName(name, batch));
  if (!id) return std::optional<Provider>();
  ASSIGN_OR_RETURN(auto holder, ById(*id, batch));
  if (!holder) return MakeError(ErrorCode::kCorruption, "name index points at a missing id");
  return holder;
}

ProviderOutcome ProviderDecider::Accept(ProviderOutcome o, OutcomeKind kind, Provider provider,
                                        StoreBatch& batch) {
  Save(provider, batch);
  o.kind = kind;
  o.provider = std::move(provider);
  return o;
}

void ProviderDecider::Save(const Provider& provider, StoreBatch& batch) {
  batch.Put(IdKey(provider.id), EncodeProvider(provider));
  batch.Put(NameKey(provider.spec.name), provider.id);
}

void ProviderDecider::Remove(const Provider& provider, StoreBatch& batch) {
  batch.Delete(IdKey(provider.id));
  batch.Delete(NameKey(provider.spec.name));
}

Result<ProviderOutcome> ProviderDecider::Decide(const ProviderRequest& request, int64_t seq,
                                                int64_t time_ms, StoreBatch& batch,
                                                const DecisionInputs& inputs) {
  ProviderOutcome o;
  o.request_id = request.request_id;
  o.actor = request.actor;
  o.request_kind = request.kind;
  o.seq = seq;
  o.attempted_name = request.spec.name;
  o.attempted_id = request.id;
  batch.Put(RequestKey(request.request_id), "");
  switch (request.kind) {
    case RequestKind::kRegister:
      return Register(request, std::move(o), time_ms, batch);
    case RequestKind::kUpdate:
      return Update(request, std::move(o), time_ms, batch);
    case RequestKind::kChangeId:
      return ChangeId(request, std::move(o), time_ms, batch);
    case RequestKind::kDelete:
      return Delete(request, std::move(o), inputs, batch);
    case RequestKind::kExpire:
      return Expire(request, std::move(o), batch);
  }
  return MakeError(ErrorCode::kInternal, "unknown request kind");
}

Result<bool> ProviderDecider::Fold(const ProviderOutcome& outcome, StoreBatch& batch) {
  ASSIGN_OR_RETURN(const bool decided, AlreadyDecided(outcome.request_id, batch));
  if (decided) return false;  // this instance's own decision, or a duplicated outcome
  batch.Put(RequestKey(outcome.request_id), "");
  // What Decide removed: the state before the change (renamed, moved or deleted).
  const std::string& before =
      outcome.kind == OutcomeKind::kIdChanged ? outcome.old_id : outcome.provider.id;
  if (outcome.kind != OutcomeKind::kRejected) {
    ASSIGN_OR_RETURN(auto existing, ById(before, batch));
    if (existing) Remove(*existing, batch);
  }
  if (outcome.kind == OutcomeKind::kRegistered || outcome.kind == OutcomeKind::kUpdated ||
      outcome.kind == OutcomeKind::kIdChanged) {
    Save(outcome.provider, batch);
  }
  return true;
}

ProviderOutcome ProviderDecider::RejectInvalid(const std::string& request_id, RequestKind kind,
                                               const Error& error, int64_t seq, StoreBatch& batch) {
  batch.Put(RequestKey(request_id), "");
  ProviderOutcome o;
  o.request_id = request_id;
  o.request_kind = kind;
  o.seq = seq;
  o.errors = error.fields;
  return Rejected(std::move(o), 400, error.message);
}

Result<ProviderOutcome> ProviderDecider::Register(const ProviderRequest& r, ProviderOutcome o,
                                                  int64_t time_ms, StoreBatch& batch) {
  ASSIGN_OR_RETURN(auto existing, ByName(r.spec.name, batch));
  if (existing) {
    if (!r.id.empty() && r.id != existing->id) {
      return Conflict(std::move(o), *existing,
                      "provider name '" + r.spec.name + "' is already registered with id '" +
                          existing->id + "'");
    }
    if (!MayChange(r, *existing)) return NotOwner(std::move(o), r, *existing);
    // Same name, no id or the same id: an idempotent re-registration (200, "updated").
    Provider updated{
        existing->id, r.spec,         existing->create_time, FormatRfc3339Millis(time_ms),
        o.seq,        existing->owner};
    return Accept(std::move(o), OutcomeKind::kUpdated, std::move(updated), batch);
  }
  if (!r.id.empty()) {
    ASSIGN_OR_RETURN(auto id_holder, ById(r.id, batch));
    if (id_holder) {
      return Conflict(
          std::move(o), *id_holder,
          "provider id '" + r.id + "' is already taken by provider '" + id_holder->spec.name + "'");
    }
  }
  const std::string id = r.id.empty() ? DeterministicUuid("provider:" + r.request_id) : r.id;
  const std::string now = FormatRfc3339Millis(time_ms);
  Provider created{id, r.spec, now, now, o.seq, OwnerOf(r.actor)};
  return Accept(std::move(o), OutcomeKind::kRegistered, std::move(created), batch);
}

Result<ProviderOutcome> ProviderDecider::Update(const ProviderRequest& r, ProviderOutcome o,
                                                int64_t time_ms, StoreBatch& batch) {
  ASSIGN_OR_RETURN(auto existing, ById(r.id, batch));
  if (!existing) return Rejected(std::move(o), 404, "provider '" + r.id + "' not found");
  if (!MayChange(r, *existing)) return NotOwner(std::move(o), r, *existing);
  if (r.spec.name != existing->spec.name) {
    ASSIGN_OR_RETURN(auto holder, ByName(r.spec.name, batch));
    if (holder) {
      return Conflict(
          std::move(o), *holder,
          "provider name '" + r.spec.name + "' is already registered with id '" + holder->id + "'");
    }
  }
  Remove(*existing, batch);
  Provider updated{
      existing->id, r.spec,         existing->create_time, FormatRfc3339Millis(time_ms),
      o.seq,        existing->owner};
  return Accept(std::move(o), OutcomeKind::kUpdated, std::move(updated), batch);
}

Result<ProviderOutcome> ProviderDecider::ChangeId(const ProviderRequest& r, ProviderOutcome o,
                                                  int64_t time_ms, StoreBatch& batch) {
  ASSIGN_OR_RETURN(auto existing, ById(r.id, batch));
  if (!existing) return Rejected(std::move(o), 404, "provider '" + r.id + "' not found");
  o.attempted_name = existing->spec.name;
  if (!MayChange(r, *existing)) return NotOwner(std::move(o), r, *existing);
  existing->seq = o.seq;
  if (r.new_id == r.id) {  // nothing to change: answer like an idempotent update
    return Accept(std::move(o), OutcomeKind::kUpdated, std::move(*existing), batch);
  }
  ASSIGN_OR_RETURN(auto id_holder, ById(r.new_id, batch));
  if (id_holder) {
    o.attempted_id = r.new_id;
    return Conflict(std::move(o), *id_holder,
                    "provider id '" + r.new_id + "' is already taken by provider '" +
                        id_holder->spec.name + "'");
  }
  Remove(*existing, batch);
  Provider moved = std::move(*existing);
  moved.id = r.new_id;
  moved.update_time = FormatRfc3339Millis(time_ms);
  o.old_id = r.id;
  return Accept(std::move(o), OutcomeKind::kIdChanged, std::move(moved), batch);
}

Result<ProviderOutcome> ProviderDecider::Delete(const ProviderRequest& r, ProviderOutcome o,
                                                const DecisionInputs& inputs, StoreBatch& batch) {
  ASSIGN_OR_RETURN(auto existing, ById(r.id, batch));
  if (!existing) return Rejected(std::move(o), 404, "provider '" + r.id + "' not found");
  o.attempted_name = existing->spec.name;
  if (!MayChange(r, *existing)) return NotOwner(std::move(o), r, *existing);
  if (!r.force && inputs.live_instances > 0) {
    return Rejected(std::move(o), 409,
                    "provider '" + r.id + "' hosts " + std::to_string(inputs.live_instances) +
                        " live instances; use ?force=true");
  }
  Remove(*existing, batch);
  o.kind = OutcomeKind::kDeleted;
  o.provider = std::move(*existing);
  return o;
}

// SPEC §8: PROVIDER_GC_AFTER without a heartbeat. The prober that asks cannot know of a
// re-registration decided after it looked, so the request names the registration it saw.
Result<ProviderOutcome> ProviderDecider::Expire(const ProviderRequest& r, ProviderOutcome o,
                                                StoreBatch& batch) {
  ASSIGN_OR_RETURN(auto existing, ById(r.id, batch));
  if (!existing) return Rejected(std::move(o), 404, "provider '" + r.id + "' not found");
  o.attempted_name = existing->spec.name;
  if (existing->seq != r.registration_seq) {
    return Rejected(std::move(o), 409,
                    "provider '" + r.id + "' was registered or updated since (seq " +
                        std::to_string(existing->seq) + ", expiry of seq " +
                        std::to_string(r.registration_seq) + ")");
  }
  Remove(*existing, batch);
  o.kind = OutcomeKind::kExpired;
  o.reason = "no heartbeat since " +
             (r.last_heartbeat_time.empty() ? std::string("registration") : r.last_heartbeat_time) +
             " (PROVIDER_GC_AFTER " + std::to_string(r.gc_after_ms / 1000) + "s)";
  o.last_heartbeat_time = r.last_heartbeat_time;
  o.provider = std::move(*existing);
  return o;
}

}  // namespace dcm
