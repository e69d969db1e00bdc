#include "projections/flavors.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <tuple>

#include "projections/placement_policy.h"
#include "src/common/json_read.h"
#include "src/common/uuid.h"

namespace dcm {
namespace {

constexpr int64_t kMaxBytes = int64_t{1} << 62;

std::optional<double> ParseNumber(std::string_view text) {
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !(value >= 0)) return std::nullopt;
  return value;
}

// A JSON number, or a numeric string ("2", "500m" millicores): cores.
std::optional<double> CpuOf(simdjson::dom::element e) {
  double number = 0;
  if (!e.get(number)) return number >= 0 ? std::optional<double>(number) : std::nullopt;
  std::string_view text;
  if (e.get(text)) return std::nullopt;
  if (text.ends_with('m')) {
    auto millis = ParseNumber(text.substr(0, text.size() - 1));
    return millis ? std::optional<double>(*millis / 1000) : std::nullopt;
  }
  return ParseNumber(text);
}

std::optional<int64_t> MemoryOf(simdjson::dom::element e) {
  double number = 0;
  if (!e.get(number)) {
    if (!(number >= 0) || number > static_cast<double>(kMaxBytes)) return std::nullopt;
    return static_cast<int64_t>(number);
  }
  std::string_view text;
  if (e.get(text)) return std::nullopt;
  return ParseMemoryQuantity(text);
}

std::optional<simdjson::dom::object> ObjectOf(std::optional<simdjson::dom::element> e) {
  simdjson::dom::object object;
  if (!e || e->get(object)) return std::nullopt;
  return object;
}

// metadata.resources of `p` into `s`.
void ReadResources(const Provider& p, FlavorSupply& s) {
  auto parsed = ParseJson(p.spec.metadata);
  simdjson::dom::object metadata;
  if (!parsed || parsed->get(metadata)) return;
  auto resources = ObjectOf(Member(metadata, "resources"));
  if (!resources) return;
  if (auto max = Member(*resources, "max_instances", "maxInstances")) {
    int64_t value = 0;
    if (!max->get(value) && value >= 0) s.max_instances = value;
  }
  if (auto cpu = Member(*resources, "totalCpu", "total_cpu")) s.total_cpu = CpuOf(*cpu);
  if (auto memory = Member(*resources, "totalMemory", "total_memory")) {
    s.total_memory = MemoryOf(*memory);
  }
}

// Adds what one instance spec requests: `cpu`/`memory`, top-level or under `resources`.
void AddRequests(std::string_view spec, FlavorSupply& s) {
  auto parsed = ParseJson(spec);
  simdjson::dom::object object;
  if (!parsed || parsed->get(object)) return;
  if (auto resources = ObjectOf(Member(object, "resources"))) object = *resources;
  if (auto cpu = Member(object, "cpu"); cpu && CpuOf(*cpu)) s.cpu_used += *CpuOf(*cpu);
  if (auto memory = Member(object, "memory"); memory && MemoryOf(*memory)) {
    s.memory_used = std::min(kMaxBytes, s.memory_used + *MemoryOf(*memory));
  }
}

Status AddInstanceRequests(const InstanceView& instances, const Provider& p, FlavorSupply& s) {
  InstanceFilter filter;
  filter.provider = p.spec.name;
  std::string token;
  do {
    ASSIGN_OR_RETURN(auto page, instances.ListInstances(filter, token, 500));
    for (const auto& instance : page.items) {
      if (instance.provider_id == p.id) AddRequests(instance.spec, s);
    }
    token = page.next_page_token;
  } while (!token.empty());
  return OkStatus();
}

// Σ of an optional bound: unlimited as soon as one part is.
template <typename T>
void AddBound(std::optional<T>& sum, bool& unlimited, const std::optional<T>& part) {
  if (!part) {
    unlimited = true;
    return;
  }
  sum = sum.value_or(T{}) + *part;
}

template <typename T>
std::optional<T> Remaining(const std::optional<T>& total, bool unlimited, T used) {
  if (unlimited || !total) return std::nullopt;
  return std::max<T>(T{}, *total - used);
}

struct Sum {
  std::optional<int64_t> instances, memory;
  std::optional<double> cpu;
  bool instances_unlimited = false, cpu_unlimited = false, memory_unlimited = false;
  int64_t live = 0, memory_used = 0;
  double cpu_used = 0;
};

template <typename T>
bool InRange(const std::optional<T>& value, const std::optional<T>& min,
             const std::optional<T>& max) {
  if (min && value && *value < *min) return false;  // nullopt value: unlimited
  if (max && (!value || *value > *max)) return false;
  return true;
}

}  // namespace

std::string FlavorId(std::string_view enclave_id, std::string_view service_type,
                     std::string_view region) {
  std::string seed = "dcm-flavor:";
  seed.append(enclave_id).append("/").append(service_type).append("/").append(region);
  return DeterministicUuid(seed);
}

