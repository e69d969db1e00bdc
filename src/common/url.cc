#include "src/common/url.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace dcm {

Result<Url> ParseHttpUrl(std::string_view text) {
  auto bad = [](std::string why) { return MakeError(ErrorCode::kInvalidArgument, std::move(why)); };
  if (text.size() > kMaxEndpointLength) return bad("must be at most 2048 characters");
  for (unsigned char c : text) {
    if (c <= 0x20 || c == 0x7F) return bad("must not contain spaces or control characters");
  }
  const auto colon = text.find("://");
  if (colon == std::string_view::npos) return bad("must be an absolute http or https URL");
  Url url;
  url.scheme.assign(text.substr(0, colon));
  std::transform(url.scheme.begin(), url.scheme.end(), url.scheme.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (url.scheme != "http" && url.scheme != "https") {
    return bad("scheme must be http or https, got '" + url.scheme + "'");
  }
  std::string_view rest = text.substr(colon + 3);
  const auto path_start = rest.find_first_of("/?#");
  std::string_view authority = rest.substr(0, path_start);
  if (authority.find('@') != std::string_view::npos) return bad("must not contain credentials");
  std::string_view port_text;
  if (!authority.empty() && authority.front() == '[') {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) return bad("has an unterminated IPv6 literal");
    url.host.assign(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return bad("has a malformed host");
      port_text = after.substr(1);
    }
  } else {
    const auto p = authority.rfind(':');
    url.host.assign(authority.substr(0, p));
    if (p != std::string_view::npos) port_text = authority.substr(p + 1);
    // "http://::1/" or "http://h:80:90/" would otherwise parse as host ":" or "h:80".
    if (url.host.find(':') != std::string::npos) {
      return bad("has a malformed host (IPv6 literals need [brackets])");
    }
  }
  if (url.host.empty()) return bad("must have a host");
  url.port = url.scheme == "https" ? 443 : 80;
  if (!port_text.empty()) {
    unsigned port = 0;
    auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || port == 0 ||
        port > 65535) {
      return bad("has an invalid port");
    }
    url.port = static_cast<uint16_t>(port);
  }
  url.target = path_start == std::string_view::npos ? "/" : std::string(rest.substr(path_start));
  if (const auto hash = url.target.find('#'); hash != std::string::npos) url.target.resize(hash);
  if (url.target.empty() || url.target.front() != '/') url.target.insert(0, "/");
  return url;
}

std::string JoinUrlPath(std::string_view base, std::string_view suffix) {
  std::string out(base.substr(0, base.find_first_of("?#")));
  while (!out.empty() && out.back() == '/') out.pop_back();
  out.append(suffix);
  return out;
}

}  // namespace dcm
