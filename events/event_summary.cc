#include "events/event_summary.h"

#include <fmt/format.h>

#include <cctype>
#include <string>
#include <vector>

#include "events/federation_events.h"
#include "events/health_events.h"
#include "events/heartbeat_events.h"
#include "events/instance_events.h"
#include "events/instance_facts.h"
#include "events/json_read.h"
#include "events/provider_events.h"
#include "src/common/time_format.h"
#include "src/common/uuid.h"

namespace dcm {
namespace {

constexpr size_t kMaxReasonBytes = 120;

// Cuts `text` to at most `max_bytes` on a UTF-8 boundary, marking the cut with "…".
std::string Truncate(std::string text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t cut = max_bytes - 3;  // room for "…" (3 bytes)
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  text.resize(cut);
  return text + "…";
}

std::string OneLine(std::string text) {
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) c = ' ';
  }
  return text;
}

std::string Undecodable(const CloudEvent& event, const Error& error) {
  return fmt::format("{} (undecodable data: {})", event.type,
                     Truncate(error.message, kMaxReasonBytes));
}

// " (vm) at https://…" for a provider spec.
std::string SpecTail(const ProviderSpec& spec) {
  std::string out;
  if (!spec.service_type.empty()) out += " (" + spec.service_type + ")";
  if (!spec.endpoint.empty()) out += " at " + spec.endpoint;
  return out;
}

std::string RequestNoun(RequestKind kind) {
  switch (kind) {
    case RequestKind::kRegister:
      return "registration";
    case RequestKind::kUpdate:
      return "update";
    case RequestKind::kChangeId:
      return "id change";
    case RequestKind::kDelete:
      return "deletion";
    case RequestKind::kExpire:
      return "expiry";
  }
  return "request";
}

// Requests are summarised whatever the server's configured service types are: the summary
// describes what was asked, so the request's own service type is accepted here.
std::vector<std::string> OwnServiceType(const CloudEvent& event) {
  auto data = ParseJson(event.data);
  if (!data || !data->is_object()) return {};
  return {StringMember(simdjson::dom::object(*data), "service_type", "serviceType")};
}

std::string SummarizeProviderRequest(const CloudEvent& event) {
  auto request = DecodeProviderRequest(event, OwnServiceType(event));
  if (!request) {
    if (request.error().code != ErrorCode::kInvalidArgument) {
      return Undecodable(event, request.error());
    }
    const auto kind = RequestKindOfType(event.type).value_or(RequestKind::kRegister);
    return fmt::format("{} requested (invalid: {})", RequestNoun(kind),
                       Truncate(request.error().message, kMaxReasonBytes));
  }
  const ProviderRequest& r = *request;
  switch (r.kind) {
    case RequestKind::kRegister:
      return "registration requested: " + r.spec.name + SpecTail(r.spec);
    case RequestKind::kUpdate:
      return "update requested: " + r.spec.name + SpecTail(r.spec);
    case RequestKind::kChangeId:
      return "id change requested: " + ShortId(r.id) + " → " + ShortId(r.new_id);
    case RequestKind::kDelete:
      return "deletion requested: " + ShortId(r.id) + (r.force ? " (force)" : "");
    case RequestKind::kExpire:
      return "expiry requested: " + ShortId(r.id) + ", no heartbeat since " +
             (r.last_heartbeat_time.empty() ? "registration" : r.last_heartbeat_time);
  }
  return "provider request";
}

std::string SummarizeProviderOutcome(const CloudEvent& event) {
  auto outcome = DecodeProviderOutcome(event);
  if (!outcome) return Undecodable(event, outcome.error());
  const ProviderOutcome& o = *outcome;
  const std::string& name = o.provider.spec.name;
  switch (o.kind) {
    case OutcomeKind::kRegistered:
      return "registered " + name + SpecTail(o.provider.spec);
    case OutcomeKind::kUpdated:
      return "updated " + name;
    case OutcomeKind::kIdChanged:
      return fmt::format("id changed: {} → {}{}", ShortId(o.old_id), ShortId(o.provider.id),
                         name == o.provider.id ? "" : " (" + name + ")");
    case OutcomeKind::kDeleted:
      return "deregistered " + name;
    case OutcomeKind::kExpired:
      return "expired " + name + ": " + Truncate(o.reason, kMaxReasonBytes);
    case OutcomeKind::kRejected:
      return fmt::format("{} rejected: {}", RequestNoun(o.request_kind),
                         Truncate(o.detail, kMaxReasonBytes));
  }
  return "provider outcome";
}

