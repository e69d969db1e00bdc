// Instance API handlers (SPEC §3.3): catalog item instances, resources (the Placement Manager
// API), service-type instances (the SP Resource Manager API) and the cleanup queue. Pure
// functions of a request and the InstanceView; writes are operation requests on the instance
// command bus (subject = the operation's root) and answer once this instance's projection has
// applied the operation's outcome (read-your-writes). With ctx.instances null every route
// answers 404.
#pragma once

#include <cstddef>
#include <string>

#include "projections/instance_projection.h"
#include "src/http/http_types.h"
#include "src/http/instance_render.h"
#include "src/http/provider_handlers.h"

namespace dcm::http {

// The largest instance `spec` a write may carry (SPEC §7), as minified JSON: a larger one answers
// 413 and nothing is written. Applies to every request with a spec (catalog item instances,
// resources, service-type instances).
inline constexpr size_t kMaxInstanceSpecBytes = 256 * 1024;

void CreateCatalogItemInstance(const HttpRequest& request, const ApiContext& ctx, Respond respond);
void ListCatalogItemInstances(const HttpRequest& request, const ApiContext& ctx, Respond respond);
void GetCatalogItemInstance(const HttpRequest& request, const std::string& id,
                            const ApiContext& ctx, Respond respond);
void DeleteCatalogItemInstance(const HttpRequest& request, const std::string& id,
                               const ApiContext& ctx, Respond respond);
void RehydrateCatalogItemInstance(const HttpRequest& request, const std::string& id,
                                  const ApiContext& ctx, Respond respond);

void CreateResource(const HttpRequest& request, const ApiContext& ctx, Respond respond);
void ListResources(const HttpRequest& request, const ApiContext& ctx, Respond respond);
void GetResource(const HttpRequest& request, const std::string& id, const ApiContext& ctx,
                 Respond respond);
void DeleteResource(const HttpRequest& request, const std::string& id, const ApiContext& ctx,
                    Respond respond);
void RehydrateResource(const HttpRequest& request, const std::string& id, const ApiContext& ctx,
                       Respond respond);

void CreateServiceTypeInstance(const HttpRequest& request, const ApiContext& ctx, Respond respond);
void ListServiceTypeInstances(const HttpRequest& request, const ApiContext& ctx, Respond respond);
void GetServiceTypeInstance(const HttpRequest& request, const std::string& id,
                            const ApiContext& ctx, Respond respond);
void DeleteServiceTypeInstance(const HttpRequest& request, const std::string& id,
                               const ApiContext& ctx, Respond respond);

void ListCleanupQueue(const HttpRequest& request, const ApiContext& ctx, Respond respond);
void RetryCleanup(const HttpRequest& request, const std::string& instance_id, const ApiContext& ctx,
                  Respond respond);

}  // namespace dcm::http
