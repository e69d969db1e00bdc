// A deterministic mixed event log like a running control plane writes (issue #5): mostly health
// probes, some health changes, provider outcomes and requests, instance sagas and requests, and
// SP status events, each encoded by the typed encoders of events/. Used by the rebuild benchmark
// (tests/bench/rebuild_bench.cc) and the rebuild integration test (tests/integration).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "events/health_events.h"
#include "events/instance_events.h"
#include "events/provider_events.h"
#include "src/common/config.h"
#include "src/common/time_format.h"
#include "src/common/uuid.h"

namespace dcm::bench {

struct WorkloadEvent {
  std::string topic;
  std::string key;
  std::string value;  // the CloudEvent JSON
};

// Per 1,000 events: 800 health_probed, 20 health_changed, 50 provider outcomes, 6 provider
// requests, 80 instance facts (a 5-fact create saga per root), 14 instance operation requests,
// 30 SP status events. Every event is valid; the same seed and count give the same log.
class MixedWorkload {
 public:
  MixedWorkload(Topics topics, int providers, std::string seed = "bench")
      : topics_(std::move(topics)), providers_(providers), seed_(std::move(seed)) {}

  WorkloadEvent Next() {
    const int64_t i = n_++;
    const int slot = static_cast<int>(i % 1000);
    const int64_t t = kBaseMs + i;
    if (slot < 800) return Probe(i, t);
    if (slot < 820) return Change(i, t);
    if (slot < 870) return Outcome(i, t);
    if (slot < 876) return Request(i, t);
    if (slot < 956) return Fact(t);
    if (slot < 970) return OperationRequest(i, t);
    return Status(i, t);
  }

 private:
  static constexpr int64_t kBaseMs = 1767225600000;  // 2026-01-01

  std::string ProviderId(int64_t n) const {
    return DeterministicUuid(seed_ + "/p" + std::to_string(n % providers_));
  }

  WorkloadEvent Probe(int64_t i, int64_t t) {
    HealthProbe probe;
    probe.probe_id = DeterministicUuid(seed_ + "/probe" + std::to_string(i));
    probe.time_ms = t;
    probe.provider_id = ProviderId(i / 7);
    probe.seq = t;
    probe.registration_seq = 1;
    probe.url = "http://10.0.0.1:8443/api/v1/vm/health";
    if (i % 10 == 3) {
      probe.failure = ProbeFailure::kTimeout;
      probe.error = "timed out after 5000 ms";
    } else {
      probe.http_status = 200;
    }
    probe.latency_us = 1000 + i % 5000;
    return {topics_.Health(), probe.provider_id, EncodeCloudEvent(EncodeHealthProbe(probe, kSrc))};
  }

  WorkloadEvent Change(int64_t i, int64_t t) {
    HealthChange change;
    change.provider_id = ProviderId(i / 11);
    change.time_ms = t;
    change.from = HealthStatus::kReady;
    change.to = HealthStatus::kUnhealthy;
    change.reason = "provider reported unhealthy";
    change.seq = t;
    change.probe_ids = {DeterministicUuid(seed_ + "/probe" + std::to_string(i - 1))};
    return {topics_.Health(), change.provider_id,
            EncodeCloudEvent(EncodeHealthChange(change, kSrc))};
  }

  ProviderSpec Spec(int64_t n) const {
    ProviderSpec spec;
    spec.name = "provider-" + std::to_string(n % providers_);
    spec.endpoint = "http://10.0.0.1:8443/api/v1/vm";
    spec.service_type = "vm";
    spec.operations = {"create", "read", "delete"};
    spec.metadata = R"({"region_code":"eu-west-1","zone":"a"})";
    return spec;
  }

  WorkloadEvent Outcome(int64_t i, int64_t t) {
    ProviderOutcome o;
    const int64_t n = outcomes_++;
    o.kind = n < providers_ ? OutcomeKind::kRegistered : OutcomeKind::kUpdated;
    o.request_id = DeterministicUuid(seed_ + "/req" + std::to_string(i));
    o.seq = n + 1;
    o.provider.id = ProviderId(n);
    o.provider.spec = Spec(n);
    o.provider.seq = o.seq;
    o.provider.create_time = o.provider.update_time = FormatRfc3339Millis(t);
    const CloudEvent e = EncodeProviderOutcome(o, "dcm/registrar/bench", t);
    return {topics_.Providers(), e.subject, EncodeCloudEvent(e)};
  }

