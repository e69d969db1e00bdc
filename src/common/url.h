// A small absolute-URL parser for provider endpoints and outbound HTTP calls (SPEC §3.1:
// endpoint is an absolute http/https URL with a host, at most 2048 characters).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "src/common/result.h"

namespace dcm {

struct Url {
  std::string scheme;  // "http" or "https", lower-cased
  std::string host;    // without brackets for IPv6 literals
  uint16_t port = 0;   // explicit or the scheme's default
  std::string target;  // path + query, at least "/"
};

inline constexpr size_t kMaxEndpointLength = 2048;

// Rejects: relative URLs, schemes other than http/https, missing host, bad ports, userinfo,
// whitespace or control characters, and anything longer than kMaxEndpointLength.
Result<Url> ParseHttpUrl(std::string_view text);

// `base` without trailing '/' + `suffix` (which starts with '/'), keeping any query out of it:
// JoinPath("http://h/api/", "/health") == "http://h/api/health".
std::string JoinUrlPath(std::string_view base, std::string_view suffix);

}  // namespace dcm
