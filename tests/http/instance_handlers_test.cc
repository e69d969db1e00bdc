// Hermetic tests of the instance API handlers (SPEC §3.3) through the router. A FakeInstanceBus
// plays the instance worker synchronously: on Submit it writes the facts the saga would record
// into the store through the real InstanceProjection and answers with operation_completed (or
// operation_failed), so every response is rendered from the view (read-your-writes). No
// sockets, no Kafka, no sleeps.
#include "src/http/instance_handlers.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "events/command_bus.h"
#include "events/instance_events.h"
#include "events/json_read.h"
#include "events/provider_events.h"
#include "projections/instance_projection.h"
#include "projections/outcome_waiters.h"
#include "projections/registry_projection.h"
#include "projections/store.h"
#include "src/common/clock.h"
#include "src/common/metrics.h"
#include "src/http/router.h"
#include "tests/http/handler_calls.h"

namespace dcm::http {
namespace {

constexpr char kProviderName[] = "sp-a";
constexpr char kProviderId[] = "sp-a-id";
constexpr char kStartTime[] = "2026-01-01T00:00:00.000Z";

// The worker's saga, reduced to the facts each operation records, folded by the real projection.
class FakeInstanceBus final : public CommandBus {
 public:
  struct Failure {
    int http_status;
    std::string reason;
    std::string error;
  };

  FakeInstanceBus(Store* store, const Clock* clock)
      : store_(store), view_(store), clock_(clock), projection_(store, &waiters_, &metrics_) {}

  void Submit(const CloudEvent& request, Done done) override {
    submitted_.push_back(request);
    if (error_) return done(tl::unexpected(*error_));
    // Round-trip through the wire form, like the worker reading dcm.instance-requests.
    auto wire = DecodeCloudEvent(EncodeCloudEvent(request));
    if (!wire) return done(tl::unexpected(wire.error()));
    auto r = DecodeInstanceEvent(*wire);
    if (!r) return done(tl::unexpected(r.error()));
    std::vector<InstanceEvent> facts;
    InstanceEvent terminal = Fact(*r, event_type::kOperationCompleted);
    terminal.operation = r->operation;
    if (failure_) {
      terminal.type = event_type::kOperationFailed;
      terminal.http_status = failure_->http_status;
      terminal.reason = failure_->reason;
      terminal.error = failure_->error;
    } else {
      auto decided = Decide(*r, &terminal);
      if (!decided) return done(tl::unexpected(decided.error()));
      facts = std::move(*decided);
    }
    facts.push_back(terminal);
    auto applied = ApplyFacts(facts);
    if (!applied) return done(tl::unexpected(applied.error()));
    done(applied->back());
  }

  void Record(const CloudEvent&) override {}

  // Folds `facts` into the store in one batch, as the projection runner would.
  Result<std::vector<CloudEvent>> ApplyFacts(const std::vector<InstanceEvent>& facts) {
    StoreBatch batch;
    std::vector<CloudEvent> events;
    for (const auto& fact : facts) {
      events.push_back(EncodeInstanceEvent(fact));
      const EventPosition position{"dcm.instances", 0, offset_++, clock_->NowMillis()};
      RETURN_IF_ERROR(projection_.Apply(events.back(), position, batch));
    }
    RETURN_IF_ERROR(store_->Write(batch));
    projection_.AfterCommit(events);
    return events;
  }

  void set_failure(std::optional<Failure> failure) { failure_ = std::move(failure); }
  void set_error(std::optional<Error> error) { error_ = std::move(error); }
  const std::vector<CloudEvent>& submitted() const { return submitted_; }

  // The fact of `type` for request `r`.
  InstanceEvent Fact(const InstanceEvent& r, const char* type) const {
    InstanceEvent f;
    f.type = type;
    f.source = "test";
    f.time_ms = clock_->NowMillis();
    f.request_id = r.request_id;
    f.root = r.root;
    return f;
  }

 private:
  static std::string ServiceTypeOf(const std::string& spec) {
    auto parsed = ParseJson(spec);
    simdjson::dom::object object;
    if (!parsed || parsed->get(object)) return "vm";
    std::string type = StringMember(object, "service_type");
    return type.empty() ? "vm" : type;
  }

  // resource.placed + service_type_instance.created for a new resource on sp-a.
  void Place(const InstanceEvent& r, const std::string& resource_id, const std::string& cii_id,
             const std::string& spec, std::vector<InstanceEvent>* facts) const {
    const std::string type = ServiceTypeOf(spec);
    InstanceEvent placed = Fact(r, event_type::kResourcePlaced);
    placed.resource_id = resource_id;
    placed.catalog_item_instance_id = cii_id;
    placed.provider_name = kProviderName;
    placed.provider_id = kProviderId;
    placed.service_type = type;
    placed.intent = spec;
    placed.spec = spec;
    placed.policy = "builtin";
    facts->push_back(placed);
    InstanceEvent created = Fact(r, event_type::kInstanceCreated);
    created.instance_id = resource_id;
    created.provider_name = kProviderName;
    created.provider_id = kProviderId;
    created.service_type = type;
    created.spec = spec;
    created.status = "PROVISIONING";
    facts->push_back(created);
  }

  // service_type_instance.deleted + resource.deleted.
  void Remove(const InstanceEvent& r, const std::string& resource_id,
              std::vector<InstanceEvent>* facts) const {
    InstanceEvent deleted = Fact(r, event_type::kInstanceDeleted);
    deleted.instance_id = resource_id;
    deleted.provider_name = kProviderName;
    deleted.provider_id = kProviderId;
    facts->push_back(deleted);
    InstanceEvent gone = Fact(r, event_type::kResourceDeleted);
    gone.resource_id = resource_id;
    facts->push_back(gone);
  }

  void Enqueue(const InstanceEvent& r, const ServiceTypeInstance& instance,
               std::vector<InstanceEvent>* facts) const {
    InstanceEvent q = Fact(r, event_type::kCleanupEnqueued);
    q.instance_id = instance.id;
    q.provider_name = instance.provider_name;
    q.provider_id = instance.provider_id;
    q.service_type = instance.service_type;
    q.requested_at_ms = clock_->NowMillis();
    facts->push_back(q);
  }

  // Creates the new resource, queues the old one for deferred deletion, drops its placement.
  Status Rehydrate(const InstanceEvent& r, const Resource& old, const std::string& new_id,
                   std::vector<InstanceEvent>* facts) const {
    Place(r, new_id, old.catalog_item_instance_id, old.intent, facts);
    ASSIGN_OR_RETURN(auto instance, view_.GetInstance(old.id));
    if (instance) Enqueue(r, *instance, facts);
    if (!old.catalog_item_instance_id.empty()) {
      InstanceEvent rehydrated = Fact(r, event_type::kCatalogItemInstanceRehydrated);
      rehydrated.catalog_item_instance_id = old.catalog_item_instance_id;
      rehydrated.old_resource_id = old.id;
      rehydrated.new_resource_id = new_id;
      rehydrated.provider_name = kProviderName;
      facts->push_back(rehydrated);
    }
    InstanceEvent gone = Fact(r, event_type::kResourceDeleted);
    gone.resource_id = old.id;
    facts->push_back(gone);
    return OkStatus();
  }

  Result<Resource> ResourceOf(const std::string& id) const {
    ASSIGN_OR_RETURN(auto resource, view_.GetResource(id));
    if (!resource) return MakeError(ErrorCode::kNotFound, "no resource " + id);
    return *resource;
  }

