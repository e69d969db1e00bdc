#include "events/upcast.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "events/health_events.h"

namespace dcm {
namespace {

// Every upcast step of this build, one line per (type, from_version). Keep them in version order.
constexpr UpcastStep kBuiltInSteps[] = {
    // v2: latency_ms (float, ms) became latency_us (integer, µs). health_events.h.
    {event_type::kHealthProbed, 1, &UpcastHealthProbedV1ToV2},
    // v3: an optional `state` (the record the probe leaves): probe retention. health_events.h.
    {event_type::kHealthProbed, 2, &UpcastHealthProbedV2ToV3},
};

std::string VersionText(const CloudEvent& event) {
  return "schemaversion " + std::to_string(event.schema_version) + " of " + event.type;
}

}  // namespace

Result<Upcaster> Upcaster::Create(std::span<const UpcastStep> steps) {
  Upcaster upcaster;
  for (const UpcastStep& step : steps) {
    const std::string type(step.type);
    if (type.empty() || step.apply == nullptr) {
      return MakeError(ErrorCode::kInvalidArgument, "upcast step of '" + type + "' is incomplete");
    }
    auto it = std::find_if(upcaster.chains_.begin(), upcaster.chains_.end(),
                           [&](const Chain& chain) { return chain.type == type; });
    if (it == upcaster.chains_.end()) it = upcaster.chains_.insert(it, Chain{type, {}});
    const int expected = static_cast<int>(it->steps.size()) + 1;
    if (step.from_version != expected) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "upcast steps of " + type + " must start at version 1 without gaps: got " +
                           std::to_string(step.from_version) + ", expected " +
                           std::to_string(expected));
    }
    it->steps.push_back(step.apply);
  }
  return upcaster;
}

const Upcaster::Chain* Upcaster::Find(std::string_view type) const {
  for (const Chain& chain : chains_) {
    if (chain.type == type) return &chain;
  }
  return nullptr;
}

int Upcaster::LatestSchemaVersion(std::string_view type) const {
  const Chain* chain = Find(type);
  return chain == nullptr ? 1 : static_cast<int>(chain->steps.size()) + 1;
}

Result<std::optional<std::string>> Upcaster::Upcast(const CloudEvent& event) const {
  const Chain* chain = Find(event.type);
  const int latest = chain == nullptr ? 1 : static_cast<int>(chain->steps.size()) + 1;
  if (event.schema_version == latest) return std::optional<std::string>();  // the hot path
  if (event.schema_version < 1) {
    return MakeError(ErrorCode::kCorruption,
                     VersionText(event) + " is not a schema version (versions start at 1)");
  }
  if (event.schema_version > latest) {
    return MakeError(ErrorCode::kCorruption, VersionText(event) +
                                                 " is newer than this build reads (latest " +
                                                 std::to_string(latest) + ")");
  }
  std::string data = event.data;
  for (int version = event.schema_version; version < latest; ++version) {
    auto next = chain->steps[static_cast<size_t>(version - 1)](data);
    if (!next) {
      return MakeError(ErrorCode::kCorruption, "upcasting " + VersionText(event) + " to " +
                                                   std::to_string(version + 1) + ": " +
                                                   next.error().message);
    }
    data = std::move(*next);
  }
  return std::optional<std::string>(std::move(data));
}

Status Upcaster::UpcastToLatest(CloudEvent& event) const {
  ASSIGN_OR_RETURN(auto upcast, Upcast(event));
  if (!upcast) return OkStatus();
  event.data = std::move(*upcast);
  event.schema_version = LatestSchemaVersion(event.type);
  return OkStatus();
}

Result<std::string_view> Upcaster::DataAtLatestVersion(const CloudEvent& event,
                                                       std::string& storage) const {
  ASSIGN_OR_RETURN(auto upcast, Upcast(event));
  if (!upcast) return std::string_view(event.data);
  storage = std::move(*upcast);
  return std::string_view(storage);
}

std::span<const UpcastStep> BuiltInUpcastSteps() { return kBuiltInSteps; }

const Upcaster& BuiltInUpcaster() {
  static const Upcaster upcaster = [] {
    auto created = Upcaster::Create(kBuiltInSteps);
    if (!created) {  // a broken table is a bug in this build: stop at once (STYLE.md, Errors)
      std::fprintf(stderr, "upcast steps: %s\n", created.error().message.c_str());
      std::abort();
    }
    return std::move(*created);
  }();
  return upcaster;
}

int LatestSchemaVersion(std::string_view type) {
  return BuiltInUpcaster().LatestSchemaVersion(type);
}

Status UpcastToLatest(CloudEvent& event) { return BuiltInUpcaster().UpcastToLatest(event); }

Result<std::string_view> DataAtLatestVersion(const CloudEvent& event, std::string& storage) {
  return BuiltInUpcaster().DataAtLatestVersion(event, storage);
}

}  // namespace dcm