std::string Millis(int64_t latency_us) {
  const double ms = static_cast<double>(latency_us) / 1000.0;
  return ms < 10 ? fmt::format("{:.1f} ms", ms) : fmt::format("{:.0f} ms", ms);
}

std::string SummarizeHealthProbe(const CloudEvent& event, const HealthSubject& subject) {
  auto probe = DecodeHealthProbe(event, subject);
  if (!probe) return Undecodable(event, probe.error());
  const HealthProbe& p = *probe;
  if (p.failure == ProbeFailure::kNone) {
    return fmt::format("probe healthy in {} (HTTP {})", Millis(p.latency_us), p.http_status);
  }
  std::string detail;
  if (p.http_status != 0) detail = fmt::format("HTTP {}", p.http_status);
  if (!p.error.empty()) {
    detail += (detail.empty() ? "" : "; ") + Truncate(p.error, kMaxReasonBytes);
  }
  std::string out = "probe failed: " + std::string(ProbeFailureName(p.failure));
  if (!detail.empty()) out += " (" + detail + ")";
  return out;
}

std::string SummarizeHeartbeat(const CloudEvent& event) {
  auto decoded = DecodeHeartbeatRecord(event);
  if (!decoded) return Undecodable(event, decoded.error());
  const HeartbeatRecord& h = *decoded;
  if (h.result == BeatResult::kExpired) {
    return fmt::format("heartbeat expired: no beat for {} ms", h.timeout_ms);
  }
  return fmt::format("heartbeat {} ({} beat{}{})",
                     h.result == BeatResult::kHealthy ? "healthy" : "reported unhealthy", h.beats,
                     h.beats == 1 ? "" : "s", h.forwarded ? ", forwarded" : "");
}

// "3 consecutive failures (timeout)" reads "after 3 failures (timeout)"; other reasons
// ("provider reported unhealthy", "re-registered") follow a colon.
std::string TransitionReason(const std::string& reason) {
  size_t digits = 0;
  while (digits < reason.size() && std::isdigit(static_cast<unsigned char>(reason[digits]))) {
    ++digits;
  }
  constexpr std::string_view kConsecutive = " consecutive ";
  if (digits > 0 && std::string_view(reason).substr(digits).starts_with(kConsecutive)) {
    return " after " + reason.substr(0, digits) + " " + reason.substr(digits + kConsecutive.size());
  }
  if (reason == "healthy probe") return " after a healthy probe";
  return reason.empty() ? "" : ": " + Truncate(reason, kMaxReasonBytes);
}

std::string SummarizeHealthChange(const CloudEvent& event, const HealthSubject& subject) {
  auto change = DecodeHealthChange(event, subject);
  if (!change) return Undecodable(event, change.error());
  const char* what = std::string_view(subject.changed_type) == event_type::kPeerHealthChanged
                         ? "peer health"
                         : "health";
  return fmt::format("{} {} → {}{}", what, HealthStatusName(change->from),
                     HealthStatusName(change->to), TransitionReason(change->reason));
}

template <typename Fact>
std::string On(const Fact& e) {
  return e.provider_name.empty() ? "" : " on " + e.provider_name;
}

template <typename Fact>
std::string Detail(const Fact& e) {
  return Truncate(e.error, kMaxReasonBytes);
}

template <typename Fact>
std::string HttpSuffix(const Fact& e) {
  return e.http_status == 0 ? "" : fmt::format(" (HTTP {})", e.http_status);
}

// "provider 'sim-vm-0' is Unavailable" reads "provider Unavailable" after "… on sim-vm-0".
std::string ParkReason(const CleanupParked& e) {
  for (const std::string& prefix :
       {"provider '" + e.provider_name + "' is ", "provider " + e.provider_name + " is "}) {
    if (e.error.starts_with(prefix)) return "provider " + e.error.substr(prefix.size());
  }
  return Detail(e);
}

std::string CleanupOf(const CleanupFact& e) {
  return "cleanup of resource " + ShortId(e.instance_id) + On(e);
}

// The id an operation is about.
template <typename Op>
const std::string& Target(const Op& e) {
  return e.catalog_item_instance_id.empty()
             ? (e.resource_id.empty() ? e.instance_id : e.resource_id)
             : e.catalog_item_instance_id;
}

// " <short id>" of what an operation is about ("" when it names nothing).
template <typename Op>
std::string About(const Op& e) {
  return Target(e).empty() ? "" : " " + ShortId(Target(e));
}