  Result<std::vector<InstanceEvent>> Decide(const InstanceEvent& r, InstanceEvent* terminal) {
    std::vector<InstanceEvent> facts;
    const auto op = ParseOperation(r.operation);
    if (!op) return MakeError(ErrorCode::kInternal, "unknown operation " + r.operation);
    switch (*op) {
      case Operation::kCreateCatalogItemInstance: {
        Place(r, r.resource_id, r.catalog_item_instance_id, r.spec, &facts);
        InstanceEvent created = Fact(r, event_type::kCatalogItemInstanceCreated);
        created.catalog_item_instance_id = r.catalog_item_instance_id;
        created.resource_id = r.resource_id;
        created.spec = r.spec;
        created.display_name = r.display_name;
        created.provider_name = kProviderName;
        facts.push_back(created);
        terminal->resource_id = r.resource_id;
        terminal->provider_name = kProviderName;
        break;
      }
      case Operation::kDeleteCatalogItemInstance: {
        ASSIGN_OR_RETURN(auto cii, view_.GetCatalogItemInstance(r.catalog_item_instance_id));
        if (!cii) return MakeError(ErrorCode::kNotFound, "no cii");
        Remove(r, cii->resource_id, &facts);
        InstanceEvent deleted = Fact(r, event_type::kCatalogItemInstanceDeleted);
        deleted.catalog_item_instance_id = cii->id;
        facts.push_back(deleted);
        break;
      }
      case Operation::kRehydrateCatalogItemInstance: {
        ASSIGN_OR_RETURN(auto cii, view_.GetCatalogItemInstance(r.catalog_item_instance_id));
        if (!cii) return MakeError(ErrorCode::kNotFound, "no cii");
        ASSIGN_OR_RETURN(auto old, ResourceOf(cii->resource_id));
        RETURN_IF_ERROR(Rehydrate(r, old, r.new_resource_id, &facts));
        terminal->old_resource_id = old.id;
        terminal->resource_id = r.new_resource_id;
        terminal->provider_name = kProviderName;
        break;
      }
      case Operation::kCreateResource:
        Place(r, r.resource_id, r.catalog_item_instance_id, r.spec, &facts);
        terminal->resource_id = r.resource_id;
        break;
      case Operation::kDeleteResource:
        Remove(r, r.resource_id, &facts);
        break;
      case Operation::kRehydrateResource: {
        ASSIGN_OR_RETURN(auto old, ResourceOf(r.resource_id));
        RETURN_IF_ERROR(Rehydrate(r, old, r.new_resource_id, &facts));
        terminal->old_resource_id = old.id;
        terminal->resource_id = r.new_resource_id;
        break;
      }
      case Operation::kRecoverLostResource:  // never asked over HTTP
        return MakeError(ErrorCode::kInternal, "not an HTTP operation");
      case Operation::kCreateServiceTypeInstance: {
        InstanceEvent created = Fact(r, event_type::kInstanceCreated);
        created.instance_id = r.instance_id;
        created.provider_name = r.provider_name;
        created.provider_id = r.provider_name + "-id";
        created.service_type = ServiceTypeOf(r.spec);
        created.spec = r.spec;
        created.status = "PROVISIONING";
        facts.push_back(created);
        break;
      }
      case Operation::kDeleteServiceTypeInstance: {
        ASSIGN_OR_RETURN(auto instance, view_.GetInstance(r.instance_id));
        if (!instance) return MakeError(ErrorCode::kNotFound, "no instance");
        if (r.deferred) {
          Enqueue(r, *instance, &facts);
        } else {
          InstanceEvent deleted = Fact(r, event_type::kInstanceDeleted);
          deleted.instance_id = instance->id;
          deleted.provider_name = instance->provider_name;
          deleted.provider_id = instance->provider_id;
          facts.push_back(deleted);
        }
        break;
      }
      case Operation::kRetryCleanup: {
        InstanceEvent retried = Fact(r, event_type::kCleanupRetried);
        retried.instance_id = r.instance_id;
        facts.push_back(retried);
        break;
      }
    }
    return facts;
  }

  Store* store_;
  InstanceView view_;
  const Clock* clock_;
  OutcomeWaiters waiters_;
  Metrics metrics_;
  InstanceProjection projection_;
  int64_t offset_ = 0;
  std::optional<Failure> failure_;
  std::optional<Error> error_;
  std::vector<CloudEvent> submitted_;
};

// Answers every provider request with `deleted` (the provider API's delete path only).
class FakeProviderBus final : public CommandBus {
 public:
  explicit FakeProviderBus(const Clock* clock) : clock_(clock) {}
  void Submit(const CloudEvent& request, Done done) override {
    submitted_.push_back(request);
    ProviderOutcome o;
    o.kind = OutcomeKind::kDeleted;
    o.request_id = request.id;
    o.provider.id = request.subject;
    o.provider.spec.name = kProviderName;
    o.provider.spec.endpoint = "http://sp-a.example.com";
    o.provider.spec.service_type = "vm";
    done(EncodeProviderOutcome(o, "test", clock_->NowMillis()));
  }
  void Record(const CloudEvent&) override {}
  const std::vector<CloudEvent>& submitted() const { return submitted_; }

 private:
  const Clock* clock_;
  std::vector<CloudEvent> submitted_;
};

class InstanceHandlersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    auto store = Store::Open("/instance-handlers-test-" + std::to_string(counter++),
                             StoreOptions{.bulk_load = false, .in_memory = true});
    ASSERT_TRUE(store.has_value()) << store.error().message;
    store_ = std::move(*store);
    registry_ = std::make_unique<RegistryView>(store_.get());
    instances_ = std::make_unique<InstanceView>(store_.get());
    bus_ = std::make_unique<FakeInstanceBus>(store_.get(), &clock_);
    provider_bus_ = std::make_unique<FakeProviderBus>(&clock_);
    ApiContext api;
    api.registry = registry_.get();
    api.commands = provider_bus_.get();
    api.provider_rules = &rules_;
    api.clock = &clock_;
    api.source = "dcm/http/test";
    api.instances = instances_.get();
    api.instance_commands = bus_.get();
    router_ = MakeRouter(api, OpsContext{}, AccessContext{});
    api.instances = nullptr;
    api.instance_commands = nullptr;
    no_instances_router_ = MakeRouter(api, OpsContext{}, AccessContext{});
  }

  HttpResponse CallWith(const Handler& router, const std::string& method, const std::string& target,
                        const std::string& body, std::map<std::string, std::string> headers) {
    return CallRouter(router, method, target, body, std::move(headers));
  }

  HttpResponse Call(const std::string& method, const std::string& target,
                    const std::string& body = "",
                    std::map<std::string, std::string> headers = {
                        {"content-type", "application/json"}}) {
    return CallWith(router_, method, target, body, std::move(headers));
  }

  // The last request submitted to the instance bus, decoded.
  InstanceEvent LastRequest() {
    EXPECT_FALSE(bus_->submitted().empty());
    if (bus_->submitted().empty()) return {};
    const CloudEvent& event = bus_->submitted().back();
    EXPECT_EQ(event.type, event_type::kOperationRequested);
    EXPECT_EQ(event.source, "dcm/http/test");
    auto decoded = DecodeInstanceEvent(event);
    EXPECT_TRUE(decoded.has_value()) << decoded.error().message;
    if (!decoded) return {};
    EXPECT_EQ(event.subject, decoded->root) << "the bus keys requests by their root";
    return *decoded;
  }

  // Creates a catalog item instance (expects 201) and returns its body.
  JsonBody CreateCii(const std::string& id = "", const std::string& type = "vm") {
    auto r = Call("POST", "/api/v1alpha1/catalog-item-instances" + (id.empty() ? "" : "?id=" + id),
                  R"({"display_name":"App","spec":{"service_type":")" + type + R"(","cpu":2}})");
    EXPECT_EQ(r.status, 201) << r.body;
    return Parse(r);
  }

  JsonBody CreateSti(const std::string& id, const std::string& provider = "sp-b",
                     const std::string& type = "vm") {
    auto r = Call(
        "POST", "/api/v1alpha1/service-type-instances?id=" + id,
        R"({"provider_name":")" + provider + R"(","spec":{"service_type":")" + type + R"("}})");
    EXPECT_EQ(r.status, 201) << r.body;
    return Parse(r);
  }

  // Folds `facts` directly (states the worker reaches outside the HTTP API).
  void ApplyFacts(const std::vector<InstanceEvent>& facts) {
    auto applied = bus_->ApplyFacts(facts);
    ASSERT_TRUE(applied.has_value()) << applied.error().message;
  }

  InstanceEvent CleanupFact(const char* type, const std::string& instance_id) {
    InstanceEvent f;
    f.type = type;
    f.source = "test";
    f.time_ms = clock_.NowMillis();
    f.root = instance_id;
    f.instance_id = instance_id;
    return f;
  }

