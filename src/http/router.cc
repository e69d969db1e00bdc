#include "src/http/router.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "src/common/log.h"
#include "src/common/reply_summary.h"
#include "src/http/audit_handlers.h"
#include "src/http/consistent_reads.h"
#include "src/http/federation_handlers.h"
#include "src/http/handler_util.h"
#include "src/http/heavy_reads.h"
#include "src/http/instance_handlers.h"
#include "src/http/problem.h"
#include "src/http/watch_handlers.h"

namespace dcm::http {
namespace {

struct Contexts {
  ApiContext api;
  OpsContext ops;
  AccessContext access;
};

using RouteFn = void (*)(const Contexts&, const HttpRequest&, const std::string& id, Respond);
// Whether a request is a heavy read (SPEC §7): it then runs on the HeavyReads pool.
using HeavyFn = bool (*)(const HttpRequest&);

struct Route {
  std::string_view method;
  std::string_view pattern;  // "{id}" stands for one non-empty path segment (or its prefix)
  bool api;                  // under the API base path
  bool instances;            // needs the instance view (without it the path is unknown: 404)
                             // or, for federation routes, the federation context
  Access access;
  RouteFn fn;
  HeavyFn heavy = nullptr;  // null: never heavy
};

bool AsOf(const HttpRequest& r) { return r.Query("as_of") != nullptr; }

// Heavy reads: O(history) folds (as_of), scans that filter (they may read every record to fill
// a page), the audit index, and every projection's digest.
bool Always(const HttpRequest&) { return true; }
bool AsOfOrFiltered(const HttpRequest& r) {
  return AsOf(r) || r.Query("type") != nullptr || r.Query("health_status") != nullptr;
}
bool InstancesFiltered(const HttpRequest& r) {
  return r.Query("provider") != nullptr || r.Query("service_type") != nullptr;
}
bool StatusFiltered(const HttpRequest& r) { return r.Query("status") != nullptr; }

// The route table: SPEC §3 paths, and who may call them (SPEC §6). A pattern with a suffix after
// {id} (":changeId", "/history") comes before the plain "{id}" pattern of the same collection: the
// first pattern matching a path is the one whose methods answer it.
// clang-format off
constexpr Route kRoutes[] = {
    // Operations (SPEC §3.5).
    {"GET", "/healthz", false, false, Access::kOpen,
     [](const Contexts&, const HttpRequest&, const std::string&, Respond r) { r(Healthz()); }},
    {"GET", "/readyz", false, false, Access::kOpen,
     [](const Contexts& c, const HttpRequest&, const std::string&, Respond r) {
       r(Readyz(c.ops));
     }},
    {"GET", "/metrics", false, false, Access::kMetrics,
     [](const Contexts& c, const HttpRequest&, const std::string&, Respond r) {
       r(MetricsText(c.ops));
     }},
    {"GET", "/admin/info", false, false, Access::kAdmin,
     [](const Contexts& c, const HttpRequest&, const std::string&, Respond r) { r(Info(c.ops)); }},
    {"GET", "/admin/projections", false, false, Access::kAdmin,
     [](const Contexts& c, const HttpRequest&, const std::string&, Respond r) {
       r(Projections(c.ops));
     }, Always},
    {"GET", "/admin/heartbeat-providers", false, false, Access::kAdmin,
     [](const Contexts& c, const HttpRequest&, const std::string&, Respond r) {
       r(HeartbeatProviders(c.ops));
     }, Always},
    // DCM's control-plane health (SPEC §7): open, as /healthz and /readyz are (and as DCM's is).
    {"GET", "/health", true, false, Access::kOpen,
     [](const Contexts& c, const HttpRequest&, const std::string&, Respond r) {
       r(ApiHealth(c.ops));
     }},
    // Providers (SPEC §3.1) and their history and past states (SPEC §3.4).
    {"GET", "/service-types", true, false, Access::kRead,
     [](const Contexts& c, const HttpRequest&, const std::string&, Respond r) {
       ListServiceTypes(c.api, std::move(r));
     }},
    {"GET", "/events", true, false, Access::kRead,
     [](const Contexts& c, const HttpRequest& q, const std::string&, Respond r) {
       ListEvents(q, c.api, std::move(r));
     }, Always},
    {"GET", "/providers", true, false, Access::kRead,
     [](const Contexts& c, const HttpRequest& q, const std::string&, Respond r) {
       AsOf(q) ? ListProvidersAsOf(q, c.api, std::move(r)) : ListProviders(q, c.api, std::move(r));
     }, AsOfOrFiltered},
    {"POST", "/providers", true, false, Access::kRegister,
     [](const Contexts& c, const HttpRequest& q, const std::string&, Respond r) {
       RegisterProvider(q, c.api, std::move(r));
     }},
    {"GET", "/providers/{id}/history", true, false, Access::kRead,
     [](const Contexts& c, const HttpRequest& q, const std::string& id, Respond r) {
       EntityHistory(q, "provider", id, c.api, std::move(r));
     }, Always},
    // Liveness by heartbeat (SPEC §8): POST, and PUT (DCM's agent verb).
    {"POST", "/providers/{id}/heartbeat", true, false, Access::kOwnProvider,
     [](const Contexts& c, const HttpRequest& q, const std::string& id, Respond r) {
       ProviderHeartbeat(q, id, c.api, std::move(r));
     }},
    {"PUT", "/providers/{id}/heartbeat", true, false, Access::kOwnProvider,
     [](const Contexts& c, const HttpRequest& q, const std::string& id, Respond r) {
       ProviderHeartbeat(q, id, c.api, std::move(r));
     }},
    {"POST", "/providers/{id}:changeId", true, false, Access::kOwnProvider,
     [](const Contexts& c, const HttpRequest& q, const std::string& id, Respond r) {
       ChangeProviderId(q, id, c.api, std::move(r));
     }},
    {"GET", "/providers/{id}", true, false, Access::kRead,
     [](const Contexts& c, const HttpRequest& q, const std::string& id, Respond r) {
       AsOf(q) ? GetProviderAsOf(q, id, c.api, std::move(r))
               : GetProvider(q, id, c.api, std::move(r));
     }, AsOf},
    {"PUT", "/providers/{id}", true, false, Access::kOwnProvider,
     [](const Contexts& c, const HttpRequest& q, const std::string& id, Respond r) {
       UpdateProvider(q, id, c.api, std::move(r));
     }},
    {"DELETE", "/providers/{id}", true, false, Access::kDeleteProvider,
     [](const Contexts& c, const HttpRequest& q, const std::string& id, Respond r) {
       DeleteProvider(q, id, c.api, std::move(r));
     }},
    // Instances (SPEC §3.3).
    {"GET", "/catalog-item-instances/{id}/history", true, false, Access::kRead,
     [](const Contexts& c, const HttpRequest& q, const std::string& id, Respond r) {
       EntityHistory(q, "catalog item instance", id, c.api, std::move(r));
     }, Always},
    {"GET", "/catalog-item-instances", true, true, Access::kRead,
     [](const Contexts& c, const HttpRequest& q, const std::string&, Respond r) {
       ListCatalogItemInstances(q, c.api, std::move(r));
     }},
    {"POST", "/catalog-item-instances", true, true, Access::kInstances,
     [](const Contexts& c, const HttpRequest& q, const std::string&, Respond r) {
       CreateCatalogItemInstance(q, c.api, std::move(r));
     }},
    {"POST", "/catalog-item-instances/{id}:rehydrate", true, true, Access::kInstances,
     [](const Contexts& c, const HttpRequest& q, const std::string& id, Respond r) {
       RehydrateCatalogItemInstance(q, id, c.api, std::move(r));
     }},
    {"GET", "/catalog-item-instances/{id}", true, true, Access::kRead,
     [](const Contexts& c, const HttpRequest& q, const std::string& id, Respond r) {
       AsOf(q) ? GetCatalogItemInstanceAsOf(q, id, c.api, std::move(r))
               : GetCatalogItemInstance(q, id, c.api, std::move(r));
     }, AsOf},
    {"DELETE", "/catalog-item-instances/{id}", true, true, Access::kInstances,
     [](const Contexts& c, const HttpRequest& q, const std::string& id, Respond r) {
       DeleteCatalogItemInstance(q, id, c.api, std::move(r));
     }},
    {"GET", "/resources", true, true, Access::kRead,
     [](const Contexts& c, const HttpRequest& q, const std::string&, Respond r) {
       ListResources(q, c.api, std::move(r));
     }},
    {"POST", "/resources", true, true, Access::kInstances,
     [](const Contexts& c, const HttpRequest& q, const std::string&, Respond r) {
       CreateResource(q, c.api, std::move(r));
     }},
    {"POST", "/resources/{id}:rehydrate", true, true, Access::kInstances,
     [](const Contexts& c, const HttpRequest& q, const std::string& id, Respond r) {
       RehydrateResource(q, id, c.api, std::move(r));
     }},
    {"GET", "/resources/{id}", true, true, Access::kRead,
     [](const Contexts& c, const HttpRequest& q, const std::string& id, Respond r) {
       GetResource(q, id, c.api, std::move(r));
     }},
    {"DELETE", "/resources/{id}", true, true, Access::kInstances,
     [](const Contexts& c, const HttpRequest& q, const std::string& id, Respond r) {
       DeleteResource(q, id, c.api, std::move(r));
     }},
    {"GET", "/service-type-instances", true, true, Access::kRead,
     [](const Contexts& c, const HttpRequest& q, const std::string&, Respond r) {
       ListServiceTypeInstances(q, c.api, std::move(r));
     }, InstancesFiltered},
    {"POST", "/service-type-instances", true, true, Access::kAdmin,
     [](const Contexts& c, const HttpRequest& q, const std::string&, Respond r) {
       CreateServiceTypeInstance(q, c.api, std::move(r));
     }},
    {"GET", "/service-type-instances/{id}", true, true, Access::kRead,
     [](const Contexts& c, const HttpRequest& q, const std::string& id, Respond r) {
       GetServiceTypeInstance(q, id, c.api, std::move(r));
     }},
    {"DELETE", "/service-type-instances/{id}", true, true, Access::kAdmin,
     [](const Contexts& c, const HttpRequest& q, const std::string& id, Respond r) {
       DeleteServiceTypeInstance(q, id, c.api, std::move(r));
     }},
    {"GET", "/cleanup-queue", true, true, Access::kRead,
     [](const Contexts& c, const HttpRequest& q, const std::string&, Respond r) {
       ListCleanupQueue(q, c.api, std::move(r));
     }, StatusFiltered},
    {"POST", "/cleanup-queue/{id}:retry", true, true, Access::kAdmin,
     [](const Contexts& c, const HttpRequest& q, const std::string& id, Respond r) {
       RetryCleanup(q, id, c.api, std::move(r));
     }},
    // Federation (SPEC §10): the configured peers (API), and the peer API (dcm-peer only).
    {"GET", "/peers", true, true, Access::kRead,
     [](const Contexts& c, const HttpRequest&, const std::string&, Respond r) {
       ListPeers(*c.api.federation, std::move(r));
     }},
    {"GET", "/federation/v1alpha1/flavors", false, true, Access::kPeer,
     [](const Contexts& c, const HttpRequest& q, const std::string&, Respond r) {
       ListFlavors(q, *c.api.federation, std::move(r));
     }, Always},
    {"GET", "/federation/v1alpha1/health", false, true, Access::kOpen,
     [](const Contexts& c, const HttpRequest&, const std::string&, Respond r) {
       FederationHealth(*c.api.federation, std::move(r));
     }},
    {"POST", "/federation/v1alpha1/reservations", false, true, Access::kPeer,
     [](const Contexts& c, const HttpRequest& q, const std::string&, Respond r) {
       ReserveFlavor(q, *c.api.federation, std::move(r));
     }},
    {"POST", "/federation/v1alpha1/reservations/{id}:confirm", false, true, Access::kPeer,
     [](const Contexts& c, const HttpRequest& q, const std::string& id, Respond r) {
       ConfirmReservation(q, id, *c.api.federation, std::move(r));
     }},
    {"DELETE", "/federation/v1alpha1/reservations/{id}", false, true, Access::kPeer,
     [](const Contexts& c, const HttpRequest& q, const std::string& id, Respond r) {
       ReleaseReservation(q, id, *c.api.federation, std::move(r));
     }},
    {"GET", "/federation/v1alpha1/contracts", false, true, Access::kPeer,
     [](const Contexts& c, const HttpRequest& q, const std::string&, Respond r) {
       ListContracts(q, *c.api.federation, std::move(r));
     }},
    {"POST", "/federation/v1alpha1/contracts/{id}:renew", false, true, Access::kPeer,
     [](const Contexts& c, const HttpRequest& q, const std::string& id, Respond r) {
       RenewContract(q, id, *c.api.federation, std::move(r));
     }},
    {"DELETE", "/federation/v1alpha1/contracts/{id}", false, true, Access::kPeer,
     [](const Contexts& c, const HttpRequest& q, const std::string& id, Respond r) {
       TerminateContract(q, id, *c.api.federation, std::move(r));
     }},
};
// clang-format on

// Strips the API base (or its alias) from `path`; nullopt if the path is not under it.
std::optional<std::string_view> ApiPath(std::string_view path) {
  for (std::string_view base : {kApiBase, kApiAlias}) {
    if (path.starts_with(base) && (path.size() == base.size() || path[base.size()] == '/')) {
      return path.substr(base.size());
    }
  }
  return std::nullopt;
}

// Whether `path` matches `pattern`; `*id` gets what "{id}" stood for.
bool Matches(std::string_view pattern, std::string_view path, std::string* id) {
  const size_t hole = pattern.find("{id}");
  if (hole == std::string_view::npos) return path == pattern;
  const std::string_view prefix = pattern.substr(0, hole);
  const std::string_view suffix = pattern.substr(hole + 4);
  if (path.size() <= prefix.size() + suffix.size() || !path.starts_with(prefix) ||
      !path.ends_with(suffix)) {
    return false;
  }
  const std::string_view middle =
      path.substr(prefix.size(), path.size() - prefix.size() - suffix.size());
  if (middle.find('/') != std::string_view::npos) return false;
  id->assign(middle);
  return true;
}

// Caller-controlled text in a logfmt value: no control characters, quotes or backslashes.
std::string LogSafe(std::string_view text) {
  std::string out = SanitizeText(text, 200);
  for (char& c : out) {
    if (c == '"' || c == '\\') c = '\'';
  }
  return out;
}

HttpResponse MethodNotAllowed(const std::string& allow) {
  HttpResponse r = Problem(405, "allowed methods: " + allow);
  r.headers.emplace_back("Allow", allow);
  return r;
}

uint32_t RolesFor(Access access, bool force) {
  switch (access) {
    case Access::kOpen:
      return ~0u;
    case Access::kMetrics:
    case Access::kRead:
      return kRoleAnyApi;
    case Access::kRegister:
    case Access::kOwnProvider:
      return kRoleProvider | kRoleAdmin;
    case Access::kDeleteProvider:
      return force ? kRoleAdmin : kRoleProvider | kRoleAdmin;
    case Access::kInstances:
      return kRoleUser | kRoleAdmin;
    case Access::kAdmin:
      return kRoleAdmin;
    case Access::kPeer:
      return kRolePeer;
  }
  return kRoleAdmin;
}

std::string DescribeRoles(uint32_t roles) {
  std::vector<std::string_view> names;
  for (auto [bit, name] :
       {std::pair{kRoleReader, kRoleReaderName}, std::pair{kRoleProvider, kRoleProviderName},
        std::pair{kRoleUser, kRoleUserName}, std::pair{kRoleAdmin, kRoleAdminName},
        std::pair{kRolePeer, kRolePeerName}}) {
    if ((roles & bit) != 0) names.push_back(name);
  }
  if (names.size() == 1) return "the role " + std::string(names.front());
  std::string out = "one of ";
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + std::string(names[i]);
  return out;
}

class Router {
 public:
  explicit Router(Contexts c) : c_(std::move(c)) {}

