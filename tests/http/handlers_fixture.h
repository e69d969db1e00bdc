// The fixture of the hermetic handler tests (handlers_test.cc, auth_handlers_test.cc): a
// FakeCommandBus runs the real decision path synchronously (decode request -> decide -> encode
// outcome -> registry projection -> store), so every write answers before the handler returns.
// No sockets, no Kafka, no sleeps.
#pragma once

#include <gtest/gtest.h>
#include <simdjson.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "events/command_bus.h"
#include "events/provider_events.h"
#include "projections/audit_projection.h"
#include "projections/health_projection.h"
#include "projections/outcome_waiters.h"
#include "projections/provider_decider.h"
#include "projections/registry_projection.h"
#include "projections/store.h"
#include "src/common/clock.h"
#include "src/common/metrics.h"
#include "src/http/router.h"
#include "tests/http/handler_calls.h"

namespace dcm::http {

// Runs the registrar's and the registry projection's real code synchronously.
class FakeCommandBus final : public CommandBus {
 public:
  FakeCommandBus(Store* store, const std::vector<std::string>* service_types, const Clock* clock)
      : store_(store),
        service_types_(service_types),
        clock_(clock),
        decider_(store),
        projection_(store, &waiters_, &metrics_) {}

  void Submit(const CloudEvent& request, Done done) override {
    submitted_.push_back(request);
    if (timeout_) {
      done(MakeError(ErrorCode::kTimeout, "no outcome within the deadline"));
      return;
    }
    // Round-trip through the wire form, like the registrar reading the requests topic.
    auto event = DecodeCloudEvent(EncodeCloudEvent(request));
    if (!event) {
      done(MakeError(ErrorCode::kInternal, "undecodable request: " + event.error().message));
      return;
    }
    const auto kind = RequestKindOfType(event->type);
    if (!kind) {
      done(MakeError(ErrorCode::kInternal, "not a provider request type: " + event->type));
      return;
    }
    const int64_t seq = seq_++;
    const int64_t now = clock_->NowMillis();
    StoreBatch batch;
    ProviderOutcome outcome;
    auto decoded = DecodeProviderRequest(*event, *service_types_);
    if (decoded) {
      DecisionInputs inputs;
      if (live_instances_) inputs.live_instances = live_instances_(decoded->id);
      auto decided = decider_.Decide(*decoded, seq, now, batch, inputs);
      if (!decided) {
        done(tl::unexpected(decided.error()));
        return;
      }
      outcome = std::move(*decided);
    } else if (decoded.error().code == ErrorCode::kInvalidArgument) {
      outcome = decider_.RejectInvalid(event->id, *kind, decoded.error(), seq, batch);
    } else {
      done(tl::unexpected(decoded.error()));
      return;
    }
    const CloudEvent outcome_event = EncodeProviderOutcome(outcome, "test", now);
    const EventPosition position{"dcm.providers", 0, seq, now};
    if (auto applied = projection_.Apply(outcome_event, position, batch); !applied) {
      done(tl::unexpected(applied.error()));
      return;
    }
    if (auto written = store_->Write(batch); !written) {
      done(tl::unexpected(written.error()));
      return;
    }
    projection_.AfterCommit({outcome_event});
    done(outcome_event);
  }

  void Record(const CloudEvent& outcome) override { recorded_.push_back(outcome); }

  void set_timeout(bool timeout) { timeout_ = timeout; }
  // What the registrar would read from the instance projection for a deletion without force.
  void set_live_instances(std::function<int64_t(const std::string&)> live) {
    live_instances_ = std::move(live);
  }
  const std::vector<CloudEvent>& recorded() const { return recorded_; }
  const std::vector<CloudEvent>& submitted() const { return submitted_; }

 private:
  Store* store_;
  const std::vector<std::string>* service_types_;
  const Clock* clock_;
  OutcomeWaiters waiters_;
  Metrics metrics_;
  ProviderDecider decider_;
  RegistryProjection projection_;
  int64_t seq_ = 0;
  bool timeout_ = false;
  std::function<int64_t(const std::string&)> live_instances_;
  std::vector<CloudEvent> recorded_;
  std::vector<CloudEvent> submitted_;
};

class HandlersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    auto store = Store::Open("/handlers-test-" + std::to_string(counter++),
                             StoreOptions{.bulk_load = false, .in_memory = true});
    ASSERT_TRUE(store.has_value()) << store.error().message;
    store_ = std::move(*store);
    view_ = std::make_unique<RegistryView>(store_.get());
    health_view_ = std::make_unique<HealthView>(store_.get());
    bus_ = std::make_unique<FakeCommandBus>(store_.get(), &service_types_, &clock_);
    requests_ = &metrics_.GetCounter("dcm_test_requests_total", "Requests seen by the test");
    requests_->Inc(7);

