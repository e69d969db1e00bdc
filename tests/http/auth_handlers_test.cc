// The trust boundary at the HTTP edge (SPEC §6), hermetic: a fake Authenticator maps tokens to
// principals, and the fixture's FakeCommandBus runs the real registrar decision path, so
// ownership is checked both at the edge and by the decider. Every route's required role is
// stated in kExpectedAccess below, written out by hand from SPEC §6 (not derived from the
// router), and checked against the router for each role.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "projections/instance_projection.h"
#include "src/http/auth.h"
#include "src/http/federation_handlers.h"
#include "tests/http/handlers_fixture.h"

namespace dcm::http {
namespace {

// Tokens are the subject's name; "expired" and "tampered" fail as a verifier would.
class FakeAuthenticator final : public auth::Authenticator {
 public:
  void Add(const std::string& token, uint32_t roles) {
    principals_[token] = Principal{Principal::Via::kToken, token, roles};
  }
  void AddCertificate(const std::string& subject, uint32_t roles) {
    certificates_[subject] = Principal{Principal::Via::kCertificate, subject, roles};
  }

  auth::AuthResult Authenticate(std::string_view token, std::string_view peer) const override {
    if (token.empty()) {
      auto cert = certificates_.find(std::string(peer));
      if (cert != certificates_.end()) return cert->second;
      return auth::Fail(auth::AuthFailureKind::kMalformed, "no token");
    }
    auto it = principals_.find(std::string(token));
    if (it == principals_.end())
      return auth::Fail(auth::AuthFailureKind::kExpired, "token expired");
    return it->second;
  }

 private:
  std::map<std::string, Principal> principals_;
  std::map<std::string, Principal> certificates_;
};

class AuthorizationTest : public HandlersTest {
 protected:
  void SetUp() override {
    HandlersTest::SetUp();
    auth_.Add("reader", kRoleReader);
    auth_.Add("sp-a", kRoleProvider);
    auth_.Add("sp-b", kRoleProvider);
    auth_.Add("alice", kRoleUser);
    auth_.Add("root", kRoleAdmin);
    auth_.Add("nobody", kRoleNone);
    auth_.AddCertificate("spiffe://dcm.test/ops", kRoleAdmin);
    auth_.Add("enclave-a", kRolePeer);
    auth_.AddCertificate("dcm-enclave://enclave-a", kRolePeer);
    instance_view_ = std::make_unique<InstanceView>(store_.get());
    federation_.registry = view_.get();
    federation_.health = health_view_.get();
    federation_.instances = instance_view_.get();
    federation_.clock = &clock_;
    federation_.flavors.enclave_id = "enclave-b";
    Rebuild(false);
  }

  void Rebuild(bool metrics_public) {
    ApiContext api = Api();
    api.instances = instance_view_.get();  // no instance bus: allowed instance writes answer 503
    api.federation = &federation_;
    router_ = MakeRouter(api, ops_, AccessContext{&auth_, metrics_public, &metrics_});
  }

  HttpResponse As(const std::string& token, const std::string& method, const std::string& target,
                  const std::string& body = "{}") {
    std::map<std::string, std::string> headers = {{"content-type", "application/json"}};
    if (!token.empty()) headers["authorization"] = "Bearer " + token;
    return Call(method, target, body, headers);
  }

  std::string RegisterAs(const std::string& token, const std::string& name) {
    auto r = As(token, "POST", "/api/v1alpha1/providers", Spec(name));
    EXPECT_EQ(r.status, 201) << r.body;
    return Parse(r).Str("id");
  }

  uint64_t Denied(const std::string& labels) {
    return metrics_.GetCounter("dcm_http_auth_denied_total", "", labels).Value();
  }

