// JSON of the audit endpoints (SPEC §3.4): the last, pure step of each audit handler
// (audit_handlers.h). The events are rendered as stored (their CloudEvent JSON verbatim).
#pragma once

#include <string>

#include "projections/audit_projection.h"

namespace dcm::http {

// GET /events: {"events": [CloudEvent...], "next_page_token"?}.
std::string RenderEventsPage(const AuditPage& page);

// GET .../{id}/history: {"id", "events": [{time, type, subject, source, actor?, summary, id,
// topic, partition, offset, event}], "next_page_token"?}. An entry that does not decode is left
// out (it was indexed only after decoding).
std::string RenderHistoryPage(const std::string& id, const AuditPage& page);

}  // namespace dcm::http
