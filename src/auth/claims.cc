#include "src/auth/claims.h"

#include <simdjson.h>

#include <optional>

#include "src/auth/json_util.h"

namespace dcm::auth {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

constexpr auto kClaims = AuthFailureKind::kClaims;

uint32_t RolesAt(object claims, std::string_view path) {
  auto value = FindPath(claims, path);
  array names;
  if (!value || value->get(names)) return kRoleNone;
  uint32_t roles = kRoleNone;
  for (element item : names) {
    std::string_view name;
    if (!item.get(name)) roles |= RoleFromName(name);
  }
  return roles;
}

tl::expected<std::string, AuthFailure> ReadSubject(object claims) {
  auto sub = Member(claims, "sub");
  if (!sub) return Fail(kClaims, "token has no 'sub' claim");
  std::string_view text;
  if (sub->get(text) || text.empty()) return Fail(kClaims, "'sub' is not a non-empty string");
  if (text.size() > kMaxSubjectBytes) return Fail(kClaims, "'sub' is longer than 256 bytes");
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7F) return Fail(kClaims, "'sub' contains control characters");
  }
  return std::string(text);
}

tl::expected<void, AuthFailure> CheckIssuer(object claims, const std::string& issuer) {
  if (issuer.empty()) return {};
  auto iss = Member(claims, "iss");
  std::string_view text;
  if (!iss || iss->get(text)) return Fail(AuthFailureKind::kIssuer, "token has no 'iss' claim");
  if (text != issuer) {
    return Fail(AuthFailureKind::kIssuer, "wrong issuer '" + Printable(text) + "'");
  }
  return {};
}

// `aud` is one string or an array of strings (RFC 7519 §4.1.3).
tl::expected<void, AuthFailure> CheckAudience(object claims, const std::string& audience) {
  if (audience.empty()) return {};
  auto aud = Member(claims, "aud");
  if (!aud) return Fail(AuthFailureKind::kAudience, "token has no 'aud' claim");
  std::string_view text;
  array list;
  if (!aud->get(text) && text == audience) return {};
  if (!aud->get(list)) {
    for (element item : list) {
      if (!item.get(text) && text == audience) return {};
    }
  }
  return Fail(AuthFailureKind::kAudience,
              "wrong audience: token is not for '" + Printable(audience) + "'");
}

tl::expected<int64_t, AuthFailure> ReadTime(object claims, std::string_view name, bool required) {
  auto value = Member(claims, name);
  if (!value) {
    if (required) return Fail(kClaims, "token has no '" + std::string(name) + "' claim");
    return kNoNotBefore;
  }
  auto ms = NumericDateMillis(*value);
  if (!ms) return Fail(kClaims, "'" + std::string(name) + "' is not a number");
  return *ms;
}

}  // namespace

tl::expected<TokenClaims, AuthFailure> ReadClaims(std::string_view json, const ClaimRules& rules) {
  auto root = ParseJson(json);
  if (!root) return Fail(AuthFailureKind::kMalformed, "malformed token payload (not JSON)");
  object claims;
  if (root->get(claims)) {
    return Fail(AuthFailureKind::kMalformed, "malformed token payload (not a JSON object)");
  }
  TokenClaims out;
  auto exp = ReadTime(claims, "exp", /*required=*/true);
  if (!exp) return tl::unexpected(exp.error());
  out.exp_ms = *exp;
  auto nbf = ReadTime(claims, "nbf", /*required=*/false);
  if (!nbf) return tl::unexpected(nbf.error());
  out.nbf_ms = *nbf;
  if (auto ok = CheckIssuer(claims, rules.issuer); !ok) return tl::unexpected(ok.error());
  if (auto ok = CheckAudience(claims, rules.audience); !ok) return tl::unexpected(ok.error());
  auto subject = ReadSubject(claims);
  if (!subject) return tl::unexpected(subject.error());
  out.subject = std::move(*subject);
  out.roles = RolesAt(claims, rules.roles_claim) | RolesAt(claims, kKeycloakRolesClaim);
  if (!rules.admin_subject.empty() && out.subject == rules.admin_subject) out.roles |= kRoleAdmin;
  return out;
}

tl::expected<void, AuthFailure> CheckTimes(int64_t exp_ms, int64_t nbf_ms, int64_t leeway_ms,
                                           int64_t now_ms) {
  if (now_ms >= SaturatingAdd(exp_ms, leeway_ms)) {
    return Fail(AuthFailureKind::kExpired, "token expired");
  }
  if (now_ms < SaturatingAdd(nbf_ms, -leeway_ms)) {
    return Fail(AuthFailureKind::kNotYetValid, "token not valid yet (nbf is in the future)");
  }
  return {};
}

}  // namespace dcm::auth
