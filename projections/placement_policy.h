// The built-in placement policy (SPEC §3.3), used when POLICY_MANAGER_EVALUATION_URL is unset,
// and the Ready-only rule that applies to every choice. A pure function of its inputs:
// deterministic for the same providers, health and load.
//
//   candidates = providers of spec.service_type
//              ∩ spec.provider_hints (see below)
//              ∩ region: spec.provider_hints.region or spec.metadata.labels.region must equal the
//                provider's metadata.region_code
//   none                        → kInvalidArgument-like "no provider" (HTTP 422)
//   none of them Ready          → kUnavailable (HTTP 503)
//   else the Ready one with the fewest live instances, ties by name.
//
// spec.provider_hints (all optional): {"provider_name": "a"} or {"provider_names": ["a","b"]}
// restrict the choice to those names; {"region": "eu-west-1"} restricts the region.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "events/health_events.h"
#include "events/provider.h"
#include "src/common/result.h"

namespace dcm {

// The provider's metadata.region_code, or "" (absent, not a string, metadata unparseable).
std::string ProviderRegion(const Provider& provider);

struct PlacementCandidate {
  Provider provider;
  HealthStatus health = HealthStatus::kPending;  // effective (EffectiveHealthStatus)
  int64_t live_instances = 0;
};

enum class PlacementFailure {
  kNone,
  kNoProvider,  // no registered provider matches the type/hints/region: HTTP 422
  kNotReady,    // matching providers exist, none is Ready: HTTP 503
  kBadSpec,     // spec is not an object or lacks service_type: HTTP 400
};

struct PlacementChoice {
  PlacementFailure failure = PlacementFailure::kNone;
  std::string detail;  // why, for the failure event and the problem+json detail
  const PlacementCandidate* chosen = nullptr;  // into `candidates`, when failure == kNone
};

// `spec_json`: the (evaluated) spec. `candidates`: every registered provider (any type).
PlacementChoice ChooseProvider(const std::string& spec_json,
                               const std::vector<PlacementCandidate>& candidates);

// The Policy Manager chose `name`: it must be a registered provider of the spec's service type
// and Ready (SPEC §3.2: placement never selects a provider that is not Ready).
PlacementChoice CheckSelectedProvider(const std::string& spec_json, const std::string& name,
                                      const std::vector<PlacementCandidate>& candidates);

// spec.service_type, or "" when missing/not a string.
std::string SpecServiceType(const std::string& spec_json);

// The region the spec asks for (provider_hints.region, else metadata.labels.region), or "".
std::string SpecRegion(const std::string& spec_json);

}  // namespace dcm
