// Page tokens of the list views (RegistryView, InstanceView): the hex of the last id a page
// returned, so the next page scans the Store from just after it. Opaque to clients; a token
// this server did not issue is bad input (HTTP 400 naming `page_token`).
#pragma once

#include <charconv>
#include <string>
#include <string_view>

#include "src/common/result.h"

namespace dcm {

inline std::string EncodePageToken(std::string_view last_id) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(last_id.size() * 2);
  for (unsigned char c : last_id) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 0xF]);
  }
  return out;
}

// The id to scan after ("" for an empty token: from the first).
inline Result<std::string> DecodePageToken(std::string_view token) {
  auto invalid = [] {
    return MakeError(ErrorCode::kInvalidArgument, "invalid page_token",
                     {{"page_token", "is not a token this server issued"}});
  };
  if (token.size() % 2) return invalid();
  std::string out;
  out.reserve(token.size() / 2);
  for (size_t i = 0; i < token.size(); i += 2) {
    unsigned v = 0;
    const auto [end, ec] = std::from_chars(token.data() + i, token.data() + i + 2, v, 16);
    if (ec != std::errc() || end != token.data() + i + 2) return invalid();
    out.push_back(static_cast<char>(v));
  }
  return out;
}

}  // namespace dcm