  // A cleanup record for instance `id` (created through the API) that the worker gave up on.
  void FailCleanup(const std::string& id) {
    ASSERT_EQ(
        Call("DELETE", "/api/v1alpha1/service-type-instances/" + id + "?deferred=true").status,
        204);
    clock_.Advance(std::chrono::seconds(5));
    InstanceEvent attempted = CleanupFact(event_type::kCleanupAttempted, id);
    attempted.outcome = "failed";
    attempted.status = kCleanupPending;
    attempted.retry_count = 10;
    attempted.max_retries = 10;
    attempted.error = "connection refused";
    InstanceEvent failed = CleanupFact(event_type::kCleanupFailed, id);
    failed.retry_count = 10;
    failed.max_retries = 10;
    failed.error = "connection refused";
    ApplyFacts({attempted, failed});
  }

  std::vector<std::string> service_types_{"vm", "container", "database"};
  ProviderRules rules_{service_types_};
  FakeClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<RegistryView> registry_;
  std::unique_ptr<InstanceView> instances_;
  std::unique_ptr<FakeInstanceBus> bus_;
  std::unique_ptr<FakeProviderBus> provider_bus_;
  Handler router_;
  Handler no_instances_router_;
};

// ---- catalog item instances ----

TEST_F(InstanceHandlersTest, CreateCatalogItemInstanceReturns201RenderedFromTheView) {
  auto r = Call("POST", "/api/v1alpha1/catalog-item-instances",
                R"({"display_name":"My App","spec":{ "service_type" : "vm", "cpu": 2 }})");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(r.content_type, "application/json");
  auto body = Parse(r);
  const std::string id = body.Str("id");
  EXPECT_FALSE(id.empty());
  EXPECT_EQ(body.Str("display_name"), "My App");
  EXPECT_EQ(body.Raw("spec"), R"({"service_type":"vm","cpu":2})");
  EXPECT_EQ(body.Str("provider_name"), kProviderName);
  EXPECT_EQ(body.Str("status"), "PROVISIONING");
  EXPECT_EQ(body.Str("create_time"), kStartTime);
  EXPECT_EQ(body.Str("update_time"), kStartTime);
  EXPECT_EQ(body.Str("path"), "catalog-item-instances/" + id);
  ASSERT_NE(FindHeader(r, "Location"), nullptr);
  EXPECT_EQ(*FindHeader(r, "Location"), "/api/v1alpha1/catalog-item-instances/" + id);

  const InstanceEvent request = LastRequest();
  EXPECT_EQ(request.operation, "create_catalog_item_instance");
  EXPECT_EQ(request.root, id);
  EXPECT_EQ(request.catalog_item_instance_id, id);
  EXPECT_EQ(request.resource_id, body.Str("resource_id"));
  EXPECT_NE(request.resource_id, id);
  EXPECT_EQ(request.spec, R"({"service_type":"vm","cpu":2})");
  EXPECT_EQ(request.display_name, "My App");
  EXPECT_EQ(request.service_type, "vm");

  auto get = Call("GET", "/api/v1alpha1/catalog-item-instances/" + id);
  ASSERT_EQ(get.status, 200) << get.body;
  EXPECT_EQ(get.body, r.body);
}

TEST_F(InstanceHandlersTest, CreateCatalogItemInstanceUsesTheIdFromTheQuery) {
  auto body = CreateCii("my-app");
  EXPECT_EQ(body.Str("id"), "my-app");
  EXPECT_EQ(LastRequest().root, "my-app");
}

TEST_F(InstanceHandlersTest, CreateCatalogItemInstanceAcceptsCamelCaseDisplayName) {
  auto r = Call("POST", "/api/v1alpha1/catalog-item-instances",
                R"({"displayName":"Camel","spec":{"service_type":"database"},"extra":1})");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(Parse(r).Str("display_name"), "Camel");
}

TEST_F(InstanceHandlersTest, CreateCatalogItemInstanceWithoutSpecReturns400) {
  auto r = Call("POST", "/api/v1alpha1/catalog-item-instances", R"({"display_name":"x"})");
  ASSERT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.content_type, "application/problem+json");
  EXPECT_EQ(Parse(r).ErrorFields(), std::vector<std::string>{"spec"});
  EXPECT_TRUE(bus_->submitted().empty());
}

TEST_F(InstanceHandlersTest, CreateCatalogItemInstanceWithNonObjectSpecReturns400) {
  for (const char* spec : {R"("vm")", "[1]", "3", "null"}) {
    auto r = Call("POST", "/api/v1alpha1/catalog-item-instances",
                  std::string(R"({"spec":)") + spec + "}");
    EXPECT_EQ(r.status, 400) << spec << " " << r.body;
    EXPECT_EQ(Parse(r).ErrorFields(), std::vector<std::string>{"spec"}) << spec;
  }
  EXPECT_TRUE(bus_->submitted().empty());
}

TEST_F(InstanceHandlersTest, CreateCatalogItemInstanceWithBadServiceTypeReturns400) {
  for (const char* spec : {R"({"service_type":"toaster"})", R"({"service_type":7})", R"({"cpu":2})",
                           R"({"serviceType":"vm"})"}) {
    auto r = Call("POST", "/api/v1alpha1/catalog-item-instances",
                  std::string(R"({"spec":)") + spec + "}");
    EXPECT_EQ(r.status, 400) << spec << " " << r.body;
    EXPECT_EQ(Parse(r).ErrorFields(), std::vector<std::string>{"spec.service_type"}) << spec;
  }
  EXPECT_TRUE(bus_->submitted().empty());
}

// A spec of `bytes` bytes of minified JSON: {"service_type":"vm","blob":"xxx…"}.
std::string SpecOfSize(size_t bytes) {
  const std::string head = R"({"service_type":"vm","blob":")";
  return head + std::string(bytes - head.size() - 2, 'x') + "\"}";
}

TEST_F(InstanceHandlersTest, SpecOver256KiBAnswers413AndWritesNothing) {
  const std::string spec = SpecOfSize(300 * 1024);
  ASSERT_EQ(spec.size(), 300u * 1024);
  for (const char* target :
       {"/api/v1alpha1/catalog-item-instances?id=big", "/api/v1alpha1/resources?id=big"}) {
    auto r = Call("POST", target, R"({"display_name":"Big","spec":)" + spec + "}");
    ASSERT_EQ(r.status, 413) << target << " " << r.body.substr(0, 200);
    EXPECT_EQ(r.content_type, "application/problem+json");
    EXPECT_EQ(Parse(r).ErrorFields(), std::vector<std::string>{"spec"});
    EXPECT_NE(Parse(r).Str("detail").find("262144"), std::string::npos) << r.body;
  }
  auto sti = Call("POST", "/api/v1alpha1/service-type-instances?id=big",
                  R"({"provider_name":"sp-b","spec":)" + spec + "}");
  EXPECT_EQ(sti.status, 413) << sti.body.substr(0, 200);
  EXPECT_TRUE(bus_->submitted().empty()) << "no operation request is produced";
  EXPECT_EQ(Call("GET", "/api/v1alpha1/catalog-item-instances/big").status, 404);
  EXPECT_EQ(Call("GET", "/api/v1alpha1/resources/big").status, 404);
}

TEST_F(InstanceHandlersTest, SpecOfExactly256KiBIsAccepted) {
  const std::string spec = SpecOfSize(kMaxInstanceSpecBytes);
  auto r = Call("POST", "/api/v1alpha1/catalog-item-instances?id=edge", R"({"spec":)" + spec + "}");
  ASSERT_EQ(r.status, 201) << r.body.substr(0, 200);
  EXPECT_EQ(LastRequest().spec.size(), kMaxInstanceSpecBytes);
}

TEST_F(InstanceHandlersTest, SpecSizeIsMeasuredMinified) {
  // Whitespace the request event would not carry does not count.
  const std::string spec = SpecOfSize(200 * 1024);
  const std::string padded =
      "{ " + spec.substr(1, spec.size() - 2) + std::string(100 * 1024, ' ') + "}";
  auto r =
      Call("POST", "/api/v1alpha1/catalog-item-instances?id=padded", R"({"spec":)" + padded + "}");
  EXPECT_EQ(r.status, 201) << r.body.substr(0, 200);
}

