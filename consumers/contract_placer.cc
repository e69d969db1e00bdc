#include "consumers/contract_placer.h"

#include "src/common/json_read.h"
#include "src/common/log.h"
#include "src/common/uuid.h"

namespace dcm {
namespace {

std::shared_ptr<spdlog::logger> PlacerLogger() {
  static auto logger = Logger("contract-placer");
  return logger;
}

constexpr std::string_view kContractRootPrefix = "contract:";

// The spec's service_type (the peer API set it to the flavour's).
std::string ServiceTypeOf(const std::string& spec) {
  auto parsed = ParseJson(spec);
  simdjson::dom::object object;
  if (!parsed || parsed->get(object)) return "";
  return StringMember(object, "service_type");
}

}  // namespace

std::string ContractRoot(const std::string& contract_id) {
  return std::string(kContractRootPrefix) + contract_id;
}

ContractPlacer::ContractPlacer(ContractPlacerOptions options, FederationState contracts,
                               const InstanceView* instances, Metrics* metrics)
    : options_(std::move(options)),
      contracts_(std::move(contracts)),
      instances_(instances),
      metrics_(metrics) {}

void ContractPlacer::Ended(const std::string& contract_id, const std::string& remote_instance_id) {
  ending_[contract_id] = remote_instance_id;
}

Status ContractPlacer::Adopt() {
  std::string token;
  do {
    ASSIGN_OR_RETURN(auto page, instances_->ListResources(token, 500));
    for (const Resource& r : page.items) {
      if (!r.root.starts_with(kContractRootPrefix)) continue;
      const std::string contract_id = r.root.substr(kContractRootPrefix.size());
      ASSIGN_OR_RETURN(auto reservation, contracts_.ReservationOfContract(contract_id));
      std::optional<ReservationRecord> record;
      if (reservation) {
        ASSIGN_OR_RETURN(record, contracts_.Reservation(*reservation));
      }
      if (!record || !record->ContractLive()) ending_[contract_id] = r.id;
    }
    token = page.next_page_token;
  } while (!token.empty());
  return OkStatus();
}

Status ContractPlacer::Reconcile(int64_t now_ms) {
  std::erase_if(asked_, [&](const auto& entry) {
    return entry.second + options_.resubmit_after.count() <= now_ms;
  });
  Status status = OkStatus();
  RETURN_IF_ERROR(contracts_.LiveContracts([&](const ReservationRecord& contract) {
    status = Place(contract, now_ms);
    return status.has_value();
  }));
  RETURN_IF_ERROR(status);
  for (auto it = ending_.begin(); it != ending_.end();) {
    bool done = false;
    RETURN_IF_ERROR(Remove(it->first, it->second, now_ms, &done));
    it = done ? ending_.erase(it) : std::next(it);
  }
  return OkStatus();
}

Status ContractPlacer::Place(const ReservationRecord& contract, int64_t now_ms) {
  ASSIGN_OR_RETURN(auto resource, instances_->GetResource(contract.remote_instance_id));
  if (resource) return OkStatus();
  const std::string root = ContractRoot(contract.contract_id);
  ASSIGN_OR_RETURN(const bool may, MayAsk(root));
  if (!may) return OkStatus();
  InstanceEvent r;
  r.operation = OperationName(Operation::kCreateResource);
  r.root = root;
  r.resource_id = contract.remote_instance_id;
  r.spec = contract.spec;
  r.service_type = ServiceTypeOf(contract.spec);
  Ask(std::move(r), now_ms, "create", contract.contract_id);
  return OkStatus();
}

Status ContractPlacer::Remove(const std::string& contract_id, const std::string& resource_id,
                              int64_t now_ms, bool* done) {
  ASSIGN_OR_RETURN(auto resource, instances_->GetResource(resource_id));
  *done = !resource;
  if (*done) return OkStatus();
  ASSIGN_OR_RETURN(const bool may, MayAsk(ContractRoot(contract_id)));
  if (!may) return OkStatus();
  InstanceEvent r;
  r.operation = OperationName(Operation::kDeleteResource);
  r.root = resource->root;
  r.resource_id = resource_id;
  Ask(std::move(r), now_ms, "delete", contract_id);
  return OkStatus();
}

Result<bool> ContractPlacer::MayAsk(const std::string& root) {
  if (asked_.contains(root)) return false;
  ASSIGN_OR_RETURN(auto saga, instances_->GetSaga(root));
  return !saga.has_value();
}

void ContractPlacer::Ask(InstanceEvent request, int64_t now_ms, const char* what,
                         const std::string& contract_id) {
  PlacerLogger()->info(
      "msg=\"contract instance operation\" operation={} contract_id={} "
      "resource_id={}",
      what, contract_id, request.resource_id);
  metrics_
      ->GetCounter("dcm_federation_contract_operations_total",
                   "Instance operations asked for contracts (SPEC §10)",
                   std::string("operation=\"") + what + "\"")
      .Inc();
  asked_[request.root] = now_ms;
  request.type = event_type::kOperationRequested;
  request.event_id = NewUuidV4();
  request.source = options_.source;
  request.subject = request.root;
  request.time_ms = now_ms;
  request.actor = options_.source;
  if (options_.submit) options_.submit(EncodeInstanceEvent(request));
}

}  // namespace dcm