std::vector<Flavor> DeriveFlavors(const std::vector<FlavorSupply>& supply,
                                  const FlavorOptions& options, const HeldCapacity* holds,
                                  int64_t now_ms) {
  const auto& types = options.export_service_types;
  std::map<std::pair<std::string, std::string>, Sum> sums;
  for (const FlavorSupply& s : supply) {
    if (std::find(types.begin(), types.end(), s.service_type) == types.end()) continue;
    Sum& sum = sums[{s.service_type, s.region}];
    AddBound(sum.instances, sum.instances_unlimited, s.max_instances);
    AddBound(sum.cpu, sum.cpu_unlimited, s.total_cpu);
    AddBound(sum.memory, sum.memory_unlimited, s.total_memory);
    sum.live += s.live_instances;
    sum.cpu_used += s.cpu_used;
    sum.memory_used += s.memory_used;
  }
  std::vector<Flavor> out;
  for (const auto& [key, sum] : sums) {
    Flavor f;
    f.owner = options.enclave_id;
    std::tie(f.service_type, f.region) = key;
    f.flavor_id = FlavorId(f.owner, f.service_type, f.region);
    const HeldAmount held = holds ? holds->ActiveHolds(f.flavor_id) : HeldAmount{};
    f.instances_available =
        Remaining(sum.instances, sum.instances_unlimited, sum.live + held.instances);
    f.cpu_available = Remaining(sum.cpu, sum.cpu_unlimited, sum.cpu_used + held.cpu);
    f.memory_available = Remaining(sum.memory, sum.memory_unlimited, sum.memory_used + held.memory);
    f.price = options.price;
    f.expires_at_ms = now_ms + options.ttl.count();
    out.push_back(std::move(f));
  }
  return out;
}

bool Matches(const FlavorSelector& s, const Flavor& f) {
  if (s.flavor_id && *s.flavor_id != f.flavor_id) return false;
  if (s.service_type && *s.service_type != f.service_type) return false;
  if (s.region && *s.region != f.region) return false;
  if (s.price_min && f.price.amount < *s.price_min) return false;
  if (s.price_max && f.price.amount > *s.price_max) return false;
  return InRange(f.instances_available, s.instances_available_min, s.instances_available_max) &&
         InRange(f.cpu_available, s.cpu_available_min, s.cpu_available_max) &&
         InRange(f.memory_available, s.memory_available_min, s.memory_available_max);
}

std::optional<int64_t> ParseMemoryQuantity(std::string_view text) {
  static const std::pair<std::string_view, double> kUnits[] = {{"Ki", 1024.0},
                                                               {"Mi", 1048576.0},
                                                               {"Gi", 1073741824.0},
                                                               {"Ti", 1099511627776.0},
                                                               {"Pi", 1125899906842624.0},
                                                               {"KB", 1e3},
                                                               {"MB", 1e6},
                                                               {"GB", 1e9},
                                                               {"TB", 1e12},
                                                               {"PB", 1e15},
                                                               {"K", 1e3},
                                                               {"M", 1e6},
                                                               {"G", 1e9},
                                                               {"T", 1e12},
                                                               {"P", 1e15},
                                                               {"B", 1}};
  double scale = 1;
  for (const auto& [unit, factor] : kUnits) {
    if (text.ends_with(unit)) {
      text.remove_suffix(unit.size());
      scale = factor;
      break;
    }
  }
  auto number = ParseNumber(text);
  if (!number || *number * scale > static_cast<double>(kMaxBytes)) return std::nullopt;
  return static_cast<int64_t>(std::llround(*number * scale));
}

Result<std::vector<FlavorSupply>> CollectFlavorSupply(const RegistryView& registry,
                                                      const HealthView& health,
                                                      const InstanceView& instances,
                                                      const std::vector<std::string>& types) {
  ProviderFilter filter;
  filter.accept = [&](const Provider& p) {
    return std::find(types.begin(), types.end(), p.spec.service_type) != types.end();
  };
  std::vector<FlavorSupply> out;
  if (types.empty()) return out;
  ASSIGN_OR_RETURN(auto page, registry.List(filter, "", SIZE_MAX));
  for (const Provider& p : page.providers) {
    ASSIGN_OR_RETURN(auto record, health.Get(p.id));
    if (EffectiveHealthStatus(record ? &*record : nullptr, p.seq) != HealthStatus::kReady) continue;
    FlavorSupply s;
    s.service_type = p.spec.service_type;
    s.region = ProviderRegion(p);
    ReadResources(p, s);
    ASSIGN_OR_RETURN(s.live_instances, instances.LiveInstances(p.id));
    if (s.total_cpu || s.total_memory) RETURN_IF_ERROR(AddInstanceRequests(instances, p, s));
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace dcm