TEST_F(InstanceHandlersTest, CreateCatalogItemInstanceWithBadIdReturns400) {
  for (const char* id : {"UPPER", "-dash", "under_score", "a.b"}) {
    auto r = Call("POST", std::string("/api/v1alpha1/catalog-item-instances?id=") + id,
                  R"({"spec":{"service_type":"vm"}})");
    EXPECT_EQ(r.status, 400) << id;
    EXPECT_EQ(Parse(r).ErrorFields(), std::vector<std::string>{"id"}) << id;
  }
  EXPECT_TRUE(bus_->submitted().empty());
}

TEST_F(InstanceHandlersTest, CreateCatalogItemInstanceWithNonStringDisplayNameReturns400) {
  auto r = Call("POST", "/api/v1alpha1/catalog-item-instances",
                R"({"display_name":5,"spec":{"service_type":"vm"}})");
  ASSERT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(Parse(r).ErrorFields(), std::vector<std::string>{"display_name"});
}

TEST_F(InstanceHandlersTest, CreateCatalogItemInstanceWithExistingIdReturns409) {
  CreateCii("taken");
  const size_t submitted = bus_->submitted().size();
  auto r = Call("POST", "/api/v1alpha1/catalog-item-instances?id=taken",
                R"({"spec":{"service_type":"vm"}})");
  ASSERT_EQ(r.status, 409) << r.body;
  EXPECT_EQ(Parse(r).Str("type"), "urn:dcm:problem:conflict");
  EXPECT_EQ(bus_->submitted().size(), submitted);
}

TEST_F(InstanceHandlersTest, CreateCatalogItemInstanceRejectsNonJsonBodies) {
  auto text =
      Call("POST", "/api/v1alpha1/catalog-item-instances", "{}", {{"content-type", "text/plain"}});
  EXPECT_EQ(text.status, 415) << text.body;
  auto malformed = Call("POST", "/api/v1alpha1/catalog-item-instances", R"({"spec":)");
  EXPECT_EQ(malformed.status, 400) << malformed.body;
  EXPECT_EQ(Parse(malformed).ErrorFields(), std::vector<std::string>{"body"});
  auto array = Call("POST", "/api/v1alpha1/catalog-item-instances", "[]");
  EXPECT_EQ(array.status, 400) << array.body;
  EXPECT_EQ(Parse(array).ErrorFields(), std::vector<std::string>{"body"});
  EXPECT_TRUE(bus_->submitted().empty());
}

TEST_F(InstanceHandlersTest, ListCatalogItemInstancesPaginatesUnderResults) {
  for (const char* id : {"app-a", "app-b", "app-c"}) CreateCii(id);
  auto first = Call("GET", "/api/v1alpha1/catalog-item-instances?max_page_size=2");
  ASSERT_EQ(first.status, 200) << first.body;
  auto page1 = Parse(first);
  EXPECT_EQ(page1.Column("results", "id"), (std::vector<std::string>{"app-a", "app-b"}));
  EXPECT_EQ(page1.Column("results", "status"),
            (std::vector<std::string>{"PROVISIONING", "PROVISIONING"}));
  const std::string token = page1.Str("next_page_token");
  auto second =
      Call("GET", "/api/v1alpha1/catalog-item-instances?max_page_size=2&page_token=" + token);
  ASSERT_EQ(second.status, 200) << second.body;
  auto page2 = Parse(second);
  EXPECT_EQ(page2.Column("results", "id"), std::vector<std::string>{"app-c"});
  EXPECT_FALSE(page2.Has("next_page_token"));
}

TEST_F(InstanceHandlersTest, ListsRejectBadPageSizesAndTokens) {
  for (const char* path :
       {"catalog-item-instances", "resources", "service-type-instances", "cleanup-queue"}) {
    for (const char* size : {"0", "101", "x", ""}) {
      auto r = Call("GET", std::string("/api/v1alpha1/") + path + "?max_page_size=" + size);
      EXPECT_EQ(r.status, 400) << path << " max_page_size=" << size;
      EXPECT_EQ(Parse(r).ErrorFields(), std::vector<std::string>{"max_page_size"}) << path;
    }
    auto token = Call("GET", std::string("/api/v1alpha1/") + path + "?page_token=zz");
    EXPECT_EQ(token.status, 400) << path;
    EXPECT_EQ(Parse(token).ErrorFields(), std::vector<std::string>{"page_token"}) << path;
  }
}

TEST_F(InstanceHandlersTest, GetUnknownCatalogItemInstanceReturns404) {
  auto r = Call("GET", "/api/v1alpha1/catalog-item-instances/nobody");
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_EQ(r.content_type, "application/problem+json");
}

TEST_F(InstanceHandlersTest, DeleteCatalogItemInstanceReturns204AndRemovesIt) {
  CreateCii("app");
  auto r = Call("DELETE", "/api/v1alpha1/catalog-item-instances/app", "", {});
  ASSERT_EQ(r.status, 204) << r.body;
  EXPECT_TRUE(r.body.empty());
  const InstanceEvent request = LastRequest();
  EXPECT_EQ(request.operation, "delete_catalog_item_instance");
  EXPECT_EQ(request.root, "app");
  EXPECT_EQ(request.catalog_item_instance_id, "app");
  EXPECT_EQ(Call("GET", "/api/v1alpha1/catalog-item-instances/app").status, 404);
}

TEST_F(InstanceHandlersTest, DeleteUnknownCatalogItemInstanceReturns404WithoutSubmitting) {
  EXPECT_EQ(Call("DELETE", "/api/v1alpha1/catalog-item-instances/nobody", "", {}).status, 404);
  EXPECT_TRUE(bus_->submitted().empty());
}

TEST_F(InstanceHandlersTest, RehydrateCatalogItemInstanceReturns202WithTheNewResource) {
  auto created = CreateCii("app");
  const std::string old_resource = created.Str("resource_id");
  auto r = Call("POST", "/api/v1alpha1/catalog-item-instances/app:rehydrate", "", {});
  ASSERT_EQ(r.status, 202) << r.body;
  auto body = Parse(r);
  const InstanceEvent request = LastRequest();
  EXPECT_EQ(request.operation, "rehydrate_catalog_item_instance");
  EXPECT_EQ(request.root, "app");
  EXPECT_EQ(request.catalog_item_instance_id, "app");
  EXPECT_FALSE(request.new_resource_id.empty());
  EXPECT_NE(request.new_resource_id, old_resource);
  // The generation it replaces, so that a concurrent rehydration of it gets 409 (worker).
  EXPECT_EQ(request.old_resource_id, old_resource);
  EXPECT_EQ(body.Str("id"), "app");
  EXPECT_EQ(body.Str("resource_id"), request.new_resource_id);
  EXPECT_EQ(body.Str("old_resource_id"), old_resource);
  EXPECT_EQ(body.Str("provider_name"), kProviderName);
  EXPECT_EQ(body.Str("status"), "PROVISIONING");
  // Read-your-writes: the instance points at the new resource, the old one awaits cleanup.
  EXPECT_EQ(Parse(Call("GET", "/api/v1alpha1/catalog-item-instances/app")).Str("resource_id"),
            request.new_resource_id);
  EXPECT_EQ(Parse(Call("GET", "/api/v1alpha1/cleanup-queue")).Column("records", "instance_id"),
            std::vector<std::string>{old_resource});
}

TEST_F(InstanceHandlersTest, RehydrateUnknownCatalogItemInstanceReturns404) {
  EXPECT_EQ(Call("POST", "/api/v1alpha1/catalog-item-instances/nobody:rehydrate", "", {}).status,
            404);
  EXPECT_TRUE(bus_->submitted().empty());
}

TEST_F(InstanceHandlersTest, SpReportedStatusWinsOverTheRecordedOne) {
  auto created = CreateCii("app");
  const std::string resource = created.Str("resource_id");
  SpStatusProjection status(store_.get(), nullptr);
  CloudEvent event;
  event.id = "status-1";
  event.source = "sp-a";
  event.type = "dcm.status.vm";
  event.subject = resource;
  event.time = "2026-01-01T00:00:01.000Z";
  event.data = R"({"id":")" + resource + R"(","status":"running","message":"up"})";
  StoreBatch batch;
  ASSERT_TRUE(status.Apply(event, EventPosition{}, batch));
  ASSERT_TRUE(store_->Write(batch));
  EXPECT_EQ(Parse(Call("GET", "/api/v1alpha1/catalog-item-instances/app")).Str("status"),
            "RUNNING");
  EXPECT_EQ(Parse(Call("GET", "/api/v1alpha1/resources/" + resource)).Str("status"), "RUNNING");
}

