#include "projections/federation_state.h"

#include <charconv>

#include "events/instance_facts.h"
#include "src/common/json_read.h"
#include "src/common/json_writer.h"

namespace dcm {
namespace {

std::string Hex16(int64_t value) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 0; i < 16; ++i) out[15 - i] = kHex[(static_cast<uint64_t>(value) >> (4 * i)) & 0xF];
  return out;
}

int64_t IntMember(simdjson::dom::object object, std::string_view key) {
  int64_t value = 0;
  if (auto member = Member(object, key); member && member->get(value)) value = 0;
  return value;
}

Result<FlavorUsage> ParseUsage(std::string_view text) {
  FlavorUsage usage;
  const char* end = text.data() + text.size();
  auto first = std::from_chars(text.data(), end, usage.holds);
  if (first.ec != std::errc() || first.ptr == end || *first.ptr != ' ' ||
      std::from_chars(first.ptr + 1, end, usage.contracts).ec != std::errc()) {
    return MakeError(ErrorCode::kCorruption,
                     "unreadable flavour usage '" + std::string(text) + "'");
  }
  return usage;
}

}  // namespace

std::string EncodeReservationRecord(const ReservationRecord& r) {
  JsonWriter w;
  w.BeginObject();
  w.Field("reservation_id", r.reservation_id);
  w.Field("state", r.state);
  w.Field("seq", r.seq);
  w.Field("flavor_id", r.flavor_id);
  w.Field("consumer", r.consumer);
  if (!r.spec.empty()) {
    w.Key("spec");
    w.Raw(r.spec);
  }
  w.Field("capacity", r.capacity);
  w.Field("hold_expires_at_ms", r.hold_expires_at_ms);
  if (!r.reason.empty()) w.Field("reason", r.reason);
  if (r.status != 0) w.Field("status", r.status);
  if (!r.contract_id.empty()) {
    w.Field("contract_id", r.contract_id);
    w.Field("remote_instance_id", r.remote_instance_id);
    w.Field("contract_expires_at_ms", r.contract_expires_at_ms);
  }
  if (!r.next_hop.empty()) w.Field("next_hop", r.next_hop);
  if (!r.owner.empty()) w.Field("owner", r.owner);
  w.EndObject();
  return w.Take();
}

Result<ReservationRecord> DecodeReservationRecord(std::string_view json) {
  ASSIGN_OR_RETURN(auto parsed, ParseJson(json));
  if (!parsed.is_object()) return MakeError(ErrorCode::kCorruption, "reservation record");
  const simdjson::dom::object o(parsed);
  ReservationRecord r;
  r.reservation_id = StringMember(o, "reservation_id");
  r.state = StringMember(o, "state");
  r.seq = IntMember(o, "seq");
  r.flavor_id = StringMember(o, "flavor_id");
  r.consumer = StringMember(o, "consumer");
  if (auto spec = Member(o, "spec"); spec && spec->is_object()) r.spec = Minify(*spec);
  r.capacity = IntMember(o, "capacity");
  r.hold_expires_at_ms = IntMember(o, "hold_expires_at_ms");
  r.reason = StringMember(o, "reason");
  r.status = static_cast<int>(IntMember(o, "status"));
  r.contract_id = StringMember(o, "contract_id");
  r.remote_instance_id = StringMember(o, "remote_instance_id");
  r.contract_expires_at_ms = IntMember(o, "contract_expires_at_ms");
  r.next_hop = StringMember(o, "next_hop");
  r.owner = StringMember(o, "owner");
  if (r.reservation_id.empty() || r.state.empty()) {
    return MakeError(ErrorCode::kCorruption, "reservation record without id or state");
  }
  return r;
}

std::string FederationState::Key(std::string_view family, std::string_view id) const {
  std::string key;
  key.reserve(root_.size() + family.size() + id.size());
  key.append(root_).append(family).append(id);
  return key;
}

std::string FederationState::ExpiryKey(int64_t expires_at_ms, char kind,
                                       std::string_view id) const {
  return Key("x/", Hex16(expires_at_ms) + "/" + kind + "/" + std::string(id));
}

Result<std::optional<ReservationRecord>> FederationState::Reservation(
    const std::string& reservation_id, const StoreBatch* batch) const {
  ASSIGN_OR_RETURN(auto value, store_->Get(Key("n/", reservation_id), batch));
  if (!value) return std::optional<ReservationRecord>();
  ASSIGN_OR_RETURN(auto record, DecodeReservationRecord(*value));
  return std::optional<ReservationRecord>(std::move(record));
}

Result<std::optional<std::string>> FederationState::ReservationOfContract(
    const std::string& contract_id, const StoreBatch* batch) const {
  return store_->Get(Key("m/", contract_id), batch);
}

Result<FlavorUsage> FederationState::Usage(const std::string& flavor_id,
                                           const StoreBatch* batch) const {
  ASSIGN_OR_RETURN(auto value, store_->Get(Key("u/", flavor_id), batch));
  if (!value) return FlavorUsage{};
  return ParseUsage(*value);
}

