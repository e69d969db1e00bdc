// Fuzz target: a Kafka record value as the registrar and the projections see it.
// DecodeCloudEvent, then every typed decoder (provider requests and outcomes, health, instance
// events, SP status events). Beyond "no crash, no hang", it checks that whatever
// decodes also survives an encode/decode round trip unchanged (SPEC §5.4: a replay must read
// back what was written), and that the upcaster (events/upcast.h) either brings an event to its
// type's latest schema version, which then decodes exactly as the original did, or calls it
// poison. Seeds: events/golden/ (health_probed in both v1 and v2) plus the inputs below.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "events/cloud_event.h"
#include "events/health_events.h"
#include "events/instance_events.h"
#include "events/provider_events.h"
#include "events/upcast.h"
#include "src/common/time_format.h"
#include "tests/fuzz/fuzz_check.h"

namespace dcm::fuzz {
namespace {

void CheckRequestRoundTrip(const CloudEvent& event) {
  auto request = DecodeProviderRequest(event, kServiceTypes);
  if (!request) {
    FUZZ_CHECK(request.error().code == ErrorCode::kCorruption ||
               request.error().code == ErrorCode::kInvalidArgument);
    return;
  }
  const auto time = ParseRfc3339(event.time);
  FUZZ_CHECK(time.has_value());
  const CloudEvent again = EncodeProviderRequest(*request, event.source, *time);
  auto decoded = DecodeCloudEvent(EncodeCloudEvent(again));
  FUZZ_CHECK(decoded.has_value());
  auto request_again = DecodeProviderRequest(*decoded, kServiceTypes);
  FUZZ_CHECK(request_again.has_value());
  FUZZ_CHECK(request_again->kind == request->kind);
  FUZZ_CHECK(request_again->request_id == request->request_id);
  FUZZ_CHECK(request_again->id == request->id);
  FUZZ_CHECK(request_again->spec == request->spec);
  FUZZ_CHECK(request_again->new_id == request->new_id);
  FUZZ_CHECK(request_again->force == request->force);
}

void CheckOutcomeRoundTrip(const CloudEvent& event) {
  auto outcome = DecodeProviderOutcome(event);
  if (!outcome) {
    FUZZ_CHECK(outcome.error().code == ErrorCode::kCorruption);
    return;
  }
  const CloudEvent again = EncodeProviderOutcome(*outcome, event.source, 0);
  auto decoded = DecodeCloudEvent(EncodeCloudEvent(again));
  FUZZ_CHECK(decoded.has_value());
  auto outcome_again = DecodeProviderOutcome(*decoded);
  FUZZ_CHECK(outcome_again.has_value());
  FUZZ_CHECK(*outcome_again == *outcome);
}

void CheckHealthRoundTrip(const CloudEvent& event) {
  if (auto probe = DecodeHealthProbe(event)) {
    auto decoded = DecodeCloudEvent(EncodeCloudEvent(EncodeHealthProbe(*probe, event.source)));
    FUZZ_CHECK(decoded.has_value());
    auto probe_again = DecodeHealthProbe(*decoded);
    FUZZ_CHECK(probe_again.has_value());
    // The time is re-rendered at millisecond precision, everything else is kept.
    probe_again->time_ms = probe->time_ms;
    FUZZ_CHECK(*probe_again == *probe);
  } else {
    FUZZ_CHECK(probe.error().code == ErrorCode::kCorruption);
  }
  if (auto change = DecodeHealthChange(event)) {
    auto decoded = DecodeCloudEvent(EncodeCloudEvent(EncodeHealthChange(*change, event.source)));
    FUZZ_CHECK(decoded.has_value());
    auto change_again = DecodeHealthChange(*decoded);
    FUZZ_CHECK(change_again.has_value());
    change_again->time_ms = change->time_ms;
    FUZZ_CHECK(*change_again == *change);
  } else {
    FUZZ_CHECK(change.error().code == ErrorCode::kCorruption);
  }
}

// Upcasting is total (latest version or kCorruption), idempotent, and invisible to the decoders:
// a probe decodes to the same HealthProbe before and after, and is poison in both or neither.
void CheckUpcast(const CloudEvent& event) {
  CloudEvent upcast = event;
  auto status = UpcastToLatest(upcast);
  if (!status) {
    FUZZ_CHECK(status.error().code == ErrorCode::kCorruption);
    FUZZ_CHECK(upcast == event);
    FUZZ_CHECK(!DecodeHealthProbe(event).has_value());
    return;
  }
  FUZZ_CHECK(upcast.schema_version == LatestSchemaVersion(event.type));
  CloudEvent again = upcast;
  FUZZ_CHECK(UpcastToLatest(again).has_value());
  FUZZ_CHECK(again == upcast);
  auto probe = DecodeHealthProbe(event);
  auto probe_upcast = DecodeHealthProbe(upcast);
  FUZZ_CHECK(probe.has_value() == probe_upcast.has_value());
  if (probe) FUZZ_CHECK(*probe == *probe_upcast);
}

void CheckInstanceRoundTrip(const CloudEvent& event) {
  auto decoded = DecodeInstanceEvent(event);
  if (!decoded) {
    FUZZ_CHECK(decoded.error().code == ErrorCode::kCorruption);
    return;
  }
  FUZZ_CHECK(IsInstanceEventType(decoded->type));
  const CloudEvent again = EncodeInstanceEvent(*decoded);
  FUZZ_CHECK(again.id == event.id);
  auto envelope = DecodeCloudEvent(EncodeCloudEvent(again));
  FUZZ_CHECK(envelope.has_value());
  auto decoded_again = DecodeInstanceEvent(*envelope);
  FUZZ_CHECK(decoded_again.has_value());
  // An empty subject is derived from the type's entity on encode; everything else is kept.
  if (decoded->subject.empty()) decoded->subject = decoded_again->subject;
  FUZZ_CHECK(*decoded_again == *decoded);
  FUZZ_CHECK(EncodeInstanceEvent(*decoded_again) == again);
}

void CheckSpStatus(const CloudEvent& event) {
  auto status = DecodeSpStatusEvent(event);
  if (!status) {
    FUZZ_CHECK(status.error().code == ErrorCode::kCorruption);
    return;
  }
  FUZZ_CHECK(!status->service_type.empty() && !status->instance_id.empty());
  FUZZ_CHECK(!status->status.empty());
  for (char c : status->status) FUZZ_CHECK(c < 'a' || c > 'z');
}

}  // namespace

// Built-in seeds for the standalone driver (tests/fuzz/standalone_main.cc).
std::vector<std::string> Seeds() {
  return {
      R"({"specversion":"1.0","id":"r1","source":"sp/a",)"
      R"("type":"dcm.provider.registration_requested","subject":"sp-a",)"
      R"("time":"2026-01-01T00:00:00.000Z","schemaversion":1,"data":{"id":"sp-a","name":"sp-a",)"
      R"("endpoint":"http://sp-a.example.com/api","serviceType":"vm","operations":["CREATE",)"
      R"("read"],"metadata":{"region_code":"eu-1","resources":{"cpu":4}}}})",
      R"({"specversion":"1.0","id":"r2","source":"s","type":"dcm.provider.update_requested",)"
      R"("time":"2026-01-01T00:00:00Z","schemaversion":"1","data":{"id":"sp-a","name":"sp-b",)"
      R"("endpoint":"https://[::1]:8443/x","service_type":"container"}})",
      R"({"specversion":"1.0","id":"r3","source":"s","type":"dcm.provider.id_change_requested",)"
      R"("time":"2026-01-01T01:00:00+01:00","data":{"id":"sp-a",)"
      R"("new_id":"123e4567-e89b-42d3-a456-426614174000"}})",
      R"({"specversion":"1.0","id":"r4","source":"s","type":"dcm.provider.deletion_requested",)"
      R"("time":"2026-01-01T00:00:00.123456789Z","data":{"id":"sp-a","force":true}})",
      R"({"specversion":"1.0","id":"o1","source":"dcm/registrar",)"
      R"("type":"dcm.provider.registered","subject":"sp-a","time":"2026-01-01T00:00:00.000Z",)"
      R"("schemaversion":1,"data":{"request_id":"r1","seq":0,"provider":{"id":"sp-a",)"
      R"("name":"sp-a","display_name":"A","endpoint":"http://h","service_type":"vm",)"
      R"("schema_version":"v1alpha1","operations":["create"],"metadata":{},)"
      R"("create_time":"2026-01-01T00:00:00.000Z","update_time":"2026-01-01T00:00:00.000Z",)"
      R"("seq":0}}})",
      R"({"specversion":"1.0","id":"o3","source":"dcm/registrar",)"
      R"("type":"dcm.provider.id_changed","time":"2026-01-01T00:00:00.000Z",)"
      R"("data":{"request_id":"r3","seq":2,"old_id":"sp-a","provider":{"id":"sp-z",)"
      R"("name":"sp-a"}}})",
      R"({"specversion":"1.0","id":"o5","source":"dcm/registrar","type":"dcm.provider.rejected",)"
      R"("time":"2026-01-01T00:00:00.000Z","data":{"request_id":"r5","seq":4,)"
      R"("request_type":"register","status":409,"detail":"taken","name":"sp-a","id":"x",)"
      R"("errors":[{"field":"name","message":"m"},1],"conflict":{"id":"sp-a","name":"sp-a"}}})",
      R"({"specversion":"1.0","id":"o6","source":"s","type":"dcm.provider.deleted",)"
      R"("time":"2026-01-01T00:00:00.000Z","data":{"request_id":"r6","provider":{"id":"a",)"
      R"("name":"b","metadata":{"a":[[[[{}]]]]}}}})",
      "{\"specversion\":\"1.0\",\"id\":\"\\u0000\",\"source\":\"\\ud83d\\ude00\",\"type\":\"t\","
      "\"time\":\"2026-01-01T00:00:00Z\",\"data\":{\"x\":\"\x7f\\u007f\"}}",
      R"({"specversion":"1.0","id":"p1","source":"dcm/prober","type":"dcm.provider.health_probed",)"
      R"("subject":"a","time":"2026-01-01T00:00:00.000Z","schemaversion":1,"data":{)"
      R"("provider_id":"a","seq":3,"registration_seq":1,"url":"http://a/health",)"
      R"("failure_class":"timeout","http_status":null,"latency_ms":5000.5,"error":"e",)"
      R"("failure_threshold":3,"success_threshold":1}})",
      R"({"specversion":"1.0","id":"p2","source":"dcm/prober","type":"dcm.provider.health_probed",)"
      R"("subject":"a","time":"2026-01-01T00:00:00.000Z","schemaversion":2,"data":{)"
      R"("provider_id":"a","seq":4,"registration_seq":1,"url":"http://a/health",)"
      R"("failure_class":null,"http_status":200,"latency_us":1875,)"
      R"("failure_threshold":3,"success_threshold":1}})",
      R"({"specversion":"1.0","id":"p3","source":"dcm/prober","type":"dcm.provider.health_probed",)"
      R"("subject":"a","time":"2026-01-01T00:00:00.000Z","schemaversion":"1","data":{)"
      R"("provider_id":"a","seq":5,"registration_seq":1,"latency_us":7,"latency_ms":4.095,)"
      R"("latency_ms":"x","failure_threshold":3,"success_threshold":1}})",
      R"({"specversion":"1.0","id":"c1","source":"dcm/prober","type":"dcm.provider.health_changed",)"
      R"("subject":"a","time":"2026-01-01T00:00:00.000Z","data":{"provider_id":"a",)"
      R"("from":"Ready","to":"Unavailable","reason":"r","seq":3,"probe_ids":["p1",2]}})",
      R"({"specversion":"1.0","id":"q1","source":"dcm/http","type":)"
      R"("dcm.instance.operation_requested","subject":"root-1","time":"2026-01-01T00:00:00.000Z",)"
      R"("schemaversion":1,"data":{"root":"root-1","operation":"create_catalog_item_instance",)"
      R"("catalog_item_instance_id":"root-1","spec":{"service_type":"vm","cpu":2}}})",
      R"({"specversion":"1.0","id":"f1","source":"dcm/worker","type":"dcm.resource.placed",)"
      R"("time":"2026-01-01T00:00:00.5+01:00","data":{"request_id":"q1","root":"root-1",)"
      R"("resource_id":"r-1","provider_name":"sim-vm-0","provider_id":"p-1","service_type":"vm",)"
      R"("intent":{"service_type":"vm"},"spec":{"service_type":"vm","a":[1.5,null,{}]},)"
      R"("policy":"builtin","deferred":true,"unknown":[]}})",
      R"({"specversion":"1.0","id":"f2","source":"dcm/cleanup","type":"dcm.cleanup.enqueued",)"
      R"("time":"2026-01-01T00:00:00.000Z","data":{"root":"root-1","instance_id":"r-1",)"
      R"("provider_name":"sim-vm-0","provider_id":"p-1","service_type":"vm",)"
      R"("requested_at":"0000-01-01T00:30:00+01:00","retry_count":0,"max_retries":5}})",
      R"({"specversion":"1.0","id":"f3","source":"dcm/cleanup","type":"dcm.cleanup.attempted",)"
      R"("time":"2026-01-01T00:00:00.000Z","data":{"root":"root-1","instance_id":"r-1",)"
      R"("outcome":"gone","status":"PENDING","retry_count":2147483647,"max_retries":5,)"
      R"("http_status":404,"force":false}})",
      R"({"specversion":"1.0","id":"s1","source":"sp/sim-vm-0","type":"dcm.status.vm",)"
      R"("subject":"r-1","time":"2026-01-01T00:00:00.000Z","data":{"id":"r-1",)"
      R"("status":"Running","message":null}})",
      std::string(2000, '[') + std::string(2000, ']'),
      std::string(200, '{'),
      "",
      "null",
  };
}

}  // namespace dcm::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  auto event = dcm::DecodeCloudEvent(input);
  if (!event) {
    FUZZ_CHECK(event.error().code == dcm::ErrorCode::kCorruption ||
               event.error().code == dcm::ErrorCode::kPayloadTooLarge);
    return 0;
  }
  // The envelope itself round-trips.
  auto again = dcm::DecodeCloudEvent(dcm::EncodeCloudEvent(*event));
  FUZZ_CHECK(again.has_value());
  FUZZ_CHECK(*again == *event);
  dcm::fuzz::CheckRequestRoundTrip(*event);
  dcm::fuzz::CheckOutcomeRoundTrip(*event);
  dcm::fuzz::CheckHealthRoundTrip(*event);
  dcm::fuzz::CheckUpcast(*event);
  dcm::fuzz::CheckInstanceRoundTrip(*event);
  dcm::fuzz::CheckSpStatus(*event);
  return 0;
}
