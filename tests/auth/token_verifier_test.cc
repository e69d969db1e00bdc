// TokenVerifier: token shape, algorithms and keys (SPEC §6). Claims, roles and the cache are in
// token_claims_test.cc and token_cache_test.cc.
#include "src/auth/token_verifier.h"

#include <gtest/gtest.h>

#include <string>

#include "src/common/base64url.h"
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

TEST_F(VerifierTest, AcceptsValidRs256Token) {
  Make();
  auto principal = verifier_->Verify(Rs256("alice", R"("roles":["dcm-reader"])"), kNowMs);
  ASSERT_TRUE(principal.has_value()) << principal.error().reason;
  EXPECT_EQ(principal->via, Principal::Via::kToken);
  EXPECT_EQ(principal->subject, "alice");
  EXPECT_EQ(principal->roles, kRoleReader);
}

TEST_F(VerifierTest, AcceptsValidEs256Token) {
  Make();
  const std::string token = MintToken(EcKey(), kEcKid, StandardClaims("bob", kNowS + 60));
  auto principal = verifier_->Verify(token, kNowMs);
  ASSERT_TRUE(principal.has_value()) << principal.error().reason;
  EXPECT_EQ(principal->subject, "bob");
  EXPECT_EQ(principal->roles, kRoleNone);
}

TEST_F(VerifierTest, RefusesMissingAndGarbageTokens) {
  Make();
  EXPECT_EQ(Reason(""), "no token");
  EXPECT_EQ(Reason("garbage"), "malformed token (a JWT has three dot-separated parts)");
  EXPECT_EQ(Reason("W10.e30.e30"), "malformed token header (not a JSON object)");  // []
  EXPECT_EQ(Reason("e30.e30.e30"), "token header has no 'alg'");
  EXPECT_EQ(Reason("!!.e30.e30"), "malformed token header (not base64url)");
  EXPECT_EQ(Reason("a.b.c.d.e"), "encrypted tokens (JWE) are not supported");
  auto failure = verifier_->Verify("garbage", kNowMs);
  ASSERT_FALSE(failure.has_value());
  EXPECT_EQ(failure.error().kind, AuthFailureKind::kMalformed);
  EXPECT_EQ(verifier_->stats().signature_checks, 0u);
}

TEST_F(VerifierTest, RefusesTokenOverTheSizeLimit) {
  Make({.max_token_bytes = 1024});
  const std::string token = Rs256("alice", R"("pad":")" + std::string(2000, 'x') + '"');
  EXPECT_EQ(Reason(token), "token is larger than 1024 bytes");
}

TEST_F(VerifierTest, RefusesAlgNone) {
  Make();
  const std::string token =
      testing::MintUnsignedToken(StandardClaims("mallory", kNowS + 60), kRsaKid);
  auto failure = verifier_->Verify(token, kNowMs);
  ASSERT_FALSE(failure.has_value());
  EXPECT_EQ(failure.error().kind, AuthFailureKind::kAlgorithm);
  EXPECT_EQ(failure.error().reason, "alg 'none' is refused: tokens must be signed");
}

// The algorithm-confusion attack: an HS256 token whose HMAC secret is the RSA public key PEM
// (which anyone can fetch from the JWKS). A verifier that let the token choose the algorithm
// would check this HMAC with the key material it has for kid rsa-1, and accept it.
TEST_F(VerifierTest, RefusesHs256SignedWithThePublicKeyPem) {
  Make();
  auto keys = keys_->Keys();
  ASSERT_FALSE(keys->keys.empty());
  const std::string& public_pem = keys->keys.front().pem;  // exactly what we would verify with
  ASSERT_EQ(keys->keys.front().kid, kRsaKid);
  const std::string token = testing::MintHmacToken(
      public_pem, StandardClaims("mallory", kNowS + 60, R"("roles":["dcm-admin"])"), kRsaKid);
  ASSERT_FALSE(token.empty());
  auto failure = verifier_->Verify(token, kNowMs);
  ASSERT_FALSE(failure.has_value());
  EXPECT_EQ(failure.error().kind, AuthFailureKind::kAlgorithm);
  EXPECT_EQ(failure.error().reason, "alg 'HS256' is refused: HMAC algorithms are not accepted");
  EXPECT_EQ(verifier_->stats().signature_checks, 0u);  // refused before libjwt saw it
}