  FakeAuthenticator auth_;
  FederationContext federation_;
  std::unique_ptr<InstanceView> instance_view_;
};

// ---- authentication (401) ----

TEST_F(AuthorizationTest, NoTokenGets401WithABearerChallengeAndSubmitsNothing) {
  for (const auto& [method, target] : std::vector<std::pair<std::string, std::string>>{
           {"GET", "/api/v1alpha1/providers"},
           {"POST", "/api/v1alpha1/providers"},
           {"DELETE", "/api/v1alpha1/providers/x?force=true"},
           {"GET", "/api/v1alpha1/no-such-thing"},
           {"GET", "/admin/info"}}) {
    auto r = As("", method, target, Spec("sp-a"));
    ASSERT_EQ(r.status, 401) << method << " " << target << " " << r.body;
    EXPECT_EQ(r.content_type, "application/problem+json");
    const std::string* challenge = FindHeader(r, "WWW-Authenticate");
    ASSERT_NE(challenge, nullptr);
    EXPECT_EQ(*challenge, "Bearer");
  }
  EXPECT_TRUE(bus_->submitted().empty());
  EXPECT_TRUE(bus_->recorded().empty());
  EXPECT_EQ(Denied("status=\"401\",reason=\"no_credentials\""), 5u);
}

TEST_F(AuthorizationTest, ARejectedTokenGets401NamingWhyAndChangesNothing) {
  auto r = As("forged", "POST", "/api/v1alpha1/providers", Spec("sp-a"));
  ASSERT_EQ(r.status, 401) << r.body;
  EXPECT_EQ(Parse(r).Str("detail"), "token expired");
  const std::string* challenge = FindHeader(r, "WWW-Authenticate");
  ASSERT_NE(challenge, nullptr);
  EXPECT_EQ(*challenge, "Bearer error=\"invalid_token\", error_description=\"token expired\"");
  EXPECT_EQ(Denied("status=\"401\",reason=\"expired\""), 1u);
  EXPECT_TRUE(bus_->submitted().empty());
  EXPECT_TRUE(bus_->recorded().empty());
  EXPECT_EQ(
      Parse(As("root", "GET", "/api/v1alpha1/providers")).root["providers"].get_array().size(), 0u);
}

TEST_F(AuthorizationTest, TheBearerSchemeIsCaseInsensitiveAndOtherSchemesAreNoToken) {
  EXPECT_EQ(
      Call("GET", "/api/v1alpha1/providers", "", {{"authorization", "Basic cmVhZGVy"}}).status,
      401);
  auto r = Call("GET", "/api/v1alpha1/providers", "", {{"authorization", "bEaReR reader"}});
  EXPECT_EQ(r.status, 200) << r.body;
}

TEST_F(AuthorizationTest, HealthAndReadinessNeedNoCredentials) {
  EXPECT_EQ(As("", "GET", "/healthz").status, 200);
  EXPECT_EQ(As("", "GET", "/readyz").status, 200);
  EXPECT_EQ(As("", "GET", "/api/v1alpha1/health").status, 200);
}

TEST_F(AuthorizationTest, MetricsNeedACallerUnlessPublic) {
  EXPECT_EQ(As("", "GET", "/metrics").status, 401);
  EXPECT_EQ(As("reader", "GET", "/metrics").status, 200);
  Rebuild(/*metrics_public=*/true);
  EXPECT_EQ(As("", "GET", "/metrics").status, 200);
}

TEST_F(AuthorizationTest, AVerifiedClientCertificateAuthenticatesItsSubject) {
  HttpRequest req;
  req.method = "DELETE";
  req.target = req.path = "/api/v1alpha1/providers/" + RegisterAs("sp-a", "sp-a");
  req.query.emplace("force", "true");
  req.peer_subject = "spiffe://dcm.test/ops";
  std::optional<HttpResponse> got;
  router_(req, [&](HttpResponse r) { got = std::move(r); });
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, 204) << got->body;
  EXPECT_EQ(bus_->submitted().back().actor, "spiffe://dcm.test/ops");
}

// ---- authorization (403): the role each route needs (SPEC §6) ----

constexpr uint32_t kAll = kRoleReader | kRoleProvider | kRoleUser | kRoleAdmin;

struct ExpectedAccess {
  const char* method;
  const char* target;  // a concrete path for the route
  uint32_t allowed;    // roles that are not refused with 403
};

const ExpectedAccess kExpectedAccess[] = {
    {"GET", "/metrics", kAll},
    {"GET", "/admin/info", kRoleAdmin},
    {"GET", "/admin/projections", kRoleAdmin},
    {"GET", "/admin/heartbeat-providers", kRoleAdmin},
    {"GET", "/api/v1alpha1/service-types", kAll},
    {"GET", "/api/v1alpha1/events", kAll},
    {"GET", "/api/v1alpha1/providers", kAll},
    {"GET", "/api/v1alpha1/providers?as_of=2026-01-01T00:00:00Z", kAll},
    {"POST", "/api/v1alpha1/providers", kRoleProvider | kRoleAdmin},
    {"GET", "/api/v1alpha1/providers/p1", kAll},
    {"GET", "/api/v1alpha1/providers/p1/history", kAll},
    {"PUT", "/api/v1alpha1/providers/p1", kRoleProvider | kRoleAdmin},
    {"POST", "/api/v1alpha1/providers/p1:changeId", kRoleProvider | kRoleAdmin},
    {"POST", "/api/v1alpha1/providers/p1/heartbeat", kRoleProvider | kRoleAdmin},
    {"PUT", "/api/v1alpha1/providers/p1/heartbeat", kRoleProvider | kRoleAdmin},
    {"DELETE", "/api/v1alpha1/providers/p1", kRoleProvider | kRoleAdmin},
    {"DELETE", "/api/v1alpha1/providers/p1?force=true", kRoleAdmin},
    {"GET", "/api/v1alpha1/catalog-item-instances", kAll},
    {"POST", "/api/v1alpha1/catalog-item-instances", kRoleUser | kRoleAdmin},
    {"GET", "/api/v1alpha1/catalog-item-instances/c1", kAll},
    {"GET", "/api/v1alpha1/catalog-item-instances/c1/history", kAll},
    {"DELETE", "/api/v1alpha1/catalog-item-instances/c1", kRoleUser | kRoleAdmin},
    {"POST", "/api/v1alpha1/catalog-item-instances/c1:rehydrate", kRoleUser | kRoleAdmin},
    {"GET", "/api/v1alpha1/resources", kAll},
    {"POST", "/api/v1alpha1/resources", kRoleUser | kRoleAdmin},
    {"GET", "/api/v1alpha1/resources/r1", kAll},
    {"DELETE", "/api/v1alpha1/resources/r1", kRoleUser | kRoleAdmin},
    {"POST", "/api/v1alpha1/resources/r1:rehydrate", kRoleUser | kRoleAdmin},
    {"GET", "/api/v1alpha1/service-type-instances", kAll},
    {"POST", "/api/v1alpha1/service-type-instances", kRoleAdmin},
    {"GET", "/api/v1alpha1/service-type-instances/s1", kAll},
    {"DELETE", "/api/v1alpha1/service-type-instances/s1", kRoleAdmin},
    {"GET", "/api/v1alpha1/cleanup-queue", kAll},
    {"POST", "/api/v1alpha1/cleanup-queue/s1:retry", kRoleAdmin},
    {"GET", "/api/v1alpha1/peers", kAll},
    {"GET", "/federation/v1alpha1/flavors", kRolePeer},
    {"POST", "/federation/v1alpha1/reservations", kRolePeer},
    {"POST", "/federation/v1alpha1/reservations/s1:confirm", kRolePeer},
    {"DELETE", "/federation/v1alpha1/reservations/s1", kRolePeer},
    {"GET", "/federation/v1alpha1/contracts", kRolePeer},
    {"POST", "/federation/v1alpha1/contracts/s1:renew", kRolePeer},
    {"DELETE", "/federation/v1alpha1/contracts/s1", kRolePeer},
};

TEST_F(AuthorizationTest, EveryRouteGrantsExactlyTheRolesOfSpec6) {
  const std::map<uint32_t, std::string> tokens = {{kRoleReader, "reader"},
                                                  {kRoleProvider, "sp-a"},
                                                  {kRoleUser, "alice"},
                                                  {kRoleAdmin, "root"},
                                                  {kRolePeer, "enclave-a"}};
  for (const auto& e : kExpectedAccess) {
    for (const auto& [role, token] : tokens) {
      auto r = As(token, e.method, e.target, "{}");
      const bool allowed = (e.allowed & role) != 0;
      EXPECT_EQ(r.status != 403, allowed)
          << token << " " << e.method << " " << e.target << " -> " << r.status << " " << r.body;
      EXPECT_NE(r.status, 401) << e.target;
    }
    EXPECT_EQ(As("nobody", e.method, e.target).status, 403) << "no role: " << e.target;
  }
  for (const CloudEvent& e : bus_->submitted()) EXPECT_NE(e.actor, "reader") << e.type;
}

TEST_F(AuthorizationTest, TheTableCoversEveryRoute) {
  std::set<std::pair<std::string, std::string>> expected;
  for (const auto& e : kExpectedAccess) {
    std::string path = e.target;
    path = path.substr(0, path.find('?'));
    if (path.starts_with(kApiBase)) path = path.substr(std::string(kApiBase).size());
    expected.emplace(e.method, path);
  }
  for (const RouteInfo& route : RouteTable()) {
    if (route.access == Access::kOpen) continue;
    std::string path = route.pattern;
    const auto hole = path.find("{id}");
    if (hole != std::string::npos) {
      const std::string id = path.starts_with("/providers")                ? "p1"
                             : path.starts_with("/catalog-item-instances") ? "c1"
                             : path.starts_with("/resources")              ? "r1"
                                                                           : "s1";
      path.replace(hole, 4, id);
    }
    EXPECT_TRUE(expected.count({route.method, path})) << route.method << " " << route.pattern;
  }
}

// SPEC §10: a peer enclave's certificate reaches the peer API and nothing of the API.
TEST_F(AuthorizationTest, APeerCertificateCallsTheFederationApiOnly) {
  auto call = [&](const std::string& target) {
    HttpRequest req;
    req.method = "GET";
    req.target = target;
    req.path = target;
    req.peer_subject = "dcm-enclave://enclave-a";
    std::optional<HttpResponse> got;
    router_(req, [&](HttpResponse r) { got = std::move(r); });
    return *got;
  };
  EXPECT_EQ(call("/federation/v1alpha1/flavors").status, 200);
  auto providers = call("/api/v1alpha1/providers");
  EXPECT_EQ(providers.status, 403) << providers.body;
  EXPECT_EQ(Parse(providers).Str("detail"),
            "this call needs one of dcm-reader, dcm-provider, dcm-user, dcm-admin");
  EXPECT_EQ(As("root", "GET", "/federation/v1alpha1/flavors").status, 403) << "not even admins";
  EXPECT_EQ(Call("GET", "/federation/v1alpha1/health").status, 200) << "open, like /readyz";
  EXPECT_EQ(Call("GET", "/federation/v1alpha1/flavors").status, 401);
}

TEST_F(AuthorizationTest, A403NamesTheRolesNeededAndSubmitsNothing) {
  auto r = As("reader", "POST", "/api/v1alpha1/providers", Spec("sp-a"));
  ASSERT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(r.content_type, "application/problem+json");
  EXPECT_EQ(Parse(r).Str("detail"), "this call needs one of dcm-provider, dcm-admin");
  auto force = As("sp-a", "DELETE", "/api/v1alpha1/providers/p1?force=true");
  EXPECT_EQ(Parse(force).Str("detail"), "this call needs the role dcm-admin");
  EXPECT_TRUE(bus_->submitted().empty());
  EXPECT_TRUE(bus_->recorded().empty());
  EXPECT_EQ(Denied("status=\"403\",reason=\"role\""), 2u);
}

// ---- provider ownership ----

TEST_F(AuthorizationTest, OnlyTheOwningProviderOrAnAdminChangesAProvider) {
  const std::string id = RegisterAs("sp-a", "sp-a");
  const std::string item = "/api/v1alpha1/providers/" + id;
  const size_t submitted = bus_->submitted().size();
  EXPECT_EQ(As("sp-b", "PUT", item, Spec("sp-a")).status, 403);
  EXPECT_EQ(As("sp-b", "POST", item + ":changeId", R"({"new_id":"stolen"})").status, 403);
  EXPECT_EQ(As("sp-b", "DELETE", item).status, 403);
  EXPECT_EQ(bus_->submitted().size(), submitted) << "a 403 at the edge produces no request";
  EXPECT_EQ(Denied("status=\"403\",reason=\"owner\""), 3u);

  auto own = As("sp-a", "PUT", item, Spec("sp-a"));
  EXPECT_EQ(own.status, 200) << own.body;
  EXPECT_EQ(Parse(own).Str("owner"), "sp-a");
  auto admin = As("root", "POST", item + ":changeId", R"({"new_id":"sp-a-2"})");
  EXPECT_EQ(admin.status, 200) << admin.body;
  EXPECT_EQ(Parse(admin).Str("owner"), "sp-a") << "an admin's change keeps the owner";
  EXPECT_EQ(As("sp-a", "DELETE", "/api/v1alpha1/providers/sp-a-2").status, 204);
}

TEST_F(AuthorizationTest, OnlyTheOwningProviderOrAnAdminSendsItsHeartbeats) {
  auto registered = As(
      "sp-a", "POST", "/api/v1alpha1/providers",
      R"({"name":"edge-a","endpoint":"http://edge-a/","service_type":"vm","liveness":"heartbeat"})");
  ASSERT_EQ(registered.status, 201) << registered.body;
  const std::string beat = "/api/v1alpha1/providers/" + Parse(registered).Str("id") + "/heartbeat";
  EXPECT_EQ(As("sp-b", "POST", beat, "").status, 403);
  EXPECT_EQ(As("sp-b", "PUT", beat, "").status, 403);
  EXPECT_EQ(As("reader", "POST", beat, "").status, 403);
  EXPECT_EQ(Denied("status=\"403\",reason=\"owner\""), 2u);
  // Allowed through the edge; this fixture has no prober, so the handler answers 503.
  EXPECT_EQ(As("sp-a", "POST", beat, "").status, 503);
  EXPECT_EQ(As("root", "PUT", beat, "").status, 503);
}

TEST_F(AuthorizationTest, TheRegistrarRefusesAReRegistrationOfAnotherOwnersName) {
  RegisterAs("sp-a", "sp-a");
  auto r = As("sp-b", "POST", "/api/v1alpha1/providers", Spec("sp-a"));
  ASSERT_EQ(r.status, 403) << r.body;
  EXPECT_NE(Parse(r).Str("detail").find("is not owned by 'sp-b'"), std::string::npos);
  const CloudEvent& request = bus_->submitted().back();
  EXPECT_EQ(request.actor, "sp-b");
  EXPECT_NE(request.data.find("\"owner_scoped\":true"), std::string::npos);
  // The admin re-registers it; the owner stays sp-a.
  auto admin = As("root", "POST", "/api/v1alpha1/providers", Spec("sp-a"));
  EXPECT_EQ(admin.status, 200) << admin.body;
  EXPECT_EQ(Parse(admin).Str("owner"), "sp-a");
}

TEST_F(AuthorizationTest, EveryRequestAndOutcomeCarriesTheCallersSubjectAsActor) {
  const std::string id = RegisterAs("sp-a", "sp-a");
  ASSERT_EQ(As("sp-a", "PUT", "/api/v1alpha1/providers/" + id, Spec("sp-a")).status, 200);
  ASSERT_EQ(bus_->submitted().size(), 2u);
  for (const CloudEvent& e : bus_->submitted()) EXPECT_EQ(e.actor, "sp-a") << e.type;
  // A rejection at the edge (400) is recorded with the caller as actor too.
  ASSERT_EQ(As("sp-a", "POST", "/api/v1alpha1/providers", R"({"name":"bad name"})").status, 400);
  ASSERT_EQ(bus_->recorded().size(), 1u);
  EXPECT_EQ(bus_->recorded()[0].actor, "sp-a");
}

TEST_F(AuthorizationTest, AUserCreatesInstancesButCannotDeleteProviders) {
  const std::string id = RegisterAs("sp-a", "sp-a");
  EXPECT_EQ(As("alice", "DELETE", "/api/v1alpha1/providers/" + id).status, 403);
  // Allowed past the boundary: without an instance bus this test instance answers 503.
  EXPECT_EQ(As("alice", "POST", "/api/v1alpha1/catalog-item-instances",
               R"({"spec":{"service_type":"vm"}})")
                .status,
            503);
}

TEST_F(AuthorizationTest, TheRegistrarRefusesToDeleteAProviderHostingLiveInstances) {
  const std::string id = RegisterAs("sp-a", "sp-a");
  bus_->set_live_instances([](const std::string&) { return int64_t{2}; });
  auto r = As("root", "DELETE", "/api/v1alpha1/providers/" + id);
  ASSERT_EQ(r.status, 409) << r.body;
  EXPECT_EQ(Parse(r).Str("detail"),
            "provider '" + id + "' hosts 2 live instances; use ?force=true");
  EXPECT_EQ(As("root", "DELETE", "/api/v1alpha1/providers/" + id + "?force=true").status, 204);
}

// ---- authentication disabled ----

TEST_F(AuthorizationTest, WithAuthenticationDisabledEveryCallerIsAnonymousWithEveryRole) {
  router_ = MakeRouter(Api(), ops_, AccessContext{});
  auto r = Call("POST", "/api/v1alpha1/providers", Spec("sp-a"));
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(bus_->submitted().back().actor, "anonymous");
  EXPECT_EQ(bus_->submitted().back().data.find("owner_scoped"), std::string::npos);
  EXPECT_EQ(Parse(r).Str("owner"), "<missing owner>") << "anonymous registrations have no owner";
  EXPECT_EQ(Call("DELETE", "/api/v1alpha1/providers/" + Parse(r).Str("id") + "?force=true").status,
            204);
}

}  // namespace
}  // namespace dcm::http
