// The built-in placement policy: filter by type, hints and region, then the least-loaded Ready
// provider, ties by name (then id). See placement_policy.h for the rules.
#include "projections/placement_policy.h"

#include <algorithm>
#include <optional>
#include <string_view>
#include <utility>

#include "events/json_read.h"

namespace dcm {
namespace {

// What the policy reads from a spec. Copied out of the parse: ParseJson's element dies at the
// next ParseJson on this thread, and the providers' metadata is parsed after.
struct SpecFilter {
  std::string service_type;
  std::optional<std::string> provider_name;                // provider_hints.provider_name
  std::optional<std::vector<std::string>> provider_names;  // provider_hints.provider_names
  std::optional<std::string> region;  // provider_hints.region, else metadata.labels.region
  std::string region_source;          // which of the two, for details
};

PlacementChoice Fail(PlacementFailure failure, std::string detail) {
  PlacementChoice choice;
  choice.failure = failure;
  choice.detail = std::move(detail);
  return choice;
}

std::optional<simdjson::dom::object> ObjectMember(simdjson::dom::object object,
                                                  std::string_view key) {
  auto value = Member(object, key);
  simdjson::dom::object out;
  if (value && !value->get(out)) return out;
  return std::nullopt;
}

// Parses `spec_json` into a filter, or a kBadSpec choice explaining what is wrong.
Result<SpecFilter> ReadSpec(const std::string& spec_json) {
  auto bad = [](std::string why) { return MakeError(ErrorCode::kInvalidArgument, std::move(why)); };
  auto parsed = ParseJson(spec_json);
  if (!parsed) return bad("spec: " + parsed.error().message);
  simdjson::dom::object spec;
  if (parsed->get(spec)) {
    return bad(std::string("spec must be a JSON object, not ") + JsonTypeName(*parsed));
  }
  SpecFilter filter;
  auto type = Member(spec, "service_type", "serviceType");
  std::string_view type_text;
  if (!type || type->get(type_text) || type_text.empty()) {
    return bad("spec.service_type is required and must be a non-empty string");
  }
  filter.service_type = std::string(type_text);

  if (auto hints_value = Member(spec, "provider_hints", "providerHints")) {
    simdjson::dom::object hints;
    if (hints_value->get(hints)) {
      return bad(std::string("spec.provider_hints must be an object, not ") +
                 JsonTypeName(*hints_value));
    }
    if (auto name = Member(hints, "provider_name", "providerName")) {
      std::string_view text;
      if (name->get(text)) return bad("spec.provider_hints.provider_name must be a string");
      filter.provider_name = std::string(text);
    }
    if (auto names = Member(hints, "provider_names", "providerNames")) {
      simdjson::dom::array array;
      if (names->get(array)) {
        return bad("spec.provider_hints.provider_names must be an array of strings");
      }
      filter.provider_names.emplace();
      for (auto item : array) {
        std::string_view text;
        if (item.get(text)) {
          return bad("spec.provider_hints.provider_names must be an array of strings");
        }
        filter.provider_names->emplace_back(text);
      }
    }
    if (auto region = Member(hints, "region")) {
      std::string_view text;
      if (region->get(text)) return bad("spec.provider_hints.region must be a string");
      filter.region = std::string(text);
      filter.region_source = "spec.provider_hints.region";
    }
  }
  if (!filter.region) {
    auto metadata = ObjectMember(spec, "metadata");
    auto labels = metadata ? ObjectMember(*metadata, "labels") : std::nullopt;
    if (auto region = labels ? Member(*labels, "region") : std::nullopt) {
      std::string_view text;
      if (region->get(text)) return bad("spec.metadata.labels.region must be a string");
      filter.region = std::string(text);
      filter.region_source = "spec.metadata.labels.region";
    }
  }
  return filter;
}

bool NameAllowed(const SpecFilter& filter, const std::string& name) {
  if (filter.provider_name && *filter.provider_name != name) return false;
  if (filter.provider_names &&
      std::find(filter.provider_names->begin(), filter.provider_names->end(), name) ==
          filter.provider_names->end()) {
    return false;
  }
  return true;
}

// "service_type 'vm', provider_hints.provider_name 'a', region 'eu-west-1' (from ...)".
std::string Describe(const SpecFilter& filter) {
  std::string out = "service_type '" + filter.service_type + "'";
  if (filter.provider_name) out += ", provider_hints.provider_name '" + *filter.provider_name + "'";
  if (filter.provider_names) {
    out += ", provider_hints.provider_names [";
    for (size_t i = 0; i < filter.provider_names->size(); ++i) {
      out += (i ? ", '" : "'") + (*filter.provider_names)[i] + "'";
    }
    out += "]";
  }
  if (filter.region) out += ", region '" + *filter.region + "' (" + filter.region_source + ")";
  return out;
}

// Strict weak order over candidates: fewest live instances, then name, then id. Total for any
// registry (names and ids are unique), so the choice does not depend on the input order.
bool Better(const PlacementCandidate& a, const PlacementCandidate& b) {
  if (a.live_instances != b.live_instances) return a.live_instances < b.live_instances;
  if (a.provider.spec.name != b.provider.spec.name) {
    return a.provider.spec.name < b.provider.spec.name;
  }
  return a.provider.id < b.provider.id;
}

// "a (Unavailable), b (Pending)" for up to 5 matching providers, sorted by name.
std::string NotReadyList(std::vector<const PlacementCandidate*> matching) {
  constexpr size_t kMaxListed = 5;
  std::sort(matching.begin(), matching.end(), [](const auto* a, const auto* b) {
    return a->provider.spec.name < b->provider.spec.name;
  });
  std::string out;
  for (size_t i = 0; i < matching.size() && i < kMaxListed; ++i) {
    if (i) out += ", ";
    out += matching[i]->provider.spec.name + " (" + HealthStatusName(matching[i]->health) + ")";
  }
  if (matching.size() > kMaxListed) {
    out += " and " + std::to_string(matching.size() - kMaxListed) + " more";
  }
  return out;
}

}  // namespace

std::string ProviderRegion(const Provider& provider) {
  auto parsed = ParseJson(provider.spec.metadata);
  simdjson::dom::object metadata;
  if (!parsed || parsed->get(metadata)) return "";
  return StringMember(metadata, "region_code");
}

PlacementChoice ChooseProvider(const std::string& spec_json,
                               const std::vector<PlacementCandidate>& candidates) {
  auto filter = ReadSpec(spec_json);
  if (!filter) return Fail(PlacementFailure::kBadSpec, filter.error().message);

  std::vector<const PlacementCandidate*> matching;
  for (const auto& c : candidates) {
    if (c.provider.spec.service_type != filter->service_type) continue;
    if (!NameAllowed(*filter, c.provider.spec.name)) continue;
    if (filter->region && ProviderRegion(c.provider) != *filter->region) continue;
    matching.push_back(&c);
  }
  if (matching.empty()) {
    return Fail(PlacementFailure::kNoProvider,
                "no registered provider matches " + Describe(*filter));
  }
  const PlacementCandidate* best = nullptr;
  for (const auto* c : matching) {
    if (c->health != HealthStatus::kReady) continue;
    if (best == nullptr || Better(*c, *best)) best = c;
  }
  if (best == nullptr) {
    const std::string count = std::to_string(matching.size());
    return Fail(PlacementFailure::kNotReady,
                count + " provider(s) match " + Describe(*filter) +
                    " but none is Ready: " + NotReadyList(std::move(matching)));
  }
  PlacementChoice choice;
  choice.chosen = best;
  return choice;
}

PlacementChoice CheckSelectedProvider(const std::string& spec_json, const std::string& name,
                                      const std::vector<PlacementCandidate>& candidates) {
  auto filter = ReadSpec(spec_json);
  if (!filter) return Fail(PlacementFailure::kBadSpec, filter.error().message);
  const PlacementCandidate* found = nullptr;
  for (const auto& c : candidates) {
    if (c.provider.spec.name == name) {
      found = &c;
      break;
    }
  }
  if (found == nullptr) {
    return Fail(PlacementFailure::kNoProvider,
                "the policy manager selected provider '" + name + "', which is not registered");
  }
  if (found->provider.spec.service_type != filter->service_type) {
    return Fail(PlacementFailure::kNoProvider,
                "the policy manager selected provider '" + name + "' of service_type '" +
                    found->provider.spec.service_type + "' for a spec of service_type '" +
                    filter->service_type + "'");
  }
  if (found->health != HealthStatus::kReady) {
    return Fail(PlacementFailure::kNotReady, "the policy manager selected provider '" + name +
                                                 "', which is " + HealthStatusName(found->health) +
                                                 ", not Ready");
  }
  PlacementChoice choice;
  choice.chosen = found;
  return choice;
}

std::string SpecServiceType(const std::string& spec_json) {
  auto parsed = ParseJson(spec_json);
  simdjson::dom::object spec;
  if (!parsed || parsed->get(spec)) return "";
  return StringMember(spec, "service_type", "serviceType");
}

std::string SpecRegion(const std::string& spec_json) {
  auto filter = ReadSpec(spec_json);
  return filter && filter->region ? *filter->region : "";
}

}  // namespace dcm
