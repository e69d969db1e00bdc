// ProviderDecider: the registrar's decision state and rules (SPEC §3.1, seed
// sp-registration-flow). Exactly one registrar in the cluster feeds it, in the total order of
// the one-partition dcm.provider-requests topic, so name and id uniqueness hold across any number
// of `dcm serve` instances (SPEC §5.1).
//
// Keys:  dec/id/<id>     -> provider JSON
//        dec/name/<name> -> id
//        dec/req/<request_id> -> "" (each request decided once; the mock duplicates batches)
//
// The state is also a fold of the outcomes (Fold): a registrar that takes the partition over folds
// the outcomes other owners produced since it last decided, then decides only the requests after
// the last one those outcomes answer. So its state never depends on the request log's head, which
// may be gone (SPEC §7 retention gaps; the dev mock keeps 5 MiB per partition). Folding what
// Decide produced stages byte-identical keys.
//
// Decide is deterministic: the outcome depends only on the state, the request and its
// DecisionInputs (generated ids derive from the request id; times from the request's timestamp).
// A registrar that crashes after producing an outcome but before committing re-decides the same
// request identically, and the duplicate outcome (same event id) is dropped by projections.
//
// Rules beyond SPEC §3.1's conflicts (SPEC §6: deciders enforce what HTTP enforces, so a request
// produced straight to Kafka cannot bypass them):
//   - ownership: a new provider is owned by the request's actor; an `owner_scoped` request
//     (an SP with the dcm-provider role) may re-register, update, change the id of or delete
//     only a provider it owns: else 403. Checked after 404, before any 409.
//   - live instances: a deletion without `force` of a provider that hosts live instances: 409.
//   - expiry (SPEC §8 garbage collection): only of the registration the prober saw (its `seq`);
//     one registered or updated since: 409. Its live instances go with it (marked LOST).
//
// Not thread-safe: one registrar thread owns it.
#pragma once

#include <string>

#include "events/provider_events.h"
#include "projections/store.h"

namespace dcm {

// What a decision needs that is neither in the request nor in the decider's state. The registrar
// reads it (from this instance's instance projection, or from the outcome already recorded for a
// re-decided request) so that Decide itself stays a pure function.
struct DecisionInputs {
  // A deletion without force: the live instances the provider hosts.
  int64_t live_instances = 0;
};

class ProviderDecider {
 public:
  static constexpr char kName[] = "registrar";
  static constexpr char kPrefix[] = "dec/";

  explicit ProviderDecider(Store* store) : store_(store) {}

  // True if `request_id` was decided already (in the store or in `batch`).
  Result<bool> AlreadyDecided(const std::string& request_id, const StoreBatch& batch) const;

  // Decides `request` as decision number `seq` (its offset) at `time_ms` (its timestamp), and
  // stages the new state in `batch`.
  Result<ProviderOutcome> Decide(const ProviderRequest& request, int64_t seq, int64_t time_ms,
                                 StoreBatch& batch, const DecisionInputs& inputs = {});

  // Stages the state change `outcome` records (another registrar's decision), unless its request
  // was decided here already. Returns whether it applied.
  Result<bool> Fold(const ProviderOutcome& outcome, StoreBatch& batch);

  // A rejection for a request whose data failed validation (400, with the field errors).
  ProviderOutcome RejectInvalid(const std::string& request_id, RequestKind kind, const Error& error,
                                int64_t seq, StoreBatch& batch);

 private:
  Result<std::optional<Provider>> ById(const std::string& id, const StoreBatch& batch) const;
  Result<std::optional<std::string>> IdByName(const std::string& name,
                                              const StoreBatch& batch) const;
  // The provider holding `name`, if any.
  Result<std::optional<Provider>> ByName(const std::string& name, const StoreBatch& batch) const;
  // Stages `provider` as the new state and makes `o` the outcome of that kind.
  ProviderOutcome Accept(ProviderOutcome o, OutcomeKind kind, Provider provider, StoreBatch& batch);
  void Save(const Provider& provider, StoreBatch& batch);
  void Remove(const Provider& provider, StoreBatch& batch);

  Result<ProviderOutcome> Register(const ProviderRequest& r, ProviderOutcome o, int64_t time_ms,
                                   StoreBatch& batch);
  Result<ProviderOutcome> Update(const ProviderRequest& r, ProviderOutcome o, int64_t time_ms,
                                 StoreBatch& batch);
  Result<ProviderOutcome> ChangeId(const ProviderRequest& r, ProviderOutcome o, int64_t time_ms,
                                   StoreBatch& batch);
  Result<ProviderOutcome> Delete(const ProviderRequest& r, ProviderOutcome o,
                                 const DecisionInputs& inputs, StoreBatch& batch);
  Result<ProviderOutcome> Expire(const ProviderRequest& r, ProviderOutcome o, StoreBatch& batch);

  Store* store_;
};

}  // namespace dcm
