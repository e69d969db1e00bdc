// Test tokens: key pairs made at runtime, their JWKS, and JWTs minted with libjwt's encoder,
// for the auth unit tests and any test that needs an authenticated request.
//
//   const auto& rsa = dcm::testing::RsaKey();           // RSA-2048, made once per process
//   std::string jwks = dcm::testing::DefaultJwks();      // rsa-1 (RsaKey(0)), ec-1 (EcKey(0))
//   std::string token = dcm::testing::MintToken(
//       rsa, dcm::testing::kRsaKid,
//       dcm::testing::StandardClaims("alice", now_s + 300, R"("roles":["dcm-admin"])"));
//
// Negative cases: MintUnsignedToken (alg none), MintHmacToken (HS256 with any secret, e.g. a
// public key PEM: the algorithm-confusion attack), TamperPayload (new claims, old signature),
// and MintToken with another key under a known kid. Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dcm::testing {

enum class TestKeyType { kRsa, kEcP256 };

// A key pair. The kid is not part of it: it is chosen where the key is published or used.
struct TestKey {
  TestKeyType type = TestKeyType::kRsa;
  std::string private_pem;  // PKCS#8, what libjwt signs with
  std::string public_pem;   // SubjectPublicKeyInfo
  std::string n, e;         // RSA JWK members (base64url)
  std::string x, y;         // EC JWK members (base64url)
};

// Distinct keys by index, each made on first use and kept for the process (RSA-2048
// generation takes ~0.1 s).
const TestKey& RsaKey(int index = 0);
const TestKey& EcKey(int index = 0);

inline constexpr char kRsaKid[] = "rsa-1";
inline constexpr char kEcKid[] = "ec-1";

// The public JWK of `key` as a JSON object, with `kid` and `alg` members unless empty.
std::string Jwk(const TestKey& key, std::string_view kid, std::string_view alg = "");
// {"keys":[<jwks...>]}.
std::string JwksJson(const std::vector<std::string>& jwks);
// RsaKey(0) as kRsaKid (alg RS256) and EcKey(0) as kEcKid (alg ES256).
std::string DefaultJwks();

// {"sub":"<sub>","exp":<exp_s>[,<extra_members>]}; `extra_members` is raw JSON members, e.g.
// R"("aud":"dcm","roles":["dcm-reader"])". An empty `sub` leaves "sub" out; exp_s < 0 leaves
// "exp" out.
std::string StandardClaims(std::string_view sub, int64_t exp_s,
                           std::string_view extra_members = "");

// `claims_json` signed by `key` (RS256 for RSA, ES256 for EC), with header `kid` unless empty.
// "" if libjwt fails (a test bug).
std::string MintToken(const TestKey& key, std::string_view kid, std::string_view claims_json);
// An unsigned token: header {"alg":"none"}.
std::string MintUnsignedToken(std::string_view claims_json, std::string_view kid = "");
// An HS256 token with `secret` as the HMAC key.
std::string MintHmacToken(std::string_view secret, std::string_view claims_json,
                          std::string_view kid = "");
// `token` with its payload replaced by `claims_json`, header and signature unchanged.
std::string TamperPayload(std::string_view token, std::string_view claims_json);

}  // namespace dcm::testing