TEST_F(InstanceHandlersTest, ALostResourceIsLostWhateverItsProviderReportedLast) {
  auto created = CreateCii("app");
  const std::string resource = created.Str("resource_id");
  InstanceEvent lost;
  lost.type = event_type::kResourceLost;
  lost.request_id = "loss-1";
  lost.root = "app";
  lost.resource_id = resource;
  lost.provider_name = "sp-a";
  lost.provider_id = "sp-a-id";
  lost.reason = "provider_expired";
  ApplyFacts({lost});
  EXPECT_EQ(Parse(Call("GET", "/api/v1alpha1/resources/" + resource)).Str("status"), "LOST");
  EXPECT_EQ(Parse(Call("GET", "/api/v1alpha1/catalog-item-instances/app")).Str("status"), "LOST");
  EXPECT_EQ(Parse(Call("GET", "/api/v1alpha1/service-type-instances/" + resource)).Str("status"),
            "LOST");
}

// ---- outcomes of failed operations ----

TEST_F(InstanceHandlersTest, OperationFailedAnswersWithItsStatusDetailAndReason) {
  struct Case {
    int status;
    const char* reason;
    const char* error;
  };
  for (const Case& c : {Case{406, "policy_rejected", "policy rejected the request"},
                        Case{422, "no_ready_provider", "no Ready provider of type vm"},
                        Case{503, "no_ready_provider", "every vm provider is unavailable"}}) {
    bus_->set_failure(FakeInstanceBus::Failure{c.status, c.reason, c.error});
    auto r =
        Call("POST", "/api/v1alpha1/catalog-item-instances", R"({"spec":{"service_type":"vm"}})");
    ASSERT_EQ(r.status, c.status) << r.body;
    EXPECT_EQ(r.content_type, "application/problem+json");
    auto body = Parse(r);
    EXPECT_EQ(body.Int("status"), c.status);
    EXPECT_EQ(body.Str("detail"), c.error);
    EXPECT_EQ(body.Str("reason"), c.reason);
    EXPECT_EQ(FindHeader(r, "Retry-After") != nullptr, c.status == 503) << c.status;
  }
  EXPECT_EQ(Parse(Call("GET", "/api/v1alpha1/catalog-item-instances")).Column("results", "id"),
            std::vector<std::string>{});
}

TEST_F(InstanceHandlersTest, ConcurrentRehydrationRejectedByTheWorkerReturns409) {
  CreateCii("app");
  bus_->set_failure(FakeInstanceBus::Failure{409, "operation_in_progress", "busy"});
  auto r = Call("POST", "/api/v1alpha1/catalog-item-instances/app:rehydrate", "", {});
  ASSERT_EQ(r.status, 409) << r.body;
  EXPECT_EQ(Parse(r).Str("reason"), "operation_in_progress");
}

TEST_F(InstanceHandlersTest, BusTimeoutReturns503WithRetryAfter) {
  bus_->set_error(Error{ErrorCode::kTimeout, "no outcome within the deadline", {}});
  auto r =
      Call("POST", "/api/v1alpha1/catalog-item-instances", R"({"spec":{"service_type":"vm"}})");
  ASSERT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(Parse(r).Str("type"), "urn:dcm:problem:unavailable");
  ASSERT_NE(FindHeader(r, "Retry-After"), nullptr);
  EXPECT_EQ(*FindHeader(r, "Retry-After"), "1");
  bus_->set_error(Error{ErrorCode::kUnavailable, "kafka is down", {}});
  EXPECT_EQ(Call("POST", "/api/v1alpha1/resources", R"({"spec":{"service_type":"vm"}})").status,
            503);
}

// ---- resources ----

TEST_F(InstanceHandlersTest, CreateResourceReturns201WithPlacementFields) {
  auto r = Call("POST", "/api/v1alpha1/resources?id=res-1",
                R"({"spec":{"service_type":"container","image":"nginx"}})");
  ASSERT_EQ(r.status, 201) << r.body;
  auto body = Parse(r);
  EXPECT_EQ(body.Str("id"), "res-1");
  EXPECT_FALSE(body.Has("catalog_item_instance_id"));
  EXPECT_EQ(body.Str("provider_name"), kProviderName);
  EXPECT_EQ(body.Str("service_type"), "container");
  EXPECT_EQ(body.Raw("spec"), R"({"service_type":"container","image":"nginx"})");
  EXPECT_EQ(body.Raw("intent"), R"({"service_type":"container","image":"nginx"})");
  EXPECT_EQ(body.Str("policy"), "builtin");
  EXPECT_EQ(body.Str("status"), "PROVISIONING");
  EXPECT_EQ(body.Str("create_time"), kStartTime);
  EXPECT_EQ(body.Str("update_time"), kStartTime);
  EXPECT_EQ(body.Str("path"), "resources/res-1");
  ASSERT_NE(FindHeader(r, "Location"), nullptr);
  EXPECT_EQ(*FindHeader(r, "Location"), "/api/v1alpha1/resources/res-1");
  const InstanceEvent request = LastRequest();
  EXPECT_EQ(request.operation, "create_resource");
  EXPECT_EQ(request.root, "res-1");
  EXPECT_EQ(request.resource_id, "res-1");
  EXPECT_EQ(request.service_type, "container");
}

TEST_F(InstanceHandlersTest, CreateResourceCarriesItsCatalogItemInstance) {
  auto r = Call("POST", "/api/v1alpha1/resources",
                R"({"catalogItemInstanceId":"app","spec":{"service_type":"vm"}})");
  ASSERT_EQ(r.status, 201) << r.body;
  auto body = Parse(r);
  EXPECT_EQ(body.Str("catalog_item_instance_id"), "app");
  const InstanceEvent request = LastRequest();
  EXPECT_EQ(request.catalog_item_instance_id, "app");
  EXPECT_EQ(request.root, body.Str("id"));
  EXPECT_EQ(request.resource_id, body.Str("id"));
}

TEST_F(InstanceHandlersTest, CreateResourceValidatesItsBody) {
  EXPECT_EQ(Parse(Call("POST", "/api/v1alpha1/resources", "{}")).ErrorFields(),
            std::vector<std::string>{"spec"});
  EXPECT_EQ(Parse(Call("POST", "/api/v1alpha1/resources", R"({"spec":{"service_type":"x"}})"))
                .ErrorFields(),
            std::vector<std::string>{"spec.service_type"});
  EXPECT_EQ(
      Call("POST", "/api/v1alpha1/resources?id=Bad", R"({"spec":{"service_type":"vm"}})").status,
      400);
  EXPECT_TRUE(bus_->submitted().empty());
  Call("POST", "/api/v1alpha1/resources?id=res-1", R"({"spec":{"service_type":"vm"}})");
  EXPECT_EQ(
      Call("POST", "/api/v1alpha1/resources?id=res-1", R"({"spec":{"service_type":"vm"}})").status,
      409);
}

TEST_F(InstanceHandlersTest, ListAndGetResources) {
  auto cii = CreateCii("app");
  auto list = Call("GET", "/api/v1alpha1/resources");
  ASSERT_EQ(list.status, 200) << list.body;
  EXPECT_EQ(Parse(list).Column("resources", "id"),
            std::vector<std::string>{cii.Str("resource_id")});
  EXPECT_EQ(Parse(list).Column("resources", "catalog_item_instance_id"),
            std::vector<std::string>{"app"});
  auto get = Call("GET", "/api/v1alpha1/resources/" + cii.Str("resource_id"));
  ASSERT_EQ(get.status, 200) << get.body;
  EXPECT_EQ(Parse(get).Str("path"), "resources/" + cii.Str("resource_id"));
  EXPECT_EQ(Call("GET", "/api/v1alpha1/resources/nobody").status, 404);
}

