#include "projections/time_travel.h"

namespace dcm {
namespace {

std::vector<ProjectionEntry> AsOfEntries(const Topics& topics) {
  std::vector<ProjectionEntry> entries;
  for (auto& entry : ProjectionCatalog(topics)) {
    if (entry.as_of) entries.push_back(std::move(entry));
  }
  return entries;
}

}  // namespace

PastState::PastState(std::unique_ptr<Store> store, const Topics& topics, Deadline deadline)
    : store_(std::move(store)),
      projections_(BuildProjections(AsOfEntries(topics),
                                    ProjectionDeps{.store = store_.get(), .topics = &topics})),
      registry_(store_.get()),
      health_(store_.get()),
      instances_(store_.get()),
      deadline_(deadline) {
  for (size_t i = 0; i < projections_.entries.size(); ++i) {
    for (const auto& topic : projections_.entries[i].topics) {
      by_topic_[topic].push_back(projections_.projections[i].get());
    }
  }
}

Status PastState::FoldEntity(const AuditView& audit, const std::string& entity, int64_t as_of_ms,
                             StoreBatch& batch) {
  auto expired = [&] {
    return MakeError(ErrorCode::kTimeout, "the as_of fold passed its deadline after " +
                                              std::to_string(folded_) +
                                              " events; retry later or ask for a single entity");
  };
  if (deadline_.Passed()) return expired();
  Status status = OkStatus();
  RETURN_IF_ERROR(audit.ForEachOfEntity(entity, as_of_ms, [&](const AuditEntry& entry) {
    if (folded_ % kDeadlineCheckEvents == kDeadlineCheckEvents - 1 && deadline_.Passed()) {
      status = expired();
      return false;
    }
    const auto folders = by_topic_.find(entry.topic);
    if (folders == by_topic_.end()) return true;  // requests: not folded into state
    auto event = DecodeCloudEvent(entry.json);
    if (!event) return true;  // the live runner dead-lettered it too
    const EventPosition position{entry.topic,   entry.partition, entry.offset,
                                 entry.time_ms, entity,          entry.json};
    for (Projection* projection : folders->second) {
      auto applied = projection->Apply(*event, position, batch);
      if (!applied && applied.error().code != ErrorCode::kCorruption) {
        status = applied;  // poison is skipped, as live; anything else is an error
        return false;
      }
    }
    ++folded_;
    return true;
  }));
  return status;
}

Result<std::unique_ptr<PastState>> PastState::OfProviders(const AuditView& audit,
                                                          const Topics& topics,
                                                          const std::vector<std::string>& ids,
                                                          int64_t as_of_ms, Deadline deadline) {
  ASSIGN_OR_RETURN(auto store, Store::Open("/past", StoreOptions{false, true}));
  std::unique_ptr<PastState> past(new PastState(std::move(store), topics, deadline));
  StoreBatch batch;
  std::vector<std::string> all;
  if (ids.empty()) {
    RETURN_IF_ERROR(audit.ForEachProviderSubject([&](std::string_view id) {
      all.emplace_back(id);
      return true;
    }));
  }
  for (const auto& id : ids.empty() ? all : ids) {
    RETURN_IF_ERROR(past->FoldEntity(audit, id, as_of_ms, batch));
  }
  RETURN_IF_ERROR(past->store_->Write(batch));
  return past;
}

Result<std::unique_ptr<PastState>> PastState::OfCatalogItemInstance(const AuditView& audit,
                                                                    const Topics& topics,
                                                                    const std::string& id,
                                                                    int64_t as_of_ms,
                                                                    Deadline deadline) {
  ASSIGN_OR_RETURN(auto store, Store::Open("/past", StoreOptions{false, true}));
  std::unique_ptr<PastState> past(new PastState(std::move(store), topics, deadline));
  StoreBatch batch;
  RETURN_IF_ERROR(past->FoldEntity(audit, id, as_of_ms, batch));
  RETURN_IF_ERROR(past->store_->Write(batch));
  // The SP status joined into the read is its resource's, an entity of its own.
  ASSIGN_OR_RETURN(auto cii, past->instances_.GetCatalogItemInstance(id));
  if (cii && !cii->resource_id.empty()) {
    RETURN_IF_ERROR(past->FoldEntity(audit, cii->resource_id, as_of_ms, batch));
    RETURN_IF_ERROR(past->store_->Write(batch));
  }
  return past;
}

}  // namespace dcm