  void Dispatch(HttpRequest req, Respond respond) const {
    std::string id;
    const Route* route = nullptr;
    const std::optional<std::string_view> api_path = ApiPath(req.path);
    std::string_view matched_pattern;
    for (const Route& r : kRoutes) {
      if (r.api != api_path.has_value() || !Serves(r)) continue;
      if (!matched_pattern.empty() && r.pattern != matched_pattern) continue;
      if (!Matches(r.pattern, r.api ? *api_path : std::string_view(req.path), &id)) continue;
      matched_pattern = r.pattern;
      const bool head = req.method == "HEAD" && !r.api && r.method == "GET";
      if (!route && (req.method == r.method || head)) route = &r;
    }
    const Access access = route ? route->access : Access::kRead;
    if (access != Access::kOpen && !(access == Access::kMetrics && c_.access.metrics_public)) {
      auto principal = Authenticate(req);
      if (!principal) return respond(std::move(principal.error()));
      req.principal = std::move(*principal);
    }
    if (matched_pattern.empty()) return respond(Problem(404, "no such resource: " + req.path));
    if (!route) return respond(MethodNotAllowed(AllowedMethods(matched_pattern, api_path)));
    if (auto denied = Authorize(*route, req, id)) return respond(std::move(*denied));
    Serve(*route, std::move(req), id, std::move(respond));
  }

