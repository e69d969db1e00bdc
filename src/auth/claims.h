// The claim rules of SPEC §6, applied to a token's claims JSON: exp required, nbf optional
// (both with leeway), iss and aud when configured, sub required, roles from a configurable
// claim plus Keycloak's realm_access.roles. Internal to dcm_auth. Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "src/auth/auth_failure.h"

namespace dcm::auth {

// Longest `sub` accepted (it becomes the `actor` of events).
inline constexpr size_t kMaxSubjectBytes = 256;
// Where Keycloak puts realm roles; always read, besides the configured claim.
inline constexpr std::string_view kKeycloakRolesClaim = "realm_access.roles";
inline constexpr int64_t kNoNotBefore = std::numeric_limits<int64_t>::min();

// a + b, clamped to the int64 range (NumericDates can be anything a JSON number holds).
inline int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t sum = 0;
  if (!__builtin_add_overflow(a, b, &sum)) return sum;
  return b > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
}

struct ClaimRules {
  std::string issuer;         // "" = iss not checked
  std::string audience;       // "" = aud not checked
  std::string roles_claim;    // dotted path to a JSON array of role names
  std::string admin_subject;  // this sub is always admin; "" = none
};

struct TokenClaims {
  std::string subject;
  int64_t exp_ms = 0;
  int64_t nbf_ms = kNoNotBefore;  // kNoNotBefore when the token has none
  uint32_t roles = kRoleNone;
};

// Reads and checks the claims of `json` (everything but the times, see CheckTimes). Role names
// that are not ours are ignored; a roles claim that is not an array of strings gives no roles.
// The returned data is copied out: it does not refer to `json` or the JSON parser.
tl::expected<TokenClaims, AuthFailure> ReadClaims(std::string_view json, const ClaimRules& rules);

// Valid at `now_ms`: now < exp + leeway, and now >= nbf - leeway.
tl::expected<void, AuthFailure> CheckTimes(int64_t exp_ms, int64_t nbf_ms, int64_t leeway_ms,
                                           int64_t now_ms);

}  // namespace dcm::auth
