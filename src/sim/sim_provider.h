// One simulated Service Provider inside SpSim (src/sim/sp_sim.h): its identity, its mutable
// state (faults, instances, registration, probe accounting) and the SP API it serves
// (SPEC §3.2/§3.3). Internal to src/sim: SpSim owns the providers, routes each request to
// ServeProvider and drives registration.
//
// Sized so that 50,000 fit in one process: no thread, socket or buffer of its own; two strings
// (name, endpoint) plus pointers into the shared options; the 64-entry probe ring (256 B of
// 32-bit offsets) is allocated at the first probe, and the deleted-ids ring grows one id at a
// time up to its 256 entries (nothing until the first delete).
//
// Thread-safety: identity fields are set before serving starts and never change; everything
// else is under `mu`.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/json_writer.h"
#include "src/http/http_types.h"
#include "src/sim/heartbeat_client.h"
#include "src/sim/sp_sim.h"

namespace dcm::sim {

// State shared by all providers of one SpSim.
struct SimShared {
  std::string version;  // "version" in health bodies
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  // Probe times are kept as 32-bit ms offsets from this (system clock, ms since the Unix
  // epoch): half the memory of absolute times, and 49 days of range is plenty for a simulator.
  int64_t epoch_ms = 0;
  // Shared-port mode: kRefuse cannot close the listener (it serves other providers too), so a
  // refusing provider's requests get their connection closed instead.
  bool shared_ports = false;
  // Over all providers, for GET /sim/stats.
  std::atomic<uint64_t> health_probes{0};
  std::atomic<uint64_t> creates_received{0};
  std::atomic<uint64_t> deletes_received{0};
  std::atomic<uint64_t> instances{0};  // held now
};

struct Provider {
  static constexpr size_t kRecentProbes = 64;
  static constexpr size_t kRecentDeletes = 256;

  // Identity, fixed at SpSim start.
  uint32_t index = 0;
  uint16_t port = 0;
  uint16_t path_start = 0;  // endpoint.substr(path_start) is the base path the SP API lives on
  const std::string* service_type = nullptr;  // into SpSimOptions::service_types
  const std::string* region_code = nullptr;   // into SpSimOptions::region_codes
  char zone_letter = 'a';
  std::string name;
  std::string endpoint;

  mutable std::mutex mu;
  FaultConfig fault;
  RegistrationState registration = RegistrationState::kPending;
  int attempts = 0;
  std::optional<std::string> id;
  std::string last_error;
  uint64_t heartbeats = 0;
  // Liveness heartbeat only: registration and beats. Used by the one registration worker that
  // holds the provider (not under mu); its state is mirrored into the fields above under mu.
  std::unique_ptr<HeartbeatClient> heartbeat;
  std::map<std::string, std::string> instances;  // id → minified spec
  uint64_t health_probes = 0;
  // Arrival times as ms after SimShared::epoch_ms. Grows to kRecentProbes, then a ring whose
  // oldest entry is at probe_next.
  std::vector<uint32_t> probe_offsets_ms;
  uint8_t probe_next = 0;
  // POST {endpoint} and DELETE {endpoint}/{id} requests received, whatever the answer.
  uint64_t creates_received = 0;
  uint64_t deletes_received = 0;
  // Ids of the last (up to) kRecentDeletes successful deletes. Grows to kRecentDeletes, then a
  // ring whose oldest entry is at deleted_next.
  std::vector<std::string> deleted_ids;
  uint16_t deleted_next = 0;

  std::string_view base_path() const { return std::string_view(endpoint).substr(path_start); }
  std::string zone() const { return *region_code + zone_letter; }
  ProviderSnapshot Snapshot(const SimShared& shared) const;
  void RecordProbe(uint32_t offset_ms);       // caller holds mu
  void RecordDeleted(const std::string& id);  // caller holds mu
};

int64_t SystemMillis();  // ms since the Unix epoch, system clock

http::HttpResponse JsonResponse(int status, std::string body);
// An RFC 9457 problem+json answer.
http::HttpResponse ProblemResponse(int status, const std::string& title, const std::string& detail);
http::HttpResponse MethodNotAllowed(const std::string& method);

// Serves one request already routed to `p` (its path starts with p.base_path()).
void ServeProvider(Provider& p, SimShared& shared, http::HttpRequest req, http::Respond respond);

// The control API representation of a provider (docs/http.md).
void RenderProvider(JsonWriter& w, const ProviderSnapshot& s);

}  // namespace dcm::sim
