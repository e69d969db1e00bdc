// The watch requests of the API (SPEC §9): `?watch=true` on GET /events, /providers,
// /catalog-item-instances and /cleanup-queue, parsed here and handed to the WatchHub
// (watch_hub.h), and the listers that render each watched list as its GET renders it.
#pragma once

#include "src/http/http_types.h"
#include "src/http/provider_handlers.h"
#include "src/http/watch_hub.h"

namespace dcm::http {

// Whether the request asks for a watch (`watch=true` or `watch=1`).
bool WantsWatch(const HttpRequest& request);

// GET /events?watch=true: the filters of GET /events (subject, type, since, until) and the
// resume point (the Last-Event-ID header, or `last_event_id` for clients that cannot set it).
void WatchEventsHandler(const HttpRequest& request, const ApiContext& ctx, Respond respond);
// GET /providers?watch=true (filters `type`, `health_status`), /catalog-item-instances
// (`provider`), /cleanup-queue (`status`).
void WatchListHandler(WatchKind kind, const HttpRequest& request, const ApiContext& ctx,
                      Respond respond);

// Each list as its GET renders it, whole (the hub diffs consecutive listings). `ctx` must
// outlive the listers.
WatchLister ProviderLister(const ApiContext& ctx);
WatchLister CatalogItemInstanceLister(const ApiContext& ctx);
WatchLister CleanupQueueLister(const ApiContext& ctx);

}  // namespace dcm::http
