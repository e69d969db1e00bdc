#include "events/instance_facts.h"

#include <array>
#include <concepts>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

namespace dcm {
namespace {

// One data field: where it lives in the typed struct and in the flat InstanceEvent (whose
// kFields table in instance_events.cc spells it on the wire).
template <typename C, typename M>
struct Bind {
  M C::*typed;
  M InstanceEvent::*flat;
};
template <typename C, typename M>
Bind(M C::*, M InstanceEvent::*) -> Bind<C, M>;

using E = InstanceEvent;

constexpr auto kIds = std::tuple{
    Bind{&OperationIds::operation, &E::operation},
    Bind{&OperationIds::catalog_item_instance_id, &E::catalog_item_instance_id},
    Bind{&OperationIds::resource_id, &E::resource_id},
    Bind{&OperationIds::old_resource_id, &E::old_resource_id},
    Bind{&OperationIds::new_resource_id, &E::new_resource_id},
    Bind{&OperationIds::instance_id, &E::instance_id},
    Bind{&OperationIds::provider_name, &E::provider_name},
};

constexpr auto kParams =
    std::tuple_cat(kIds, std::tuple{Bind{&OperationParams::service_type, &E::service_type},
                                    Bind{&OperationParams::display_name, &E::display_name},
                                    Bind{&OperationParams::spec, &E::spec},
                                    Bind{&OperationParams::deferred, &E::deferred},
                                    Bind{&OperationParams::force, &E::force},
                                    Bind{&OperationParams::prefer_local, &E::prefer_local},
                                    Bind{&OperationParams::provider_id, &E::provider_id},
                                    Bind{&OperationParams::reason, &E::reason}});

constexpr auto kEnd =
    std::tuple_cat(kIds, std::tuple{Bind{&OperationEnd::http_status, &E::http_status}});

constexpr auto kSpInstance = std::tuple{
    Bind{&SpInstanceFact::resource_id, &E::resource_id},
    Bind{&SpInstanceFact::instance_id, &E::instance_id},
    Bind{&SpInstanceFact::provider_name, &E::provider_name},
    Bind{&SpInstanceFact::provider_id, &E::provider_id},
    Bind{&SpInstanceFact::service_type, &E::service_type},
    Bind{&SpInstanceFact::http_status, &E::http_status},
};

constexpr auto kCleanup = std::tuple{
    Bind{&CleanupFact::resource_id, &E::resource_id},
    Bind{&CleanupFact::instance_id, &E::instance_id},
    Bind{&CleanupFact::provider_name, &E::provider_name},
    Bind{&CleanupFact::provider_id, &E::provider_id},
    Bind{&CleanupFact::status, &E::status},
    Bind{&CleanupFact::error, &E::error},
    Bind{&CleanupFact::http_status, &E::http_status},
    Bind{&CleanupFact::retry_count, &E::retry_count},
    Bind{&CleanupFact::max_retries, &E::max_retries},
};

// The data fields of each type (the envelope is copied separately).
template <typename T>
constexpr auto kFieldsOf = std::tuple{};

template <>
constexpr auto kFieldsOf<OperationRequested> = kParams;
template <>
constexpr auto kFieldsOf<OperationStarted> = kParams;
template <>
constexpr auto kFieldsOf<OperationCompleted> = kEnd;
template <>
constexpr auto kFieldsOf<OperationFailed> =
    std::tuple_cat(kEnd, std::tuple{Bind{&OperationFailed::reason, &E::reason},
                                    Bind{&OperationFailed::error, &E::error}});
template <>
constexpr auto kFieldsOf<ResourcePlaced> = std::tuple{
    Bind{&ResourcePlaced::catalog_item_instance_id, &E::catalog_item_instance_id},
    Bind{&ResourcePlaced::resource_id, &E::resource_id},
    Bind{&ResourcePlaced::old_resource_id, &E::old_resource_id},
    Bind{&ResourcePlaced::provider_name, &E::provider_name},
    Bind{&ResourcePlaced::provider_id, &E::provider_id},
    Bind{&ResourcePlaced::service_type, &E::service_type},
    Bind{&ResourcePlaced::spec, &E::spec},
    Bind{&ResourcePlaced::intent, &E::intent},
    Bind{&ResourcePlaced::policy, &E::policy},
    Bind{&ResourcePlaced::placement, &E::placement},
};
template <>
constexpr auto kFieldsOf<ResourceDeleted> = std::tuple{
    Bind{&ResourceDeleted::resource_id, &E::resource_id},
    Bind{&ResourceDeleted::provider_name, &E::provider_name},
    Bind{&ResourceDeleted::provider_id, &E::provider_id},
    Bind{&ResourceDeleted::reason, &E::reason},
    Bind{&ResourceDeleted::deferred, &E::deferred},
};
template <>
constexpr auto kFieldsOf<ResourceLost> = std::tuple{
    Bind{&ResourceLost::resource_id, &E::resource_id},
    Bind{&ResourceLost::provider_name, &E::provider_name},
    Bind{&ResourceLost::provider_id, &E::provider_id},
    Bind{&ResourceLost::reason, &E::reason},
};
template <>
constexpr auto kFieldsOf<InstanceCreated> =
    std::tuple_cat(kSpInstance, std::tuple{Bind{&InstanceCreated::spec, &E::spec},
                                           Bind{&InstanceCreated::status, &E::status},
                                           Bind{&InstanceCreated::placement, &E::placement}});
template <>
constexpr auto kFieldsOf<InstanceCreateFailed> =
    std::tuple_cat(kSpInstance, std::tuple{Bind{&InstanceCreateFailed::error, &E::error}});
template <>
constexpr auto kFieldsOf<InstanceDeleted> = kSpInstance;
template <>
constexpr auto kFieldsOf<InstanceDeleteFailed> =
    std::tuple_cat(kSpInstance, std::tuple{Bind{&InstanceDeleteFailed::error, &E::error}});
template <>
constexpr auto kFieldsOf<CleanupEnqueued> = std::tuple_cat(
    kCleanup, std::tuple{Bind{&CleanupEnqueued::service_type, &E::service_type},
                         Bind{&CleanupEnqueued::requested_at_ms, &E::requested_at_ms}});
template <>
constexpr auto kFieldsOf<CleanupParked> = kCleanup;
template <>
constexpr auto kFieldsOf<CleanupAttempted> =
    std::tuple_cat(kCleanup, std::tuple{Bind{&CleanupAttempted::outcome, &E::outcome}});
template <>
constexpr auto kFieldsOf<CleanupFailed> = kCleanup;
template <>
constexpr auto kFieldsOf<CleanupRetried> = kCleanup;
template <>
constexpr auto kFieldsOf<CatalogItemInstanceCreated> = std::tuple{
    Bind{&CatalogItemInstanceCreated::catalog_item_instance_id, &E::catalog_item_instance_id},
    Bind{&CatalogItemInstanceCreated::resource_id, &E::resource_id},
    Bind{&CatalogItemInstanceCreated::provider_name, &E::provider_name},
    Bind{&CatalogItemInstanceCreated::provider_id, &E::provider_id},
    Bind{&CatalogItemInstanceCreated::service_type, &E::service_type},
    Bind{&CatalogItemInstanceCreated::display_name, &E::display_name},
    Bind{&CatalogItemInstanceCreated::spec, &E::spec},
};
template <>
constexpr auto kFieldsOf<CatalogItemInstanceRehydrated> = std::tuple{
    Bind{&CatalogItemInstanceRehydrated::catalog_item_instance_id, &E::catalog_item_instance_id},
    Bind{&CatalogItemInstanceRehydrated::resource_id, &E::resource_id},
    Bind{&CatalogItemInstanceRehydrated::old_resource_id, &E::old_resource_id},
    Bind{&CatalogItemInstanceRehydrated::new_resource_id, &E::new_resource_id},
    Bind{&CatalogItemInstanceRehydrated::provider_name, &E::provider_name},
    Bind{&CatalogItemInstanceRehydrated::provider_id, &E::provider_id},
};
template <>
constexpr auto kFieldsOf<CatalogItemInstanceDeleted> = std::tuple{
    Bind{&CatalogItemInstanceDeleted::catalog_item_instance_id, &E::catalog_item_instance_id},
    Bind{&CatalogItemInstanceDeleted::resource_id, &E::resource_id},
};

constexpr auto kRemote = std::tuple{
    Bind{&RemoteFact::resource_id, &E::resource_id},
    Bind{&RemoteFact::instance_id, &E::instance_id},
    Bind{&RemoteFact::peer, &E::peer},
    Bind{&RemoteFact::reservation_id, &E::reservation_id},
    Bind{&RemoteFact::flavor_id, &E::flavor_id},
    Bind{&RemoteFact::contract_id, &E::contract_id},
    Bind{&RemoteFact::reason, &E::reason},
    Bind{&RemoteFact::error, &E::error},
    Bind{&RemoteFact::http_status, &E::http_status},
    Bind{&RemoteFact::expires_at_ms, &E::expires_at_ms},
};
// Every peer placement step carries the same fields.
template <typename T>
requires std::derived_from<T, RemoteFact>
constexpr auto kFieldsOf<T> = kRemote;

constexpr auto kEnvelope = std::tuple{
    Bind{&InstanceEnvelope::event_id, &E::event_id},
    Bind{&InstanceEnvelope::source, &E::source},
    Bind{&InstanceEnvelope::subject, &E::subject},
    Bind{&InstanceEnvelope::time_ms, &E::time_ms},
    Bind{&InstanceEnvelope::actor, &E::actor},
    Bind{&InstanceEnvelope::request_id, &E::request_id},
    Bind{&InstanceEnvelope::root, &E::root},
};

template <typename T, typename Fields>
void CopyOut(const T& typed, const Fields& fields, InstanceEvent& flat) {
  std::apply([&](const auto&... f) { ((flat.*f.flat = typed.*f.typed), ...); }, fields);
}

// Moves the fields out of `flat` (each member is read once).
template <typename T, typename Fields>
void MoveIn(InstanceEvent& flat, const Fields& fields, T& typed) {
  std::apply([&](const auto&... f) { ((typed.*f.typed = std::move(flat.*f.flat)), ...); }, fields);
}

template <typename T>
InstanceFact FromFlat(InstanceEvent&& flat) {
  T typed;
  MoveIn(flat, kEnvelope, typed);
  MoveIn(flat, kFieldsOf<T>, typed);
  return typed;
}

// The decode table: one row per alternative, keyed by its kType.
struct Alternative {
  const char* type;
  InstanceFact (*from_flat)(InstanceEvent&&);
};

template <size_t... I>
constexpr auto MakeTable(std::index_sequence<I...>) {
  return std::array<Alternative, sizeof...(I)>{
      Alternative{std::variant_alternative_t<I, InstanceFact>::kType,
                  &FromFlat<std::variant_alternative_t<I, InstanceFact>>}...};
}

constexpr auto kAlternatives =
    MakeTable(std::make_index_sequence<std::variant_size_v<InstanceFact>>());

}  // namespace

const char* TypeOf(const InstanceFact& fact) {
  return std::visit([](const auto& f) { return std::decay_t<decltype(f)>::kType; }, fact);
}

const InstanceEnvelope& EnvelopeOf(const InstanceFact& fact) {
  return std::visit([](const auto& f) -> const InstanceEnvelope& { return f; }, fact);
}

InstanceEnvelope& EnvelopeOf(InstanceFact& fact) {
  return std::visit([](auto& f) -> InstanceEnvelope& { return f; }, fact);
}

InstanceEvent ToInstanceEvent(const InstanceFact& fact) {
  return std::visit(
      [](const auto& typed) {
        using T = std::decay_t<decltype(typed)>;
        InstanceEvent flat;
        flat.type = T::kType;
        CopyOut(typed, kEnvelope, flat);
        CopyOut(typed, kFieldsOf<T>, flat);
        return flat;
      },
      fact);
}

Result<InstanceFact> ToInstanceFact(InstanceEvent&& event) {
  for (const auto& alternative : kAlternatives) {
    if (event.type == alternative.type) return alternative.from_flat(std::move(event));
  }
  return MakeError(ErrorCode::kCorruption, "not an instance event: " + event.type);
}

Result<InstanceFact> ToInstanceFact(const InstanceEvent& event) {
  return ToInstanceFact(InstanceEvent(event));
}

CloudEvent EncodeInstanceFact(const InstanceFact& fact) {
  return EncodeInstanceEvent(ToInstanceEvent(fact));
}

Result<InstanceFact> DecodeInstanceFact(const CloudEvent& event) {
  ASSIGN_OR_RETURN(auto flat, DecodeInstanceEvent(event));
  return ToInstanceFact(std::move(flat));
}

}  // namespace dcm
