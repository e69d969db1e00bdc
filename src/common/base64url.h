// base64url (RFC 4648 §5): JOSE's JWS segments and JWK key material (RFC 7515 §2, RFC 7518 §6),
// and DCM-Position tokens. Pure functions, thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace dcm {

enum class Padding {
  kRefuse,  // JWS compact serialization: no '=' (RFC 7515 §2)
  kAllow,   // JWK members: '=' tolerated at the end (some issuers still pad)
};

// The bytes `text` encodes; nullopt for characters outside the base64url alphabet, a length
// that no encoding has (4n+1), '=' that is refused or not at the end, or non-zero unused bits
// in the last character (so every byte string has exactly one accepted encoding).
std::optional<std::string> Base64UrlDecode(std::string_view text,
                                           Padding padding = Padding::kRefuse);

// Unpadded base64url of `bytes`.
std::string Base64UrlEncode(std::string_view bytes);

}  // namespace dcm
