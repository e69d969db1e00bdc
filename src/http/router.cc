#include "src/http/router.h"

#include <map>
#include <memory>
#include <optional>

#include "src/http/audit_handlers.h"
#include "src/http/instance_handlers.h"
#include "src/http/problem.h"

namespace dcm::http {
namespace {

// Strips the API base (or its alias) from `path`; nullopt if the path is not under it.
std::optional<std::string> ApiPath(const std::string& path) {
  for (std::string_view base : {kApiBase, kApiAlias}) {
    if (path.starts_with(base) && (path.size() == base.size() || path[base.size()] == '/')) {
      return path.substr(base.size());
    }
  }
  return std::nullopt;
}

HttpResponse MethodNotAllowed(const char* allow) {
  HttpResponse r = Problem(405, std::string("allowed methods: ") + allow);
  r.headers.emplace_back("Allow", allow);
  return r;
}

using CollectionHandler = void (*)(const HttpRequest&, const ApiContext&, Respond);
using ItemHandler = void (*)(const HttpRequest&, const std::string&, const ApiContext&, Respond);

// An instance API collection (SPEC §3.3): `/name` (list, create), `/name/{id}` (get, delete)
// and `/name/{id}:action` (POST). A null handler is a method the collection does not have.
struct Collection {
  std::string_view path;  // "/catalog-item-instances"
  const char* collection_allow;
  CollectionHandler list;
  CollectionHandler create;
  const char* item_allow;  // nullptr: no item routes (only the action)
  ItemHandler get;
  ItemHandler remove;
  std::string_view action;  // ":rehydrate"; empty: none
  ItemHandler act;
};

constexpr Collection kInstanceCollections[] = {
    {"/catalog-item-instances", "GET, POST", ListCatalogItemInstances, CreateCatalogItemInstance,
     "GET, DELETE", GetCatalogItemInstance, DeleteCatalogItemInstance, ":rehydrate",
     RehydrateCatalogItemInstance},
    {"/resources", "GET, POST", ListResources, CreateResource, "GET, DELETE", GetResource,
     DeleteResource, ":rehydrate", RehydrateResource},
    {"/service-type-instances", "GET, POST", ListServiceTypeInstances, CreateServiceTypeInstance,
     "GET, DELETE", GetServiceTypeInstance, DeleteServiceTypeInstance, "", nullptr},
    {"/cleanup-queue", "GET", ListCleanupQueue, nullptr, nullptr, nullptr, nullptr, ":retry",
     RetryCleanup},
};

struct Routes {
  ApiContext api;
  OpsContext ops;

  // The operations endpoints (GET only), or nullopt for any other path.
  std::optional<HttpResponse> Operations(const HttpRequest& req) const {
    static const std::map<std::string, HttpResponse (*)(const OpsContext&)> kEndpoints = {
        {"/healthz", [](const OpsContext&) { return Healthz(); }},
        {"/readyz", Readyz},
        {"/metrics", MetricsText},
        {"/admin/info", Info},
        {"/admin/projections", Projections},
    };
    auto it = kEndpoints.find(req.path);
    if (it == kEndpoints.end()) return std::nullopt;
    if (req.method != "GET" && req.method != "HEAD") return MethodNotAllowed("GET");
    return it->second(ops);
  }

  void Dispatch(const HttpRequest& req, Respond respond) const {
    const std::string& m = req.method;
    if (auto ops_response = Operations(req)) return respond(std::move(*ops_response));
    auto path = ApiPath(req.path);
    if (!path) return respond(Problem(404, "no such resource: " + req.path));
    if (*path == "/service-types") {
      if (m != "GET") return respond(MethodNotAllowed("GET"));
      return ListServiceTypes(api, std::move(respond));
    }
    if (*path == "/events") {
      if (m != "GET") return respond(MethodNotAllowed("GET"));
      return ListEvents(req, api, std::move(respond));
    }
    if (AuditRoute(req, *path, respond)) return;
    if (*path == "/providers") {
      if (m == "GET") return ListProviders(req, api, std::move(respond));
      if (m == "POST") return RegisterProvider(req, api, std::move(respond));
      return respond(MethodNotAllowed("GET, POST"));
    }
    constexpr std::string_view kProviders = "/providers/";
    if (path->starts_with(kProviders)) {
      std::string id = path->substr(kProviders.size());
      if (id.empty() || id.find('/') != std::string::npos) {
        return respond(Problem(404, "no such resource: " + req.path));
      }
      constexpr std::string_view kChangeId = ":changeId";
      if (id.ends_with(kChangeId)) {
        id.resize(id.size() - kChangeId.size());
        if (m != "POST") return respond(MethodNotAllowed("POST"));
        return ChangeProviderId(req, id, api, std::move(respond));
      }
      if (m == "GET") return GetProvider(req, id, api, std::move(respond));
      if (m == "PUT") return UpdateProvider(req, id, api, std::move(respond));
      if (m == "DELETE") return DeleteProvider(req, id, api, std::move(respond));
      return respond(MethodNotAllowed("GET, PUT, DELETE"));
    }
    if (InstanceRoute(req, *path, respond)) return;
    respond(Problem(404, "no such resource: " + req.path));
  }