// One line per instance event type, visited (every type has one).
struct InstanceSummary {
  std::string operator()(const OperationRequested& e) const {
    std::string out = "requested " + e.operation + About(e);
    if (!e.display_name.empty()) out += " (" + e.display_name + ")";
    if (e.deferred) out += " (deferred)";
    return out;
  }
  std::string operator()(const OperationStarted& e) const {
    return "started " + e.operation + About(e);
  }
  std::string operator()(const OperationCompleted& e) const {
    std::string out = "completed " + e.operation + About(e);
    if (!e.resource_id.empty() && e.resource_id != Target(e)) {
      out += ": resource " + ShortId(e.resource_id);
    }
    return out + HttpSuffix(e);
  }
  std::string operator()(const OperationFailed& e) const {
    std::string out = e.operation + About(e) + " failed";
    if (!e.reason.empty()) out += ": " + e.reason;
    if (!e.error.empty()) out += " (" + Detail(e) + ")";
    return out;
  }
  std::string operator()(const ResourcePlaced& e) const {
    std::string out = "placed resource " + ShortId(e.resource_id) + On(e);
    if (!e.policy.empty()) out += " (" + e.policy + " policy)";
    return out;
  }
  std::string operator()(const ResourceDeleted& e) const {
    return "deleted resource " + ShortId(e.resource_id) + On(e) +
           (e.deferred ? " (deferred cleanup)" : "");
  }
  std::string operator()(const ResourceLost& e) const {
    return "resource " + ShortId(e.resource_id) + " LOST" + On(e) + " (" + e.reason + ")";
  }
  std::string operator()(const InstanceCreated& e) const {
    std::string out = "created instance " + ShortId(e.instance_id) + On(e);
    if (!e.status.empty()) out += ": " + e.status;
    return out + HttpSuffix(e);
  }
  std::string operator()(const InstanceCreateFailed& e) const { return Failed("create", e); }
  std::string operator()(const InstanceDeleteFailed& e) const { return Failed("delete", e); }
  std::string operator()(const InstanceDeleted& e) const {
    return "deleted instance " + ShortId(e.instance_id) + On(e) + HttpSuffix(e);
  }
  std::string operator()(const CleanupEnqueued& e) const { return CleanupOf(e) + " enqueued"; }
  std::string operator()(const CleanupParked& e) const {
    return CleanupOf(e) + " parked: " + ParkReason(e);
  }
  std::string operator()(const CleanupRetried& e) const {
    return CleanupOf(e) + " retried by an operator (" + e.status + ")";
  }
  std::string operator()(const CleanupFailed& e) const {
    return fmt::format("{} failed after {} retries: {}", CleanupOf(e), e.retry_count, Detail(e));
  }
  std::string operator()(const CleanupAttempted& e) const {
    if (e.outcome == "failed") {
      return fmt::format("{} attempt failed ({}/{}): {}", CleanupOf(e), e.retry_count,
                         e.max_retries, Detail(e));
    }
    if (e.outcome == "gone") return CleanupOf(e) + ": already gone on the provider";
    return CleanupOf(e) + ": " + (e.outcome.empty() ? "attempted" : e.outcome) + HttpSuffix(e);
  }
  std::string operator()(const CatalogItemInstanceCreated& e) const {
    std::string out = "catalog item instance created";
    if (!e.display_name.empty()) out += " (" + e.display_name + ")";
    return out + ": resource " + ShortId(e.resource_id) + On(e);
  }
  std::string operator()(const CatalogItemInstanceRehydrated& e) const {
    return "rehydrated: resource " + ShortId(e.old_resource_id) + " replaced by " +
           ShortId(e.new_resource_id.empty() ? e.resource_id : e.new_resource_id) + On(e);
  }
  std::string operator()(const CatalogItemInstanceDeleted& e) const {
    return "catalog item instance deleted" +
           (e.resource_id.empty() ? "" : " (resource " + ShortId(e.resource_id) + ")");
  }
  std::string operator()(const RemoteReservationRequested& e) const {
    return fmt::format("asked peer {} to hold flavour {} for resource {} (reservation {})", e.peer,
                       e.flavor_id, ShortId(e.resource_id), ShortId(e.reservation_id));
  }
  std::string operator()(const RemoteReservationHeld& e) const {
    return fmt::format("peer {} holds reservation {} until {}", e.peer, ShortId(e.reservation_id),
                       FormatRfc3339Millis(e.expires_at_ms));
  }
  std::string operator()(const RemoteReservationRefused& e) const {
    std::string out = fmt::format("peer {} refused reservation {}: {}", e.peer,
                                  ShortId(e.reservation_id), e.reason);
    if (!e.error.empty()) out += " (" + Detail(e) + ")";
    return out;
  }
  std::string operator()(const RemoteContractSigned& e) const {
    return fmt::format("contract {} signed with peer {}: its instance {}, until {}",
                       ShortId(e.contract_id), e.peer, ShortId(e.instance_id),
                       FormatRfc3339Millis(e.expires_at_ms));
  }
  std::string operator()(const RemoteContractRenewed& e) const {
    return fmt::format("contract {} with peer {} renewed until {}", ShortId(e.contract_id), e.peer,
                       FormatRfc3339Millis(e.expires_at_ms));
  }
  std::string operator()(const RemoteContractExpired& e) const {
    return fmt::format("contract {} with peer {} is gone ({}): resource {} lost",
                       ShortId(e.contract_id), e.peer, e.reason, ShortId(e.resource_id));
  }
  std::string operator()(const RemoteContractRevoked& e) const {
    return fmt::format("contract {} revoked by peer {}: resource {} lost", ShortId(e.contract_id),
                       e.peer, ShortId(e.resource_id));
  }
  std::string operator()(const RemoteContractTerminated& e) const {
    return fmt::format("contract {} with peer {} terminated", ShortId(e.contract_id), e.peer);
  }

