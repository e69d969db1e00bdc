// Fuzz target: what a provider's health endpoint may answer (remote, untrusted input) through
// ClassifyHealthResponse, and stored health records through DecodeHealthRecord. Beyond "no
// crash, no hang": a 200 body is classified as healthy, reported unhealthy or bad_body with a
// bounded error, and a record that decodes re-encodes to an equal record.
#include <cstdint>
#include <string>
#include <vector>

#include "events/health_events.h"
#include "projections/health_state.h"
#include "tests/fuzz/fuzz_check.h"

namespace dcm::fuzz {

std::vector<std::string> Seeds() {
  HealthRecord r;
  r.provider_id = "sp-1";
  r.status = HealthStatus::kUnavailable;
  r.seq = 9;
  r.consecutive_failures = 4;
  r.last_error = "no response in 5000 ms";
  r.streak_probe_ids = {"p1", "p2"};
  return {
      R"({"status":"healthy","version":"v1.2.3","uptime":3600})",
      R"({"status":"unhealthy"})",
      R"({"status":"ok"})",
      R"({"status":"HEALTHY"})",
      R"({"status":["healthy"]})",
      "OK",
      "",
      std::string(300, '{'),
      EncodeHealthRecord(r),
  };
}

}  // namespace dcm::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  dcm::ProbeResponse response;
  response.http_status = 200;
  response.body = input;
  const auto classified = dcm::ClassifyHealthResponse(response);
  FUZZ_CHECK(classified.failure == dcm::ProbeFailure::kNone ||
             classified.failure == dcm::ProbeFailure::kReportedUnhealthy ||
             classified.failure == dcm::ProbeFailure::kBadBody);
  FUZZ_CHECK(classified.error.size() < 200);
  FUZZ_CHECK((classified.failure == dcm::ProbeFailure::kNone) == classified.error.empty());

  auto record = dcm::DecodeHealthRecord(input);
  if (!record) {
    FUZZ_CHECK(record.error().code == dcm::ErrorCode::kCorruption);
    return 0;
  }
  auto again = dcm::DecodeHealthRecord(dcm::EncodeHealthRecord(*record));
  FUZZ_CHECK(again.has_value());
  FUZZ_CHECK(*again == *record);
  return 0;
}
