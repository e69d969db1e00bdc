// One-line human summaries of events, for `dcm events --output table` (src/cli/events_cmd.cc)
// and the HTTP history endpoints. Every type in the catalogue (docs/events.md) has its own
// wording, read through the typed decoders so a summary never shows data the projections would
// reject:
//
//   dcm.provider.health_changed  "health Ready → Unavailable after 3 failures (timeout)"
//   dcm.provider.registered      "registered vm-east-1 (vm) at https://…/vms"
//   dcm.catalog_item_instance.rehydrated
//                                "rehydrated: resource 5f3a9c2e… replaced by 9d8c7b6a… on sim-vm-0"
//
// UUIDs are shortened to their first 8 hex digits and "…" (the full id is in the event).
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "events/cloud_event.h"

namespace dcm {

// Never fails and always returns one line (control characters become spaces; at most
// kMaxSummaryBytes). Data a decoder rejects gives "<type> (undecodable data: <reason>)"; a type
// without a summary gives "<type> (no summary for this type)".
std::string SummarizeEvent(const CloudEvent& event);

inline constexpr size_t kMaxSummaryBytes = 300;

// "5f3a9c2e…" for a UUID, `id` itself otherwise. Exposed for renderers that show ids.
std::string ShortId(std::string_view id);

}  // namespace dcm
