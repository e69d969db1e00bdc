// ParseJwks (src/auth/jwks.h) and the base64url it is built on.
#include "src/auth/jwks.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "src/common/base64url.h"
#include "tests/auth/test_tokens.h"

namespace dcm::auth {
namespace {

using testing::EcKey;
using testing::Jwk;
using testing::JwksJson;
using testing::RsaKey;

std::string Error(std::string_view json) {
  auto parsed = ParseJwks(json);
  return parsed ? "parsed" : parsed.error().message;
}

TEST(Base64UrlTest, RoundTripsEveryLength) {
  std::string bytes;
  for (int i = 0; i < 40; ++i) {
    const std::string encoded = Base64UrlEncode(bytes);
    EXPECT_EQ(encoded.find_first_of("+/="), std::string::npos);
    EXPECT_EQ(Base64UrlDecode(encoded), bytes);
    bytes.push_back(static_cast<char>(i * 37));
  }
}

TEST(Base64UrlTest, RefusesBadInput) {
  EXPECT_EQ(Base64UrlDecode("YQ"), "a");
  EXPECT_EQ(Base64UrlDecode("YQ=="), std::nullopt);  // JWS: no padding
  EXPECT_EQ(Base64UrlDecode("YQ==", Padding::kAllow), "a");
  EXPECT_EQ(Base64UrlDecode("YQ=", Padding::kAllow), std::nullopt);  // padded to 3
  EXPECT_EQ(Base64UrlDecode("Y===", Padding::kAllow), std::nullopt);
  EXPECT_EQ(Base64UrlDecode("YR"), std::nullopt);  // non-zero unused bits
  EXPECT_EQ(Base64UrlDecode("Y"), std::nullopt);   // 4n+1 characters
  EXPECT_EQ(Base64UrlDecode("a+/b"), std::nullopt);
  EXPECT_EQ(Base64UrlDecode(""), "");
}

TEST(JwksTest, ParsesRsaAndEcKeysWithKidAndAlg) {
  auto jwks = ParseJwks(testing::DefaultJwks());
  ASSERT_TRUE(jwks.has_value()) << jwks.error().message;
  ASSERT_EQ(jwks->keys.size(), 2u);
  EXPECT_TRUE(jwks->warnings.empty());
  EXPECT_EQ(jwks->keys[0].kid, testing::kRsaKid);
  EXPECT_EQ(jwks->keys[0].alg, "RS256");
  EXPECT_EQ(jwks->keys[0].type, KeyType::kRsa);
  EXPECT_EQ(jwks->keys[0].pem, RsaKey().public_pem);  // the same SubjectPublicKeyInfo
  EXPECT_EQ(jwks->keys[1].kid, testing::kEcKid);
  EXPECT_EQ(jwks->keys[1].type, KeyType::kEcP256);
  EXPECT_EQ(jwks->keys[1].pem, EcKey().public_pem);
}

TEST(JwksTest, KeepsKeysWithoutKidOrAlg) {
  auto jwks = ParseJwks(JwksJson({Jwk(EcKey(), "")}));
  ASSERT_TRUE(jwks.has_value()) << jwks.error().message;
  EXPECT_EQ(jwks->keys[0].kid, "");
  EXPECT_EQ(jwks->keys[0].alg, "");
}

TEST(JwksTest, SkipsUnusableKeysAndSaysWhy) {
  const testing::TestKey& rsa = RsaKey();
  const testing::TestKey& ec = EcKey();
  std::string short_modulus = Base64UrlDecode(rsa.n)->substr(128);
  short_modulus[0] |= static_cast<char>(0x80);  // exactly 1024 bits
  const std::string short_n = Base64UrlEncode(short_modulus);
  std::string off_curve_y = *Base64UrlDecode(ec.y);
  off_curve_y.back() ^= 1;
  const std::vector<std::string> keys = {
      Jwk(rsa, "good"),
      R"({"kty":"RSA","kid":"enc","use":"enc","n":")" + rsa.n + R"(","e":"AQAB"})",
      R"({"kty":"oct","kid":"hmac","k":"c2VjcmV0"})",
      R"({"kty":"EC","kid":"p384","crv":"P-384","x":")" + ec.x + R"(","y":")" + ec.y + R"("})",
      R"({"kty":"RSA","kid":"weak","n":")" + short_n + R"(","e":"AQAB"})",
      R"({"kty":"EC","kid":"off","crv":"P-256","x":")" + ec.x + R"(","y":")" +
          Base64UrlEncode(off_curve_y) + R"("})",
      R"({"kty":"RSA","kid":"bad-n","n":"***","e":"AQAB"})",
      R"({"kty":"RSA","kid":"ps","alg":"PS256","n":")" + rsa.n + R"(","e":"AQAB"})",
      R"({"kty":"EC","kid":"mix","alg":"RS256","crv":"P-256","x":")" + ec.x + R"(","y":")" + ec.y +
          R"("})",
      R"({"kty":"RSA","kid":"ops","key_ops":["encrypt"],"n":")" + rsa.n + R"(","e":"AQAB"})",
      Jwk(rsa, "good"),
      R"("not an object")",
      R"({"kty":"RSA","kid":7})",
  };
  auto jwks = ParseJwks(JwksJson(keys));
  ASSERT_TRUE(jwks.has_value()) << jwks.error().message;
  ASSERT_EQ(jwks->keys.size(), 1u);
  EXPECT_EQ(jwks->keys[0].kid, "good");
  const std::vector<std::string> expected = {
      "key #1 (kid 'enc'): 'use' is 'enc', not 'sig'",
      "key #2 (kid 'hmac'): key type 'oct' is not supported (RSA and EC are)",
      "key #3 (kid 'p384'): curve 'P-384' is not supported (P-256 is)",
      "key #4 (kid 'weak'): RSA modulus has 1024 bits (2048..8192 accepted)",
      "key #5 (kid 'off'): key material rejected by OpenSSL",
      "key #6 (kid 'bad-n'): 'n' is not base64url",
      "key #7 (kid 'ps'): alg 'PS256' is not accepted (RS256 and ES256 are)",
      "key #8 (kid 'mix'): alg RS256 does not fit an EC P-256 key",
      "key #9 (kid 'ops'): 'key_ops' does not include 'verify'",
      "key #10 (kid 'good'): repeats an earlier key's kid and type",
      "key #11: not a JSON object",
      "key #12: 'kid' is not a string",
  };
  EXPECT_EQ(jwks->warnings, expected);
}

TEST(JwksTest, RefusesDocumentsThatAreNotAJwks) {
  EXPECT_TRUE(Error("{").starts_with("JWKS is not JSON: malformed JSON: ")) << Error("{");
  EXPECT_EQ(Error("[]"), "not a JWKS: no \"keys\" array");
  EXPECT_EQ(Error(R"({"keys":{}})"), "not a JWKS: no \"keys\" array");
  EXPECT_EQ(Error(R"({"keys":[]})"), "JWKS has no usable key");
  EXPECT_EQ(Error(R"({"keys":[{"kty":"oct"}]})"),
            "JWKS has no usable key: key #0: key type 'oct' is not supported (RSA and EC are)");
}

TEST(JwksTest, RefusesOversizedDocumentsAndTooManyKeys) {
  EXPECT_EQ(Error(std::string(kMaxJwksBytes + 1, ' ')),
            "JWKS is larger than 1 MiB (1048577 bytes)");
  std::vector<std::string> keys(kMaxJwksKeys + 1, Jwk(EcKey(), ""));
  EXPECT_EQ(Error(JwksJson(keys)), "JWKS has 101 keys (at most 100 are accepted)");
}

}  // namespace
}  // namespace dcm::auth
