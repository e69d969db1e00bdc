#include "projections/federation_projection.h"

namespace dcm {

FederationProjection::FederationProjection(Store* store, OutcomeWaiters* waiters, Metrics* metrics)
    : state_(store, kPrefix), waiters_(waiters), applied_(metrics, kName) {}

Status FederationProjection::Apply(const CloudEvent& event, const EventPosition& position,
                                   StoreBatch& batch) {
  // Anything but a federation outcome is poison here (kCorruption: dead-lettered).
  ASSIGN_OR_RETURN(const FederationOutcome outcome, DecodeFederationOutcome(event));
  RETURN_IF_ERROR(state_.Apply(outcome, batch));
  applied_.Inc(event.type);
  applied_request_ids_.push_back(BaseOf(outcome).request_id);
  applied_at_.push_back({position.partition, position.offset});
  return OkStatus();
}

void FederationProjection::AfterCommit(const std::vector<CloudEvent>& applied) {
  // applied[i] is the event whose request id Apply recorded i-th in this batch.
  if (waiters_ && applied.size() == applied_request_ids_.size()) {
    for (size_t i = 0; i < applied.size() && waiters_->Pending() > 0; ++i) {
      waiters_->Complete(applied_request_ids_[i], applied[i], applied_at_[i]);
    }
  }
  Abandoned();
}

void FederationProjection::Abandoned() {
  applied_request_ids_.clear();
  applied_at_.clear();
}

Result<std::optional<ReservationRecord>> FederationView::Reservation(
    const std::string& reservation_id) const {
  return state_.Reservation(reservation_id);
}

Result<std::optional<ReservationRecord>> FederationView::Contract(
    const std::string& contract_id) const {
  ASSIGN_OR_RETURN(auto reservation_id, state_.ReservationOfContract(contract_id));
  if (!reservation_id) return std::optional<ReservationRecord>();
  return state_.Reservation(*reservation_id);
}

Result<std::optional<ReservationRecord>> FederationView::RelayOfContract(
    const std::string& contract_id) const {
  ASSIGN_OR_RETURN(auto reservation_id, state_.ReservationOfContract(contract_id));
  if (!reservation_id) return std::optional<ReservationRecord>();
  ASSIGN_OR_RETURN(auto record, state_.Reservation(*reservation_id));
  if (!record || !record->Relayed()) return std::optional<ReservationRecord>();
  return record;
}

Result<FlavorUsage> FederationView::Usage(const std::string& flavor_id) const {
  return state_.Usage(flavor_id);
}

Result<std::vector<ReservationRecord>> FederationView::Holds(const std::string& flavor_id) const {
  std::vector<ReservationRecord> out;
  RETURN_IF_ERROR(state_.LiveHolds([&](const ReservationRecord& r) {
    if (flavor_id.empty() || r.flavor_id == flavor_id) out.push_back(r);
    return true;
  }));
  return out;
}

Result<std::vector<ReservationRecord>> FederationView::Contracts(
    const std::string& flavor_id) const {
  std::vector<ReservationRecord> out;
  RETURN_IF_ERROR(state_.LiveContracts([&](const ReservationRecord& r) {
    if (flavor_id.empty() || r.flavor_id == flavor_id) out.push_back(r);
    return true;
  }));
  return out;
}

Result<std::vector<ReservationRecord>> FederationView::ContractsOf(
    const std::string& consumer) const {
  return state_.ContractsOf(consumer);
}

Result<std::optional<std::string>> FederationView::OutcomeType(
    const std::string& request_id) const {
  return state_.Decided(request_id);
}

}  // namespace dcm
