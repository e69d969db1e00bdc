// AUTH_CERT_ROLES (src/auth/cert_roles.h) and the principal of an mTLS peer.
#include "src/auth/cert_roles.h"

#include <gtest/gtest.h>

#include <string>

namespace dcm::auth {
namespace {

std::string Error(std::string_view text) {
  auto parsed = ParseCertRoles(text);
  return parsed ? "parsed" : parsed.error().message;
}

TEST(CertRolesTest, ParsesSubjectsAndRoles) {
  auto roles = ParseCertRoles(
      " spiffe://dcm/sp-1 = dcm-provider ; CN=ops,O=acme=dcm-reader, "
      "dcm-admin;;admin.test=dcm-user;");
  ASSERT_TRUE(roles.has_value()) << roles.error().message;
  const CertRoles expected = {{"spiffe://dcm/sp-1", kRoleProvider},
                              {"CN=ops,O=acme", kRoleReader | kRoleAdmin},
                              {"admin.test", kRoleUser}};
  EXPECT_EQ(*roles, expected);
}

// SPEC §10: a peer enclave's certificate subject maps to dcm-peer.
TEST(CertRolesTest, MapsAPeerEnclaveToDcmPeer) {
  auto roles = ParseCertRoles("dcm-enclave://enclave-a=dcm-peer");
  ASSERT_TRUE(roles.has_value()) << roles.error().message;
  EXPECT_EQ(*roles, (CertRoles{{"dcm-enclave://enclave-a", kRolePeer}}));
}

TEST(CertRolesTest, EmptyTextHasNoSubjects) {
  auto roles = ParseCertRoles("  ");
  ASSERT_TRUE(roles.has_value());
  EXPECT_TRUE(roles->empty());
}

TEST(CertRolesTest, RefusesMalformedItemsNamingThem) {
  EXPECT_EQ(Error("sp-1=dcm-superuser"),
            "AUTH_CERT_ROLES: unknown role 'dcm-superuser' for subject 'sp-1' (known: "
            "dcm-reader, dcm-provider, dcm-user, dcm-admin, dcm-peer)");
  EXPECT_EQ(Error("sp-1"), "AUTH_CERT_ROLES: 'sp-1' is not subject=role,role");
  EXPECT_EQ(Error(" =dcm-reader"), "AUTH_CERT_ROLES: '=dcm-reader' has an empty subject");
  EXPECT_EQ(Error("sp-1= , "), "AUTH_CERT_ROLES: subject 'sp-1' has no role");
  EXPECT_EQ(Error("a=dcm-user;a=dcm-reader"), "AUTH_CERT_ROLES: subject 'a' is listed twice");
}

TEST(CertRolesTest, CertificatePrincipalTakesRolesFromTheMap) {
  const CertRoles roles = {{"sp-1", kRoleProvider}};
  const Principal known = CertificatePrincipal("sp-1", roles, "");
  EXPECT_EQ(known.via, Principal::Via::kCertificate);
  EXPECT_EQ(known.subject, "sp-1");
  EXPECT_EQ(known.roles, kRoleProvider);
  const Principal stranger = CertificatePrincipal("sp-2", roles, "");
  EXPECT_EQ(stranger.subject, "sp-2");
  EXPECT_EQ(stranger.roles, kRoleNone);
  const Principal admin = CertificatePrincipal("root", roles, "root");
  EXPECT_EQ(admin.roles, kRoleAdmin);
  EXPECT_EQ(CertificatePrincipal("sp-1", roles, "root").roles, kRoleProvider);
}

}  // namespace
}  // namespace dcm::auth
