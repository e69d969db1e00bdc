// Provider API handlers (SPEC §3.1): pure functions of a request and the registry view. Writes go
// through the CommandBus and answer once the outcome is applied here (read-your-writes).
//
// Each handler is params (provider_params.h: the request, validated) ─▶ the view or the command
// bus ─▶ render (provider_render.h: the JSON); ids and times come from the context's injected
// id generator and clock.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "events/command_bus.h"
#include "projections/health_projection.h"
#include "projections/instance_projection.h"
#include "projections/registry_projection.h"
#include "projections/time_travel.h"
#include "src/common/clock.h"
#include "src/common/uuid.h"
#include "src/http/http_types.h"
#include "src/http/provider_render.h"

namespace dcm::http {

class ConsistentReads;
class HeavyReads;  // heavy_reads.h

// Base path of the API, and the alias the seeds use (SPEC §3).
inline constexpr char kApiBase[] = "/api/v1alpha1";
inline constexpr char kApiAlias[] = "/api/v1";

class WatchHub;            // watch_hub.h
struct FederationContext;  // federation_handlers.h

struct ApiContext {
  const RegistryView* registry = nullptr;
  const HealthView* health = nullptr;  // null: every provider shows Pending
  CommandBus* commands = nullptr;
  const ProviderRules* provider_rules = nullptr;  // service types, endpoint host policy
  const Clock* clock = nullptr;
  std::string source = "dcm/http";  // `source` of the events this API emits
  // Instances (SPEC §3.3): the view, and the bus whose requests go to dcm.instance-requests
  // (the CloudEvent's subject is the operation's root: the bus keys and partitions by it).
  const InstanceView* instances = nullptr;  // null: no instance API (404), provider deletes
                                            // skip the live-instances check
  CommandBus* instance_commands = nullptr;
  // Audit (SPEC §3.4): the index, and the topic names `as_of` folds by (time_travel.h).
  const AuditView* audit = nullptr;  // null: /events, history and as_of answer 404
  Topics topics = {};
  // New event ids (provider requests, edge rejections): random UUIDs unless a test injects its
  // own.
  std::function<std::string()> new_id = NewUuidV4;
  // Consistent reads and DCM-Position (SPEC §7, consistent_reads.h), applied by the router to
  // every API call; null: reads are served as they come, without the header.
  const ConsistentReads* consistency = nullptr;
  // Heavy reads (SPEC §7: as_of, filtered scans, /admin/projections) run on this pool, off the
  // I/O threads (router.cc); null: inline (tests). A heavy read's handler sees its deadline here.
  HeavyReads* heavy_reads = nullptr;
  Deadline deadline = {};
  // Takes a heartbeat of a `liveness: heartbeat` provider (SPEC §8; the Prober's Beat) and
  // returns its health after it. Null: this instance does not take heartbeats (no prober): 503.
  std::function<Result<HealthRecord>(const Provider&, BeatResult)> heartbeat = nullptr;
  // Watch streams (SPEC §9, watch_hub.h); null: `?watch=true` answers 404.
  WatchHub* watches = nullptr;
  // Federation (SPEC §10): /federation/v1alpha1/* and /api/v1alpha1/peers; null: 404.
  const FederationContext* federation = nullptr;
};

// The provider's health record, or nullopt (never probed, or no health view). A read error
// shows as never probed: health is advisory on provider reads.
std::optional<HealthRecord> HealthOf(const ApiContext& ctx, const std::string& id);

void RegisterProvider(const HttpRequest& request, const ApiContext& ctx, Respond respond);
void ListProviders(const HttpRequest& request, const ApiContext& ctx, Respond respond);
void GetProvider(const HttpRequest& request, const std::string& id, const ApiContext& ctx,
                 Respond respond);
void UpdateProvider(const HttpRequest& request, const std::string& id, const ApiContext& ctx,
                    Respond respond);
void ChangeProviderId(const HttpRequest& request, const std::string& id, const ApiContext& ctx,
                      Respond respond);
void DeleteProvider(const HttpRequest& request, const std::string& id, const ApiContext& ctx,
                    Respond respond);
void ListServiceTypes(const ApiContext& ctx, Respond respond);
// POST and PUT /providers/{id}/heartbeat (SPEC §8): 200 with the provider's `health` detail;
// 404 for an unknown id (the provider registers again), 409 for a probed provider, 400 for a
// bad body.
void ProviderHeartbeat(const HttpRequest& request, const std::string& id, const ApiContext& ctx,
                       Respond respond);

}  // namespace dcm::http
