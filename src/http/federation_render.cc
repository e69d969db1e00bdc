#include "src/http/federation_render.h"

#include "events/instance_facts.h"
#include "src/common/json_writer.h"
#include "src/common/time_format.h"
#include "src/http/handler_util.h"
#include "src/http/problem.h"
#include "src/http/provider_render.h"

namespace dcm::http {
namespace {

template <typename T>
void OptionalNumber(JsonWriter& w, const char* key, const std::optional<T>& value) {
  w.Key(key);
  if (!value) return w.Null();
  if constexpr (std::is_floating_point_v<T>) {
    w.Double(*value);
  } else {
    w.Int(*value);
  }
}

void WriteFlavor(JsonWriter& w, const Flavor& f) {
  w.BeginObject();
  w.Field("flavor_id", f.flavor_id);
  w.Field("owner", f.owner);
  w.Field("service_type", f.service_type);
  w.Field("region", f.region);
  OptionalNumber(w, "instances_available", f.instances_available);
  OptionalNumber(w, "cpu_available", f.cpu_available);
  OptionalNumber(w, "memory_available", f.memory_available);
  w.Key("price");
  w.BeginObject();
  w.Key("amount");
  w.Double(f.price.amount);
  w.Field("currency", f.price.currency);
  w.Field("period", f.price.period);
  w.EndObject();
  w.Field("expires_at", FormatRfc3339Millis(f.expires_at_ms));
  w.Field("hops", 1);
  w.StringArray("path", std::vector<std::string>{f.owner});
  w.EndObject();
}

// The fields every successful answer has.
void AnswerHead(JsonWriter& w, const FederationOutcomeBase& o, const char* state) {
  w.Field("reservation_id", o.reservation_id);
  w.Field("flavor_id", o.flavor_id);
  w.Field("consumer", o.consumer);
  w.Field("state", state);
}

std::string AnswerBody(const FederationOutcome& outcome) {
  JsonWriter w;
  w.BeginObject();
  std::visit(
      Overloaded{
          [&](const ReservationHeld& o) {
            AnswerHead(w, o, reservation_state::kHeld);
            w.Field("expires_at", FormatRfc3339Millis(o.expires_at_ms));
          },
          [&](const ReservationReleased& o) { AnswerHead(w, o, reservation_state::kReleased); },
          [&](const ContractRevoked& o) {
            AnswerHead(w, o, reservation_state::kRevoked);
            w.Field("contract_id", o.contract_id);
          },
          [&](const ContractTerminated& o) {
            AnswerHead(w, o, reservation_state::kTerminated);
            w.Field("contract_id", o.contract_id);
          },
          [&](const ContractFact& o) {  // signed, renewed (expired answers a problem)
            AnswerHead(w, o, reservation_state::kSigned);
            w.Field("contract_id", o.contract_id);
            w.Field("remote_instance_id", o.remote_instance_id);
            w.Field("expires_at", FormatRfc3339Millis(o.expires_at_ms));
          },
          [&](const ReservationRelayed& o) {
            AnswerHead(w, o, reservation_state::kRelayed);
            w.Field("next_hop", o.next_hop);
            w.Field("owner", o.owner);
            w.Field("contract_id", o.contract_id);
          },
          [&](const FederationOutcomeBase& o) { AnswerHead(w, o, ""); },
      },
      outcome);
  w.Key("repeat");
  w.Bool(BaseOf(outcome).repeat);
  w.EndObject();
  return w.Take();
}

void WriteRecord(JsonWriter& w, const ReservationRecord& r) {
  w.BeginObject();
  w.Field("reservation_id", r.reservation_id);
  w.Field("flavor_id", r.flavor_id);
  w.Field("consumer", r.consumer);
  w.Field("state", r.state);
  if (!r.contract_id.empty()) {
    w.Field("contract_id", r.contract_id);
    w.Field("remote_instance_id", r.remote_instance_id);
    w.Field("expires_at", FormatRfc3339Millis(r.contract_expires_at_ms));
  } else {
    w.Field("expires_at", FormatRfc3339Millis(r.hold_expires_at_ms));
  }
  w.EndObject();
}

}  // namespace

HttpResponse RenderFederationAnswer(const FederationOutcome& outcome) {
  const int status = FederationAnswerStatus(outcome);
  if (status < 400) return Json(status, AnswerBody(outcome));
  if (const auto* refused = std::get_if<ReservationRefused>(&outcome)) {
    return WithMember(Problem(status, refused->detail.empty() ? refused->reason : refused->detail),
                      "reason", refused->reason);
  }
  const FederationOutcomeBase& base = BaseOf(outcome);
  const bool contract = std::holds_alternative<ContractExpired>(outcome);
  return WithMember(Problem(status, std::string(contract ? "contract" : "hold") +
                                        " of reservation '" + base.reservation_id + "' expired"),
                    "reason", refusal::kExpired);
}

std::string RenderContracts(const std::vector<ReservationRecord>& records) {
  JsonWriter w;
  w.BeginObject();
  w.Key("contracts");
  w.BeginArray();
  for (const ReservationRecord& r : records) WriteRecord(w, r);
  w.EndArray();
  w.EndObject();
  return w.Take();
}

std::string RenderFlavors(const std::string& enclave_id, const std::vector<Flavor>& flavors,
                          const std::vector<std::string>& forwarded) {
  JsonWriter w;
  w.BeginObject();
  w.Field("owner", enclave_id);
  w.Key("flavors");
  w.BeginArray();
  for (const Flavor& f : flavors) WriteFlavor(w, f);
  for (const std::string& f : forwarded) w.Raw(f);
  w.EndArray();
  w.EndObject();
  return w.Take();
}

std::string RenderFederationHealth(const std::string& enclave_id, bool healthy) {
  JsonWriter w;
  w.BeginObject();
  w.Field("status", healthy ? "healthy" : "unhealthy");
  w.Field("enclave_id", enclave_id);
  w.EndObject();
  return w.Take();
}

std::string RenderPeer(const PeerConfig& peer, const HealthRecord* health) {
  JsonWriter w;
  w.BeginObject();
  w.Field("id", peer.id);
  w.Field("url", peer.url);
  // Peers never re-register: every probe is of registration 0 (consumers/peer_prober.h).
  w.Field("health_status", HealthStatusName(EffectiveHealthStatus(health, 0)));
  if (health && health->last_probe_time_ms > 0) {
    w.Field("last_probe_time", FormatRfc3339Millis(health->last_probe_time_ms));
  }
  w.Key("health");
  w.Raw(RenderHealthDetail(health, 0));
  w.EndObject();
  return w.Take();
}

std::string RenderPeerList(const std::string& enclave_id,
                           const std::vector<std::string>& rendered) {
  JsonWriter w;
  w.BeginObject();
  w.Field("enclave_id", enclave_id);
  w.Key("peers");
  w.BeginArray();
  for (const auto& peer : rendered) w.Raw(peer);
  w.EndArray();
  w.EndObject();
  return w.Take();
}

}  // namespace dcm::http
