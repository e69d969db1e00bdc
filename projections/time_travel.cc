#include "projections/time_travel.h"

namespace dcm {

PastState::PastState(std::unique_ptr<Store> store)
    : store_(std::move(store)),
      registry_projection_(store_.get(), nullptr, nullptr),
      health_projection_(store_.get(), nullptr),
      instance_projection_(store_.get(), nullptr, nullptr),
      status_projection_(store_.get(), nullptr),
      registry_(store_.get()),
      health_(store_.get()),
      instances_(store_.get()) {}

Status PastState::FoldEntity(const AuditView& audit, const FoldTopics& topics,
                             const std::string& entity, int64_t as_of_ms, StoreBatch& batch) {
  Status status = OkStatus();
  RETURN_IF_ERROR(audit.ForEachOfEntity(entity, as_of_ms, [&](const AuditEntry& entry) {
    Projection* projection = nullptr;
    if (entry.topic == topics.providers) projection = &registry_projection_;
    if (entry.topic == topics.health) projection = &health_projection_;
    if (entry.topic == topics.instances) projection = &instance_projection_;
    if (entry.topic == topics.status) projection = &status_projection_;
    if (!projection) return true;  // requests: not folded into state
    auto event = DecodeCloudEvent(entry.json);
    if (!event) return true;  // the live runner dead-lettered it too
    const EventPosition position{entry.topic,   entry.partition, entry.offset,
                                 entry.time_ms, entity,          entry.json};
    auto applied = projection->Apply(*event, position, batch);
    if (!applied && applied.error().code != ErrorCode::kCorruption) {
      status = applied;  // poison is skipped, as live; anything else is an error
      return false;
    }
    ++folded_;
    return true;
  }));
  return status;
}

Result<std::unique_ptr<PastState>> PastState::OfProviders(const AuditView& audit,
                                                          const FoldTopics& topics,
                                                          const std::vector<std::string>& ids,
                                                          int64_t as_of_ms) {
  ASSIGN_OR_RETURN(auto store, Store::Open("/past", StoreOptions{false, true}));
  std::unique_ptr<PastState> past(new PastState(std::move(store)));
  StoreBatch batch;
  std::vector<std::string> all;
  if (ids.empty()) {
    RETURN_IF_ERROR(audit.ForEachProviderSubject([&](std::string_view id) {
      all.emplace_back(id);
      return true;
    }));
  }
  for (const auto& id : ids.empty() ? all : ids) {
    RETURN_IF_ERROR(past->FoldEntity(audit, topics, id, as_of_ms, batch));
  }
  RETURN_IF_ERROR(past->store_->Write(batch));
  return past;
}

Result<std::unique_ptr<PastState>> PastState::OfCatalogItemInstance(const AuditView& audit,
                                                                    const FoldTopics& topics,
                                                                    const std::string& id,
                                                                    int64_t as_of_ms) {
  ASSIGN_OR_RETURN(auto store, Store::Open("/past", StoreOptions{false, true}));
  std::unique_ptr<PastState> past(new PastState(std::move(store)));
  StoreBatch batch;
  RETURN_IF_ERROR(past->FoldEntity(audit, topics, id, as_of_ms, batch));
  RETURN_IF_ERROR(past->store_->Write(batch));
  // The SP status joined into the read is its resource's, an entity of its own.
  ASSIGN_OR_RETURN(auto cii, past->instances_.GetCatalogItemInstance(id));
  if (cii && !cii->resource_id.empty()) {
    RETURN_IF_ERROR(past->FoldEntity(audit, topics, cii->resource_id, as_of_ms, batch));
    RETURN_IF_ERROR(past->store_->Write(batch));
  }
  return past;
}

}  // namespace dcm
