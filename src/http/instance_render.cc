#include "src/http/instance_render.h"

#include <type_traits>

#include "projections/instance_records.h"
#include "src/common/json_writer.h"
#include "src/common/time_format.h"

namespace dcm::http {
namespace {

constexpr char kUnknownStatus[] = "UNKNOWN";

// The record's fields (one table with its store codec, projections/instance_records.h), then
// its path.
template <class T>
std::string Render(const T& entity, const std::string& status, const std::string& path) {
  JsonWriter w;
  w.BeginObject();
  instance_records::WriteApiFields(w, entity, status);
  w.Field("path", path);
  w.EndObject();
  return w.Take();
}

// Whether `resource_id` is LOST (SPEC §8): its provider is gone, so nothing it reported holds.
Result<bool> Lost(const InstanceView& view, const std::string& resource_id) {
  if (resource_id.empty()) return false;
  auto resource = view.GetResource(resource_id);
  if (!resource) return tl::unexpected(resource.error());
  const std::optional<Resource>& found = *resource;
  return found.has_value() && found->status == kLostStatus;
}

// LOST, else the SP-reported status of `instance_id`, else (with `instance`) the service-type
// instance's status; "" when none is known.
Result<std::string> ReportedStatus(const InstanceView& view, const std::string& instance_id,
                                   bool instance) {
  if (instance_id.empty()) return std::string();
  ASSIGN_OR_RETURN(const bool lost, Lost(view, instance_id));
  if (lost) return std::string(kLostStatus);
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
  if (resource.status == kLostStatus) return resource.status;
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

std::string RenderCatalogItemInstance(const CatalogItemInstance& cii, const std::string& status) {
  return Render(cii, status, "catalog-item-instances/" + cii.id);
}

std::string RenderResource(const Resource& resource, const std::string& status) {
  return Render(resource, status, "resources/" + resource.id);
}

std::string RenderServiceTypeInstance(const ServiceTypeInstance& instance,
                                      const std::string& status) {
  return Render(instance, status, "service-type-instances/" + instance.id);
}

std::string RenderCleanupRecord(const CleanupRecord& record) {
  JsonWriter w;
  w.BeginObject();
  instance_records::WriteApiFields(w, record);
  w.EndObject();
  return w.Take();
}

}  // namespace dcm::http
