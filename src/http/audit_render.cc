#include "src/http/audit_render.h"

#include "events/event_summary.h"
#include "src/common/json_writer.h"

namespace dcm::http {
namespace {

void WriteHistoryEntry(JsonWriter& w, const AuditEntry& entry, const CloudEvent& event) {
  w.BeginObject();
  w.Field("time", event.time);
  w.Field("type", event.type);
  w.Field("subject", event.subject);
  w.Field("source", event.source);
  if (!event.actor.empty()) w.Field("actor", event.actor);
  w.Field("summary", SummarizeEvent(event));
  w.Field("id", event.id);
  w.Field("topic", entry.topic);
  w.Field("partition", static_cast<int64_t>(entry.partition));
  w.Field("offset", entry.offset);
  w.Key("event");
  w.Raw(entry.json);
  w.EndObject();
}

}  // namespace

std::string RenderEventsPage(const AuditPage& page) {
  JsonWriter w;
  w.BeginObject();
  w.Key("events");
  w.BeginArray();
  for (const auto& entry : page.entries) w.Raw(entry.json);
  w.EndArray();
  if (!page.next_page_token.empty()) w.Field("next_page_token", page.next_page_token);
  w.EndObject();
  return w.Take();
}

std::string RenderHistoryPage(const std::string& id, const AuditPage& page) {
  JsonWriter w;
  w.BeginObject();
  w.Field("id", id);
  w.Key("events");
  w.BeginArray();
  for (const auto& entry : page.entries) {
    auto event = DecodeCloudEvent(entry.json);
    if (!event) continue;  // indexed only after decoding; unreachable unless the disk lies
    WriteHistoryEntry(w, entry, *event);
  }
  w.EndArray();
  if (!page.next_page_token.empty()) w.Field("next_page_token", page.next_page_token);
  w.EndObject();
  return w.Take();
}

}  // namespace dcm::http
