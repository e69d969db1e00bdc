#include "src/http/provider_handlers.h"

#include <unordered_map>

#include "events/json_read.h"
#include "events/provider_events.h"
#include "src/http/handler_util.h"
#include "src/http/problem.h"
#include "src/http/provider_params.h"
#include "src/http/provider_render.h"

namespace dcm::http {
namespace {

// Records a request rejected at the edge as an outcome event (auditors see who tried).
void RecordEdgeRejection(const ApiContext& ctx, const HttpRequest& request, RequestKind kind,
                         const Error& error, const std::string& name, const std::string& id) {
  ProviderOutcome o;
  o.actor = request.principal.subject;
  o.kind = OutcomeKind::kRejected;
  o.request_id = ctx.new_id();
  o.request_kind = kind;
  o.status = HttpStatusFor(error.code);
  o.detail = error.message;
  o.errors = error.fields;
  o.attempted_name = name;
  o.attempted_id = id;
  ctx.commands->Record(EncodeProviderOutcome(o, ctx.source, ctx.clock->NowMillis()));
}

std::string Render(const ApiContext& ctx, const Provider& p, const std::string& status = "") {
  const auto health = HealthOf(ctx, p.id);
  return RenderProvider(p, health ? &*health : nullptr, status);
}

HttpResponse RenderOutcome(const ApiContext& ctx, const ProviderOutcome& o) {
  switch (o.kind) {
    case OutcomeKind::kRegistered: {
      HttpResponse r = Json(201, Render(ctx, o.provider, "registered"));
      r.headers.emplace_back("Location", std::string(kApiBase) + "/providers/" + o.provider.id);
      return r;
    }
    case OutcomeKind::kUpdated:
      return Json(
          200, Render(ctx, o.provider, o.request_kind == RequestKind::kRegister ? "updated" : ""));
    case OutcomeKind::kIdChanged:
      return Json(200, Render(ctx, o.provider));
    case OutcomeKind::kDeleted:
    case OutcomeKind::kExpired:
      return HttpResponse{204, "", "", {}};
    case OutcomeKind::kRejected:
      return Problem(o.status, o.detail, o.errors, o.conflict);
  }
  return Problem(500, "unknown outcome");
}

// Sends `request` through the command bus, as the caller of `http`, and answers with its outcome.
void SubmitAndRespond(const ApiContext& ctx, const HttpRequest& http, ProviderRequest request,
                      Respond respond) {
  request.request_id = ctx.new_id();
  request.actor = http.principal.subject;
  request.owner_scoped = http.principal.OwnerScoped();
  const CloudEvent event = EncodeProviderRequest(request, ctx.source, ctx.clock->NowMillis());
  ctx.commands->Submit(
      event, [ctx, respond = std::move(respond)](Result<CloudEvent> outcome_event) {
        if (!outcome_event) {
          respond(ProblemFromError(outcome_event.error()));
          return;
        }
        auto outcome = DecodeProviderOutcome(*outcome_event);
        respond(outcome ? RenderOutcome(ctx, *outcome)
                        : Problem(500, "unreadable outcome: " + outcome.error().message));
      });
}

// Validates a provider spec body for register/update; answers and records the rejection on
// failure.
std::optional<ProviderSpec> SpecFromBody(const HttpRequest& request, const ApiContext& ctx,
                                         RequestKind kind, const std::string& id,
                                         Respond& respond) {
  HttpResponse error;
  auto body = ParseBody(request, &error);
  if (!body) {
    respond(std::move(error));
    return std::nullopt;
  }
  auto spec = ParseProviderSpec(*body, *ctx.provider_rules);
  if (!spec) {
    std::string name;
    if (body->is_object()) {
      std::string_view n;
      if (!(*body)["name"].get(n)) name = std::string(n.substr(0, 63));
    }
    RecordEdgeRejection(ctx, request, kind, spec.error(), name, id);
    respond(ProblemFromError(spec.error()));
    return std::nullopt;
  }
  return *spec;
}

// Answers 400 (and records the rejection) unless `id` is a valid provider id.
bool CheckId(const ApiContext& ctx, const HttpRequest& request, RequestKind kind,
             const std::string& id, const char* field, Respond& respond) {
  auto checked = CheckProviderId(id, field);
  if (checked) return true;
  RecordEdgeRejection(ctx, request, kind, checked.error(), "", id.substr(0, 63));
  respond(ProblemFromError(checked.error()));
  return false;
}

}  // namespace

std::optional<HealthRecord> HealthOf(const ApiContext& ctx, const std::string& id) {
  if (!ctx.health) return std::nullopt;
  auto record = ctx.health->Get(id);
  return record ? std::move(*record) : std::nullopt;
}

void RegisterProvider(const HttpRequest& request, const ApiContext& ctx, Respond respond) {
  ProviderRequest r;
  r.kind = RequestKind::kRegister;
  if (const auto* id = request.Query("id"); id && !id->empty()) {
    if (!CheckId(ctx, request, r.kind, *id, "id", respond)) return;
    r.id = *id;
  }
  auto spec = SpecFromBody(request, ctx, r.kind, r.id, respond);
  if (!spec) return;
  r.spec = std::move(*spec);
  SubmitAndRespond(ctx, request, std::move(r), std::move(respond));
}

void UpdateProvider(const HttpRequest& request, const std::string& id, const ApiContext& ctx,
                    Respond respond) {
  if (!CheckId(ctx, request, RequestKind::kUpdate, id, "id", respond)) return;
  ProviderRequest r;
  r.kind = RequestKind::kUpdate;
  r.id = id;
  auto spec = SpecFromBody(request, ctx, r.kind, r.id, respond);
  if (!spec) return;
  r.spec = std::move(*spec);
  SubmitAndRespond(ctx, request, std::move(r), std::move(respond));
}

void ChangeProviderId(const HttpRequest& request, const std::string& id, const ApiContext& ctx,
                      Respond respond) {
  if (!CheckId(ctx, request, RequestKind::kChangeId, id, "id", respond)) return;
  HttpResponse error;
  auto body = ParseBody(request, &error);
  if (!body) return respond(std::move(error));
  ProviderRequest r;
  r.kind = RequestKind::kChangeId;
  r.id = id;
  auto new_id = ParseNewProviderId(*body);
  if (!new_id) {
    RecordEdgeRejection(ctx, request, r.kind, new_id.error(), "", id);
    return respond(ProblemFromError(new_id.error()));
  }
  r.new_id = std::move(*new_id);
  if (!CheckId(ctx, request, r.kind, r.new_id, "new_id", respond)) return;
  SubmitAndRespond(ctx, request, std::move(r), std::move(respond));
}

void DeleteProvider(const HttpRequest& request, const std::string& id, const ApiContext& ctx,
                    Respond respond) {
  if (!CheckId(ctx, request, RequestKind::kDelete, id, "id", respond)) return;
  ProviderRequest r;
  r.kind = RequestKind::kDelete;
  r.id = id;
  r.force = ForceRequested(request);
  if (ctx.instances && !r.force) {
    auto live = ctx.instances->LiveInstances(id);
    if (!live) return respond(ProblemFromError(live.error()));
    if (*live > 0) {
      return respond(Problem(409, "provider '" + id + "' hosts " + std::to_string(*live) +
                                      " live instances; use ?force=true"));
    }
  }
  SubmitAndRespond(ctx, request, std::move(r), std::move(respond));
}

void GetProvider(const HttpRequest&, const std::string& id, const ApiContext& ctx,
                 Respond respond) {
  auto provider = ctx.registry->Get(id);
  if (!provider) return respond(ProblemFromError(provider.error()));
  if (!*provider) return respond(Problem(404, "provider '" + id + "' not found"));
  respond(Json(200, Render(ctx, **provider)));
}

void ListProviders(const HttpRequest& request, const ApiContext& ctx, Respond respond) {
  auto params = ParseProviderListParams(request);
  if (!params) return respond(ProblemFromError(params.error()));
  ProviderFilter filter;
  filter.service_type = params->service_type;
  std::unordered_map<std::string, std::optional<HealthRecord>> accepted;
  if (params->health) {
    // Records the filter read for the providers it accepted, so rendering does not read them
    // again (at most a page and one).
    filter.accept = [&ctx, &accepted, wanted = *params->health](const Provider& p) {
      auto record = HealthOf(ctx, p.id);
      if (EffectiveHealthStatus(record ? &*record : nullptr, p.seq) != wanted) return false;
      accepted.emplace(p.id, std::move(record));
      return true;
    };
  }
  auto page = ctx.registry->List(filter, params->page_token, params->page_size);
  if (!page) return respond(ProblemFromError(page.error()));
  std::vector<std::string> rendered;
  for (const auto& p : page->providers) {
    auto it = accepted.find(p.id);
    const auto health = it != accepted.end() ? std::move(it->second) : HealthOf(ctx, p.id);
    rendered.push_back(RenderProvider(p, health ? &*health : nullptr));
  }
  respond(Json(200, RenderProviderList(rendered, page->next_page_token)));
}

void ProviderHeartbeat(const HttpRequest& request, const std::string& id, const ApiContext& ctx,
                       Respond respond) {
  auto result = ParseHeartbeatBody(request);
  if (!result) return respond(ProblemFromError(result.error()));
  auto provider = ctx.registry->Get(id);
  if (!provider) return respond(ProblemFromError(provider.error()));
  if (!*provider) {
    return respond(Problem(404, "provider '" + id + "' not found; register it again"));
  }
  const Provider& p = **provider;
  if (p.spec.liveness == Liveness::kProbe) {
    return respond(
        Problem(409, "provider '" + id + "' has liveness " + LivenessName(p.spec.liveness) +
                         "; register it with liveness heartbeat (or both) to send heartbeats"));
  }
  if (!ctx.heartbeat) {
    return respond(Problem(503, "this instance does not take heartbeats (health checking is off)"));
  }
  auto health = ctx.heartbeat(p, *result);
  if (!health) return respond(ProblemFromError(health.error()));
  respond(Json(200, RenderHealthDetail(&*health, p.seq)));
}

void ListServiceTypes(const ApiContext& ctx, Respond respond) {
  respond(Json(200, RenderServiceTypes(ctx.provider_rules->service_types)));
}

}  // namespace dcm::http
