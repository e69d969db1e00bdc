#include "src/http/audit_handlers.h"

#include <chrono>

#include "src/common/log.h"
#include "src/http/audit_params.h"
#include "src/http/audit_render.h"
#include "src/http/instance_handlers.h"
#include "src/http/problem.h"

namespace dcm::http {
namespace {

HttpResponse NoAuditIndex(const HttpRequest& request) {
  return Problem(404, "no such resource: " + request.path);
}

// Folds are O(history) (docs/architecture.md §9): a slow one is worth a log line.
constexpr std::chrono::milliseconds kSlowFold{250};

// Timed by the context's clock (injected: a FakeClock in tests).
void LogIfSlow(const ApiContext& ctx, const char* what, const std::string& id,
               const PastState& past, TimePoint started) {
  const auto took =
      std::chrono::duration_cast<std::chrono::milliseconds>(ctx.clock->Now() - started);
  if (took < kSlowFold) return;
  Logger("http")->info("msg=\"slow as_of fold\" what={} id={} events={} ms={}", what, id,
                       past.folded(), took.count());
}

// Runs `handler` against a copy of `ctx` whose views read the past state, without `as_of`.
template <class Handler>
void WithPast(const ApiContext& ctx, const PastState& past, Handler&& handler) {
  ApiContext then = ctx;
  then.registry = &past.registry();
  then.health = &past.health();
  then.instances = &past.instances();
  then.commands = nullptr;
  then.instance_commands = nullptr;
  handler(then);
}

}  // namespace

void ListEvents(const HttpRequest& request, const ApiContext& ctx, Respond respond) {
  if (!ctx.audit) return respond(NoAuditIndex(request));
  auto query = ParseAuditQuery(request);
  if (!query) return respond(ProblemFromError(query.error()));
  auto page = ctx.audit->Events(*query);
  if (!page) return respond(ProblemFromError(page.error()));
  respond(Json(200, RenderEventsPage(*page)));
}

void EntityHistory(const HttpRequest& request, const std::string& kind, const std::string& id,
                   const ApiContext& ctx, Respond respond) {
  if (!ctx.audit) return respond(NoAuditIndex(request));
  auto query = ParseAuditQuery(request);
  if (!query) return respond(ProblemFromError(query.error()));
  bool known = false;
  auto status = ctx.audit->ForEachOfEntity(id, 0, [&](const AuditEntry&) {
    known = true;
    return false;
  });
  if (!status) return respond(ProblemFromError(status.error()));
  if (!known) return respond(Problem(404, "no events of " + kind + " '" + id + "'"));
  auto page = ctx.audit->History(id, *query);
  if (!page) return respond(ProblemFromError(page.error()));
  respond(Json(200, RenderHistoryPage(id, *page)));
}

void ListProvidersAsOf(const HttpRequest& request, const ApiContext& ctx, Respond respond) {
  if (!ctx.audit) return respond(NoAuditIndex(request));
  const auto as_of = ParseAsOf(request);
  if (!as_of) return respond(ProblemFromError(as_of.error()));
  const auto started = ctx.clock->Now();
  auto past = PastState::OfProviders(*ctx.audit, ctx.topics, {}, *as_of, ctx.deadline);
  if (!past) return respond(ProblemFromError(past.error()));
  LogIfSlow(ctx, "providers", "*", **past, started);
  WithPast(ctx, **past, [&](const ApiContext& then) { ListProviders(request, then, respond); });
}

void GetProviderAsOf(const HttpRequest& request, const std::string& id, const ApiContext& ctx,
                     Respond respond) {
  if (!ctx.audit) return respond(NoAuditIndex(request));
  const auto as_of = ParseAsOf(request);
  if (!as_of) return respond(ProblemFromError(as_of.error()));
  const auto started = ctx.clock->Now();
  auto past = PastState::OfProviders(*ctx.audit, ctx.topics, {id}, *as_of, ctx.deadline);
  if (!past) return respond(ProblemFromError(past.error()));
  LogIfSlow(ctx, "provider", id, **past, started);
  auto provider = (*past)->registry().Get(id);
  if (!provider) return respond(ProblemFromError(provider.error()));
  if (!*provider) {
    return respond(
        Problem(404, "provider '" + id + "' did not exist at " + *request.Query("as_of")));
  }
  WithPast(ctx, **past, [&](const ApiContext& then) { GetProvider(request, id, then, respond); });
}

void GetCatalogItemInstanceAsOf(const HttpRequest& request, const std::string& id,
                                const ApiContext& ctx, Respond respond) {
  if (!ctx.audit) return respond(NoAuditIndex(request));
  const auto as_of = ParseAsOf(request);
  if (!as_of) return respond(ProblemFromError(as_of.error()));
  const auto started = ctx.clock->Now();
  auto past = PastState::OfCatalogItemInstance(*ctx.audit, ctx.topics, id, *as_of, ctx.deadline);
  if (!past) return respond(ProblemFromError(past.error()));
  LogIfSlow(ctx, "catalog_item_instance", id, **past, started);
  auto cii = (*past)->instances().GetCatalogItemInstance(id);
  if (!cii) return respond(ProblemFromError(cii.error()));
  if (!*cii) {
    return respond(Problem(
        404, "catalog item instance '" + id + "' did not exist at " + *request.Query("as_of")));
  }
  WithPast(ctx, **past,
           [&](const ApiContext& then) { GetCatalogItemInstance(request, id, then, respond); });
}

}  // namespace dcm::http