TEST_F(InstanceHandlersTest, DeleteResourceSubmitsUnderTheResourcesRoot) {
  auto cii = CreateCii("app");
  const std::string resource = cii.Str("resource_id");
  auto r = Call("DELETE", "/api/v1alpha1/resources/" + resource, "", {});
  ASSERT_EQ(r.status, 204) << r.body;
  const InstanceEvent request = LastRequest();
  EXPECT_EQ(request.operation, "delete_resource");
  EXPECT_EQ(request.root, "app");
  EXPECT_EQ(request.resource_id, resource);
  EXPECT_EQ(Call("GET", "/api/v1alpha1/resources/" + resource).status, 404);
  EXPECT_EQ(Call("DELETE", "/api/v1alpha1/resources/" + resource, "", {}).status, 404);
}

TEST_F(InstanceHandlersTest, RehydrateResourceWithChosenNewIdReturns202) {
  auto cii = CreateCii("app");
  const std::string old_id = cii.Str("resource_id");
  auto r = Call("POST", "/api/v1alpha1/resources/" + old_id + ":rehydrate",
                R"({"newInstanceId":"fresh-1"})");
  ASSERT_EQ(r.status, 202) << r.body;
  auto body = Parse(r);
  EXPECT_EQ(body.Str("resource_id"), "fresh-1");
  EXPECT_EQ(body.Str("old_resource_id"), old_id);
  EXPECT_EQ(body.Str("provider_name"), kProviderName);
  EXPECT_EQ(body.Str("status"), "PROVISIONING");
  const InstanceEvent request = LastRequest();
  EXPECT_EQ(request.operation, "rehydrate_resource");
  EXPECT_EQ(request.root, "app");
  EXPECT_EQ(request.resource_id, old_id);
  EXPECT_EQ(request.new_resource_id, "fresh-1");
  EXPECT_EQ(Call("GET", "/api/v1alpha1/resources/fresh-1").status, 200);
}

TEST_F(InstanceHandlersTest, RehydrateResourceAcceptsEverySpellingOfTheNewId) {
  Call("POST", "/api/v1alpha1/resources?id=res-1", R"({"spec":{"service_type":"vm"}})");
  auto a = Call("POST", "/api/v1alpha1/resources/res-1:rehydrate", R"({"new_resource_id":"n-1"})");
  ASSERT_EQ(a.status, 202) << a.body;
  auto b = Call("POST", "/api/v1alpha1/resources/n-1:rehydrate", R"({"new_instance_id":"n-2"})");
  ASSERT_EQ(b.status, 202) << b.body;
  EXPECT_EQ(LastRequest().new_resource_id, "n-2");
  EXPECT_EQ(LastRequest().root, "res-1");
}

TEST_F(InstanceHandlersTest, RehydrateResourceWithoutBodyGeneratesTheNewId) {
  Call("POST", "/api/v1alpha1/resources?id=res-1", R"({"spec":{"service_type":"vm"}})");
  auto r = Call("POST", "/api/v1alpha1/resources/res-1:rehydrate", "", {});
  ASSERT_EQ(r.status, 202) << r.body;
  const InstanceEvent request = LastRequest();
  EXPECT_EQ(request.root, "res-1");
  EXPECT_EQ(request.resource_id, "res-1");
  EXPECT_EQ(request.new_resource_id.size(), 36u);
  EXPECT_EQ(Parse(r).Str("resource_id"), request.new_resource_id);
}

TEST_F(InstanceHandlersTest, RehydrateResourceRejectsBadOrTakenNewIds) {
  Call("POST", "/api/v1alpha1/resources?id=res-1", R"({"spec":{"service_type":"vm"}})");
  Call("POST", "/api/v1alpha1/resources?id=res-2", R"({"spec":{"service_type":"vm"}})");
  const size_t submitted = bus_->submitted().size();
  auto bad = Call("POST", "/api/v1alpha1/resources/res-1:rehydrate", R"({"new_resource_id":"X"})");
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(Parse(bad).ErrorFields(), std::vector<std::string>{"new_resource_id"});
  auto wrong_type =
      Call("POST", "/api/v1alpha1/resources/res-1:rehydrate", R"({"new_resource_id":1})");
  EXPECT_EQ(wrong_type.status, 400) << wrong_type.body;
  auto taken =
      Call("POST", "/api/v1alpha1/resources/res-1:rehydrate", R"({"new_resource_id":"res-2"})");
  EXPECT_EQ(taken.status, 409) << taken.body;
  EXPECT_EQ(Call("POST", "/api/v1alpha1/resources/nobody:rehydrate", "", {}).status, 404);
  EXPECT_EQ(bus_->submitted().size(), submitted);
}

// SPEC §10: prefer_local (query or body) travels to the worker on both rehydrate calls; without
// it the request is as before (absent on the wire); a bad value is a 400 naming it.
TEST_F(InstanceHandlersTest, RehydrateCarriesPreferLocalFromTheQueryOrTheBody) {
  CreateCii("app");
  auto plain = Call("POST", "/api/v1alpha1/catalog-item-instances/app:rehydrate", "", {});
  ASSERT_EQ(plain.status, 202) << plain.body;
  EXPECT_FALSE(LastRequest().prefer_local);
  EXPECT_EQ(bus_->submitted().back().data.find("prefer_local"), std::string::npos);
  auto query =
      Call("POST", "/api/v1alpha1/catalog-item-instances/app:rehydrate?prefer_local=true", "", {});
  ASSERT_EQ(query.status, 202) << query.body;
  EXPECT_TRUE(LastRequest().prefer_local);
  auto body = Call("POST", "/api/v1alpha1/catalog-item-instances/app:rehydrate",
                   R"({"prefer_local":true})");
  ASSERT_EQ(body.status, 202) << body.body;
  EXPECT_TRUE(LastRequest().prefer_local);

  Call("POST", "/api/v1alpha1/resources?id=res-1", R"({"spec":{"service_type":"vm"}})");
  auto resource = Call("POST", "/api/v1alpha1/resources/res-1:rehydrate?prefer_local=true",
                       R"({"new_resource_id":"n-1"})");
  ASSERT_EQ(resource.status, 202) << resource.body;
  EXPECT_TRUE(LastRequest().prefer_local);
  EXPECT_EQ(LastRequest().new_resource_id, "n-1");
  auto camel = Call("POST", "/api/v1alpha1/resources/n-1:rehydrate", R"({"preferLocal":false})");
  ASSERT_EQ(camel.status, 202) << camel.body;
  EXPECT_FALSE(LastRequest().prefer_local);
}

TEST_F(InstanceHandlersTest, RehydrateRejectsABadPreferLocalNamingIt) {
  CreateCii("app");
  Call("POST", "/api/v1alpha1/resources?id=res-1", R"({"spec":{"service_type":"vm"}})");
  const size_t submitted = bus_->submitted().size();
  for (const auto& [target, body] : std::vector<std::pair<std::string, std::string>>{
           {"/api/v1alpha1/catalog-item-instances/app:rehydrate?prefer_local=yes", ""},
           {"/api/v1alpha1/catalog-item-instances/app:rehydrate", R"({"prefer_local":"true"})"},
           {"/api/v1alpha1/resources/res-1:rehydrate?prefer_local=1", ""},
           {"/api/v1alpha1/resources/res-1:rehydrate", R"({"prefer_local":1})"}}) {
    SCOPED_TRACE(target + " " + body);
    auto r = Call("POST", target, body);
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(Parse(r).ErrorFields(), std::vector<std::string>{"prefer_local"});
  }
  EXPECT_EQ(bus_->submitted().size(), submitted);
}

// ---- service-type instances ----

TEST_F(InstanceHandlersTest, CreateServiceTypeInstanceReturns201) {
  auto r = Call("POST", "/api/v1alpha1/service-type-instances?id=vm-1",
                R"({"providerName":"sp-b","spec":{"service_type":"vm","memory":"2Gi"}})");
  ASSERT_EQ(r.status, 201) << r.body;
  auto body = Parse(r);
  EXPECT_EQ(body.Str("id"), "vm-1");
  EXPECT_EQ(body.Str("provider_name"), "sp-b");
  EXPECT_EQ(body.Str("service_type"), "vm");
  EXPECT_EQ(body.Raw("spec"), R"({"service_type":"vm","memory":"2Gi"})");
  EXPECT_EQ(body.Str("status"), "PROVISIONING");
  EXPECT_EQ(body.Str("create_time"), kStartTime);
  EXPECT_EQ(body.Str("update_time"), kStartTime);
  EXPECT_EQ(body.Str("path"), "service-type-instances/vm-1");
  ASSERT_NE(FindHeader(r, "Location"), nullptr);
  EXPECT_EQ(*FindHeader(r, "Location"), "/api/v1alpha1/service-type-instances/vm-1");
  const InstanceEvent request = LastRequest();
  EXPECT_EQ(request.operation, "create_service_type_instance");
  EXPECT_EQ(request.root, "vm-1");
  EXPECT_EQ(request.instance_id, "vm-1");
  EXPECT_EQ(request.provider_name, "sp-b");
  EXPECT_EQ(request.spec, R"({"service_type":"vm","memory":"2Gi"})");
}

