#include "src/auth/cert_roles.h"

#include "src/auth/json_util.h"

namespace dcm::auth {
namespace {

std::string_view Trim(std::string_view text) {
  constexpr std::string_view kBlanks = " \t\r\n";
  const size_t begin = text.find_first_not_of(kBlanks);
  if (begin == std::string_view::npos) return {};
  return text.substr(begin, text.find_last_not_of(kBlanks) - begin + 1);
}

tl::unexpected<Error> Invalid(std::string message) {
  return MakeError(ErrorCode::kInvalidArgument, "AUTH_CERT_ROLES: " + std::move(message));
}

Result<uint32_t> ParseRoleList(std::string_view list, const std::string& subject) {
  uint32_t roles = kRoleNone;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view name = Trim(list.substr(0, comma));
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    if (name.empty()) continue;
    const uint32_t role = RoleFromName(name);
    if (role == kRoleNone) {
      return Invalid("unknown role '" + Printable(name) + "' for subject '" + subject +
                     "' (known: dcm-reader, dcm-provider, dcm-user, dcm-admin, dcm-peer)");
    }
    roles |= role;
  }
  if (roles == kRoleNone) return Invalid("subject '" + subject + "' has no role");
  return roles;
}

}  // namespace

Result<CertRoles> ParseCertRoles(std::string_view text) {
  CertRoles out;
  while (!text.empty()) {
    const size_t semicolon = text.find(';');
    const std::string_view item = Trim(text.substr(0, semicolon));
    text = semicolon == std::string_view::npos ? std::string_view() : text.substr(semicolon + 1);
    if (item.empty()) continue;
    const size_t eq = item.rfind('=');
    if (eq == std::string_view::npos) {
      return Invalid("'" + Printable(item) + "' is not subject=role,role");
    }
    const std::string subject(Trim(item.substr(0, eq)));
    if (subject.empty()) return Invalid("'" + Printable(item) + "' has an empty subject");
    ASSIGN_OR_RETURN(const uint32_t roles, ParseRoleList(item.substr(eq + 1), Printable(subject)));
    if (!out.emplace(subject, roles).second) {
      return Invalid("subject '" + Printable(subject) + "' is listed twice");
    }
  }
  return out;
}

Principal CertificatePrincipal(std::string_view subject, const CertRoles& roles,
                               std::string_view admin_subject) {
  Principal principal{Principal::Via::kCertificate, std::string(subject), kRoleNone};
  if (auto it = roles.find(subject); it != roles.end()) principal.roles = it->second;
  if (!admin_subject.empty() && subject == admin_subject) principal.roles |= kRoleAdmin;
  return principal;
}

}  // namespace dcm::auth
