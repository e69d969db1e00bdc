#include "events/federation_events.h"

#include <array>
#include <climits>
#include <tuple>
#include <type_traits>
#include <utility>

#include "events/instance_facts.h"
#include "events/json_read.h"
#include "src/common/json_writer.h"
#include "src/common/time_format.h"
#include "src/common/uuid.h"

namespace dcm {
namespace {

// How a data field is spelled in JSON.
enum class Wire {
  kString,  // a string
  kObject,  // a JSON object, kept as minified text
  kInt,     // an integer (int64_t or int member)
  kTime,    // an RFC 3339 string, held as unix millis (int64_t member)
  kBool,    // written only when true
};

// One data field: its JSON name, where it lives in the typed struct, how it is spelled, and
// whether its type requires it. Optional fields are written when set (non-empty, non-zero,
// true); required ones always.
template <typename C, typename M>
struct Field {
  const char* name;
  M C::*member;
  Wire wire;
  bool required;
};
template <typename C, typename M>
Field(const char*, M C::*, Wire, bool) -> Field<C, M>;

constexpr bool kRequired = true;
constexpr bool kOptional = false;

using RR = ReservationReceived;
using RC = ReservationCall;
using CC = ContractCall;
using OB = FederationOutcomeBase;
using CF = ContractFact;

constexpr auto kOutcomeBase = std::tuple{
    Field{"request_id", &OB::request_id, Wire::kString, kRequired},
    Field{"seq", &OB::seq, Wire::kInt, kRequired},
    Field{"request_type", &OB::request_type, Wire::kString, kRequired},
    Field{"reservation_id", &OB::reservation_id, Wire::kString, kOptional},
    Field{"consumer", &OB::consumer, Wire::kString, kOptional},
    Field{"flavor_id", &OB::flavor_id, Wire::kString, kOptional},
    Field{"repeat", &OB::repeat, Wire::kBool, kOptional},
};

constexpr auto kContract = std::tuple_cat(
    kOutcomeBase,
    std::tuple{Field{"contract_id", &CF::contract_id, Wire::kString, kRequired},
               Field{"remote_instance_id", &CF::remote_instance_id, Wire::kString, kRequired},
               Field{"expires_at", &CF::expires_at_ms, Wire::kTime, kRequired}});

// kFields<T>: the data fields of type T, in the order the encoder writes them.
template <typename T>
constexpr auto kFields = std::tuple{};

template <>
constexpr auto kFields<ReservationReceived> = std::tuple{
    Field{"reservation_id", &RR::reservation_id, Wire::kString, kRequired},
    Field{"flavor_id", &RR::flavor_id, Wire::kString, kRequired},
    Field{"consumer", &RR::consumer, Wire::kString, kRequired},
    Field{"spec", &RR::spec, Wire::kObject, kRequired},
    Field{"ttl_ms", &RR::ttl_ms, Wire::kInt, kRequired},
};
constexpr auto kReservationCall =
    std::tuple{Field{"reservation_id", &RC::reservation_id, Wire::kString, kRequired},
               Field{"consumer", &RC::consumer, Wire::kString, kRequired}};
template <>
constexpr auto kFields<ReservationConfirmRequested> = kReservationCall;
template <>
constexpr auto kFields<ReservationReleaseRequested> = kReservationCall;
template <>
constexpr auto kFields<ReservationExpiryDue> = std::tuple{
    Field{"reservation_id", &ReservationExpiryDue::reservation_id, Wire::kString, kRequired},
    Field{"expires_at", &ReservationExpiryDue::expires_at_ms, Wire::kTime, kRequired},
};
constexpr auto kContractCall =
    std::tuple{Field{"contract_id", &CC::contract_id, Wire::kString, kRequired},
               Field{"consumer", &CC::consumer, Wire::kString, kRequired}};
template <>
constexpr auto kFields<ContractRenewalRequested> = kContractCall;
template <>
constexpr auto kFields<ContractTerminationRequested> = kContractCall;
template <>
constexpr auto kFields<ContractRevocationRequested> = std::tuple{
    Field{"contract_id", &ContractRevocationRequested::contract_id, Wire::kString, kRequired},
    Field{"reason", &ContractRevocationRequested::reason, Wire::kString, kOptional},
};
template <>
constexpr auto kFields<ContractExpiryDue> = std::tuple{
    Field{"contract_id", &ContractExpiryDue::contract_id, Wire::kString, kRequired},
    Field{"expires_at", &ContractExpiryDue::expires_at_ms, Wire::kTime, kRequired},
};

template <>
constexpr auto kFields<ReservationRelayRequested> = std::tuple{
    Field{"reservation_id", &ReservationRelayRequested::reservation_id, Wire::kString, kRequired},
    Field{"flavor_id", &ReservationRelayRequested::flavor_id, Wire::kString, kRequired},
    Field{"consumer", &ReservationRelayRequested::consumer, Wire::kString, kRequired},
    Field{"next_hop", &ReservationRelayRequested::next_hop, Wire::kString, kRequired},
    Field{"owner", &ReservationRelayRequested::owner, Wire::kString, kRequired},
};

template <>
constexpr auto kFields<ReservationHeld> = std::tuple_cat(
    kOutcomeBase,
    std::tuple{Field{"spec", &ReservationHeld::spec, Wire::kObject, kRequired},
               Field{"expires_at", &ReservationHeld::expires_at_ms, Wire::kTime, kRequired},
               Field{"capacity", &ReservationHeld::capacity, Wire::kInt, kRequired}});
template <>
constexpr auto kFields<ReservationRefused> = std::tuple_cat(
    kOutcomeBase,
    std::tuple{Field{"contract_id", &ReservationRefused::contract_id, Wire::kString, kOptional},
               Field{"reason", &ReservationRefused::reason, Wire::kString, kRequired},
               Field{"status", &ReservationRefused::status, Wire::kInt, kRequired},
               Field{"detail", &ReservationRefused::detail, Wire::kString, kOptional}});
template <>
constexpr auto kFields<ReservationExpired> = std::tuple_cat(
    kOutcomeBase,
    std::tuple{Field{"expires_at", &ReservationExpired::expires_at_ms, Wire::kTime, kRequired}});
template <>
constexpr auto kFields<ReservationReleased> = kOutcomeBase;
template <>
constexpr auto kFields<ContractSigned> = std::tuple_cat(
    kContract, std::tuple{Field{"spec", &ContractSigned::spec, Wire::kObject, kRequired}});
template <>
constexpr auto kFields<ContractRenewed> = kContract;
template <>
constexpr auto kFields<ContractExpired> = kContract;
template <>
constexpr auto kFields<ContractRevoked> = std::tuple_cat(
    kContract, std::tuple{Field{"reason", &ContractRevoked::reason, Wire::kString, kOptional}});
template <>
constexpr auto kFields<ContractTerminated> = kContract;
template <>
constexpr auto kFields<ReservationRelayed> = std::tuple_cat(
    kOutcomeBase,
    std::tuple{Field{"next_hop", &ReservationRelayed::next_hop, Wire::kString, kRequired},
               Field{"owner", &ReservationRelayed::owner, Wire::kString, kRequired},
               Field{"contract_id", &ReservationRelayed::contract_id, Wire::kString, kRequired}});

// Unix millis of an RFC 3339 text that also renders back.
std::optional<int64_t> ReadTime(std::string_view text) {
  auto millis = ParseRfc3339(text);
  if (!millis || ParseRfc3339(FormatRfc3339Millis(*millis)) != millis) return std::nullopt;
  return millis;
}

template <typename M>
bool IsSet(const M& value) {
  if constexpr (std::is_same_v<M, std::string>) {
    return !value.empty();
  } else if constexpr (std::is_same_v<M, bool>) {
    return value;
  } else {
    return value != 0;
  }
}

template <typename T, typename C, typename M>
void WriteField(JsonWriter& w, const T& typed, const Field<C, M>& f) {
  const M& value = typed.*f.member;
  if (!f.required && !IsSet(value)) return;
  w.Key(f.name);
  if constexpr (std::is_same_v<M, std::string>) {
    if (f.wire == Wire::kObject) {
      w.Raw(value.empty() ? "{}" : value);
    } else {
      w.String(value);
    }
  } else if constexpr (std::is_same_v<M, bool>) {
    w.Bool(value);
  } else {
    if (f.wire == Wire::kTime) {
      w.String(FormatRfc3339Millis(value));
    } else {
      w.Int(static_cast<int64_t>(value));
    }
  }
}

template <typename T>
std::string WriteData(const T& typed) {
  JsonWriter w;
  w.BeginObject();
  std::apply([&](const auto&... f) { (WriteField(w, typed, f), ...); }, kFields<T>);
  w.EndObject();
  return w.Take();
}

// A field error of `type`: kInvalidArgument naming the field (requests) or kCorruption.
tl::unexpected<Error> BadField(ErrorCode code, std::string_view type, std::string_view field,
                               std::string_view what) {
  return MakeError(code, std::string(type) + ": " + std::string(field) + " " + std::string(what),
                   {{std::string(field), std::string(what)}});
}

template <typename T, typename C, typename M>
Status ReadField(simdjson::dom::object data, ErrorCode code, const Field<C, M>& f, T& typed) {
  auto value = Member(data, f.name);
  if (!value || value->is_null()) {
    if (f.required) return (BadField(code, T::kType, f.name, "is required"));
    return OkStatus();
  }
  M& out = typed.*f.member;
  if constexpr (std::is_same_v<M, std::string>) {
    if (f.wire == Wire::kObject) {
      if (!value->is_object()) {
        return (BadField(code, T::kType, f.name, "must be an object"));
      }
      out = Minify(*value);
    } else {
      std::string_view text;
      if (value->get(text)) {
        return (BadField(code, T::kType, f.name, "must be a string"));
      }
      if (f.required && text.empty()) {
        return (BadField(code, T::kType, f.name, "must not be empty"));
      }
      out.assign(text);
    }
  } else if constexpr (std::is_same_v<M, bool>) {
    if (value->get(out)) {
      return (BadField(code, T::kType, f.name, "must be a boolean"));
    }
  } else {
    if (f.wire == Wire::kTime) {
      std::string_view text;
      std::optional<int64_t> millis;
      if (!value->get(text)) millis = ReadTime(text);
      if (!millis) {
        return (BadField(code, T::kType, f.name, "must be an RFC 3339 time"));
      }
      out = *millis;
    } else {
      int64_t number = 0;
      if (value->get(number) || number < 0 || (std::is_same_v<M, int> && number > INT_MAX)) {
        return (BadField(code, T::kType, f.name, "must be a non-negative integer"));
      }
      out = static_cast<M>(number);
    }
  }
  return OkStatus();
}

template <typename T>
Status ReadData(simdjson::dom::object data, ErrorCode code, T& typed) {
  Status status = OkStatus();
  std::apply(
      [&](const auto&... f) {
        ((status = status ? ReadField(data, code, f, typed) : status), ...);
      },
      kFields<T>);
  return status;
}

Result<FederationEnvelope> ReadEnvelope(const CloudEvent& event) {
  FederationEnvelope envelope;
  envelope.event_id = event.id;
  envelope.source = event.source;
  envelope.subject = event.subject;
  envelope.actor = event.actor;
  auto time_ms = ReadTime(event.time);
  if (!time_ms) {
    return MakeError(ErrorCode::kCorruption, "unreadable time '" + event.time.substr(0, 64) + "'");
  }
  envelope.time_ms = *time_ms;
  return envelope;
}

CloudEvent WriteEnvelope(const FederationEnvelope& envelope, const char* type) {
  CloudEvent e;
  e.id = envelope.event_id;
  e.source = envelope.source;
  e.type = type;
  e.subject = envelope.subject;
  e.time = FormatRfc3339Millis(envelope.time_ms);
  e.schema_version = kFederationEventSchemaVersion;
  e.actor = envelope.actor;
  return e;
}

// The decode tables: one row per alternative of a family, keyed by its kType.
template <typename Variant>
struct Alternative {
  const char* type;
  Result<Variant> (*decode)(const CloudEvent&, simdjson::dom::object, ErrorCode);
};

template <typename Variant, typename T>
Result<Variant> DecodeAs(const CloudEvent& event, simdjson::dom::object data, ErrorCode code) {
  T typed;
  ASSIGN_OR_RETURN(static_cast<FederationEnvelope&>(typed), ReadEnvelope(event));
  RETURN_IF_ERROR(ReadData(data, code, typed));
  return Variant(std::move(typed));
}

template <typename Variant, size_t... I>
constexpr auto MakeTable(std::index_sequence<I...>) {
  return std::array<Alternative<Variant>, sizeof...(I)>{
      Alternative<Variant>{std::variant_alternative_t<I, Variant>::kType,
                           &DecodeAs<Variant, std::variant_alternative_t<I, Variant>>}...};
}

template <typename Variant>
constexpr auto kTable =
    MakeTable<Variant>(std::make_index_sequence<std::variant_size_v<Variant>>());

template <typename Variant>
const Alternative<Variant>* Find(std::string_view type) {
  for (const auto& alternative : kTable<Variant>) {
    if (type == alternative.type) return &alternative;
  }
  return nullptr;
}

// The namespace of federation ids derived from request ids.
constexpr char kOutcomeNamespace[] = "dcm-federation-outcome:";

}  // namespace

const char* TypeOf(const FederationRequest& request) {
  return std::visit([](const auto& r) { return std::decay_t<decltype(r)>::kType; }, request);
}
const char* TypeOf(const FederationOutcome& outcome) {
  return std::visit([](const auto& o) { return std::decay_t<decltype(o)>::kType; }, outcome);
}
const FederationEnvelope& EnvelopeOf(const FederationRequest& request) {
  return std::visit([](const auto& r) -> const FederationEnvelope& { return r; }, request);
}
FederationEnvelope& EnvelopeOf(FederationRequest& request) {
  return std::visit([](auto& r) -> FederationEnvelope& { return r; }, request);
}
const FederationOutcomeBase& BaseOf(const FederationOutcome& outcome) {
  return std::visit([](const auto& o) -> const FederationOutcomeBase& { return o; }, outcome);
}
FederationOutcomeBase& BaseOf(FederationOutcome& outcome) {
  return std::visit([](auto& o) -> FederationOutcomeBase& { return o; }, outcome);
}

bool IsFederationRequestType(std::string_view type) {
  return Find<FederationRequest>(type) != nullptr;
}
bool IsFederationOutcomeType(std::string_view type) {
  return Find<FederationOutcome>(type) != nullptr;
}

std::string FederationOutcomeId(const std::string& request_id) {
  return UuidV5(kUuidNamespaceUrl, kOutcomeNamespace + request_id);
}

int FederationAnswerStatus(const FederationOutcome& outcome) {
  const FederationOutcomeBase& base = BaseOf(outcome);
  const std::string& asked = base.request_type;
  return std::visit(Overloaded{
                        [&](const ReservationHeld& o) { return o.repeat ? 200 : 201; },
                        [&](const ReservationRefused& o) { return o.status; },
                        [&](const ReservationExpired&) {
                          return asked == event_type::kReservationExpiryDue ? 200 : 410;
                        },
                        [&](const ContractSigned& o) { return o.repeat ? 200 : 201; },
                        [&](const ReservationRelayed& o) { return o.repeat ? 200 : 201; },
                        [&](const ContractExpired&) {
                          return asked == event_type::kContractExpiryDue ? 200 : 410;
                        },
                        [&](const auto&) { return 200; },
                    },
                    outcome);
}

CloudEvent EncodeFederationRequest(const FederationRequest& request) {
  return std::visit(
      [](const auto& r) {
        using T = std::decay_t<decltype(r)>;
        CloudEvent e = WriteEnvelope(r, T::kType);
        if (e.id.empty()) e.id = NewUuidV4();
        if (e.subject.empty()) {
          if constexpr (requires { r.reservation_id; }) {
            e.subject = r.reservation_id;
          } else {
            e.subject = r.contract_id;
          }
        }
        e.data = WriteData(r);
        return e;
      },
      request);
}

Result<FederationRequest> DecodeFederationRequest(const CloudEvent& event) {
  const auto* alternative = Find<FederationRequest>(event.type);
  if (!alternative) {
    return MakeError(ErrorCode::kCorruption,
                     "not a federation request type: " + event.type.substr(0, 128));
  }
  ASSIGN_OR_RETURN(auto parsed, ParseEventData(event, kFederationEventSchemaVersion));
  ASSIGN_OR_RETURN(auto request, alternative->decode(event, simdjson::dom::object(parsed),
                                                     ErrorCode::kInvalidArgument));
  if (const auto* received = std::get_if<ReservationReceived>(&request);
      received && received->ttl_ms <= 0) {
    return BadField(ErrorCode::kInvalidArgument, event.type, "ttl_ms", "must be positive");
  }
  return request;
}

CloudEvent EncodeFederationOutcome(const FederationOutcome& outcome) {
  return std::visit(
      [](const auto& o) {
        using T = std::decay_t<decltype(o)>;
        CloudEvent e = WriteEnvelope(o, T::kType);
        if (e.id.empty()) e.id = FederationOutcomeId(o.request_id);
        if (e.subject.empty()) {
          std::string contract;
          if constexpr (requires { o.contract_id; }) contract = o.contract_id;
          const bool contract_type = std::string_view(T::kType).starts_with("dcm.contract.");
          e.subject = contract_type && !contract.empty() ? contract
                      : !o.reservation_id.empty()        ? o.reservation_id
                      : !contract.empty()                ? contract
                                                         : o.request_id;
        }
        e.data = WriteData(o);
        return e;
      },
      outcome);
}

Result<FederationOutcome> DecodeFederationOutcome(const CloudEvent& event) {
  const auto* alternative = Find<FederationOutcome>(event.type);
  if (!alternative) {
    return MakeError(ErrorCode::kCorruption,
                     "not a federation outcome type: " + event.type.substr(0, 128));
  }
  ASSIGN_OR_RETURN(auto parsed, ParseEventData(event, kFederationEventSchemaVersion));
  ASSIGN_OR_RETURN(auto outcome, alternative->decode(event, simdjson::dom::object(parsed),
                                                     ErrorCode::kCorruption));
  if (const auto* refused = std::get_if<ReservationRefused>(&outcome);
      refused && (refused->status < 400 || refused->status > 499)) {
    return MakeError(ErrorCode::kCorruption, "refused outcome without a 4xx status");
  }
  return outcome;
}

}  // namespace dcm
