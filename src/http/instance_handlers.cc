#include "src/http/instance_handlers.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <initializer_list>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "events/instance_events.h"
#include "events/json_read.h"
#include "events/provider.h"
#include "projections/instance_decider.h"
#include "src/common/json_writer.h"
#include "src/common/time_format.h"
#include "src/common/uuid.h"
#include "src/http/handler_util.h"
#include "src/http/instance_render.h"
#include "src/http/problem.h"

namespace dcm::http {
namespace {

constexpr char kProvisioning[] = "PROVISIONING";

// ---- request parsing ----

HttpResponse Invalid(std::vector<FieldError> errors) {
  std::string detail = "invalid request: " + errors.front().field + " " + errors.front().message;
  if (errors.size() > 1) detail += " (and " + std::to_string(errors.size() - 1) + " more)";
  return Problem(400, detail, errors);
}

// The body of a write as a JSON object. On failure the response is ready in *error.
std::optional<simdjson::dom::object> BodyObject(const HttpRequest& request, HttpResponse* error) {
  auto body = ParseBody(request, error);
  if (!body) return std::nullopt;
  simdjson::dom::object object;
  if (body->get(object)) {
    *error =
        Problem(400, std::string("request body must be a JSON object, got ") + JsonTypeName(*body),
                {{"body", "must be a JSON object"}});
    return std::nullopt;
  }
  return object;
}

// The id of a new entity: `?id=` (a DNS label or a UUID) or a fresh UUIDv4. On failure the 400
// is ready in *error.
std::optional<std::string> NewEntityId(const HttpRequest& request, HttpResponse* error) {
  const auto* id = request.Query("id");
  if (!id || id->empty()) return NewUuidV4();
  if (auto why = ValidateProviderId(*id); !why.empty()) {
    *error = Problem(400, "id " + why, {{"id", why}});
    return std::nullopt;
  }
  return *id;
}

// An optional string member (first of `names` present); "" when absent or null.
std::string OptionalString(simdjson::dom::object object, std::initializer_list<const char*> names,
                           std::vector<FieldError>* errors) {
  for (const char* name : names) {
    simdjson::dom::element value;
    if (object.at_key(name).get(value)) continue;
    if (value.is_null()) return "";
    std::string_view text;
    if (value.get(text)) {
      errors->push_back({*names.begin(), "must be a string"});
      return "";
    }
    return std::string(text);
  }
  return "";
}

// `prefer_local` of a rehydration (SPEC §10): `?prefer_local=true|false` or the body's boolean
// `prefer_local` (`preferLocal`); true when either says so. On a bad value the 400 naming it is
// ready in *error.
std::optional<bool> PreferLocal(const HttpRequest& request,
                                const std::optional<simdjson::dom::object>& body,
                                HttpResponse* error) {
  const auto query = ParseBoolFlag(request, "prefer_local", false, error);
  if (!query) return std::nullopt;
  if (!body) return *query;
  for (const char* name : {"prefer_local", "preferLocal"}) {
    simdjson::dom::element value;
    if (body->at_key(name).get(value) || value.is_null()) continue;
    bool flag = false;
    if (value.get(flag)) {
      *error = Invalid({{"prefer_local", "must be a boolean"}});
      return std::nullopt;
    }
    return *query || flag;
  }
  return *query;
}

// The body of a call whose body is optional (absent or blank: none). On failure the response is
// ready in *error and *ok is false.
std::optional<simdjson::dom::object> OptionalBody(const HttpRequest& request, HttpResponse* error,
                                                  bool* ok) {
  *ok = true;
  if (request.body.find_first_not_of(" \t\r\n") == std::string::npos) return std::nullopt;
  auto body = BodyObject(request, error);
  *ok = body.has_value();
  return body;
}

// `spec`: a required JSON object of at most kMaxInstanceSpecBytes (minified: what the request
// event carries); with `service_types`, its string `service_type` must be one of them. Sets the
// minified spec and the service type. False (the 413 ready in *too_large) for a larger spec.
bool ReadSpec(simdjson::dom::object body, const std::vector<std::string>* service_types,
              std::string* spec, std::string* service_type, std::vector<FieldError>* errors,
              HttpResponse* too_large) {
  auto value = Member(body, "spec");
  if (!value || value->is_null()) {
    errors->push_back({"spec", "is required"});
    return true;
  }
  simdjson::dom::object object;
  if (value->get(object)) {
    errors->push_back({"spec", "must be a JSON object"});
    return true;
  }
  *spec = Minify(*value);
  if (spec->size() > kMaxInstanceSpecBytes) {
    const std::string why = "must be at most " + std::to_string(kMaxInstanceSpecBytes) +
                            " bytes of JSON (got " + std::to_string(spec->size()) + ")";
    *too_large = Problem(413, "spec " + why, {{"spec", why}});
    return false;
  }
  if (!service_types) return true;
  simdjson::dom::element type;
  std::string_view text;
  if (object.at_key("service_type").get(type) || type.is_null()) {
    errors->push_back({"spec.service_type", "is required"});
  } else if (type.get(text)) {
    errors->push_back({"spec.service_type", "must be a string"});
  } else if (std::find(service_types->begin(), service_types->end(), text) ==
             service_types->end()) {
    std::string allowed;
    for (const auto& t : *service_types) allowed += (allowed.empty() ? "" : ", ") + t;
    errors->push_back({"spec.service_type", "must be one of: " + allowed});
  } else {
    *service_type = std::string(text);
  }
  return true;
}

HttpResponse Created(const std::string& collection, const std::string& id, std::string body) {
  HttpResponse r = Json(201, std::move(body));
  r.headers.emplace_back("Location", std::string(kApiBase) + "/" + collection + "/" + id);
  return r;
}

HttpResponse NotFound(const std::string& what, const std::string& id) {
  return Problem(404, what + " '" + id + "' not found");
}

HttpResponse NoContent() { return HttpResponse{204, "", "", {}}; }

// The instance worker's own rules (projections/instance_decider.h CheckOperation) on `r`
// against this instance's view: an early answer with the status the worker would give (it
// decides again, on the owner's state, when the request arrives).
std::optional<HttpResponse> Refused(const ApiContext& ctx, const InstanceEvent& r) {
  const auto checked = CheckOperation(*ctx.instances, r);
  if (!checked) return ProblemFromError(checked.error());
  if (checked->kind != InstanceDecision::Kind::kFailed) return std::nullopt;
  return Problem(checked->fact.http_status, checked->fact.error);
}

// ---- lists ----

// Answers a page of `fetch(page_token, page_size)` under `key`.
template <class T>
void RespondList(const HttpRequest& request, const ApiContext& ctx, const char* key,
                 const std::function<Result<Page<T>>(const std::string&, size_t)>& fetch,
                 Respond& respond) {
  HttpResponse error;
  const auto page_size = ParsePageSize(request, &error);
  if (!page_size) return respond(std::move(error));
  const auto* token = request.Query("page_token");
  auto page = fetch(token ? *token : "", *page_size);
  if (!page) return respond(ProblemFromError(page.error()));
  JsonWriter w;
  w.BeginObject();
  w.Key(key);
  w.BeginArray();
  for (const auto& item : page->items) {
    auto rendered = RenderJoined(*ctx.instances, item);
    if (!rendered) return respond(ProblemFromError(rendered.error()));
    w.Raw(*rendered);
  }
  w.EndArray();
  if (!page->next_page_token.empty()) w.Field("next_page_token", page->next_page_token);
  w.EndObject();
  respond(Json(200, w.Take()));
}

// ---- writes ----

// Renders the response of a completed operation from the view (read-your-writes: the
// projection applied the outcome before the waiter fired).
using OnCompleted = std::function<HttpResponse(const InstanceEvent& completed)>;

// operation_failed → problem+json with the worker's status, detail and `reason`.
HttpResponse FailureProblem(const InstanceEvent& failed) {
  const int status =
      failed.http_status >= 400 && failed.http_status <= 599 ? failed.http_status : 500;
  std::string detail = failed.error;
  if (detail.empty()) detail = failed.operation + " failed";
  HttpResponse r = Problem(status, detail);
  if (!failed.reason.empty()) r = WithMember(std::move(r), "reason", failed.reason);
  return r;
}

// Completes `request` (operation and its parameters set) as an operation_requested event on
// the instance command bus and answers with its outcome.
void SubmitOperation(const ApiContext& ctx, InstanceEvent request, OnCompleted on_completed,
                     Respond respond) {
  if (!ctx.instance_commands) {
    return respond(Problem(503, "instance operations are not available on this instance"));
  }
  request.type = event_type::kOperationRequested;
  request.event_id = NewUuidV4();
  request.source = ctx.source;
  request.subject = request.root;
  request.time_ms = ctx.clock->NowMillis();
  ctx.instance_commands->Submit(
      EncodeInstanceEvent(request),
      [on_completed = std::move(on_completed),
       respond = std::move(respond)](Result<CloudEvent> outcome_event) {
        if (!outcome_event) return respond(ProblemFromError(outcome_event.error()));
        auto outcome = DecodeInstanceEvent(*outcome_event);
        if (!outcome) {
          return respond(Problem(500, "unreadable outcome: " + outcome.error().message));
        }
        if (outcome->type == event_type::kOperationFailed) {
          return respond(FailureProblem(*outcome));
        }
        if (outcome->type != event_type::kOperationCompleted) {
          return respond(Problem(500, "unexpected outcome type " + outcome->type));
        }
        respond(on_completed(*outcome));
      });
}

// An operation request on `root` by the caller of `request` (its `actor`, SPEC §6).
InstanceEvent NewOperation(const HttpRequest& request, Operation op, const std::string& root) {
  InstanceEvent e;
  e.actor = request.principal.subject;
  e.operation = OperationName(op);
  e.root = root;
  return e;
}

// 201 with the entity `get(id)` reads after the operation completed.
template <class T>
OnCompleted RenderCreated(const ApiContext& ctx, std::string collection, std::string what,
                          std::string id,
                          Result<std::optional<T>> (InstanceView::*get)(const std::string&) const) {
  return [ctx, collection = std::move(collection), what = std::move(what), id = std::move(id),
          get](const InstanceEvent&) {
    auto entity = (ctx.instances->*get)(id);
    if (!entity) return ProblemFromError(entity.error());
    if (!*entity) return Problem(500, what + " '" + id + "' not found after its creation");
    auto rendered = RenderJoined(*ctx.instances, **entity);
    if (!rendered) return ProblemFromError(rendered.error());
    return Created(collection, id, std::move(*rendered));
  };
}

OnCompleted RespondNoContent() {
  return [](const InstanceEvent&) { return NoContent(); };
}

std::string UpperCase(std::string text) {
  for (auto& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

}  // namespace

// ---- catalog item instances ----

void CreateCatalogItemInstance(const HttpRequest& request, const ApiContext& ctx, Respond respond) {
  HttpResponse error;
  const auto id = NewEntityId(request, &error);
  if (!id) return respond(std::move(error));
  auto body = BodyObject(request, &error);
  if (!body) return respond(std::move(error));
  InstanceEvent r = NewOperation(request, Operation::kCreateCatalogItemInstance, *id);
  std::vector<FieldError> errors;
  r.display_name = OptionalString(*body, {"display_name", "displayName"}, &errors);
  if (r.display_name.size() > kMaxDisplayNameLength) {
    errors.push_back(
        {"display_name", "must be at most " + std::to_string(kMaxDisplayNameLength) + " bytes"});
  }
  if (!ReadSpec(*body, ctx.provider_rules ? &ctx.provider_rules->service_types : nullptr, &r.spec,
                &r.service_type, &errors, &error)) {
    return respond(std::move(error));
  }
  if (!errors.empty()) return respond(Invalid(std::move(errors)));
  r.catalog_item_instance_id = *id;
  r.resource_id = NewUuidV4();
  // The body is not read past this point (view reads reuse the thread's JSON parser).
  if (auto refused = Refused(ctx, r)) return respond(std::move(*refused));
  SubmitOperation(ctx, std::move(r),
                  RenderCreated(ctx, "catalog-item-instances", "catalog item instance", *id,
                                &InstanceView::GetCatalogItemInstance),
                  std::move(respond));
}

void ListCatalogItemInstances(const HttpRequest& request, const ApiContext& ctx, Respond respond) {
  RespondList<CatalogItemInstance>(
      request, ctx, "results",
      [&ctx](const std::string& token, size_t size) {
        return ctx.instances->ListCatalogItemInstances(token, size);
      },
      respond);
}

void GetCatalogItemInstance(const HttpRequest&, const std::string& id, const ApiContext& ctx,
                            Respond respond) {
  auto cii = ctx.instances->GetCatalogItemInstance(id);
  if (!cii) return respond(ProblemFromError(cii.error()));
  if (!*cii) return respond(NotFound("catalog item instance", id));
  auto rendered = RenderJoined(*ctx.instances, **cii);
  if (!rendered) return respond(ProblemFromError(rendered.error()));
  respond(Json(200, std::move(*rendered)));
}

void DeleteCatalogItemInstance(const HttpRequest& request, const std::string& id,
                               const ApiContext& ctx, Respond respond) {
  InstanceEvent r = NewOperation(request, Operation::kDeleteCatalogItemInstance, id);
  r.catalog_item_instance_id = id;
  if (auto refused = Refused(ctx, r)) return respond(std::move(*refused));
  SubmitOperation(ctx, std::move(r), RespondNoContent(), std::move(respond));
}

void RehydrateCatalogItemInstance(const HttpRequest& request, const std::string& id,
                                  const ApiContext& ctx, Respond respond) {
  HttpResponse error;
  bool ok = true;
  const auto body = OptionalBody(request, &error, &ok);
  if (!ok) return respond(std::move(error));
  const auto prefer_local = PreferLocal(request, body, &error);
  if (!prefer_local) return respond(std::move(error));
  InstanceEvent r = NewOperation(request, Operation::kRehydrateCatalogItemInstance, id);
  r.catalog_item_instance_id = id;
  r.new_resource_id = NewUuidV4();
  r.prefer_local = *prefer_local;
  const auto checked = CheckOperation(*ctx.instances, r);
  if (!checked) return respond(ProblemFromError(checked.error()));
  if (checked->kind == InstanceDecision::Kind::kFailed) {
    return respond(Problem(checked->fact.http_status, checked->fact.error));
  }
  // The generation this rehydration replaces: the worker answers 409 if another rehydration
  // moved the instance on meanwhile (SPEC §3.3: concurrent rehydrations, exactly one proceeds).
  r.old_resource_id = checked->fact.old_resource_id;
  auto on_completed = [ctx, id, before = r.old_resource_id,
                       new_id = r.new_resource_id](const InstanceEvent& completed) {
    auto after = ctx.instances->GetCatalogItemInstance(id);
    if (!after) return ProblemFromError(after.error());
    const CatalogItemInstance* now = *after ? &**after : nullptr;
    std::string resource_id = now ? now->resource_id : new_id;
    std::string provider = now ? now->provider_name : completed.provider_name;
    std::string old_id = !completed.old_resource_id.empty() ? completed.old_resource_id : before;
    JsonWriter w;
    w.BeginObject();
    w.Field("id", id);
    w.Field("resource_id", resource_id);
    w.Field("old_resource_id", old_id);
    w.Field("provider_name", provider);
    w.Field("status", kProvisioning);
    w.EndObject();
    return Json(202, w.Take());
  };
  SubmitOperation(ctx, std::move(r), std::move(on_completed), std::move(respond));
}

// ---- resources ----

void CreateResource(const HttpRequest& request, const ApiContext& ctx, Respond respond) {
  HttpResponse error;
  const auto id = NewEntityId(request, &error);
  if (!id) return respond(std::move(error));
  auto body = BodyObject(request, &error);
  if (!body) return respond(std::move(error));
  InstanceEvent r = NewOperation(request, Operation::kCreateResource, *id);
  std::vector<FieldError> errors;
  if (!ReadSpec(*body, ctx.provider_rules ? &ctx.provider_rules->service_types : nullptr, &r.spec,
                &r.service_type, &errors, &error)) {
    return respond(std::move(error));
  }
  r.catalog_item_instance_id =
      OptionalString(*body, {"catalog_item_instance_id", "catalogItemInstanceId"}, &errors);
  if (!r.catalog_item_instance_id.empty()) {
    if (auto why = ValidateProviderId(r.catalog_item_instance_id); !why.empty()) {
      errors.push_back({"catalog_item_instance_id", why});
    }
  }
  if (!errors.empty()) return respond(Invalid(std::move(errors)));
  r.resource_id = *id;
  if (auto refused = Refused(ctx, r)) return respond(std::move(*refused));
  SubmitOperation(ctx, std::move(r),
                  RenderCreated(ctx, "resources", "resource", *id, &InstanceView::GetResource),
                  std::move(respond));
}

void ListResources(const HttpRequest& request, const ApiContext& ctx, Respond respond) {
  RespondList<Resource>(
      request, ctx, "resources",
      [&ctx](const std::string& token, size_t size) {
        return ctx.instances->ListResources(token, size);
      },
      respond);
}

void GetResource(const HttpRequest&, const std::string& id, const ApiContext& ctx,
                 Respond respond) {
  auto resource = ctx.instances->GetResource(id);
  if (!resource) return respond(ProblemFromError(resource.error()));
  if (!*resource) return respond(NotFound("resource", id));
  auto rendered = RenderJoined(*ctx.instances, **resource);
  if (!rendered) return respond(ProblemFromError(rendered.error()));
  respond(Json(200, std::move(*rendered)));
}

void DeleteResource(const HttpRequest& request, const std::string& id, const ApiContext& ctx,
                    Respond respond) {
  auto resource = ctx.instances->GetResource(id);
  if (!resource) return respond(ProblemFromError(resource.error()));
  if (!*resource) return respond(NotFound("resource", id));
  InstanceEvent r = NewOperation(request, Operation::kDeleteResource, (*resource)->root);
  r.resource_id = id;
  SubmitOperation(ctx, std::move(r), RespondNoContent(), std::move(respond));
}

void RehydrateResource(const HttpRequest& request, const std::string& id, const ApiContext& ctx,
                       Respond respond) {
  std::string new_id;
  HttpResponse error;
  bool ok = true;
  const auto body = OptionalBody(request, &error, &ok);
  if (!ok) return respond(std::move(error));
  const auto prefer_local = PreferLocal(request, body, &error);
  if (!prefer_local) return respond(std::move(error));
  if (body) {
    std::vector<FieldError> errors;
    new_id = OptionalString(
        *body, {"new_resource_id", "newResourceId", "new_instance_id", "newInstanceId"}, &errors);
    if (!errors.empty()) return respond(Invalid(std::move(errors)));
    if (!new_id.empty()) {
      if (auto why = ValidateProviderId(new_id); !why.empty()) {
        return respond(Invalid({{"new_resource_id", why}}));
      }
    }
  }
  auto resource = ctx.instances->GetResource(id);
  if (!resource) return respond(ProblemFromError(resource.error()));
  if (!*resource) return respond(NotFound("resource", id));
  if (new_id.empty()) new_id = NewUuidV4();
  InstanceEvent r = NewOperation(request, Operation::kRehydrateResource, (*resource)->root);
  r.resource_id = id;
  r.new_resource_id = new_id;
  r.prefer_local = *prefer_local;
  if (auto refused = Refused(ctx, r)) return respond(std::move(*refused));
  auto on_completed = [ctx, id, new_id](const InstanceEvent& completed) {
    auto after = ctx.instances->GetResource(new_id);
    if (!after) return ProblemFromError(after.error());
    JsonWriter w;
    w.BeginObject();
    w.Field("resource_id", new_id);
    w.Field("old_resource_id", id);
    w.Field("provider_name", *after ? (*after)->provider_name : completed.provider_name);
    w.Field("status", kProvisioning);
    w.EndObject();
    return Json(202, w.Take());
  };
  SubmitOperation(ctx, std::move(r), std::move(on_completed), std::move(respond));
}

// ---- service-type instances ----

void CreateServiceTypeInstance(const HttpRequest& request, const ApiContext& ctx, Respond respond) {
  HttpResponse error;
  const auto id = NewEntityId(request, &error);
  if (!id) return respond(std::move(error));
  auto body = BodyObject(request, &error);
  if (!body) return respond(std::move(error));
  InstanceEvent r = NewOperation(request, Operation::kCreateServiceTypeInstance, *id);
  std::vector<FieldError> errors;
  r.provider_name = OptionalString(*body, {"provider_name", "providerName"}, &errors);
  if (r.provider_name.empty() && errors.empty()) errors.push_back({"provider_name", "is required"});
  if (!ReadSpec(*body, nullptr, &r.spec, &r.service_type, &errors, &error)) {
    return respond(std::move(error));
  }
  if (!errors.empty()) return respond(Invalid(std::move(errors)));
  r.instance_id = *id;
  if (auto refused = Refused(ctx, r)) return respond(std::move(*refused));
  SubmitOperation(ctx, std::move(r),
                  RenderCreated(ctx, "service-type-instances", "service-type instance", *id,
                                &InstanceView::GetInstance),
                  std::move(respond));
}

void ListServiceTypeInstances(const HttpRequest& request, const ApiContext& ctx, Respond respond) {
  InstanceFilter filter;
  HttpResponse error;
  const auto show_deleted = ParseBoolFlag(request, "show_deleted", false, &error);
  if (!show_deleted) return respond(std::move(error));
  filter.show_deleted = *show_deleted;
  if (const auto* provider = request.Query("provider")) filter.provider = *provider;
  if (const auto* type = request.Query("service_type")) filter.service_type = *type;
  RespondList<ServiceTypeInstance>(
      request, ctx, "instances",
      [&ctx, &filter](const std::string& token, size_t size) {
        return ctx.instances->ListInstances(filter, token, size);
      },
      respond);
}

void GetServiceTypeInstance(const HttpRequest& request, const std::string& id,
                            const ApiContext& ctx, Respond respond) {
  HttpResponse error;
  const auto show_deleted = ParseBoolFlag(request, "show_deleted", false, &error);
  if (!show_deleted) return respond(std::move(error));
  auto instance = ctx.instances->GetInstance(id);
  if (!instance) return respond(ProblemFromError(instance.error()));
  if (!*instance || ((*instance)->deleted && !*show_deleted)) {
    return respond(NotFound("service-type instance", id));
  }
  auto rendered = RenderJoined(*ctx.instances, **instance);
  if (!rendered) return respond(ProblemFromError(rendered.error()));
  respond(Json(200, std::move(*rendered)));
}

void DeleteServiceTypeInstance(const HttpRequest& request, const std::string& id,
                               const ApiContext& ctx, Respond respond) {
  HttpResponse error;
  const auto deferred = ParseBoolFlag(request, "deferred", false, &error);
  if (!deferred) return respond(std::move(error));
  auto instance = ctx.instances->GetInstance(id);
  if (!instance) return respond(ProblemFromError(instance.error()));
  if (!*instance || (*instance)->deleted) return respond(NotFound("service-type instance", id));
  InstanceEvent r = NewOperation(request, Operation::kDeleteServiceTypeInstance, (*instance)->root);
  r.instance_id = id;
  r.deferred = *deferred;
  SubmitOperation(ctx, std::move(r), RespondNoContent(), std::move(respond));
}

// ---- cleanup queue ----

void ListCleanupQueue(const HttpRequest& request, const ApiContext& ctx, Respond respond) {
  std::string status;
  if (const auto* wanted = request.Query("status")) {
    status = UpperCase(*wanted);
    if (status != kCleanupPending && status != kCleanupPendingProvider &&
        status != kCleanupFailedStatus) {
      return respond(Problem(400, "status must be PENDING, PENDING_PROVIDER or FAILED",
                             {{"status", "must be PENDING, PENDING_PROVIDER or FAILED"}}));
    }
  }
  RespondList<CleanupRecord>(
      request, ctx, "records",
      [&ctx, &status](const std::string& token, size_t size) {
        return ctx.instances->ListCleanup(status, token, size);
      },
      respond);
}

void RetryCleanup(const HttpRequest& request, const std::string& instance_id, const ApiContext& ctx,
                  Respond respond) {
  auto record = ctx.instances->GetCleanup(instance_id);
  if (!record) return respond(ProblemFromError(record.error()));
  if (!*record) return respond(NotFound("cleanup record", instance_id));
  InstanceEvent r = NewOperation(request, Operation::kRetryCleanup, (*record)->root);
  r.instance_id = instance_id;
  if (auto refused = Refused(ctx, r)) return respond(std::move(*refused));
  auto on_completed = [ctx, instance_id, before = std::move(**record)](const InstanceEvent&) {
    auto after = ctx.instances->GetCleanup(instance_id);
    if (!after) return ProblemFromError(after.error());
    if (*after) return Json(200, RenderCleanupRecord(**after));
    // Already attempted and removed by the cleanup worker: show the record as retried.
    CleanupRecord retried = before;
    retried.status = kCleanupPending;
    retried.retry_count = 0;
    return Json(200, RenderCleanupRecord(retried));
  };
  SubmitOperation(ctx, std::move(r), std::move(on_completed), std::move(respond));
}

}  // namespace dcm::http
