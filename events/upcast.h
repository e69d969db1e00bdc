// Schema evolution (SPEC §4: "a decoder that keeps reading older versions"). Every CloudEvent
// carries `schemaversion`, the version of its `data` schema for its `type`. When a type's data
// changes shape, its writers move to version N+1 and an *upcast step* rewrites data of version N
// into version N+1. Decoders then read only the latest shape: an older event is upcast first.
//
//   v1 data ──step(type, 1)──▶ v2 data ──step(type, 2)──▶ … ──▶ latest data ──▶ typed decoder
//
// The chain of one type is its steps from version 1, without gaps; its latest version is one more
// than its last step (a type without steps is at version 1). An event whose version is newer than
// the latest this build knows, or below 1, is poison (kCorruption: the runner dead-letters it
// rather than misreading it). A step that cannot read its input is poison too.
//
// Rule for every step: an upcast event must decode, and fold, exactly as the event a current
// writer would have written for the same fact (its "latest-version twin"). The golden tests check
// it for every older golden file (events/golden/<type>.v<N>.*.json against its .v<latest>. twin).
//
// Cost: an event already at its latest version is neither copied nor parsed (a type lookup in a
// short table and an integer compare), so the rebuild path pays nothing for the chain.
//
// Adding a step (docs/events.md, "Schema versions and upcasting"): write
// `Result<std::string> Upcast<Type>V<N>ToV<N+1>(std::string_view data)` next to the type's codec,
// list it in kBuiltInSteps (upcast.cc), move the writer and the type's schema version constant to
// N+1, and add a v<N+1> golden twin of every v<N> golden.
//
// Thread-safety: an Upcaster is immutable once created and may be shared by any threads. Steps
// parse with the thread-local parser of json_read.h, so an upcast invalidates any simdjson
// element the calling thread still holds from an earlier ParseJson.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "events/cloud_event.h"
#include "src/common/result.h"

namespace dcm {

// Rewrites `data` (a JSON object, minified) of one schema version into the next version. Errors
// are reported as kCorruption whatever code the step returns.
using UpcastStepFn = Result<std::string> (*)(std::string_view data);

struct UpcastStep {
  std::string_view type;  // the CloudEvent type, e.g. "dcm.provider.health_probed"
  int from_version = 1;   // the step reads this version and writes from_version + 1
  UpcastStepFn apply = nullptr;
};

// A registry of upcast steps keyed by (type, from_version).
class Upcaster {
 public:
  // kInvalidArgument unless, for each type, the steps' from_versions are exactly 1..n (no gap, no
  // duplicate) and every step has a function.
  static Result<Upcaster> Create(std::span<const UpcastStep> steps);

  // The newest schema version of `type` this build reads and writes; 1 for a type without steps.
  int LatestSchemaVersion(std::string_view type) const;

  // Rewrites `event` (data and schema_version) to the latest version of its type; a no-op for an
  // event already there. kCorruption for a version below 1, a version newer than the latest, or
  // data a step cannot read; `event` is unchanged on error.
  Status UpcastToLatest(CloudEvent& event) const;

  // The data of `event` at the latest version of its type, for a decoder: a view of event.data
  // when it is already there (no copy), else a view of `storage`, which receives the upcast data.
  // Errors as UpcastToLatest.
  Result<std::string_view> DataAtLatestVersion(const CloudEvent& event, std::string& storage) const;

 private:
  struct Chain {
    std::string type;
    std::vector<UpcastStepFn> steps;  // steps[i] reads version i + 1
  };

  const Chain* Find(std::string_view type) const;
  // The upcast data, or nullopt when the event is already at the latest version.
  Result<std::optional<std::string>> Upcast(const CloudEvent& event) const;

  std::vector<Chain> chains_;
};

// The steps this build knows (upcast.cc), and an Upcaster over them (built on first use).
std::span<const UpcastStep> BuiltInUpcastSteps();
const Upcaster& BuiltInUpcaster();

// BuiltInUpcaster() shorthands: what decoders call.
int LatestSchemaVersion(std::string_view type);
Status UpcastToLatest(CloudEvent& event);
Result<std::string_view> DataAtLatestVersion(const CloudEvent& event, std::string& storage);

}  // namespace dcm
