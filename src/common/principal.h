// Principal: who is calling (SPEC §6). Set by the HTTP authentication layer on every request
// before it is routed; handlers read `subject` as the `actor` of the events they emit.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace dcm {

// The roles of SPEC §6, as bits.
enum Role : uint32_t {
  kRoleNone = 0,
  kRoleReader = 1u << 0,    // dcm-reader: every GET
  kRoleProvider = 1u << 1,  // dcm-provider: register; change only the providers it owns
  kRoleUser = 1u << 2,      // dcm-user: catalog item instances and resources
  kRoleAdmin = 1u << 3,     // dcm-admin: everything
  // dcm-peer (SPEC §10): another enclave. Only /federation/v1alpha1/*, and nothing else: it is
  // not one of the roles of kRoleAnyApi, so a peer certificate cannot call /api/v1alpha1/*.
  kRolePeer = 1u << 4,
};

// The roles that may read the API (/api/v1alpha1/*): every role but dcm-peer.
inline constexpr uint32_t kRoleAnyApi = kRoleReader | kRoleProvider | kRoleUser | kRoleAdmin;

inline constexpr std::string_view kRoleReaderName = "dcm-reader";
inline constexpr std::string_view kRoleProviderName = "dcm-provider";
inline constexpr std::string_view kRoleUserName = "dcm-user";
inline constexpr std::string_view kRoleAdminName = "dcm-admin";
inline constexpr std::string_view kRolePeerName = "dcm-peer";

// The role bit a role name stands for; kRoleNone for names that are not ours.
inline uint32_t RoleFromName(std::string_view name) {
  if (name == kRoleReaderName) return kRoleReader;
  if (name == kRoleProviderName) return kRoleProvider;
  if (name == kRoleUserName) return kRoleUser;
  if (name == kRoleAdminName) return kRoleAdmin;
  if (name == kRolePeerName) return kRolePeer;
  return kRoleNone;
}

// The actor of requests when authentication is disabled (SPEC §6).
inline constexpr std::string_view kAnonymousActor = "anonymous";

struct Principal {
  enum class Via { kNone, kDisabled, kToken, kCertificate };
  Via via = Via::kNone;  // kNone: not authenticated (yet)
  std::string subject;   // the token's `sub`, the certificate's subject, or "anonymous"
  uint32_t roles = kRoleNone;

  bool Has(uint32_t role) const { return (roles & role) != 0; }
  bool IsAdmin() const { return Has(kRoleAdmin); }
  // SPEC §6: an authenticated caller that is not an admin acts only on the providers it owns.
  bool OwnerScoped() const {
    return (via == Via::kToken || via == Via::kCertificate) && !IsAdmin();
  }
};

}  // namespace dcm
