#include "src/http/federation_forwarding.h"

#include <algorithm>
#include <charconv>

#include "src/common/federation_config.h"
#include "src/common/json_read.h"
#include "src/common/json_writer.h"

namespace dcm::http {
namespace {

constexpr size_t kMaxRequestIdBytes = 128;
constexpr size_t kMaxVia = 16;

tl::unexpected<Error> Invalid(const std::string& header, const std::string& why) {
  return MakeError(ErrorCode::kInvalidArgument, header + " " + why, {{header, why}});
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

bool IsRequestIdChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == ':' ||
         c == '-';
}

}  // namespace

Result<FedHop> ParseFedHop(const HttpRequest& request) {
  FedHop hop;
  if (const std::string* id = request.Header("fed-request-id")) {
    if (id->empty() || id->size() > kMaxRequestIdBytes ||
        !std::all_of(id->begin(), id->end(), IsRequestIdChar)) {
      return Invalid("Fed-Request-Id", "must be 1-128 of [A-Za-z0-9._:-]");
    }
    hop.request_id = *id;
  }
  if (const std::string* limit = request.Header("fed-hop-limit")) {
    std::string_view text = Trim(*limit);
    int value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || value < 1 ||
        value > kMaxFedHopLimit) {
      return Invalid("Fed-Hop-Limit", "must be an integer from 1 to 16");
    }
    hop.hop_limit = value;
  }
  if (const std::string* via = request.Header("fed-via")) {
    std::string_view rest = *via;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      std::string_view item = Trim(rest.substr(0, comma));
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      if (!IsDnsLabel(item) || hop.via.size() == kMaxVia) {
        return Invalid("Fed-Via", "must be up to 16 comma-separated enclave ids");
      }
      hop.via.emplace_back(item);
    }
  }
  return hop;
}

FedHop ForwardedHop(const FedHop& in, const std::string& self) {
  FedHop out = in;
  out.hop_limit = std::max(1, in.hop_limit - 1);
  out.via.push_back(self);
  return out;
}

std::vector<std::pair<std::string, std::string>> FedHopHeaders(const FedHop& hop) {
  std::vector<std::pair<std::string, std::string>> headers;
  if (!hop.request_id.empty()) headers.emplace_back("Fed-Request-Id", hop.request_id);
  headers.emplace_back("Fed-Hop-Limit", std::to_string(hop.hop_limit));
  std::string via;
  for (const std::string& e : hop.via) via += (via.empty() ? "" : ",") + e;
  headers.emplace_back("Fed-Via", via);
  return headers;
}

bool Visited(const FedHop& hop, const std::string& enclave) {
  return std::find(hop.via.begin(), hop.via.end(), enclave) != hop.via.end();
}

Result<std::vector<std::string>> ReadvertiseFlavors(const std::string& self,
                                                    const std::string& body) {
  auto parsed = ParseJson(body);
  simdjson::dom::array flavors;
  if (!parsed || !parsed->is_object() ||
      simdjson::dom::object(*parsed).at_key("flavors").get(flavors)) {
    return MakeError(ErrorCode::kInvalidArgument, "not a flavour list ({\"flavors\": [...]})");
  }
  std::vector<std::string> out;
  for (auto item : flavors) {
    simdjson::dom::object f;
    if (item.get(f)) continue;
    const std::string owner = StringMember(f, "owner");
    if (StringMember(f, "flavor_id").empty() || owner.empty()) continue;
    int64_t hops = 1;
    if (f.at_key("hops").get(hops) || hops < 1) hops = 1;
    std::vector<std::string> path{self};
    simdjson::dom::array inner;
    if (!f.at_key("path").get(inner)) {
      for (auto hop : inner) {
        std::string_view id;
        if (!hop.get(id)) path.emplace_back(id);
      }
    }
    if (path.size() == 1) path.push_back(owner);
    JsonWriter w;
    w.BeginObject();
    for (auto field : f) {
      if (field.key == "hops" || field.key == "path") continue;
      w.Key(field.key);
      w.Raw(Minify(field.value));
    }
    w.Field("hops", hops + 1);
    w.StringArray("path", path);
    w.EndObject();
    out.push_back(w.Take());
  }
  return out;
}

}  // namespace dcm::http