Result<std::optional<std::string>> FederationState::Decided(const std::string& request_id,
                                                            const StoreBatch* batch) const {
  return store_->Get(Key("q/", request_id), batch);
}

void FederationState::Remember(const std::string& request_id, std::string_view outcome_type,
                               StoreBatch& batch) {
  batch.Put(Key("q/", request_id), outcome_type);
}

Status FederationState::AddUsage(const std::string& flavor_id, int64_t holds, int64_t contracts,
                                 StoreBatch& batch) {
  ASSIGN_OR_RETURN(FlavorUsage usage, Usage(flavor_id, &batch));
  usage.holds += holds;
  usage.contracts += contracts;
  if (usage.holds < 0 || usage.contracts < 0) {
    return MakeError(ErrorCode::kCorruption, "flavour usage below zero: " + flavor_id);
  }
  if (usage.Total() == 0) {
    batch.Delete(Key("u/", flavor_id));
  } else {
    batch.Put(Key("u/", flavor_id),
              std::to_string(usage.holds) + " " + std::to_string(usage.contracts));
  }
  return OkStatus();
}

void FederationState::PutRecord(const ReservationRecord& record, StoreBatch& batch) {
  const std::string json = EncodeReservationRecord(record);
  batch.Put(Key("n/", record.reservation_id), json);
  if (record.HoldLive()) batch.Put(Key("h/", record.reservation_id), json);
  if (record.ContractLive()) batch.Put(Key("c/", record.contract_id), json);
}

Status FederationState::StartHold(ReservationRecord& record, StoreBatch& batch) {
  record.state = reservation_state::kHeld;
  batch.Put(ExpiryKey(record.hold_expires_at_ms, 'h', record.reservation_id), "");
  return AddUsage(record.flavor_id, 1, 0, batch);
}

Status FederationState::EndHold(ReservationRecord& record, StoreBatch& batch) {
  batch.Delete(Key("h/", record.reservation_id));
  batch.Delete(ExpiryKey(record.hold_expires_at_ms, 'h', record.reservation_id));
  return AddUsage(record.flavor_id, -1, 0, batch);
}

Status FederationState::StartContract(ReservationRecord& record, StoreBatch& batch) {
  record.state = reservation_state::kSigned;
  batch.Put(Key("m/", record.contract_id), record.reservation_id);
  batch.Put(Key("k/", record.consumer + "/" + record.contract_id), "");
  batch.Put(ExpiryKey(record.contract_expires_at_ms, 'c', record.contract_id), "");
  return AddUsage(record.flavor_id, 0, 1, batch);
}

Status FederationState::EndContract(ReservationRecord& record, StoreBatch& batch) {
  batch.Delete(Key("c/", record.contract_id));
  batch.Delete(Key("k/", record.consumer + "/" + record.contract_id));
  batch.Delete(ExpiryKey(record.contract_expires_at_ms, 'c', record.contract_id));
  return AddUsage(record.flavor_id, 0, -1, batch);
}

Result<bool> FederationState::Apply(const FederationOutcome& outcome, StoreBatch& batch) {
  const FederationOutcomeBase& base = BaseOf(outcome);
  Remember(base.request_id, TypeOf(outcome), batch);
  if (base.repeat || base.reservation_id.empty()) return false;
  ASSIGN_OR_RETURN(auto record, Reservation(base.reservation_id, &batch));
  if (record && base.seq <= record->seq) return false;  // a duplicate or an older decision
  return ApplyChange(outcome, std::move(record), batch);
}

Result<bool> FederationState::ApplyChange(const FederationOutcome& outcome,
                                          std::optional<ReservationRecord> existing,
                                          StoreBatch& batch) {
  ReservationRecord r;
  bool changed = false;
  if (existing) {
    r = std::move(*existing);
    ASSIGN_OR_RETURN(changed, ChangeRecord(outcome, r, batch));
  } else {
    ASSIGN_OR_RETURN(changed, NewRecord(outcome, r, batch));
  }
  if (!changed) return false;
  r.seq = BaseOf(outcome).seq;
  PutRecord(r, batch);
  return true;
}

Result<bool> FederationState::NewRecord(const FederationOutcome& outcome, ReservationRecord& r,
                                        StoreBatch& batch) {
  const FederationOutcomeBase& base = BaseOf(outcome);
  r.reservation_id = base.reservation_id;
  r.flavor_id = base.flavor_id;
  r.consumer = base.consumer;
  if (const auto* held = std::get_if<ReservationHeld>(&outcome)) {
    r.spec = held->spec;
    r.capacity = held->capacity;
    r.hold_expires_at_ms = held->expires_at_ms;
    RETURN_IF_ERROR(StartHold(r, batch));
    return true;
  }
  if (const auto* relayed = std::get_if<ReservationRelayed>(&outcome)) {
    r.state = reservation_state::kRelayed;  // no capacity, no lease: n/ and m/ only
    r.next_hop = relayed->next_hop;
    r.owner = relayed->owner;
    r.contract_id = relayed->contract_id;
    batch.Put(Key("m/", r.contract_id), r.reservation_id);
    return true;
  }
  // A new reservation's refusal is its record (a repeat gets it again).
  const auto* refused = std::get_if<ReservationRefused>(&outcome);
  if (!refused || refused->request_type != event_type::kReservationReceived) return false;
  r.state = reservation_state::kRefused;
  r.reason = refused->reason;
  r.status = refused->status;
  return true;
}

