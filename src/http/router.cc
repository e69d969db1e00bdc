#include "src/http/router.h"

#include <memory>

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

struct Routes {
  ApiContext api;
  OpsContext ops;

  void Dispatch(const HttpRequest& req, Respond respond) const {
    const std::string& m = req.method;
    if (req.path == "/healthz") return respond(Healthz());
    if (req.path == "/readyz") return respond(Readyz(ops));
    if (req.path == "/metrics") return respond(MetricsText(ops));
    if (req.path == "/admin/info") return respond(Info(ops));
    if (req.path == "/admin/projections") return respond(Projections(ops));
    auto path = ApiPath(req.path);
    if (!path) return respond(Problem(404, "no such resource: " + req.path));
    if (*path == "/service-types") {
      if (m != "GET") return respond(MethodNotAllowed("GET"));
      return ListServiceTypes(api, std::move(respond));
    }
    if (*path == "/providers") {
      if (m == "GET") return ListProviders(req, api, std::move(respond));
      if (m == "POST") return RegisterProvider(req, api, std::move(respond));
      return respond(MethodNotAllowed("GET, POST"));
    }
    constexpr std::string_view kProviders = "/providers/";
    if (path->starts_with(kProviders)) {
      std::string id = path->substr(kProviders.size());
      constexpr std::string_view kChangeId = ":changeId";
      if (id.ends_with(kChangeId)) {
        id.resize(id.size() - kChangeId.size());
        if (m != "POST") return respond(MethodNotAllowed("POST"));
        return ChangeProviderId(req, id, api, std::move(respond));
      }
      if (id.empty() || id.find('/') != std::string::npos) {
        return respond(Problem(404, "no such resource: " + req.path));
      }
      if (m == "GET") return GetProvider(req, id, api, std::move(respond));
      if (m == "PUT") return UpdateProvider(req, id, api, std::move(respond));
      if (m == "DELETE") return DeleteProvider(req, id, api, std::move(respond));
      return respond(MethodNotAllowed("GET, PUT, DELETE"));
    }
    respond(Problem(404, "no such resource: " + req.path));
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
