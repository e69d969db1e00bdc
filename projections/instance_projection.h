// InstanceProjection folds dcm.instances (the instance worker's facts, events/instance_events.h)
// into the catalog item instances, resources (placements), service-type instances, the cleanup
// queue, the sagas in progress and per-provider load. InstanceView is its read-only query side.
// SpStatusProjection folds the SP-produced dcm.status topic into a separate key space that
// reads join (a second runner must not read-modify-write the same keys).
//
// Keys (all JSON values unless noted):
//   in/c/<catalog_item_instance_id>  CatalogItemInstance
//   in/r/<resource_id>               Resource (placement record; removed once deleted or
//                                    replaced by a rehydration)
//   in/s/<instance_id>               ServiceTypeInstance (kept with deleted=true after delete)
//   in/q/<instance_id>               CleanupRecord (removed once the SP confirmed the delete)
//   in/g/<root>                      Saga: the operation in progress on that root
//   in/l/<provider_id>               decimal count of live service-type instances
//   in/x/<request_id>                the terminal event's type (operation_completed|failed)
//   ss/<instance_id>                 SpStatus (SpStatusProjection)
//
// Every fold step is idempotent (a duplicate leaves the state as it is: a live count changes
// only when an instance's live flag flips), and one root's facts share a partition, so replay
// from offset 0 is byte-identical (SPEC §5.3, §5.4).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "events/instance_events.h"
#include "projections/decoded_cache.h"
#include "projections/outcome_waiters.h"
#include "projections/projection.h"
#include "src/common/metrics.h"

namespace dcm {

struct CatalogItemInstance {
  std::string id;
  std::string display_name;
  std::string spec = "{}";  // the user's spec, JSON text
  std::string resource_id;  // current InstanceID
  std::string provider_name;
  int64_t create_time_ms = 0;
  int64_t update_time_ms = 0;
  bool operator==(const CatalogItemInstance&) const = default;
};

struct Resource {
  std::string id;
  std::string root;
  std::string catalog_item_instance_id;  // empty: created through the Placement API
  std::string provider_name;
  std::string provider_id;
  std::string service_type;
  std::string intent = "{}";  // original request spec, JSON text
  std::string spec = "{}";    // evaluated spec sent to the SP
  std::string policy;         // "builtin" | "policy_manager"
  std::string status;         // "PLACED" until the SP accepted it, then its SP status
  std::string placement;      // on a peer enclave: {"kind":"remote","peer","contract_id"}
  int64_t create_time_ms = 0;
  int64_t update_time_ms = 0;
  bool operator==(const Resource&) const = default;
};

struct ServiceTypeInstance {
  std::string id;
  std::string root;
  std::string provider_name;
  std::string provider_id;
  std::string service_type;
  std::string spec = "{}";
  std::string status;     // as the SP answered the create ("PROVISIONING"); "DELETED" once deleted
  std::string placement;  // as its resource's
  bool deleted = false;
  int64_t create_time_ms = 0;
  int64_t update_time_ms = 0;
  bool operator==(const ServiceTypeInstance&) const = default;
};

struct CleanupRecord {
  std::string instance_id;
  std::string root;
  std::string provider_name;
  std::string provider_id;
  std::string service_type;
  int64_t requested_at_ms = 0;
  int retry_count = 0;
  std::string status = kCleanupPending;  // PENDING | PENDING_PROVIDER | FAILED
  int64_t last_attempt_ms = 0;           // 0: never attempted
  std::string last_error;
  bool operator==(const CleanupRecord&) const = default;
};

// The operation in progress on one root: its operation_started event and the facts recorded
// since (types in order), enough for a new owner to resume it at the next step.
struct Saga {
  InstanceEvent started;           // operation_started (carries every parameter)
  std::vector<std::string> steps;  // fact types applied since, in order
  // From resource.placed, once placed.
  std::string placed_resource_id;
  std::string provider_name;
  std::string provider_id;
  std::string spec;  // evaluated spec
  // A placement on a peer (SPEC §10): the reservation asked or held (cleared when refused),
  // then its contract.
  std::string peer;
  std::string flavor_id;
  std::string reservation_id;
  std::string contract_id;
  bool Has(std::string_view type) const;
  bool operator==(const Saga&) const = default;
};

// SP-reported status of an instance (dcm.status).
struct SpStatus {
  std::string status;  // upper-cased
  std::string message;
  int64_t time_ms = 0;
  bool operator==(const SpStatus&) const = default;
};

class InstanceProjection final : public Projection {
 public:
  static constexpr char kName[] = "instances";
  static constexpr char kPrefix[] = "in/";
  // Applied facts, after they are durable; the instance worker follows them (placement load).
  using Listener = std::function<void(const std::vector<InstanceEvent>&)>;