  // History (`/{collection}/{id}/history`) and time travel (`?as_of=` on a GET) of providers and
  // catalog item instances (SPEC §3.4); false: not one of these.
  bool AuditRoute(const HttpRequest& req, const std::string& path, Respond& respond) const {
    static constexpr std::pair<std::string_view, std::string_view> kEntities[] = {
        {"/providers", "provider"}, {"/catalog-item-instances", "catalog item instance"}};
    constexpr std::string_view kHistory = "/history";
    const bool as_of = req.method == "GET" && req.Query("as_of");
    for (const auto& [collection, kind] : kEntities) {
      if (!path.starts_with(collection)) continue;
      std::string_view rest = std::string_view(path).substr(collection.size());
      if (rest.empty()) {
        if (!as_of || kind != "provider") return false;
        ListProvidersAsOf(req, api, std::move(respond));
        return true;
      }
      if (rest.front() != '/') return false;
      rest.remove_prefix(1);
      const bool history = rest.ends_with(kHistory) && rest.size() > kHistory.size();
      if (history) rest.remove_suffix(kHistory.size());
      if (rest.empty() || rest.find('/') != std::string_view::npos || (!history && !as_of)) {
        return false;
      }
      const std::string id(rest);
      if (history) {
        if (req.method != "GET") {
          respond(MethodNotAllowed("GET"));
        } else {
          EntityHistory(req, std::string(kind), id, api, std::move(respond));
        }
      } else if (kind == "provider") {
        GetProviderAsOf(req, id, api, std::move(respond));
      } else {
        GetCatalogItemInstanceAsOf(req, id, api, std::move(respond));
      }
      return true;
    }
    return false;
  }

  // Dispatches the instance API (false: not one of its paths). Without an instance view, every
  // instance path answers 404.
  bool InstanceRoute(const HttpRequest& req, const std::string& path, Respond& respond) const {
    const std::string& m = req.method;
    for (const Collection& c : kInstanceCollections) {
      if (!path.starts_with(c.path)) continue;
      const std::string_view rest = std::string_view(path).substr(c.path.size());
      if (!rest.empty() && rest.front() != '/') continue;
      if (!api.instances) {
        respond(Problem(404, "no such resource: " + req.path));
        return true;
      }
      if (rest.empty()) {
        if (m == "GET" && c.list) {
          c.list(req, api, std::move(respond));
        } else if (m == "POST" && c.create) {
          c.create(req, api, std::move(respond));
        } else {
          respond(MethodNotAllowed(c.collection_allow));
        }
        return true;
      }
      std::string id(rest.substr(1));
      if (id.empty() || id.find('/') != std::string::npos) {
        respond(Problem(404, "no such resource: " + req.path));
        return true;
      }
      if (!c.action.empty() && id.ends_with(c.action) && id.size() > c.action.size()) {
        id.resize(id.size() - c.action.size());
        if (m != "POST") {
          respond(MethodNotAllowed("POST"));
        } else {
          c.act(req, id, api, std::move(respond));
        }
        return true;
      }
      if (!c.item_allow) {
        respond(Problem(404, "no such resource: " + req.path));
      } else if (m == "GET") {
        c.get(req, id, api, std::move(respond));
      } else if (m == "DELETE") {
        c.remove(req, id, api, std::move(respond));
      } else {
        respond(MethodNotAllowed(c.item_allow));
      }
      return true;
    }
    return false;
  }
};

}  // namespace

Handler MakeRouter(ApiContext api, OpsContext ops) {
  auto routes = std::make_shared<Routes>(Routes{std::move(api), std::move(ops)});
  return [routes](HttpRequest request, Respond respond) {
    routes->Dispatch(request, std::move(respond));
  };
}

}  // namespace dcm::http
