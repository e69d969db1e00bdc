// The watch hub's message format (watch_hub.h): index keys, SSE messages, stored event types.
#include <fmt/format.h>

#include "src/http/watch_hub.h"

namespace dcm::http {

// One pass that tracks strings and nesting, without decoding the rest.
std::string_view StoredEventType(std::string_view json) {
  int depth = 0;
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      --depth;
    } else if (c == '"') {
      const size_t start = i + 1;
      for (++i; i < json.size() && json[i] != '"'; ++i) {
        if (json[i] == '\\') ++i;
      }
      if (depth != 1 || json.substr(start, i - start) != "type") continue;
      size_t v = json.find_first_not_of(" \t\r\n", i + 1);
      if (v == std::string_view::npos || json[v] != ':') continue;  // a value "type", not a key
      v = json.find_first_not_of(" \t\r\n", v + 1);
      if (v == std::string_view::npos || json[v] != '"') return "";
      const size_t end = json.find('"', v + 1);
      return end == std::string_view::npos ? "" : json.substr(v + 1, end - v - 1);
    }
  }
  return "";
}

std::string AuditEntryKey(const AuditEntry& e) {
  return fmt::format("{:013}/{}/{:06}/{:012}", e.time_ms, e.topic, e.partition, e.offset);
}

void AppendSse(std::string* out, std::string_view id, std::string_view event,
               std::string_view data) {
  if (!id.empty()) out->append("id: ").append(id).append("\n");
  out->append("event: ").append(event).append("\n");
  while (true) {  // a line break inside the data starts another data: line
    const size_t nl = data.find('\n');
    std::string_view line = data.substr(0, nl);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    out->append("data: ").append(line).append("\n");
    if (nl == std::string_view::npos) break;
    data.remove_prefix(nl + 1);
  }
  out->append("\n");
}

}  // namespace dcm::http