 private:
  // Runs the route's handler; API calls through the consistent-reads edge (SPEC §7).
  void Serve(const Route& route, HttpRequest req, std::string id, Respond respond) const {
    if (ServeWatch(route, req, respond)) return;
    const ConsistentReads* consistency = c_.api.consistency;
    if (!consistency || !route.api) {
      return Run(route, std::move(req), std::move(id), std::move(respond));
    }
    if (route.method != "GET") {
      return Run(route, std::move(req), std::move(id), consistency->Write(std::move(respond)));
    }
    consistency->Read(ReadServedByRoute(route.pattern, AsOf(req)), std::move(req),
                      std::move(respond),
                      [this, &route, id = std::move(id)](const HttpRequest& q, Respond r) {
                        Run(route, q, id, std::move(r));
                      });
  }

  // A watch (SPEC §9) is a stream, not a read: no read barrier and no heavy-read pool. False
  // when `req` is not a watch of a watchable list.
  bool ServeWatch(const Route& route, const HttpRequest& req, Respond& respond) const {
    if (route.method != "GET" || !WantsWatch(req)) return false;
    static constexpr std::pair<std::string_view, WatchKind> kLists[] = {
        {"/providers", WatchKind::kProviders},
        {"/catalog-item-instances", WatchKind::kCatalogItemInstances},
        {"/cleanup-queue", WatchKind::kCleanupQueue}};
    if (AsOf(req)) {
      respond(Problem(400, "watch and as_of cannot be combined", {{"watch", "not with as_of"}}));
      return true;
    }
    if (route.pattern == "/events") {
      WatchEventsHandler(req, c_.api, std::move(respond));
      return true;
    }
    for (const auto& [pattern, kind] : kLists) {
      if (route.pattern == pattern) {
        WatchListHandler(kind, req, c_.api, std::move(respond));
        return true;
      }
    }
    return false;
  }