 private:
  template <typename Fact>
  static std::string Failed(const char* verb, const Fact& e) {
    return fmt::format("{} of instance {}{} failed: {}", verb, ShortId(e.instance_id), On(e),
                       Detail(e));
  }
};

std::string SummarizeInstanceEvent(const CloudEvent& event) {
  auto decoded = DecodeInstanceFact(event);
  if (!decoded) return Undecodable(event, decoded.error());
  return std::visit(InstanceSummary{}, *decoded);
}

std::string SummarizeStatus(const CloudEvent& event) {
  auto status = DecodeSpStatusEvent(event);
  if (!status) return Undecodable(event, status.error());
  std::string out = "SP status " + status->status;
  if (!status->message.empty()) out += ": " + Truncate(status->message, kMaxReasonBytes);
  return out;
}

// SPEC §10, provider side: "held reservation 7d1e3f0a… of fl-1 for enclave-a until …".
struct FederationSummary {
  static std::string Reservation(const std::string& id) { return "reservation " + ShortId(id); }
  static std::string Repeat(const FederationOutcomeBase& o) { return o.repeat ? " (repeat)" : ""; }
  std::string operator()(const ReservationReceived& r) const {
    return fmt::format("{} asks to hold {} of {} for {} ms", r.consumer,
                       Reservation(r.reservation_id), r.flavor_id, r.ttl_ms);
  }
  std::string operator()(const ReservationConfirmRequested& r) const {
    return fmt::format("{} confirms {}", r.consumer, Reservation(r.reservation_id));
  }
  std::string operator()(const ReservationReleaseRequested& r) const {
    return fmt::format("{} releases {}", r.consumer, Reservation(r.reservation_id));
  }
  std::string operator()(const ReservationExpiryDue& r) const {
    return fmt::format("hold of {} due to expire (at {})", Reservation(r.reservation_id),
                       FormatRfc3339Millis(r.expires_at_ms));
  }
  std::string operator()(const ContractRenewalRequested& r) const {
    return fmt::format("{} renews contract {}", r.consumer, ShortId(r.contract_id));
  }
  std::string operator()(const ContractTerminationRequested& r) const {
    return fmt::format("{} terminates contract {}", r.consumer, ShortId(r.contract_id));
  }
  std::string operator()(const ContractRevocationRequested& r) const {
    return fmt::format("revocation of contract {} asked: {}", ShortId(r.contract_id),
                       Truncate(r.reason, kMaxReasonBytes));
  }
  std::string operator()(const ContractExpiryDue& r) const {
    return fmt::format("contract {} due to expire (at {})", ShortId(r.contract_id),
                       FormatRfc3339Millis(r.expires_at_ms));
  }
  std::string operator()(const ReservationRelayRequested& r) const {
    return fmt::format("{} asks to relay {} of {} to {} (owner {})", r.consumer,
                       Reservation(r.reservation_id), r.flavor_id, r.next_hop, r.owner);
  }
  std::string operator()(const ReservationHeld& o) const {
    return fmt::format("held {} of {} for {} until {}{}", Reservation(o.reservation_id),
                       o.flavor_id, o.consumer, FormatRfc3339Millis(o.expires_at_ms), Repeat(o));
  }
  std::string operator()(const ReservationRefused& o) const {
    const std::string what = !o.reservation_id.empty() ? Reservation(o.reservation_id)
                             : !o.contract_id.empty()  ? "contract " + ShortId(o.contract_id)
                                                       : "request " + ShortId(o.request_id);
    return fmt::format("refused {} ({}, {}): {}{}", what, o.reason, o.status,
                       Truncate(o.detail, kMaxReasonBytes), Repeat(o));
  }
  std::string operator()(const ReservationExpired& o) const {
    return fmt::format("hold of {} expired (at {})", Reservation(o.reservation_id),
                       FormatRfc3339Millis(o.expires_at_ms));
  }
  std::string operator()(const ReservationReleased& o) const {
    return fmt::format("released {}{}", Reservation(o.reservation_id), Repeat(o));
  }
  std::string operator()(const ContractSigned& o) const {
    return fmt::format("signed contract {} with {}: instance {} until {}{}", ShortId(o.contract_id),
                       o.consumer, ShortId(o.remote_instance_id),
                       FormatRfc3339Millis(o.expires_at_ms), Repeat(o));
  }
  std::string operator()(const ContractRenewed& o) const {
    return fmt::format("renewed contract {} until {}", ShortId(o.contract_id),
                       FormatRfc3339Millis(o.expires_at_ms));
  }
  std::string operator()(const ContractExpired& o) const {
    return fmt::format("contract {} expired (at {})", ShortId(o.contract_id),
                       FormatRfc3339Millis(o.expires_at_ms));
  }
  std::string operator()(const ContractRevoked& o) const {
    return fmt::format("revoked contract {}{}: {}", ShortId(o.contract_id), Repeat(o),
                       Truncate(o.reason, kMaxReasonBytes));
  }
  std::string operator()(const ContractTerminated& o) const {
    return fmt::format("terminated contract {}{}", ShortId(o.contract_id), Repeat(o));
  }
  std::string operator()(const ReservationRelayed& o) const {
    return fmt::format("relayed {} of {} for {} to {} (contract {} of {}){}",
                       Reservation(o.reservation_id), o.flavor_id, o.consumer, o.next_hop,
                       ShortId(o.contract_id), o.owner, Repeat(o));
  }
};

