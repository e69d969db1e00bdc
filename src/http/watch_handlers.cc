#include "src/http/watch_handlers.h"

#include <utility>

#include "events/health_events.h"
#include "src/http/audit_params.h"
#include "src/http/instance_render.h"
#include "src/http/problem.h"
#include "src/http/provider_render.h"

namespace dcm::http {
namespace {

constexpr size_t kListPage = 1000;

// Every item of a paged list, rendered: `fetch(token, max)` returns a Page<T>.
template <class T, class Fetch, class Item>
Result<std::vector<WatchItem>> ListAll(const Fetch& fetch, const Item& item) {
  std::vector<WatchItem> out;
  std::string token;
  do {
    ASSIGN_OR_RETURN(auto page, fetch(token, kListPage));
    for (const T& t : page.items) {
      ASSIGN_OR_RETURN(auto rendered, item(t));
      out.push_back(std::move(rendered));
    }
    token = page.next_page_token;
  } while (!token.empty());
  return out;
}

}  // namespace

bool WantsWatch(const HttpRequest& request) {
  const auto* watch = request.Query("watch");
  return watch != nullptr && (*watch == "true" || *watch == "1");
}

void WatchEventsHandler(const HttpRequest& request, const ApiContext& ctx, Respond respond) {
  if (ctx.watches == nullptr || ctx.audit == nullptr) {
    return respond(Problem(404, "watches are not served by this instance"));
  }
  auto query = ParseAuditQuery(request);
  if (!query) return respond(ProblemFromError(query.error()));
  EventWatchRequest watch{std::move(*query), ""};
  if (const auto* id = request.Header("last-event-id")) {
    watch.resume = *id;
  } else if (const auto* q = request.Query("last_event_id")) {
    watch.resume = *q;
  }
  respond(ctx.watches->WatchEvents(std::move(watch)));
}

void WatchListHandler(WatchKind kind, const HttpRequest& request, const ApiContext& ctx,
                      Respond respond) {
  if (ctx.watches == nullptr) {
    return respond(Problem(404, "watches are not served by this instance"));
  }
  ListWatchRequest watch{kind, {}};
  auto filter = [&](const char* param, const char* attr) {
    if (const auto* v = request.Query(param)) watch.filters.emplace_back(attr, *v);
  };
  switch (kind) {
    case WatchKind::kProviders:
      filter("type", "service_type");
      filter("health_status", "health_status");
      break;
    case WatchKind::kCatalogItemInstances:
      filter("provider", "provider_name");
      break;
    case WatchKind::kCleanupQueue:
      filter("status", "status");
      break;
  }
  respond(ctx.watches->WatchList(std::move(watch)));
}

WatchLister ProviderLister(const ApiContext& ctx) {
  return [&ctx]() -> Result<std::vector<WatchItem>> {
    std::vector<WatchItem> out;
    std::string token;
    do {
      ASSIGN_OR_RETURN(auto page, ctx.registry->List(ProviderFilter{}, token, kListPage));
      for (const Provider& p : page.providers) {
        const std::optional<HealthRecord> health = HealthOf(ctx, p.id);
        const HealthRecord* h = health ? &*health : nullptr;
        out.push_back(
            WatchItem{p.id,
                      RenderProvider(p, h),
                      {{"service_type", p.spec.service_type},
                       {"health_status", HealthStatusName(EffectiveHealthStatus(h, p.seq))}}});
      }
      token = page.next_page_token;
    } while (!token.empty());
    return out;
  };
}

WatchLister CatalogItemInstanceLister(const ApiContext& ctx) {
  return [&ctx]() {
    return ListAll<CatalogItemInstance>(
        [&ctx](const std::string& token, size_t max) {
          return ctx.instances->ListCatalogItemInstances(token, max);
        },
        [&ctx](const CatalogItemInstance& cii) -> Result<WatchItem> {
          ASSIGN_OR_RETURN(auto json, RenderJoined(*ctx.instances, cii));
          return WatchItem{cii.id, std::move(json), {{"provider_name", cii.provider_name}}};
        });
  };
}

WatchLister CleanupQueueLister(const ApiContext& ctx) {
  return [&ctx]() {
    return ListAll<CleanupRecord>(
        [&ctx](const std::string& token, size_t max) {
          return ctx.instances->ListCleanup("", token, max);
        },
        [&ctx](const CleanupRecord& r) -> Result<WatchItem> {
          ASSIGN_OR_RETURN(auto json, RenderJoined(*ctx.instances, r));
          return WatchItem{r.instance_id, std::move(json), {{"status", r.status}}};
        });
  };
}

}  // namespace dcm::http