  // The handler itself: inline, or on the heavy-read pool for a heavy read (SPEC §7).
  void Run(const Route& route, HttpRequest req, std::string id, Respond respond) const {
    if (route.heavy != nullptr && c_.api.heavy_reads != nullptr && route.heavy(req)) {
      return RunHeavy(route, std::move(req), std::move(id), std::move(respond));
    }
    route.fn(c_, req, id, std::move(respond));
  }

  // Runs `route` on the heavy-read pool with the contexts (copied: the task may outlive this
  // call) carrying the read's deadline; the pool answers 503 itself when it is full.
  void RunHeavy(const Route& route, HttpRequest req, std::string id, Respond respond) const {
    HeavyReads* pool = c_.api.heavy_reads;
    pool->Submit(
        [c = c_, fn = route.fn, req = std::move(req), id = std::move(id),
         respond](Deadline deadline) mutable {
          c.api.deadline = deadline;
          fn(c, req, id, std::move(respond));
        },
        respond);
  }

  // Whether this router serves `r` at all (instance routes need the instance view, federation
  // routes the federation context).
  bool Serves(const Route& r) const {
    if (!r.instances) return true;
    return IsFederationRoute(r) ? c_.api.federation != nullptr : c_.api.instances != nullptr;
  }
  static bool IsFederationRoute(const Route& r) {
    return r.pattern == "/peers" || r.pattern.starts_with(kFederationBase);
  }

