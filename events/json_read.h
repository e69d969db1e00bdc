// Reading event data: the generic JSON helpers (src/common/json_read.h) plus the reader of a
// typed event's `data`. The only place in events/ that spells simdjson error handling.
#pragma once

#include <simdjson.h>

#include "events/cloud_event.h"
#include "src/common/json_read.h"
#include "src/common/result.h"

namespace dcm {

// The `data` of `event`, for a typed decoder that reads schema versions 1..`newest_version`.
// kCorruption (dead-letter it) when the event's schemaversion is newer, or `data` is not a JSON
// object. Valid until the next ParseJson call on this thread.
Result<simdjson::dom::element> ParseEventData(const CloudEvent& event, int newest_version);

}  // namespace dcm
