#include "src/http/audit_handlers.h"

#include <chrono>

#include "events/event_summary.h"
#include "src/common/json_writer.h"
#include "src/common/log.h"
#include "src/common/time_format.h"
#include "src/http/handler_util.h"
#include "src/http/instance_handlers.h"
#include "src/http/problem.h"

namespace dcm::http {
namespace {

// An RFC 3339 time from query parameter `name` (absent: 0). On failure the 400 is in *error.
std::optional<int64_t> ParseTimeParam(const HttpRequest& request, const std::string& name,
                                      HttpResponse* error) {
  const auto* text = request.Query(name);
  if (!text) return int64_t{0};
  auto ms = ParseRfc3339(*text);
  if (!ms || *ms < 0) {
    const std::string message = "must be an RFC 3339 time such as 2026-01-01T00:00:00Z";
    *error = Problem(400, name + " " + message, {{name, message}});
    return std::nullopt;
  }
  return ms;
}

// The filters shared by GET /events and the history endpoints. On failure the 400 is in *error.
std::optional<AuditQuery> ParseAuditQuery(const HttpRequest& request, HttpResponse* error) {
  AuditQuery query;
  const auto page_size = ParsePageSize(request, error);
  const auto since = page_size ? ParseTimeParam(request, "since", error) : std::nullopt;
  const auto until = since ? ParseTimeParam(request, "until", error) : std::nullopt;
  if (!until) return std::nullopt;
  query.max_page_size = static_cast<int>(*page_size);
  query.since_ms = *since;
  query.until_ms = *until;
  if (query.until_ms > 0 && query.until_ms < query.since_ms) {
    *error = Problem(400, "until is before since", {{"until", "must not be before since"}});
    return std::nullopt;
  }
  if (const auto* subject = request.Query("subject")) query.subject = *subject;
  if (const auto* type = request.Query("type")) query.type = *type;
  if (const auto* token = request.Query("page_token")) query.page_token = *token;
  return query;
}

HttpResponse NoAuditIndex(const HttpRequest& request) {
  return Problem(404, "no such resource: " + request.path);
}

// `as_of` as unix ms; on failure the 400 is in *error.
std::optional<int64_t> ParseAsOf(const HttpRequest& request, HttpResponse* error) {
  auto as_of = ParseTimeParam(request, "as_of", error);
  if (as_of && *as_of == 0) {
    *error = Problem(400, "as_of must be after 1970", {{"as_of", "must be after 1970"}});
    return std::nullopt;
  }
  return as_of;
}

// Folds are O(history) (docs/architecture.md §9): a slow one is worth a log line.
constexpr std::chrono::milliseconds kSlowFold{250};

void LogIfSlow(const char* what, const std::string& id, const PastState& past,
               std::chrono::steady_clock::time_point started) {
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - started);
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
  HttpResponse error;
  auto query = ParseAuditQuery(request, &error);
  if (!query) return respond(std::move(error));
  auto page = ctx.audit->Events(*query);
  if (!page) return respond(ProblemFromError(page.error()));
  JsonWriter w;
  w.BeginObject();
  w.Key("events");
  w.BeginArray();
  for (const auto& entry : page->entries) w.Raw(entry.json);
  w.EndArray();
  if (!page->next_page_token.empty()) w.Field("next_page_token", page->next_page_token);
  w.EndObject();
  respond(Json(200, w.Take()));
}

void EntityHistory(const HttpRequest& request, const std::string& kind, const std::string& id,
                   const ApiContext& ctx, Respond respond) {
  if (!ctx.audit) return respond(NoAuditIndex(request));
  HttpResponse error;
  auto query = ParseAuditQuery(request, &error);
  if (!query) return respond(std::move(error));
  bool known = false;
  auto status = ctx.audit->ForEachOfEntity(id, 0, [&](const AuditEntry&) {
    known = true;
    return false;
  });
  if (!status) return respond(ProblemFromError(status.error()));
  if (!known) return respond(Problem(404, "no events of " + kind + " '" + id + "'"));
  auto page = ctx.audit->History(id, *query);
  if (!page) return respond(ProblemFromError(page.error()));
  JsonWriter w;
  w.BeginObject();
  w.Field("id", id);
  w.Key("events");
  w.BeginArray();
  for (const auto& entry : page->entries) {
    auto event = DecodeCloudEvent(entry.json);
    if (!event) continue;  // indexed only after decoding; unreachable unless the disk lies
    w.BeginObject();
    w.Field("time", event->time);
    w.Field("type", event->type);
    w.Field("subject", event->subject);
    w.Field("source", event->source);
    if (!event->actor.empty()) w.Field("actor", event->actor);
    w.Field("summary", SummarizeEvent(*event));
    w.Field("id", event->id);
    w.Field("topic", entry.topic);
    w.Field("partition", static_cast<int64_t>(entry.partition));
    w.Field("offset", entry.offset);
    w.Key("event");
    w.Raw(entry.json);
    w.EndObject();
  }
  w.EndArray();
  if (!page->next_page_token.empty()) w.Field("next_page_token", page->next_page_token);
  w.EndObject();
  respond(Json(200, w.Take()));
}

void ListProvidersAsOf(const HttpRequest& request, const ApiContext& ctx, Respond respond) {
  if (!ctx.audit) return respond(NoAuditIndex(request));
  HttpResponse error;
  const auto as_of = ParseAsOf(request, &error);
  if (!as_of) return respond(std::move(error));
  const auto started = std::chrono::steady_clock::now();
  auto past = PastState::OfProviders(*ctx.audit, ctx.topics, {}, *as_of);
  if (!past) return respond(ProblemFromError(past.error()));
  LogIfSlow("providers", "*", **past, started);
  WithPast(ctx, **past, [&](const ApiContext& then) { ListProviders(request, then, respond); });
}

void GetProviderAsOf(const HttpRequest& request, const std::string& id, const ApiContext& ctx,
                     Respond respond) {
  if (!ctx.audit) return respond(NoAuditIndex(request));
  HttpResponse error;
  const auto as_of = ParseAsOf(request, &error);
  if (!as_of) return respond(std::move(error));
  const auto started = std::chrono::steady_clock::now();
  auto past = PastState::OfProviders(*ctx.audit, ctx.topics, {id}, *as_of);
  if (!past) return respond(ProblemFromError(past.error()));
  LogIfSlow("provider", id, **past, started);
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
  HttpResponse error;
  const auto as_of = ParseAsOf(request, &error);
  if (!as_of) return respond(std::move(error));
  const auto started = std::chrono::steady_clock::now();
  auto past = PastState::OfCatalogItemInstance(*ctx.audit, ctx.topics, id, *as_of);
  if (!past) return respond(ProblemFromError(past.error()));
  LogIfSlow("catalog_item_instance", id, **past, started);
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