  // The Allow header of a 405: the methods of `pattern` (only built when answering one).
  std::string AllowedMethods(std::string_view pattern,
                             const std::optional<std::string_view>& api_path) const {
    std::string allow;
    for (const Route& r : kRoutes) {
      if (Serves(r) && r.pattern == pattern && r.api == api_path.has_value()) {
        allow += (allow.empty() ? "" : ", ") + std::string(r.method);
      }
    }
    return allow;
  }

  // The caller, or the 401 to answer.
  tl::expected<Principal, HttpResponse> Authenticate(const HttpRequest& req) const {
    if (!c_.access.authenticator) return AnonymousPrincipal();
    const std::string* header = req.Header("authorization");
    const std::string_view token =
        header ? auth::BearerToken(*header).value_or(std::string_view()) : std::string_view();
    auto principal = c_.access.authenticator->Authenticate(token, req.peer_subject);
    if (principal) return std::move(*principal);
    const auth::AuthFailure& failure = principal.error();
    const bool token_given = !token.empty();
    Count("401", token_given ? auth::AuthFailureKindName(failure.kind) : "no_credentials");
    if (LogAllowed()) {  // anyone can send 401s: the metric counts them all, the log a few
      Logger("auth")->info("msg=\"unauthenticated\" method={} target=\"{}\" reason=\"{}\"",
                           LogSafe(req.method), LogSafe(req.target), failure.reason);
    }
    HttpResponse r = Problem(401, failure.reason);
    r.headers.emplace_back("WWW-Authenticate",
                           auth::BearerChallenge(token_given ? &failure : nullptr));
    return tl::unexpected(std::move(r));
  }

