#include "src/http/router.h"

#include <map>
#include <memory>
#include <optional>

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