  WorkloadEvent Request(int64_t i, int64_t t) {
    ProviderRequest request;
    request.kind = RequestKind::kRegister;
    request.spec = Spec(i);
    CloudEvent e = EncodeProviderRequest(request, "dcm/http/bench", t);
    e.id = DeterministicUuid(seed_ + "/preq" + std::to_string(i));
    return {topics_.ProviderRequests(), request.spec.name, EncodeCloudEvent(e)};
  }

  // A create saga per root: started, placed, created, catalog item created, completed.
  WorkloadEvent Fact(int64_t t) {
    const int64_t n = facts_++;
    const int64_t root_n = n / 5;
    InstanceEvent e;
    e.root = seed_ + "-cii-" + std::to_string(root_n);
    e.request_id = DeterministicUuid(seed_ + "/op" + std::to_string(root_n));
    e.time_ms = t;
    e.source = "dcm/instance-worker/bench";
    e.operation = OperationName(Operation::kCreateCatalogItemInstance);
    e.catalog_item_instance_id = e.root;
    e.resource_id = DeterministicUuid(seed_ + "/res" + std::to_string(root_n));
    e.instance_id = e.resource_id;
    e.provider_name = Spec(root_n).name;
    e.provider_id = ProviderId(root_n);
    e.service_type = "vm";
    e.spec = R"({"service_type":"vm","cpu":2,"memory":"4Gi"})";
    switch (n % 5) {
      case 0:
        e.type = event_type::kOperationStarted;
        break;
      case 1:
        e.type = event_type::kResourcePlaced;
        e.intent = e.spec;
        e.policy = "builtin";
        break;
      case 2:
        e.type = event_type::kInstanceCreated;
        e.status = "PROVISIONING";
        break;
      case 3:
        e.type = event_type::kCatalogItemInstanceCreated;
        e.display_name = "web";
        break;
      default:
        e.type = event_type::kOperationCompleted;
        break;
    }
    return {topics_.Instances(), e.root, EncodeCloudEvent(EncodeInstanceEvent(e))};
  }

  WorkloadEvent OperationRequest(int64_t i, int64_t t) {
    InstanceEvent e;
    e.type = event_type::kOperationRequested;
    e.request_id = DeterministicUuid(seed_ + "/opreq" + std::to_string(i));
    e.root = seed_ + "-cii-r" + std::to_string(i);
    e.operation = OperationName(Operation::kCreateCatalogItemInstance);
    e.catalog_item_instance_id = e.root;
    e.spec = R"({"service_type":"vm","cpu":2})";
    e.source = "dcm/http/bench";
    e.time_ms = t;
    return {topics_.InstanceRequests(), e.root, EncodeCloudEvent(EncodeInstanceEvent(e))};
  }

  WorkloadEvent Status(int64_t i, int64_t t) {
    CloudEvent e;
    e.id = DeterministicUuid(seed_ + "/status" + std::to_string(i));
    e.source = "sp/bench";
    e.type = std::string(event_type::kStatusPrefix) + "vm";
    const std::string instance = DeterministicUuid(seed_ + "/res" + std::to_string(i % 4000));
    e.subject = instance;
    e.time = FormatRfc3339Millis(t);
    e.data = R"({"id":")" + instance + R"(","status":")" + (i % 3 ? "running" : "stopped") +
             R"(","message":"ok"})";
    return {topics_.Status(), instance, EncodeCloudEvent(e)};
  }

  static constexpr char kSrc[] = "dcm/prober/bench";
  Topics topics_;
  int providers_;
  std::string seed_;
  int64_t n_ = 0;
  int64_t outcomes_ = 0;
  int64_t facts_ = 0;
};

}  // namespace dcm::bench
