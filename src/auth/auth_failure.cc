#include "src/auth/auth_failure.h"

#include <cctype>

namespace dcm::auth {
namespace {

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

std::string_view TrimBlanks(std::string_view text) {
  while (!text.empty() && IsBlank(text.front())) text.remove_prefix(1);
  while (!text.empty() && IsBlank(text.back())) text.remove_suffix(1);
  return text;
}

}  // namespace

const char* AuthFailureKindName(AuthFailureKind kind) {
  switch (kind) {
    case AuthFailureKind::kMalformed:
      return "malformed";
    case AuthFailureKind::kAlgorithm:
      return "algorithm";
    case AuthFailureKind::kUnknownKey:
      return "unknown_key";
    case AuthFailureKind::kKeysUnavailable:
      return "keys_unavailable";
    case AuthFailureKind::kSignature:
      return "signature";
    case AuthFailureKind::kExpired:
      return "expired";
    case AuthFailureKind::kNotYetValid:
      return "not_yet_valid";
    case AuthFailureKind::kIssuer:
      return "issuer";
    case AuthFailureKind::kAudience:
      return "audience";
    case AuthFailureKind::kClaims:
      return "claims";
  }
  return "unknown";
}

std::optional<std::string_view> BearerToken(std::string_view authorization) {
  authorization = TrimBlanks(authorization);
  constexpr std::string_view kScheme = "bearer";
  if (authorization.size() < kScheme.size()) return std::nullopt;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != kScheme[i]) {
      return std::nullopt;
    }
  }
  const std::string_view rest = authorization.substr(kScheme.size());
  if (!rest.empty() && !IsBlank(rest.front())) return std::nullopt;  // "Bearerx"
  return TrimBlanks(rest);
}

std::string BearerChallenge(const AuthFailure* failure) {
  if (failure == nullptr) return "Bearer";
  std::string out = R"(Bearer error="invalid_token", error_description=")";
  for (unsigned char c : failure->reason) {
    // Defence in depth: reasons are built clean, but the header must never break.
    const bool plain = c >= 0x20 && c < 0x7F && c != '"' && c != '\\';
    out.push_back(plain ? static_cast<char>(c) : '?');
  }
  out.push_back('"');
  return out;
}

}  // namespace dcm::auth