TEST_F(VerifierTest, RefusesOtherAsymmetricAlgorithms) {
  Make();
  // An RS256 token relabelled RS512: refused by its header, whatever its signature.
  const std::string token = Rs256();
  const std::string rs512 =
      Base64UrlEncode(R"({"alg":"RS512","kid":"rsa-1"})") + token.substr(token.find('.'));
  EXPECT_EQ(Reason(rs512), "alg 'RS512' is not accepted (RS256 and ES256 are)");
}

TEST_F(VerifierTest, RefusesCriticalHeaderExtensions) {
  Make();
  const std::string token = Rs256();
  const std::string crit = Base64UrlEncode(R"({"alg":"RS256","kid":"rsa-1","crit":["x"]})") +
                           token.substr(token.find('.'));
  EXPECT_EQ(Reason(crit), "token header has 'crit' extensions");
}

TEST_F(VerifierTest, RefusesUnknownKidAndAsksForOneRefresh) {
  Make();
  const std::string token = MintToken(RsaKey(), "rsa-9", StandardClaims("alice", kNowS + 60));
  auto failure = verifier_->Verify(token, kNowMs);
  ASSERT_FALSE(failure.has_value());
  EXPECT_EQ(failure.error().kind, AuthFailureKind::kUnknownKey);
  EXPECT_EQ(failure.error().reason, "unknown signing key id 'rsa-9'");
  EXPECT_EQ(keys_->refresh_requests, 1);
}

TEST_F(VerifierTest, UnknownKidVerifiesWhenTheRefreshBringsIt) {
  Make();
  keys_->next_jwks = testing::JwksJson({testing::Jwk(RsaKey(1), "rsa-2")});
  const std::string token = MintToken(RsaKey(1), "rsa-2", StandardClaims("alice", kNowS + 60));
  auto principal = verifier_->Verify(token, kNowMs);
  ASSERT_TRUE(principal.has_value()) << principal.error().reason;
  EXPECT_EQ(keys_->refresh_requests, 1);
}

TEST_F(VerifierTest, RefusesTokenSignedByAnotherKeyUnderAKnownKid) {
  Make();
  const std::string token = MintToken(RsaKey(1), kRsaKid, StandardClaims("mallory", kNowS + 60));
  auto failure = verifier_->Verify(token, kNowMs);
  ASSERT_FALSE(failure.has_value());
  EXPECT_EQ(failure.error().kind, AuthFailureKind::kSignature);
  EXPECT_EQ(failure.error().reason, "invalid signature");
  EXPECT_EQ(keys_->refresh_requests, 0);  // the kid is known: no refresh
}

TEST_F(VerifierTest, RefusesTamperedPayload) {
  Make();
  const std::string token = Rs256("alice", R"("roles":["dcm-reader"])");
  const std::string tampered = testing::TamperPayload(
      token, StandardClaims("alice", kNowS + 60, R"("roles":["dcm-admin"])"));
  EXPECT_EQ(Reason(tampered), "invalid signature");
  EXPECT_EQ(Reason(token), "accepted");
}

TEST_F(VerifierTest, RefusesTamperedSignature) {
  Make();
  std::string token = MintToken(EcKey(), kEcKid, StandardClaims("alice", kNowS + 60));
  token[token.size() - 5] = token[token.size() - 5] == 'A' ? 'B' : 'A';
  EXPECT_EQ(Reason(token), "invalid signature");
}

TEST_F(VerifierTest, RefusesKeyOfTheWrongTypeForTheAlg) {
  Make();
  // An ES256 token naming the RSA key's kid.
  const std::string token = MintToken(EcKey(), kRsaKid, StandardClaims("alice", kNowS + 60));
  auto failure = verifier_->Verify(token, kNowMs);
  ASSERT_FALSE(failure.has_value());
  EXPECT_EQ(failure.error().kind, AuthFailureKind::kAlgorithm);
  EXPECT_EQ(failure.error().reason, "key 'rsa-1' cannot verify ES256 (it needs an EC P-256 key)");
}

TEST_F(VerifierTest, TokenWithoutKidIsTriedAgainstKeysOfItsType) {
  keys_ = std::make_shared<FakeKeySource>(testing::JwksJson(
      {testing::Jwk(RsaKey(1), "other"), testing::Jwk(RsaKey(0), ""), testing::Jwk(EcKey(), "")}));
  Make();
  const std::string token = MintToken(RsaKey(0), "", StandardClaims("alice", kNowS + 60));
  EXPECT_EQ(Reason(token), "accepted");
  EXPECT_EQ(verifier_->stats().signature_checks, 2u);  // "other" first, then the right one
  const std::string forged = MintToken(RsaKey(2), "", StandardClaims("alice", kNowS + 60));
  EXPECT_EQ(Reason(forged), "invalid signature");
}

