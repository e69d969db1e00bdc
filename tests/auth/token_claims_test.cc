// TokenVerifier: the claim rules of SPEC §6 (exp/nbf with leeway, iss, aud, sub) and roles.
#include <gtest/gtest.h>

#include <string>

#include "src/auth/token_verifier.h"
#include "tests/auth/test_tokens.h"
#include "tests/auth/verifier_fixture.h"

namespace dcm::auth {
namespace {

using testing::EcKey;
using testing::kEcKid;
using testing::kRsaKid;
using testing::MintToken;
using testing::RsaKey;
using testing::StandardClaims;

std::string Token(std::string_view claims) { return MintToken(RsaKey(), kRsaKid, claims); }

TEST_F(VerifierTest, RefusesExpiredToken) {
  Make();
  auto failure = verifier_->Verify(Token(StandardClaims("alice", kNowS - 61)), kNowMs);
  ASSERT_FALSE(failure.has_value());
  EXPECT_EQ(failure.error().kind, AuthFailureKind::kExpired);
  EXPECT_EQ(failure.error().reason, "token expired");
  EXPECT_EQ(verifier_->stats().signature_checks, 0u);  // refused on the unverified claims
}

TEST_F(VerifierTest, AcceptsTokenExpiredWithinTheLeeway) {
  Make();
  EXPECT_EQ(Reason(Token(StandardClaims("alice", kNowS - 59))), "accepted");
  Make({.leeway_ms = 0});
  EXPECT_EQ(Reason(Token(StandardClaims("alice", kNowS))), "token expired");
  EXPECT_EQ(Reason(Token(StandardClaims("alice", kNowS + 1))), "accepted");
}

TEST_F(VerifierTest, RefusesTokenNotValidYet) {
  Make();
  const std::string future =
      Token(StandardClaims("alice", kNowS + 600, "\"nbf\":" + std::to_string(kNowS + 61)));
  auto failure = verifier_->Verify(future, kNowMs);
  ASSERT_FALSE(failure.has_value());
  EXPECT_EQ(failure.error().kind, AuthFailureKind::kNotYetValid);
  EXPECT_EQ(failure.error().reason, "token not valid yet (nbf is in the future)");
  const std::string soon =
      Token(StandardClaims("alice", kNowS + 600, "\"nbf\":" + std::to_string(kNowS + 59)));
  EXPECT_EQ(Reason(soon), "accepted");
}

TEST_F(VerifierTest, AcceptsFractionalNumericDates) {
  Make({.leeway_ms = 0});
  const std::string token = Token(R"({"sub":"alice","exp":)" + std::to_string(kNowS) + ".5}");
  EXPECT_EQ(Reason(token, kNowMs + 499), "accepted");
  EXPECT_EQ(Reason(token, kNowMs + 500), "token expired");
}

TEST_F(VerifierTest, RefusesMissingOrMalformedExp) {
  Make();
  EXPECT_EQ(Reason(Token(StandardClaims("alice", -1))), "token has no 'exp' claim");
  EXPECT_EQ(Reason(Token(R"({"sub":"alice","exp":"tomorrow"})")), "'exp' is not a number");
  // libjwt cannot even mint this one: forge it onto a valid token.
  EXPECT_EQ(Reason(testing::TamperPayload(Rs256(), R"({"sub":"alice","exp":1e400})")),
            "malformed token payload (not JSON)");
  EXPECT_EQ(Reason(testing::TamperPayload(Rs256(), "[1]")),
            "malformed token payload (not a JSON object)");
}

TEST_F(VerifierTest, RefusesMissingOrMalformedSub) {
  Make();
  EXPECT_EQ(Reason(Token(StandardClaims("", kNowS + 60))), "token has no 'sub' claim");
  const std::string exp = std::to_string(kNowS + 60);
  EXPECT_EQ(Reason(Token(R"({"sub":"","exp":)" + exp + "}")), "'sub' is not a non-empty string");
  EXPECT_EQ(Reason(Token(R"({"sub":42,"exp":)" + exp + "}")), "'sub' is not a non-empty string");
  EXPECT_EQ(Reason(Token(R"({"sub":"a\nb","exp":)" + exp + "}")),
            "'sub' contains control characters");
  EXPECT_EQ(Reason(Token(StandardClaims(std::string(257, 's'), kNowS + 60))),
            "'sub' is longer than 256 bytes");
  EXPECT_EQ(Reason(Token(StandardClaims(std::string(256, 's'), kNowS + 60))), "accepted");
}

TEST_F(VerifierTest, RefusesWrongIssuer) {
  Make({.issuer = "https://idp.example/realms/dcm"});
  const std::string right = R"("iss":"https://idp.example/realms/dcm")";
  EXPECT_EQ(Reason(Token(StandardClaims("alice", kNowS + 60, right))), "accepted");
  auto failure = verifier_->Verify(
      Token(StandardClaims("alice", kNowS + 60, R"("iss":"https://evil.example")")), kNowMs);
  ASSERT_FALSE(failure.has_value());
  EXPECT_EQ(failure.error().kind, AuthFailureKind::kIssuer);
  EXPECT_EQ(failure.error().reason, "wrong issuer 'https://evil.example'");
  EXPECT_EQ(Reason(Token(StandardClaims("alice", kNowS + 60))), "token has no 'iss' claim");
}

TEST_F(VerifierTest, IssuerIsNotCheckedWhenNotConfigured) {
  Make();
  EXPECT_EQ(Reason(Token(StandardClaims("alice", kNowS + 60, R"("iss":"anyone")"))), "accepted");
}

TEST_F(VerifierTest, RefusesWrongAudience) {
  Make({.audience = "dcm"});
  auto failure =
      verifier_->Verify(Token(StandardClaims("alice", kNowS + 60, R"("aud":"other")")), kNowMs);
  ASSERT_FALSE(failure.has_value());
  EXPECT_EQ(failure.error().kind, AuthFailureKind::kAudience);
  EXPECT_EQ(failure.error().reason, "wrong audience: token is not for 'dcm'");
  EXPECT_EQ(Reason(Token(StandardClaims("alice", kNowS + 60))), "token has no 'aud' claim");
  EXPECT_EQ(Reason(Token(StandardClaims("alice", kNowS + 60, R"("aud":["a","b"])"))),
            "wrong audience: token is not for 'dcm'");
}

TEST_F(VerifierTest, AcceptsAudienceArrayContainingTheAudience) {
  Make({.audience = "dcm"});
  EXPECT_EQ(Reason(Token(StandardClaims("alice", kNowS + 60, R"("aud":"dcm")"))), "accepted");
  EXPECT_EQ(Reason(Token(StandardClaims("alice", kNowS + 60, R"("aud":["account",1,"dcm"])"))),
            "accepted");
}

TEST_F(VerifierTest, ReadsRolesFromTheRolesClaim) {
  Make();
  auto principal = verifier_->Verify(
      Rs256("alice", R"("roles":["dcm-reader","dcm-user","something-else",7])"), kNowMs);
  ASSERT_TRUE(principal.has_value()) << principal.error().reason;
  EXPECT_EQ(principal->roles, kRoleReader | kRoleUser);
}

TEST_F(VerifierTest, ReadsKeycloakRealmRolesAlways) {
  Make();
  auto principal = verifier_->Verify(
      Rs256("alice", R"("roles":["dcm-reader"],"realm_access":{"roles":["dcm-provider"]})"),
      kNowMs);
  ASSERT_TRUE(principal.has_value()) << principal.error().reason;
  EXPECT_EQ(principal->roles, kRoleReader | kRoleProvider);
}

TEST_F(VerifierTest, ReadsACustomDottedRolesClaim) {
  Make({.roles_claim = "resource_access.dcm.roles"});
  auto principal = verifier_->Verify(
      Rs256("alice", R"("roles":["dcm-admin"],"resource_access":{"dcm":{"roles":["dcm-user"]}})"),
      kNowMs);
  ASSERT_TRUE(principal.has_value()) << principal.error().reason;
  EXPECT_EQ(principal->roles, kRoleUser);  // "roles" is not read when another claim is set
  Make({.roles_claim = "realm_access.roles"});
  principal = verifier_->Verify(Rs256("bob", R"("realm_access":{"roles":["dcm-admin"]})"), kNowMs);
  ASSERT_TRUE(principal.has_value()) << principal.error().reason;
  EXPECT_EQ(principal->roles, kRoleAdmin);
}

TEST_F(VerifierTest, RolesClaimOfAnotherShapeGivesNoRoles) {
  Make();
  for (const char* roles : {R"("roles":"dcm-admin")", R"("roles":{"dcm-admin":true})",
                            R"("realm_access":["dcm-admin"])"}) {
    auto principal = verifier_->Verify(Rs256("alice", roles), kNowMs);
    ASSERT_TRUE(principal.has_value()) << principal.error().reason;
    EXPECT_EQ(principal->roles, kRoleNone) << roles;
  }
}

TEST_F(VerifierTest, AdminSubjectIsAlwaysAdmin) {
  Make({.admin_subject = "root@example"});
  auto admin = verifier_->Verify(Rs256("root@example", R"("roles":["dcm-reader"])"), kNowMs);
  ASSERT_TRUE(admin.has_value()) << admin.error().reason;
  EXPECT_EQ(admin->roles, kRoleReader | kRoleAdmin);
  auto other = verifier_->Verify(Rs256("root@example.org"), kNowMs);
  ASSERT_TRUE(other.has_value()) << other.error().reason;
  EXPECT_FALSE(other->IsAdmin());
}

TEST_F(VerifierTest, Es256TokensGetTheSameClaimRules) {
  Make({.issuer = "https://idp", .audience = "dcm"});
  const std::string token =
      MintToken(EcKey(), kEcKid,
                StandardClaims("carol", kNowS + 60,
                               R"("iss":"https://idp","aud":["dcm"],"roles":["dcm-user"])"));
  auto principal = verifier_->Verify(token, kNowMs);
  ASSERT_TRUE(principal.has_value()) << principal.error().reason;
  EXPECT_EQ(principal->roles, kRoleUser);
  EXPECT_EQ(Reason(token, kNowMs + 121'000), "token expired");
}

}  // namespace
}  // namespace dcm::auth
