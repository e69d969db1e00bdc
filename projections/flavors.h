// Flavours (SPEC §10, FLUIDOS's offers): what this enclave offers its peers, derived from the
// projections at each request, never stored.
//
//   registry (Ready providers of an exported service type)       ┐
//   health (Ready only: EffectiveHealthStatus)                   ├─▶ FlavorSupply per provider
//   instances (live instances on each, their cpu/memory requests) ┘
//        ─▶ DeriveFlavors: one Flavor per (service_type, region), availability summed over its
//           providers, minus active holds (HeldCapacity, the reservation decider's projection)
//        ─▶ FlavorSelector (the peer's query) ─▶ GET /federation/v1alpha1/flavors
//
// Provider ids, names and endpoints never leave the enclave: a Flavor carries none of them.
// DeriveFlavors and Matches are pure; CollectFlavorSupply reads the views (thread-safe, as they
// are).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "projections/health_projection.h"
#include "projections/instance_projection.h"
#include "projections/registry_projection.h"
#include "src/common/federation_config.h"
#include "src/common/result.h"

namespace dcm {

// One Ready provider's part in a flavour. Read from its metadata.resources (SPEC §10):
// `max_instances` (integer), `totalCpu` (cores, a number) and `totalMemory` (bytes as a number,
// or a quantity string: "1TB", "512Mi"; ParseMemoryQuantity). Absent: unlimited.
struct FlavorSupply {
  std::string service_type;
  std::string region;                    // metadata.region_code ("" when absent)
  std::optional<int64_t> max_instances;  // nullopt: unlimited
  std::optional<double> total_cpu;       // cores; nullopt: unlimited
  std::optional<int64_t> total_memory;   // bytes; nullopt: unlimited
  int64_t live_instances = 0;
  double cpu_used = 0;      // Σ of its live instances' spec cpu (cores)
  int64_t memory_used = 0;  // Σ of its live instances' spec memory (bytes)
};

// What the active holds of one flavour take (SPEC §10: holds reduce availability at once).
struct HeldAmount {
  int64_t instances = 0;
  double cpu = 0;
  int64_t memory = 0;
};

// The seam for holds: the reservation decider's projection (issue #17, the provider side)
// implements it. Null where DeriveFlavors takes it: nothing is held. Implementations are
// thread-safe (read from HTTP threads).
class HeldCapacity {
 public:
  virtual ~HeldCapacity() = default;
  virtual HeldAmount ActiveHolds(const std::string& flavor_id) const = 0;
};

struct Flavor {
  std::string flavor_id;  // FlavorId(owner, service_type, region)
  std::string owner;      // the enclave hosting it (this one)
  std::string service_type;
  std::string region;
  // nullopt: unlimited (no provider of the flavour declares the bound; rendered as null).
  // Never below 0: what holds and live instances take past a bound counts as none left.
  std::optional<int64_t> instances_available;
  std::optional<double> cpu_available;
  std::optional<int64_t> memory_available;
  FederationPrice price;
  int64_t expires_at_ms = 0;

  bool operator==(const Flavor&) const = default;
};

struct FlavorOptions {
  std::string enclave_id;
  std::vector<std::string> export_service_types;
  FederationPrice price;
  std::chrono::milliseconds ttl{30000};
};

// A deterministic id: a name-based UUID of (enclave, service type, region), the same on every
// instance and after restarts, so a peer's hold names the flavour it saw.
std::string FlavorId(std::string_view enclave_id, std::string_view service_type,
                     std::string_view region);

// One flavour per exported (service_type, region) with at least one supply, sorted by
// (service_type, region). A bound is unlimited when any provider of the flavour leaves it
// unbounded. expires_at = now + ttl.
std::vector<Flavor> DeriveFlavors(const std::vector<FlavorSupply>& supply,
                                  const FlavorOptions& options, const HeldCapacity* holds,
                                  int64_t now_ms);

// A peer's flavour query: every set field must match (exact strings; inclusive ranges). An
// unlimited availability is above every minimum and below no maximum.
struct FlavorSelector {
  std::optional<std::string> flavor_id;
  std::optional<std::string> service_type;
  std::optional<std::string> region;
  std::optional<int64_t> instances_available_min;
  std::optional<int64_t> instances_available_max;
  std::optional<double> cpu_available_min;
  std::optional<double> cpu_available_max;
  std::optional<int64_t> memory_available_min;
  std::optional<int64_t> memory_available_max;
  std::optional<double> price_max;
  std::optional<double> price_min;
};
bool Matches(const FlavorSelector& selector, const Flavor& flavor);

// Bytes of a memory quantity: a non-negative JSON number (bytes), or a string "<n><unit>" with
// unit one of B, K/KB, M/MB, G/GB, T/TB, P/PB (powers of 1000), Ki, Mi, Gi, Ti, Pi (1024), or
// none (bytes). nullopt for anything else.
std::optional<int64_t> ParseMemoryQuantity(std::string_view text);

// The supply of every Ready provider of an exported type: its metadata, its live instances and
// what their specs request (`cpu` and `memory`, top-level or under `resources`).
Result<std::vector<FlavorSupply>> CollectFlavorSupply(const RegistryView& registry,
                                                      const HealthView& health,
                                                      const InstanceView& instances,
                                                      const std::vector<std::string>& types);

}  // namespace dcm
