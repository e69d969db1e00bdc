#include "src/http/instance_render.h"

#include <type_traits>

#include "src/common/json_writer.h"
#include "src/common/time_format.h"

namespace dcm::http {
namespace {

constexpr char kUnknownStatus[] = "UNKNOWN";

// The SP-reported status of `instance_id`, else (with `instance`) the service-type instance's
// status; "" when neither is known.
Result<std::string> ReportedStatus(const InstanceView& view, const std::string& instance_id,
                                   bool instance) {
  if (instance_id.empty()) return std::string();
  ASSIGN_OR_RETURN(auto sp, view.GetSpStatus(instance_id));
  if (sp && !sp->status.empty()) return sp->status;
  if (!instance) return std::string();
  ASSIGN_OR_RETURN(auto sti, view.GetInstance(instance_id));
  if (sti && !sti->status.empty()) return sti->status;
  return std::string();
}

Result<std::string> StatusOf(const InstanceView& view, const CatalogItemInstance& cii) {
  ASSIGN_OR_RETURN(auto status, ReportedStatus(view, cii.resource_id, true));
  if (!status.empty()) return status;
  if (cii.resource_id.empty()) return std::string(kUnknownStatus);
  ASSIGN_OR_RETURN(auto resource, view.GetResource(cii.resource_id));
  if (resource && !resource->status.empty()) return resource->status;
  return std::string(kUnknownStatus);
}

Result<std::string> StatusOf(const InstanceView& view, const Resource& resource) {
  ASSIGN_OR_RETURN(auto status, ReportedStatus(view, resource.id, true));
  if (!status.empty()) return status;
  return resource.status.empty() ? std::string(kUnknownStatus) : resource.status;
}

Result<std::string> StatusOf(const InstanceView& view, const ServiceTypeInstance& instance) {
  if (instance.deleted) return instance.status.empty() ? std::string("DELETED") : instance.status;
  ASSIGN_OR_RETURN(auto status, ReportedStatus(view, instance.id, false));
  if (!status.empty()) return status;
  return instance.status.empty() ? std::string(kUnknownStatus) : instance.status;
}

void RawObject(JsonWriter& w, std::string_view key, const std::string& json) {
  w.Key(key);
  w.Raw(json.empty() ? "{}" : json);
}

// An entity rendered with its joined status.
template <class T>
Result<std::string> RenderWithStatus(const InstanceView& view, const T& entity) {
  ASSIGN_OR_RETURN(auto status, StatusOf(view, entity));
  if constexpr (std::is_same_v<T, CatalogItemInstance>) {
    return RenderCatalogItemInstance(entity, status);
  } else if constexpr (std::is_same_v<T, Resource>) {
    return RenderResource(entity, status);
  } else {
    return RenderServiceTypeInstance(entity, status);
  }
}

}  // namespace

Result<std::string> RenderJoined(const InstanceView& view, const CatalogItemInstance& cii) {
  return RenderWithStatus(view, cii);
}

Result<std::string> RenderJoined(const InstanceView& view, const Resource& resource) {
  return RenderWithStatus(view, resource);
}

Result<std::string> RenderJoined(const InstanceView& view, const ServiceTypeInstance& instance) {
  return RenderWithStatus(view, instance);
}

Result<std::string> RenderJoined(const InstanceView&, const CleanupRecord& record) {
  return RenderCleanupRecord(record);
}

// ---- rendering ----

std::string RenderCatalogItemInstance(const CatalogItemInstance& cii, const std::string& status) {
  JsonWriter w;
  w.BeginObject();
  w.Field("id", cii.id);
  w.Field("display_name", cii.display_name);
  RawObject(w, "spec", cii.spec);
  w.Field("resource_id", cii.resource_id);
  w.Field("provider_name", cii.provider_name);
  w.Field("status", status);
  w.Field("create_time", FormatRfc3339Millis(cii.create_time_ms));
  w.Field("update_time", FormatRfc3339Millis(cii.update_time_ms));
  w.Field("path", "catalog-item-instances/" + cii.id);
  w.EndObject();
  return w.Take();
}

std::string RenderResource(const Resource& resource, const std::string& status) {
  JsonWriter w;
  w.BeginObject();
  w.Field("id", resource.id);
  if (!resource.catalog_item_instance_id.empty()) {
    w.Field("catalog_item_instance_id", resource.catalog_item_instance_id);
  }
  w.Field("provider_name", resource.provider_name);
  w.Field("service_type", resource.service_type);
  RawObject(w, "spec", resource.spec);
  RawObject(w, "intent", resource.intent);
  w.Field("policy", resource.policy);
  w.Field("status", status);
  w.Field("create_time", FormatRfc3339Millis(resource.create_time_ms));
  w.Field("update_time", FormatRfc3339Millis(resource.update_time_ms));
  w.Field("path", "resources/" + resource.id);
  w.EndObject();
  return w.Take();
}

std::string RenderServiceTypeInstance(const ServiceTypeInstance& instance,
                                      const std::string& status) {
  JsonWriter w;
  w.BeginObject();
  w.Field("id", instance.id);
  w.Field("provider_name", instance.provider_name);
  w.Field("service_type", instance.service_type);
  RawObject(w, "spec", instance.spec);
  w.Field("status", status);
  w.Field("create_time", FormatRfc3339Millis(instance.create_time_ms));
  w.Field("update_time", FormatRfc3339Millis(instance.update_time_ms));
  w.Field("path", "service-type-instances/" + instance.id);
  w.EndObject();
  return w.Take();
}

std::string RenderCleanupRecord(const CleanupRecord& record) {
  JsonWriter w;
  w.BeginObject();
  w.Field("instance_id", record.instance_id);
  w.Field("provider_name", record.provider_name);
  w.Field("service_type", record.service_type);
  w.Field("requested_at", FormatRfc3339Millis(record.requested_at_ms));
  w.Field("retry_count", record.retry_count);
  w.Field("status", record.status);
  w.Key("last_attempt");
  if (record.last_attempt_ms > 0) {
    w.String(FormatRfc3339Millis(record.last_attempt_ms));
  } else {
    w.Null();
  }
  w.Key("last_error");
  if (!record.last_error.empty()) {
    w.String(record.last_error);
  } else {
    w.Null();
  }
  w.EndObject();
  return w.Take();
}

}  // namespace dcm::http
