// The instance API's representations (SPEC §3.3, snake_case JSON) and the status join: an
// entity's `status` is the SP-reported one (dcm.status) first, else the one the saga recorded.
#pragma once

#include <string>

#include "projections/instance_projection.h"
#include "src/common/result.h"

namespace dcm::http {

// The API representations. `status` is the joined status (SP-reported first).
std::string RenderCatalogItemInstance(const CatalogItemInstance& cii, const std::string& status);
std::string RenderResource(const Resource& resource, const std::string& status);
std::string RenderServiceTypeInstance(const ServiceTypeInstance& instance,
                                      const std::string& status);
std::string RenderCleanupRecord(const CleanupRecord& record);

// An entity rendered with its joined status, read from `view`.
Result<std::string> RenderJoined(const InstanceView& view, const CatalogItemInstance& cii);
Result<std::string> RenderJoined(const InstanceView& view, const Resource& resource);
Result<std::string> RenderJoined(const InstanceView& view, const ServiceTypeInstance& instance);
Result<std::string> RenderJoined(const InstanceView& view, const CleanupRecord& record);

}  // namespace dcm::http