TEST_F(VerifierTest, TokenWithoutKidNeedsOneWhenManyKeysCouldSign) {
  std::vector<std::string> jwks;
  for (int i = 0; i < 5; ++i) jwks.push_back(testing::Jwk(EcKey(i), "ec-" + std::to_string(i)));
  keys_ = std::make_shared<FakeKeySource>(testing::JwksJson(jwks));
  Make();
  const std::string token = MintToken(EcKey(0), "", StandardClaims("alice", kNowS + 60));
  EXPECT_EQ(Reason(token),
            "token has no 'kid' and 5 keys could have signed it: a 'kid' is required");
  EXPECT_EQ(verifier_->stats().signature_checks, 0u);
}

TEST_F(VerifierTest, NoKeysLoadedIsA401WithoutTheSourcesInternals) {
  keys_ = std::make_shared<FakeKeySource>();
  keys_->MarkUnavailable("issuer unreachable: GET https://idp/x: connection refused");
  Make();
  auto failure = verifier_->Verify(Rs256(), kNowMs);
  ASSERT_FALSE(failure.has_value());
  EXPECT_EQ(failure.error().kind, AuthFailureKind::kKeysUnavailable);
  EXPECT_EQ(failure.error().reason, "signing keys not loaded (the issuer could not be reached)")
      << "the cause is logged, not told to an unauthenticated caller";
  EXPECT_EQ(keys_->refresh_requests, 1);  // the issuer may be back
}

TEST_F(VerifierTest, ReasonsQuoteTokenValuesSafely) {
  Make();
  const std::string token =
      MintToken(RsaKey(), "k\"\\\x01" + std::string(100, 'z'), StandardClaims("a", kNowS + 60));
  const std::string reason = Reason(token);
  EXPECT_EQ(reason, "unknown signing key id 'k???" + std::string(60, 'z') + "...'");
  AuthFailure failure{AuthFailureKind::kUnknownKey, reason};
  EXPECT_EQ(BearerChallenge(&failure),
            "Bearer error=\"invalid_token\", error_description=\"" + reason + "\"");
}

TEST(BearerTest, ExtractsTheTokenOfABearerHeader) {
  EXPECT_EQ(BearerToken("Bearer abc.def.ghi"), "abc.def.ghi");
  EXPECT_EQ(BearerToken("bearer   abc "), "abc");
  EXPECT_EQ(BearerToken("BEARER\tabc"), "abc");
  EXPECT_EQ(BearerToken("Bearer"), "");
  EXPECT_EQ(BearerToken("Bearer "), "");
  EXPECT_EQ(BearerToken("Basic dXNlcjpwYXNz"), std::nullopt);
  EXPECT_EQ(BearerToken("Bearerabc"), std::nullopt);
  EXPECT_EQ(BearerToken(""), std::nullopt);
}

TEST(BearerTest, ChallengeNamesTheErrorOnlyWhenATokenWasGiven) {
  EXPECT_EQ(BearerChallenge(nullptr), "Bearer");
  AuthFailure expired{AuthFailureKind::kExpired, "token expired"};
  EXPECT_EQ(BearerChallenge(&expired),
            R"(Bearer error="invalid_token", error_description="token expired")");
  AuthFailure dirty{AuthFailureKind::kClaims, "a\"b\\c\n"};
  EXPECT_EQ(BearerChallenge(&dirty), R"(Bearer error="invalid_token", error_description="a?b?c?")");
  EXPECT_STREQ(AuthFailureKindName(AuthFailureKind::kUnknownKey), "unknown_key");
}

TEST(TokenVerifierCreateTest, RefusesBadOptions) {
  auto keys = std::make_shared<FakeKeySource>(testing::DefaultJwks());
  EXPECT_FALSE(TokenVerifier::Create({}, nullptr).has_value());
  for (const char* claim : {"", ".roles", "roles.", "a..b"}) {
    auto created = TokenVerifier::Create({.roles_claim = claim}, keys);
    ASSERT_FALSE(created.has_value()) << claim;
    EXPECT_EQ(created.error().code, ErrorCode::kInvalidArgument);
  }
  EXPECT_FALSE(TokenVerifier::Create({.leeway_ms = -1}, keys).has_value());
  EXPECT_TRUE(
      TokenVerifier::Create({.roles_claim = "resource_access.dcm.roles"}, keys).has_value());
}

}  // namespace
}  // namespace dcm::auth