    OpsContext ops;
    ops.metrics = &metrics_;
    ops.checks = {{"projection:registry", [this] { return registry_ready_.load(); }},
                  {"registrar", [this] { return registrar_ready_.load(); },
                   [this] { return registrar_detail_; }}};
    ops.dependencies = {{"store", [this] { return store_ok_.load(); }}};
    ops.info.version = "0.1.0-test";
    ops.info.instance_id = "instance-1";
    ops.info.kafka_bootstrap_servers = "broker-1:9092,broker-2:9092";
    ops.info.topics = {"dcm.provider-requests", "dcm.providers"};
    ops.info.components = {"api", "registrar"};
    ops_ = std::move(ops);
    router_ = MakeRouter(Api(), ops_, AccessContext{});  // auth disabled (auth_handlers_test.cc)
  }

  ApiContext Api() {
    return ApiContext{view_.get(), health_view_.get(), bus_.get(), &rules_,
                      &clock_,     "dcm/http/test"};
  }

  HttpResponse Call(const std::string& method, const std::string& target,
                    const std::string& body = "",
                    std::map<std::string, std::string> headers = {
                        {"content-type", "application/json"}}) {
    return CallRouter(router_, method, target, body, std::move(headers));
  }

  static std::string Spec(const std::string& name, const std::string& type = "vm") {
    return R"({"name":")" + name + R"(","endpoint":"http://)" + name +
           R"(.example.com/api","service_type":")" + type + R"("})";
  }

  // Folds probes of provider `id` (for its current registration) into the health projection.
  void Probe(const std::string& id, std::vector<ProbeFailure> failures, int64_t reg_offset = 0) {
    auto provider = view_->Get(id);
    ASSERT_TRUE(provider && *provider);
    HealthProjection projection(store_.get(), nullptr);
    StoreBatch batch;
    for (auto failure : failures) {
      HealthProbe p;
      p.probe_id = "probe-" + std::to_string(++probe_seq_);
      p.time_ms = clock_.NowMillis();
      p.provider_id = id;
      p.seq = probe_seq_;
      p.registration_seq = (*provider)->seq + reg_offset;
      p.failure = failure;
      p.http_status = failure == ProbeFailure::kNone ? 200 : 0;
      p.latency_us = 2500;
      p.error = failure == ProbeFailure::kNone ? "" : "connection refused";
      ASSERT_TRUE(projection.Apply(EncodeHealthProbe(p, "test"), EventPosition{}, batch));
    }
    ASSERT_TRUE(store_->Write(batch));
  }

  std::vector<std::string> IdsWithHealth(const std::string& status) {
    auto r = Call("GET", "/api/v1alpha1/providers?health_status=" + status);
    EXPECT_EQ(r.status, 200) << r.body;
    std::vector<std::string> ids;
    simdjson::dom::array providers;
    auto body = Parse(r);
    if (body.root["providers"].get(providers)) return ids;
    for (auto p : providers) {
      std::string_view id;
      if (!p["id"].get(id)) ids.emplace_back(id);
    }
    return ids;
  }

  int64_t probe_seq_ = 0;

  // Registers `name` (optionally with ?id=) and returns the id (expects 201).
  std::string Register(const std::string& name, const std::string& id = "",
                       const std::string& type = "vm") {
    auto r =
        Call("POST", "/api/v1alpha1/providers" + (id.empty() ? "" : "?id=" + id), Spec(name, type));
    EXPECT_EQ(r.status, 201) << r.body;
    return Parse(r).Str("id");
  }

  std::vector<std::string> service_types_{"vm", "container", "database"};
  ProviderRules rules_{service_types_};
  FakeClock clock_;
  Metrics metrics_;
  Counter* requests_ = nullptr;
  std::atomic<bool> registry_ready_{true};
  std::atomic<bool> registrar_ready_{true};
  std::string registrar_detail_;  // the registrar check's /readyz detail (handlers run inline)
  std::unique_ptr<Store> store_;
  std::unique_ptr<RegistryView> view_;
  std::unique_ptr<HealthView> health_view_;
  std::unique_ptr<FakeCommandBus> bus_;
  OpsContext ops_;
  std::atomic<bool> store_ok_{true};
  Handler router_;
};

}  // namespace dcm::http
