#include "events/json_read.h"

namespace dcm {

Result<simdjson::dom::element> ParseEventData(const CloudEvent& event, int newest_version) {
  if (event.schema_version > newest_version) {
    return MakeError(ErrorCode::kCorruption,
                     "schemaversion " + std::to_string(event.schema_version) + " of " + event.type +
                         " is newer than this build understands");
  }
  auto parsed = ParseJson(event.data);
  if (!parsed) return MakeError(ErrorCode::kCorruption, parsed.error().message);
  if (!parsed->is_object()) return MakeError(ErrorCode::kCorruption, "data is not an object");
  return *parsed;
}

}  // namespace dcm
