// Audit handlers (SPEC §3.4): the event log through the audit index, per-entity history with a
// human summary per event, and time travel (`as_of`), which renders the state folded from the
// events up to that time with the same handlers as live reads (projections/time_travel.h).
//
// Each handler is params (audit_params.h: the query, validated) ─▶ the audit view or a past
// state ─▶ render (audit_render.h: the JSON), with time from the context's injected clock.
#pragma once

#include <string>

#include "src/http/http_types.h"
#include "src/http/provider_handlers.h"

namespace dcm::http {

// GET /events?subject=&type=&since=&until=&max_page_size=&page_token=
void ListEvents(const HttpRequest& request, const ApiContext& ctx, Respond respond);
// GET /providers/{id}/history and GET /catalog-item-instances/{id}/history (same query).
void EntityHistory(const HttpRequest& request, const std::string& kind, const std::string& id,
                   const ApiContext& ctx, Respond respond);
// GET /providers?as_of=, GET /providers/{id}?as_of=, GET /catalog-item-instances/{id}?as_of=.
void ListProvidersAsOf(const HttpRequest& request, const ApiContext& ctx, Respond respond);
void GetProviderAsOf(const HttpRequest& request, const std::string& id, const ApiContext& ctx,
                     Respond respond);
void GetCatalogItemInstanceAsOf(const HttpRequest& request, const std::string& id,
                                const ApiContext& ctx, Respond respond);

}  // namespace dcm::http