Result<bool> FederationState::ChangeRecord(const FederationOutcome& outcome, ReservationRecord& r,
                                           StoreBatch& batch) {
  // Each alternative: whether it applies to the record as it is, after staging its index changes.
  auto change = Overloaded{
      [&](const ReservationHeld&) -> Result<bool> { return false; },  // only a new one is held
      [&](const ReservationRefused&) -> Result<bool> { return false; },
      [&](const ReservationRelayed&) -> Result<bool> { return false; },  // only a new one
      [&](const ReservationExpired&) -> Result<bool> {
        if (!r.HoldLive()) return false;
        RETURN_IF_ERROR(EndHold(r, batch));
        r.state = reservation_state::kHoldExpired;
        return true;
      },
      [&](const ReservationReleased&) -> Result<bool> {
        if (!r.HoldLive()) return false;
        RETURN_IF_ERROR(EndHold(r, batch));
        r.state = reservation_state::kReleased;
        return true;
      },
      [&](const ContractSigned& o) -> Result<bool> {
        if (!r.HoldLive()) return false;
        RETURN_IF_ERROR(EndHold(r, batch));
        r.contract_id = o.contract_id;
        r.remote_instance_id = o.remote_instance_id;
        r.contract_expires_at_ms = o.expires_at_ms;
        RETURN_IF_ERROR(StartContract(r, batch));
        return true;
      },
      [&](const ContractRenewed& o) -> Result<bool> {
        if (!r.ContractLive()) return false;
        batch.Delete(ExpiryKey(r.contract_expires_at_ms, 'c', r.contract_id));
        r.contract_expires_at_ms = o.expires_at_ms;
        batch.Put(ExpiryKey(r.contract_expires_at_ms, 'c', r.contract_id), "");
        return true;
      },
      [&](const auto& o) -> Result<bool> {  // contract expired, revoked, terminated
        using T = std::decay_t<decltype(o)>;
        if (!r.ContractLive()) return false;
        RETURN_IF_ERROR(EndContract(r, batch));
        r.state = std::is_same_v<T, ContractExpired>   ? reservation_state::kContractExpired
                  : std::is_same_v<T, ContractRevoked> ? reservation_state::kRevoked
                                                       : reservation_state::kTerminated;
        return true;
      },
  };
  return std::visit(change, outcome);
}

Status FederationState::LiveHolds(const std::function<bool(const ReservationRecord&)>& fn) const {
  Status status = OkStatus();
  RETURN_IF_ERROR(store_->Scan(Key("h/", ""), "", [&](std::string_view, std::string_view value) {
    auto record = DecodeReservationRecord(value);
    if (!record) {
      status = tl::unexpected(record.error());
      return false;
    }
    return fn(*record);
  }));
  return status;
}

Status FederationState::LiveContracts(
    const std::function<bool(const ReservationRecord&)>& fn) const {
  Status status = OkStatus();
  RETURN_IF_ERROR(store_->Scan(Key("c/", ""), "", [&](std::string_view, std::string_view value) {
    auto record = DecodeReservationRecord(value);
    if (!record) {
      status = tl::unexpected(record.error());
      return false;
    }
    return fn(*record);
  }));
  return status;
}

Result<std::vector<ReservationRecord>> FederationState::ContractsOf(
    const std::string& consumer) const {
  std::vector<std::string> ids;
  const std::string prefix = Key("k/", consumer + "/");
  RETURN_IF_ERROR(store_->Scan(prefix, "", [&](std::string_view key, std::string_view) {
    ids.emplace_back(key.substr(prefix.size()));
    return true;
  }));
  std::vector<ReservationRecord> out;
  for (const auto& id : ids) {
    ASSIGN_OR_RETURN(auto value, store_->Get(Key("c/", id)));
    if (!value) continue;  // ended between the scan and the read
    ASSIGN_OR_RETURN(auto record, DecodeReservationRecord(*value));
    out.push_back(std::move(record));
  }
  return out;
}

Result<std::vector<DueLease>> FederationState::Due(int64_t now_ms, size_t limit) const {
  std::vector<DueLease> due;
  const std::string prefix = Key("x/", "");
  const std::string end = Hex16(now_ms);
  Status status = OkStatus();
  RETURN_IF_ERROR(store_->Scan(prefix, "", [&](std::string_view key, std::string_view) {
    // <hex16>/<h|c>/<id>
    const std::string_view rest = key.substr(prefix.size());
    if (rest.size() < 20 || rest.substr(0, 16) > end || due.size() >= limit) return false;
    uint64_t at = 0;
    std::from_chars(rest.data(), rest.data() + 16, at, 16);
    due.push_back({rest[17] == 'c', std::string(rest.substr(19)), static_cast<int64_t>(at)});
    return true;
  }));
  return due;
}

}  // namespace dcm
