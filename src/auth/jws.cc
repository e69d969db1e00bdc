#include "src/auth/jws.h"

#include <simdjson.h>

#include <algorithm>

#include "src/auth/json_util.h"
#include "src/common/base64url.h"

namespace dcm::auth {
namespace {

constexpr auto kMalformed = AuthFailureKind::kMalformed;

tl::expected<void, AuthFailure> CheckAlg(std::string_view alg) {
  if (alg == "RS256" || alg == "ES256") return {};
  if (alg == "none") {
    return Fail(AuthFailureKind::kAlgorithm, "alg 'none' is refused: tokens must be signed");
  }
  if (alg == "HS256" || alg == "HS384" || alg == "HS512") {
    return Fail(AuthFailureKind::kAlgorithm,
                "alg '" + std::string(alg) + "' is refused: HMAC algorithms are not accepted");
  }
  return Fail(AuthFailureKind::kAlgorithm,
              "alg '" + Printable(alg, 16) + "' is not accepted (RS256 and ES256 are)");
}

tl::expected<JoseHeader, AuthFailure> ParseHeader(std::string_view segment) {
  auto json = Base64UrlDecode(segment);
  if (!json) return Fail(kMalformed, "malformed token header (not base64url)");
  auto root = ParseJson(*json);
  simdjson::dom::object header;
  if (!root || root->get(header)) {
    return Fail(kMalformed, "malformed token header (not a JSON object)");
  }
  auto alg = Member(header, "alg");
  std::string_view alg_text;
  if (!alg || alg->get(alg_text)) return Fail(kMalformed, "token header has no 'alg'");
  auto checked = CheckAlg(alg_text);
  if (!checked) return tl::unexpected(checked.error());
  // RFC 7515 §4.1.11: extensions marked critical that we do not understand make it invalid.
  if (Member(header, "crit")) return Fail(kMalformed, "token header has 'crit' extensions");
  JoseHeader out;
  out.alg = std::string(alg_text);
  out.key_type = out.alg == "RS256" ? KeyType::kRsa : KeyType::kEcP256;
  if (auto kid = Member(header, "kid")) {
    std::string_view kid_text;
    if (kid->get(kid_text)) return Fail(kMalformed, "token header 'kid' is not a string");
    out.kid = std::string(kid_text);
  }
  return out;
}

tl::expected<void, AuthFailure> CheckSignature(std::string_view segment, KeyType type) {
  auto signature = Base64UrlDecode(segment);
  if (!signature) return Fail(kMalformed, "malformed token signature (not base64url)");
  // ES256: R || S, 32 bytes each (RFC 7518 §3.4). RS256: the modulus size, 256..1024 bytes.
  const bool plausible = type == KeyType::kEcP256
                             ? signature->size() == 64
                             : signature->size() >= 256 && signature->size() <= 1024;
  if (!plausible) return Fail(AuthFailureKind::kSignature, "invalid signature (wrong size)");
  return {};
}

}  // namespace

tl::expected<JwsParts, AuthFailure> ParseJws(std::string_view token) {
  const auto dots = std::count(token.begin(), token.end(), '.');
  if (dots == 4) return Fail(kMalformed, "encrypted tokens (JWE) are not supported");
  if (dots != 2) return Fail(kMalformed, "malformed token (a JWT has three dot-separated parts)");
  const size_t first = token.find('.');
  const size_t second = token.find('.', first + 1);
  auto header = ParseHeader(token.substr(0, first));
  if (!header) return tl::unexpected(header.error());
  auto payload = Base64UrlDecode(token.substr(first + 1, second - first - 1));
  if (!payload) return Fail(kMalformed, "malformed token payload (not base64url)");
  auto signature = CheckSignature(token.substr(second + 1), header->key_type);
  if (!signature) return tl::unexpected(signature.error());
  return JwsParts{std::move(*header), std::move(*payload)};
}

}  // namespace dcm::auth