TEST_F(InstanceHandlersTest, CreateServiceTypeInstanceValidatesItsBody) {
  auto no_provider =
      Call("POST", "/api/v1alpha1/service-type-instances", R"({"spec":{"service_type":"vm"}})");
  EXPECT_EQ(no_provider.status, 400) << no_provider.body;
  EXPECT_EQ(Parse(no_provider).ErrorFields(), std::vector<std::string>{"provider_name"});
  auto no_spec = Call("POST", "/api/v1alpha1/service-type-instances", R"({"provider_name":"p"})");
  EXPECT_EQ(no_spec.status, 400) << no_spec.body;
  EXPECT_EQ(Parse(no_spec).ErrorFields(), std::vector<std::string>{"spec"});
  auto neither = Call("POST", "/api/v1alpha1/service-type-instances", R"({"provider_name":3})");
  EXPECT_EQ(Parse(neither).ErrorFields(), (std::vector<std::string>{"provider_name", "spec"}));
  EXPECT_EQ(Call("POST", "/api/v1alpha1/service-type-instances?id=NO",
                 R"({"provider_name":"p","spec":{}})")
                .status,
            400);
  EXPECT_TRUE(bus_->submitted().empty());
  CreateSti("vm-1");
  EXPECT_EQ(Call("POST", "/api/v1alpha1/service-type-instances?id=vm-1",
                 R"({"provider_name":"p","spec":{}})")
                .status,
            409);
}

TEST_F(InstanceHandlersTest, ListServiceTypeInstancesFiltersUnderInstances) {
  CreateSti("a-vm", "sp-b", "vm");
  CreateSti("b-db", "sp-b", "database");
  CreateSti("c-vm", "sp-c", "vm");
  auto ids = [&](const std::string& query) {
    auto r = Call("GET", "/api/v1alpha1/service-type-instances" + query);
    EXPECT_EQ(r.status, 200) << query << " " << r.body;
    return Parse(r).Column("instances", "id");
  };
  EXPECT_EQ(ids(""), (std::vector<std::string>{"a-vm", "b-db", "c-vm"}));
  EXPECT_EQ(ids("?provider=sp-b"), (std::vector<std::string>{"a-vm", "b-db"}));
  EXPECT_EQ(ids("?service_type=vm"), (std::vector<std::string>{"a-vm", "c-vm"}));
  EXPECT_EQ(ids("?provider=sp-c&service_type=database"), std::vector<std::string>{});
  ASSERT_EQ(Call("DELETE", "/api/v1alpha1/service-type-instances/a-vm", "", {}).status, 204);
  EXPECT_EQ(ids(""), (std::vector<std::string>{"b-db", "c-vm"}));
  EXPECT_EQ(ids("?show_deleted=true"), (std::vector<std::string>{"a-vm", "b-db", "c-vm"}));
  EXPECT_EQ(ids("?show_deleted=false"), (std::vector<std::string>{"b-db", "c-vm"}));
}

TEST_F(InstanceHandlersTest, BadShowDeletedReturns400) {
  for (const char* value : {"yes", "1", "TRUE", ""}) {
    auto list =
        Call("GET", std::string("/api/v1alpha1/service-type-instances?show_deleted=") + value);
    EXPECT_EQ(list.status, 400) << value;
    EXPECT_EQ(Parse(list).ErrorFields(), std::vector<std::string>{"show_deleted"});
    auto get =
        Call("GET", std::string("/api/v1alpha1/service-type-instances/x?show_deleted=") + value);
    EXPECT_EQ(get.status, 400) << value;
  }
}

TEST_F(InstanceHandlersTest, DeletedServiceTypeInstanceIsHiddenUnlessShowDeleted) {
  CreateSti("vm-1");
  auto r = Call("DELETE", "/api/v1alpha1/service-type-instances/vm-1", "", {});
  ASSERT_EQ(r.status, 204) << r.body;
  const InstanceEvent request = LastRequest();
  EXPECT_EQ(request.operation, "delete_service_type_instance");
  EXPECT_EQ(request.root, "vm-1");
  EXPECT_EQ(request.instance_id, "vm-1");
  EXPECT_FALSE(request.deferred);
  EXPECT_EQ(Call("GET", "/api/v1alpha1/service-type-instances/vm-1").status, 404);
  auto shown = Call("GET", "/api/v1alpha1/service-type-instances/vm-1?show_deleted=true");
  ASSERT_EQ(shown.status, 200) << shown.body;
  EXPECT_EQ(Parse(shown).Str("status"), "DELETED");
  EXPECT_EQ(Call("DELETE", "/api/v1alpha1/service-type-instances/vm-1", "", {}).status, 404);
  EXPECT_EQ(Call("DELETE", "/api/v1alpha1/service-type-instances/nobody", "", {}).status, 404);
}

TEST_F(InstanceHandlersTest, DeferredDeleteQueuesACleanupRecord) {
  CreateSti("vm-1", "sp-b", "database");
  auto r = Call("DELETE", "/api/v1alpha1/service-type-instances/vm-1?deferred=true", "", {});
  ASSERT_EQ(r.status, 204) << r.body;
  const InstanceEvent request = LastRequest();
  EXPECT_TRUE(request.deferred);
  EXPECT_EQ(request.root, "vm-1");
  auto list = Call("GET", "/api/v1alpha1/cleanup-queue");
  ASSERT_EQ(list.status, 200) << list.body;
  auto body = Parse(list);
  simdjson::dom::array records;
  ASSERT_FALSE(body.root["records"].get(records)) << list.body;
  ASSERT_EQ(records.size(), 1u);
  simdjson::dom::element record;
  ASSERT_FALSE(records.at(0).get(record));
  std::string_view text;
  int64_t n = -1;
  ASSERT_FALSE(record["instance_id"].get(text));
  EXPECT_EQ(text, "vm-1");
  ASSERT_FALSE(record["provider_name"].get(text));
  EXPECT_EQ(text, "sp-b");
  ASSERT_FALSE(record["service_type"].get(text));
  EXPECT_EQ(text, "database");
  ASSERT_FALSE(record["requested_at"].get(text));
  EXPECT_EQ(text, kStartTime);
  ASSERT_FALSE(record["retry_count"].get(n));
  EXPECT_EQ(n, 0);
  ASSERT_FALSE(record["status"].get(text));
  EXPECT_EQ(text, "PENDING");
  simdjson::dom::element value;
  ASSERT_FALSE(record["last_attempt"].get(value));
  EXPECT_TRUE(value.is_null());
  ASSERT_FALSE(record["last_error"].get(value));
  EXPECT_TRUE(value.is_null());
}

TEST_F(InstanceHandlersTest, BadDeferredReturns400) {
  CreateSti("vm-1");
  auto r = Call("DELETE", "/api/v1alpha1/service-type-instances/vm-1?deferred=maybe", "", {});
  ASSERT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(Parse(r).ErrorFields(), std::vector<std::string>{"deferred"});
  auto explicit_false =
      Call("DELETE", "/api/v1alpha1/service-type-instances/vm-1?deferred=false", "", {});
  EXPECT_EQ(explicit_false.status, 204);
  EXPECT_FALSE(LastRequest().deferred);
}

// ---- cleanup queue ----

