// AUTH_CERT_ROLES (SPEC §6): the roles of mTLS clients, by certificate subject (the SAN URI or
// DNS name, else the CN, as the TLS layer extracts it).
//
//   AUTH_CERT_ROLES="spiffe://dcm/sp-1=dcm-provider;CN=ops,O=acme=dcm-reader,dcm-admin"
//
// Items are separated by ';'. In each, the roles follow the LAST '=' (a subject may contain
// '=' itself, as "CN=ops,O=acme" does); roles are separated by ','. Blanks around subjects and
// role names are trimmed; empty items are skipped. Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "src/common/principal.h"
#include "src/common/result.h"

namespace dcm::auth {

// Certificate subject -> role bits.
using CertRoles = std::map<std::string, uint32_t, std::less<>>;

// kInvalidArgument (a startup config error) naming the culprit: an item without '=', an empty
// subject, a subject listed twice, a subject with no role, or a role name that is not one of
// dcm-reader, dcm-provider, dcm-user, dcm-admin.
Result<CertRoles> ParseCertRoles(std::string_view text);

// The principal of an mTLS peer: via kCertificate, `subject`, the roles `roles` gives it (none
// for a subject it does not list), plus kRoleAdmin when `subject` is `admin_subject`
// (DCM_ADMIN_SUBJECT; "" = none).
Principal CertificatePrincipal(std::string_view subject, const CertRoles& roles,
                               std::string_view admin_subject);

}  // namespace dcm::auth