  // `waiters` completes HTTP calls on operation_completed/operation_failed (by request_id).
  InstanceProjection(Store* store, OutcomeWaiters* waiters, Metrics* metrics);

  std::string Name() const override { return kName; }
  Status Apply(const CloudEvent& event, const EventPosition& position, StoreBatch& batch) override;
  void AfterCommit(const std::vector<CloudEvent>& applied) override;
  void Abandoned() override {
    batch_events_.clear();
    batch_at_.clear();
  }
  void SetListener(Listener listener) { listener_ = std::move(listener); }

 private:
  Store* store_;
  OutcomeWaiters* waiters_;
  AppliedCounters applied_;
  Listener listener_;
  std::vector<InstanceEvent> batch_events_;  // decoded, of the batch in progress
  std::vector<OutcomePosition> batch_at_;    // where each of those events is
  DecodedCache<Saga> sagas_;                 // by root: each step re-encodes, never re-decodes
};

class SpStatusProjection final : public Projection {
 public:
  static constexpr char kName[] = "sp-status";
  static constexpr char kPrefix[] = "ss/";
  SpStatusProjection(Store* store, Metrics* metrics);
  std::string Name() const override { return kName; }
  // Later events win by event time (ties: the later offset); older ones are ignored.
  Status Apply(const CloudEvent& event, const EventPosition& position, StoreBatch& batch) override;

 private:
  Store* store_;
  AppliedCounters applied_;
};

template <typename T>
struct Page {
  std::vector<T> items;
  std::string next_page_token;  // empty on the last page
};

struct InstanceFilter {
  std::string provider;      // provider name; empty = any
  std::string service_type;  // empty = any
  bool show_deleted = false;
};

// Thread-safe (reads the Store only). Page tokens are opaque (hex of the last key returned).
// With an `overlay` (the instance worker's own facts not yet applied here, InstanceState), the
// point reads see the overlay's writes first; the List* scans see the Store only. The overlay's
// owner guards it: such a view is not thread-safe on its own.
class InstanceView {
 public:
  explicit InstanceView(const Store* store, const StoreBatch* overlay = nullptr)
      : store_(store), overlay_(overlay) {}

  Result<std::optional<CatalogItemInstance>> GetCatalogItemInstance(const std::string& id) const;
  Result<Page<CatalogItemInstance>> ListCatalogItemInstances(const std::string& page_token,
                                                             size_t max) const;
  Result<std::optional<Resource>> GetResource(const std::string& id) const;
  Result<Page<Resource>> ListResources(const std::string& page_token, size_t max) const;
  Result<std::optional<ServiceTypeInstance>> GetInstance(const std::string& id) const;
  Result<Page<ServiceTypeInstance>> ListInstances(const InstanceFilter& filter,
                                                  const std::string& page_token, size_t max) const;
  Result<std::optional<CleanupRecord>> GetCleanup(const std::string& instance_id) const;
  // `status` empty = any.
  Result<Page<CleanupRecord>> ListCleanup(const std::string& status, const std::string& page_token,
                                          size_t max) const;
  Result<std::optional<Saga>> GetSaga(const std::string& root) const;
  // Every saga in progress whose root `accept`s (the worker: roots of its partitions).
  Result<std::vector<Saga>> ListSagas(
      const std::function<bool(const std::string& root)>& accept) const;
  // Every cleanup record whose root `accept`s.
  Result<std::vector<CleanupRecord>> ListCleanupFor(
      const std::function<bool(const std::string& root)>& accept) const;
  // Live (not deleted) service-type instances on a provider.
  Result<int64_t> LiveInstances(const std::string& provider_id) const;
  // The live instances on peer enclaves (SPEC §10) whose root `accept`s.
  Result<std::vector<ServiceTypeInstance>> ListPeerInstancesFor(
      const std::function<bool(const std::string& root)>& accept) const;
  Result<std::optional<SpStatus>> GetSpStatus(const std::string& instance_id) const;
  // The terminal event type recorded for a request, if any (dedupe of requests).
  Result<std::optional<std::string>> RequestOutcome(const std::string& request_id) const;

 private:
  const Store* store_;
  const StoreBatch* overlay_;
};

}  // namespace dcm
