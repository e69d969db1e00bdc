#include "src/http/provider_render.h"

#include "src/common/json_writer.h"
#include "src/common/time_format.h"

namespace dcm::http {
namespace {

void WriteHealthDetail(JsonWriter& w, const HealthRecord* health, int64_t registration_seq) {
  const HealthStatus health_status = EffectiveHealthStatus(health, registration_seq);
  // Counters belong to the registration they were counted for; a newer one starts from zero.
  const bool current = health && health->registration_seq >= registration_seq;
  w.BeginObject();
  w.Field("status", HealthStatusName(health_status));
  w.Field("consecutive_failures", current ? health->consecutive_failures : 0);
  w.Field("consecutive_successes", current ? health->consecutive_successes : 0);
  if (health && health->last_probe_time_ms > 0) {
    w.Field("last_probe_time", FormatRfc3339Millis(health->last_probe_time_ms));
    w.Field("last_probe_result", health->last_result);
    if (health->last_http_status != 0) w.Field("last_http_status", health->last_http_status);
    w.Key("latency_ms");
    w.Double(static_cast<double>(health->last_latency_us) / 1000.0);
  }
  if (health && health->last_transition_time_ms > 0) {
    w.Field("last_transition_time", FormatRfc3339Millis(health->last_transition_time_ms));
    w.Field("last_transition_reason", health->last_transition_reason);
  }
  if (health && !health->last_error.empty()) {
    w.Field("last_error", health->last_error);
    w.Field("last_error_time", FormatRfc3339Millis(health->last_error_time_ms));
  }
  if (health && health->last_beat_time_ms > 0) {
    w.Field("last_heartbeat_time", FormatRfc3339Millis(health->last_beat_time_ms));
  }
  if (current && health->both) {  // liveness both: each signal's own status (SPEC §8)
    w.Field("probe_status", HealthStatusName(health->probe_status));
    w.Field("heartbeat_status", HealthStatusName(health->beat_status));
  }
  w.EndObject();
}

}  // namespace

std::string RenderProvider(const Provider& p, const HealthRecord* health,
                           const std::string& status) {
  JsonWriter w;
  w.BeginObject();
  w.Field("id", p.id);
  WriteProviderSpecFields(w, p.spec);
  // Stored and carried only when not the default (events/provider.h); always shown.
  if (p.spec.liveness == Liveness::kProbe) w.Field("liveness", LivenessName(p.spec.liveness));
  w.Field("health_status", HealthStatusName(EffectiveHealthStatus(health, p.seq)));
  w.Key("health");
  WriteHealthDetail(w, health, p.seq);
  if (!status.empty()) w.Field("status", status);
  if (!p.owner.empty()) w.Field("owner", p.owner);
  w.Field("create_time", p.create_time);
  w.Field("update_time", p.update_time);
  w.Field("path", "providers/" + p.id);
  w.EndObject();
  return w.Take();
}

std::string RenderHealthDetail(const HealthRecord* health, int64_t registration_seq) {
  JsonWriter w;
  WriteHealthDetail(w, health, registration_seq);
  return w.Take();
}

std::string RenderProviderList(const std::vector<std::string>& rendered,
                               const std::string& next_page_token) {
  JsonWriter w;
  w.BeginObject();
  w.Key("providers");
  w.BeginArray();
  for (const auto& provider : rendered) w.Raw(provider);
  w.EndArray();
  if (!next_page_token.empty()) w.Field("next_page_token", next_page_token);
  w.EndObject();
  return w.Take();
}

std::string RenderServiceTypes(const std::vector<std::string>& service_types) {
  JsonWriter w;
  w.BeginObject();
  w.StringArray("service_types", service_types);
  w.EndObject();
  return w.Take();
}

}  // namespace dcm::http