TEST_F(InstanceHandlersTest, CleanupQueueFiltersByStatus) {
  CreateSti("vm-1");
  CreateSti("vm-2");
  FailCleanup("vm-1");
  ASSERT_EQ(Call("DELETE", "/api/v1alpha1/service-type-instances/vm-2?deferred=true").status, 204);
  auto ids = [&](const std::string& status) {
    auto r = Call("GET", "/api/v1alpha1/cleanup-queue?status=" + status);
    EXPECT_EQ(r.status, 200) << status << " " << r.body;
    return Parse(r).Column("records", "instance_id");
  };
  EXPECT_EQ(ids("FAILED"), std::vector<std::string>{"vm-1"});
  EXPECT_EQ(ids("PENDING"), std::vector<std::string>{"vm-2"});
  EXPECT_EQ(ids("pending"), std::vector<std::string>{"vm-2"});
  EXPECT_EQ(ids("PENDING_PROVIDER"), std::vector<std::string>{});
  auto failed = Parse(Call("GET", "/api/v1alpha1/cleanup-queue?status=FAILED"));
  EXPECT_EQ(failed.Column("records", "last_attempt"),
            std::vector<std::string>{"2026-01-01T00:00:05.000Z"});
  EXPECT_EQ(failed.Column("records", "last_error"), std::vector<std::string>{"connection refused"});
}

TEST_F(InstanceHandlersTest, CleanupQueueUnknownStatusReturns400) {
  for (const char* status : {"DONE", "", "PENDINGX"}) {
    auto r = Call("GET", std::string("/api/v1alpha1/cleanup-queue?status=") + status);
    EXPECT_EQ(r.status, 400) << status;
    EXPECT_EQ(Parse(r).ErrorFields(), std::vector<std::string>{"status"});
  }
}

TEST_F(InstanceHandlersTest, RetryFailedCleanupReturns200WithThePendingRecord) {
  CreateSti("vm-1");
  FailCleanup("vm-1");
  auto r = Call("POST", "/api/v1alpha1/cleanup-queue/vm-1:retry", "", {});
  ASSERT_EQ(r.status, 200) << r.body;
  auto body = Parse(r);
  EXPECT_EQ(body.Str("instance_id"), "vm-1");
  EXPECT_EQ(body.Str("status"), "PENDING");
  EXPECT_EQ(body.Int("retry_count"), 0);
  const InstanceEvent request = LastRequest();
  EXPECT_EQ(request.operation, "retry_cleanup");
  EXPECT_EQ(request.root, "vm-1");
  EXPECT_EQ(request.instance_id, "vm-1");
}

TEST_F(InstanceHandlersTest, RetryOfANonFailedRecordReturns409) {
  CreateSti("vm-1");
  ASSERT_EQ(Call("DELETE", "/api/v1alpha1/service-type-instances/vm-1?deferred=true").status, 204);
  const size_t submitted = bus_->submitted().size();
  auto r = Call("POST", "/api/v1alpha1/cleanup-queue/vm-1:retry", "", {});
  ASSERT_EQ(r.status, 409) << r.body;
  EXPECT_EQ(bus_->submitted().size(), submitted);
  EXPECT_EQ(Call("POST", "/api/v1alpha1/cleanup-queue/nobody:retry", "", {}).status, 404);
}

// ---- routing ----

TEST_F(InstanceHandlersTest, WrongMethodsReturn405WithAllow) {
  struct Case {
    const char* method;
    const char* path;
    const char* allow;
  };
  for (const Case& c :
       {Case{"PUT", "/catalog-item-instances", "GET, POST"},
        Case{"PUT", "/catalog-item-instances/app", "GET, DELETE"},
        Case{"GET", "/catalog-item-instances/app:rehydrate", "POST"},
        Case{"DELETE", "/resources", "GET, POST"}, Case{"PATCH", "/resources/r", "GET, DELETE"},
        Case{"GET", "/resources/r:rehydrate", "POST"},
        Case{"PUT", "/service-type-instances", "GET, POST"},
        Case{"POST", "/service-type-instances/s", "GET, DELETE"},
        Case{"POST", "/cleanup-queue", "GET"}, Case{"GET", "/cleanup-queue/s:retry", "POST"}}) {
    auto r = Call(c.method, std::string("/api/v1alpha1") + c.path, "{}");
    EXPECT_EQ(r.status, 405) << c.method << " " << c.path;
    const auto* allow = FindHeader(r, "Allow");
    ASSERT_NE(allow, nullptr) << c.method << " " << c.path;
    EXPECT_EQ(*allow, c.allow) << c.method << " " << c.path;
  }
  EXPECT_TRUE(bus_->submitted().empty());
}

TEST_F(InstanceHandlersTest, UnknownInstancePathsReturn404) {
  for (const char* path : {"/catalog-item-instances/a/b", "/cleanup-queue/x", "/resourcesx",
                           "/catalog-item-instances/"}) {
    auto r = Call("GET", std::string("/api/v1alpha1") + path);
    EXPECT_EQ(r.status, 404) << path;
  }
}

TEST_F(InstanceHandlersTest, ApiV1AliasServesTheInstanceApi) {
  auto r = Call("POST", "/api/v1/catalog-item-instances?id=via-alias",
                R"({"spec":{"service_type":"vm"}})");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(Call("GET", "/api/v1/catalog-item-instances/via-alias").status, 200);
  EXPECT_EQ(Call("GET", "/api/v1alpha1/catalog-item-instances/via-alias").status, 200);
  EXPECT_EQ(Call("GET", "/api/v1/resources").status, 200);
  EXPECT_EQ(Call("GET", "/api/v1/service-type-instances").status, 200);
  EXPECT_EQ(Call("GET", "/api/v1/cleanup-queue").status, 200);
  EXPECT_EQ(Call("POST", "/api/v1/catalog-item-instances/via-alias:rehydrate", "", {}).status, 202);
}

TEST_F(InstanceHandlersTest, WithoutAnInstanceViewEveryInstanceRouteReturns404) {
  for (const char* path :
       {"/catalog-item-instances", "/catalog-item-instances/a",
        "/catalog-item-instances/a:rehydrate", "/resources", "/resources/r:rehydrate",
        "/service-type-instances", "/service-type-instances/s", "/cleanup-queue",
        "/cleanup-queue/s:retry"}) {
    for (const char* method : {"GET", "POST", "DELETE"}) {
      auto r = CallWith(no_instances_router_, method, std::string("/api/v1alpha1") + path, "{}",
                        {{"content-type", "application/json"}});
      EXPECT_EQ(r.status, 404) << method << " " << path;
    }
  }
  EXPECT_TRUE(bus_->submitted().empty());
}

// ---- provider deletes (SPEC §3.1) ----

TEST_F(InstanceHandlersTest, DeleteProviderHostingLiveInstancesReturns409) {
  CreateCii("app-1");
  CreateCii("app-2");
  auto r = Call("DELETE", std::string("/api/v1alpha1/providers/") + kProviderId, "", {});
  ASSERT_EQ(r.status, 409) << r.body;
  EXPECT_EQ(Parse(r).Str("detail"), "provider 'sp-a-id' hosts 2 live instances; use ?force=true");
  EXPECT_TRUE(provider_bus_->submitted().empty());
  auto not_forced = Call(
      "DELETE", std::string("/api/v1alpha1/providers/") + kProviderId + "?force=false", "", {});
  EXPECT_EQ(not_forced.status, 409);
}

TEST_F(InstanceHandlersTest, DeleteProviderWithForceIgnoresLiveInstances) {
  CreateCii("app-1");
  auto r =
      Call("DELETE", std::string("/api/v1alpha1/providers/") + kProviderId + "?force=true", "", {});
  ASSERT_EQ(r.status, 204) << r.body;
  ASSERT_EQ(provider_bus_->submitted().size(), 1u);
  EXPECT_EQ(provider_bus_->submitted()[0].type, event_type::kDeletionRequested);
}

TEST_F(InstanceHandlersTest, DeleteProviderWhoseInstancesAreGoneReturns204) {
  CreateCii("app-1");
  ASSERT_EQ(Call("DELETE", "/api/v1alpha1/catalog-item-instances/app-1", "", {}).status, 204);
  auto r = Call("DELETE", std::string("/api/v1alpha1/providers/") + kProviderId, "", {});
  EXPECT_EQ(r.status, 204) << r.body;
  EXPECT_EQ(provider_bus_->submitted().size(), 1u);
}

}  // namespace
}  // namespace dcm::http
