// CloudEvent: the envelope of every event on every topic (SPEC §4), CloudEvents 1.0 in
// structured JSON mode. `data` is kept as minified JSON text so events are stored and re-emitted
// exactly; typed codecs (provider_events.h) read and write it.
//
// Wire form (golden examples in events/golden/):
//   {"specversion":"1.0","id":"<uuid>","source":"dcm/registrar","type":"dcm.provider.registered",
//    "subject":"<entity id>","time":"2026-01-01T00:00:00.000Z",
//    "datacontenttype":"application/json","schemaversion":1,"data":{...}}
// `schemaversion` is a CloudEvents extension attribute: the version of `data`'s schema for this
// `type`. Decoders keep reading every older version.
// `actor` is a CloudEvents extension attribute (SPEC §6): who caused the event: the caller's
// `sub` for a request and every outcome it causes, "anonymous" with authentication disabled, or
// the component for system decisions ("dcm/prober", "dcm/cleanup"). Written after
// `schemaversion` when set; events from before it have none.
#pragma once

#include <string>
#include <string_view>

#include "src/common/result.h"

namespace dcm {

inline constexpr std::string_view kCloudEventsContentType = "application/cloudevents+json";
inline constexpr size_t kMaxActorBytes = 256;

struct CloudEvent {
  std::string id;
  std::string source;
  std::string type;
  std::string subject;
  std::string time;  // RFC 3339, UTC, milliseconds
  int schema_version = 1;
  std::string actor;        // extension attribute; "" = absent
  std::string data = "{}";  // minified JSON (an object)

  bool operator==(const CloudEvent&) const = default;
};

std::string EncodeCloudEvent(const CloudEvent& event);

// The type filter of `dcm events --type` and `GET /events?type=`: true when `type` equals
// `pattern`, or starts with it when `pattern` ends in '*' ("dcm.provider.*"); "" matches all.
bool TypeMatches(std::string_view pattern, std::string_view type);

// Rejects (kCorruption, with the reason) anything that is not a CloudEvents 1.0 JSON object
// with string id, source, type and time, and an object `data`. Unknown attributes are ignored.
// An `actor` must be a string of at most kMaxActorBytes.
Result<CloudEvent> DecodeCloudEvent(std::string_view json);

}  // namespace dcm