  // A 403 when the caller may not make this call, else nullopt (SPEC §6).
  std::optional<HttpResponse> Authorize(const Route& route, const HttpRequest& req,
                                        const std::string& id) const {
    const Principal& who = req.principal;
    if (route.access == Access::kOpen ||
        (route.access == Access::kMetrics && c_.access.metrics_public)) {
      return std::nullopt;
    }
    const uint32_t needed = RolesFor(route.access, ForceRequested(req));
    if ((who.roles & needed) == 0) {
      return Forbidden(req, "role", "this call needs " + DescribeRoles(needed));
    }
    const bool owner_checked =
        route.access == Access::kOwnProvider || route.access == Access::kDeleteProvider;
    if (owner_checked && who.OwnerScoped() && c_.api.registry) {
      // The registrar decides again (a Kafka request, or a provider registered just now); this
      // spares an event for the common case. An unknown id goes on to its 404.
      auto provider = c_.api.registry->Get(id);
      if (provider && *provider && (*provider)->owner != who.subject) {
        return Forbidden(req, "owner",
                         "provider '" + id + "' is not owned by '" + who.subject + "'");
      }
    }
    return std::nullopt;
  }

  HttpResponse Forbidden(const HttpRequest& req, const char* reason,
                         const std::string& detail) const {
    Count("403", reason);
    Logger("auth")->info("msg=\"forbidden\" subject=\"{}\" method={} target=\"{}\" reason=\"{}\"",
                         LogSafe(req.principal.subject), LogSafe(req.method), LogSafe(req.target),
                         LogSafe(detail));
    return Problem(403, detail);
  }

  void Count(const char* status, const char* reason) const {
    if (!c_.access.metrics) return;
    c_.access.metrics
        ->GetCounter("dcm_http_auth_denied_total",
                     "Requests refused at the trust boundary (401, 403), by reason",
                     std::string("status=\"") + status + "\",reason=\"" + reason + "\"")
        .Inc();
  }

  // At most kLogLinesPerSecond 401 log lines a second (races between threads only blur it).
  bool LogAllowed() const {
    constexpr int kLogLinesPerSecond = 10;
    const int64_t second = std::chrono::duration_cast<std::chrono::seconds>(
                               std::chrono::steady_clock::now().time_since_epoch())
                               .count();
    if (log_second_.exchange(second) != second) log_lines_ = 0;
    return log_lines_.fetch_add(1) < kLogLinesPerSecond;
  }

  Contexts c_;
  mutable std::atomic<int64_t> log_second_{0};
  mutable std::atomic<int> log_lines_{0};
};

}  // namespace

Principal AnonymousPrincipal() {
  return Principal{Principal::Via::kDisabled, std::string(kAnonymousActor),
                   kRoleAnyApi | kRolePeer};
}

std::vector<RouteInfo> RouteTable() {
  std::vector<RouteInfo> out;
  for (const Route& r : kRoutes) {
    out.push_back({std::string(r.method), std::string(r.pattern), r.api, r.access});
  }
  return out;
}

Handler MakeRouter(ApiContext api, OpsContext ops, AccessContext access) {
  auto router =
      std::make_shared<Router>(Contexts{std::move(api), std::move(ops), std::move(access)});
  return [router](HttpRequest request, Respond respond) {
    router->Dispatch(std::move(request), std::move(respond));
  };
}

}  // namespace dcm::http