std::string SummarizeFederationEvent(const CloudEvent& event) {
  if (IsFederationRequestType(event.type)) {
    auto request = DecodeFederationRequest(event);
    if (!request) return Undecodable(event, request.error());
    return std::visit(FederationSummary{}, *request);
  }
  auto outcome = DecodeFederationOutcome(event);
  if (!outcome) return Undecodable(event, outcome.error());
  return std::visit(FederationSummary{}, *outcome);
}

std::string Summarize(const CloudEvent& event) {
  const std::string_view type = event.type;
  if (RequestKindOfType(type)) return SummarizeProviderRequest(event);
  if (IsProviderOutcomeType(type)) return SummarizeProviderOutcome(event);
  if (type == event_type::kHealthProbed) return SummarizeHealthProbe(event, kProviderHealth);
  if (type == event_type::kHealthChanged) return SummarizeHealthChange(event, kProviderHealth);
  if (type == event_type::kPeerHealthProbed)
    return "peer " + SummarizeHealthProbe(event, kPeerHealth);
  if (type == event_type::kPeerHealthChanged) return SummarizeHealthChange(event, kPeerHealth);
  if (type == event_type::kHeartbeatRecorded) return SummarizeHeartbeat(event);
  if (IsInstanceEvent(event)) return SummarizeInstanceEvent(event);
  if (type.starts_with(event_type::kStatusPrefix)) return SummarizeStatus(event);
  if (IsFederationRequestType(type) || IsFederationOutcomeType(type)) {
    return SummarizeFederationEvent(event);
  }
  return std::string(type) + " (no summary for this type)";
}

}  // namespace

std::string ShortId(std::string_view id) {
  if (!IsUuid(id)) return std::string(id);
  return std::string(id.substr(0, 8)) + "…";
}

std::string SummarizeEvent(const CloudEvent& event) {
  return Truncate(OneLine(Summarize(event)), kMaxSummaryBytes);
}

}  // namespace dcm
