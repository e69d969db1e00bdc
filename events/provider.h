// The Service Provider model (SPEC §3.1) and its validation. Shared by the HTTP handlers and the
// registrar, so a registration over HTTP and one over Kafka pass exactly the same checks.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/json_writer.h"
#include "src/common/result.h"

namespace dcm {

inline constexpr size_t kMaxMetadataBytes = 64 * 1024;
inline constexpr size_t kMaxDisplayNameLength = 256;
inline constexpr std::string_view kDefaultSchemaVersion = "v1alpha1";

// How the control plane learns that a provider is alive (SPEC §8): it probes it (§3.2), or the
// provider pushes heartbeats (POST /providers/{id}/heartbeat), or both: probed and beating,
// failing when either signal fails (projections/health_state.h).
enum class Liveness { kProbe, kHeartbeat, kBoth };
// "probe", "heartbeat", "both".
const char* LivenessName(Liveness liveness);

// What a registration or a full update (PUT) sets. Unknown request fields are dropped.
struct ProviderSpec {
  std::string name;
  std::string display_name;
  std::string endpoint;
  std::string service_type;
  std::string schema_version = std::string(kDefaultSchemaVersion);
  std::vector<std::string> operations;  // lower-cased, de-duplicated, in request order
  std::string metadata = "{}";          // minified JSON object
  Liveness liveness = Liveness::kProbe;

  bool operator==(const ProviderSpec&) const = default;
};

// A provider as the registry and the registrar keep it.
struct Provider {
  std::string id;
  ProviderSpec spec;
  std::string create_time;  // RFC 3339 ms
  std::string update_time;
  int64_t seq = 0;  // the registrar's decision sequence that produced this state (see registrar)
  // The `actor` of its first registration (SPEC §6): an SP acting with the dcm-provider role may
  // change only the providers it owns. "" when it was registered anonymously (auth disabled, or
  // a Kafka request without an actor): then only admins and unscoped requests change it.
  std::string owner;

  bool operator==(const Provider&) const = default;
};

// What a registration is checked against. Every `dcm serve` of a cluster must be configured
// alike: the registrar applies the same rules to requests produced straight to Kafka.
struct ProviderRules {
  ProviderRules() = default;
  // NOLINTNEXTLINE(google-explicit-constructor): the common case, service types alone.
  ProviderRules(std::vector<std::string> types) : service_types(std::move(types)) {}

  // The admin-predefined service types (SERVICE_TYPES).
  std::vector<std::string> service_types;
  // The outbound policy's verdict on an endpoint whose host is a literal address (SPEC §6):
  // "" if it may be registered, else why not (a 400 on `endpoint`). Host names pass here and
  // are judged when dialled. Null: every host passes.
  std::function<std::string(std::string_view host)> refuse_endpoint_host;
};

// Validates a request body (snake_case, or the seeds' camelCase: serviceType, displayName,
// schemaVersion). Every bad field is reported (kInvalidArgument with `fields`).
Result<ProviderSpec> ParseProviderSpec(simdjson::dom::element body, const ProviderRules& rules);

// `id` from `?id=`: a lowercase DNS label (1–63) or a UUID. Returns an error message or "".
std::string ValidateProviderId(std::string_view id);
std::string ValidateProviderName(std::string_view name);

// The stored/event form: {id,name,display_name,endpoint,service_type,schema_version,operations,
// metadata[,liveness],create_time,update_time,seq[,owner]} (`liveness` only when not `probe`
// and `owner` only when set, so providers from before them keep their bytes; a provider without
// `liveness` reads as `probe`).
void WriteProvider(JsonWriter& w, const Provider& provider);
std::string EncodeProvider(const Provider& provider);
Result<Provider> ReadProvider(simdjson::dom::element element);
Result<Provider> DecodeProvider(std::string_view json);

// Writes the spec's fields into an open object (no braces); `liveness` only when not `probe`.
void WriteProviderSpecFields(JsonWriter& w, const ProviderSpec& spec);

}  // namespace dcm
