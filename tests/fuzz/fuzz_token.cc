// Fuzz target: the trust boundary's parsers (SPEC §6). Each input is tried as
//   - a bearer token, against a TokenVerifier over a fixed JWKS (one RSA, one EC key): an
//     accepted token must be one of the validly signed seeds (any change to a signed token must
//     be refused: no signature bypass), and a refusal's reason must fit a WWW-Authenticate
//     error_description (short printable ASCII, no '"' or '\');
//   - a JWKS document: parsed keys are PEM public keys, at most kMaxJwksKeys of them;
//   - an AUTH_CERT_ROLES value: parsed subjects are non-empty and trimmed, with known roles.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "src/auth/cert_roles.h"
#include "src/auth/jwks.h"
#include "src/auth/key_source.h"
#include "src/auth/token_verifier.h"
#include "tests/auth/test_tokens.h"
#include "tests/fuzz/fuzz_check.h"

namespace dcm::fuzz {
namespace {

constexpr int64_t kNowS = 1767225600;
constexpr char kIssuer[] = "https://idp.test/realms/dcm";

class FixedKeys final : public auth::KeySource {
 public:
  FixedKeys() {
    auto jwks = auth::ParseJwks(testing::DefaultJwks());
    FUZZ_CHECK(jwks.has_value());
    holder_.Publish(std::move(jwks->keys));
  }
  std::shared_ptr<const auth::KeySnapshot> Keys() const override { return holder_.Current(); }
  uint64_t Generation() const override { return holder_.Generation(); }

 private:
  auth::KeySetHolder holder_;
};

struct Fixture {
  Fixture() {
    auto created =
        auth::TokenVerifier::Create({.issuer = kIssuer, .audience = "dcm", .admin_subject = "root"},
                                    std::make_shared<FixedKeys>());
    FUZZ_CHECK(created.has_value());
    verifier = std::move(*created);
    const std::string claims = testing::StandardClaims(
        "alice", kNowS + 3600,
        R"("iss":"https://idp.test/realms/dcm","aud":["dcm","x"],"nbf":1767225000,)"
        R"("roles":["dcm-reader"],"realm_access":{"roles":["dcm-user"]})");
    valid = {testing::MintToken(testing::RsaKey(), testing::kRsaKid, claims),
             testing::MintToken(testing::EcKey(), testing::kEcKid, claims),
             testing::MintToken(
                 testing::RsaKey(), /*kid=*/"",
                 testing::StandardClaims("root", kNowS + 60,
                                         R"("iss":"https://idp.test/realms/dcm","aud":"dcm")"))};
    invalid = {
        testing::MintUnsignedToken(claims, testing::kRsaKid),
        testing::MintHmacToken(testing::RsaKey().public_pem, claims, testing::kRsaKid),
        testing::MintToken(testing::RsaKey(1), testing::kRsaKid, claims),
        testing::MintToken(testing::EcKey(), "unknown", claims),
        testing::TamperPayload(valid[0], R"({"sub":"mallory","exp":1e3,"roles":[1,{}]})"),
    };
  }

  bool IsValidSeed(std::string_view token) const {
    for (const auto& v : valid) {
      if (token == v) return true;
    }
    return false;
  }

  std::unique_ptr<auth::TokenVerifier> verifier;
  std::vector<std::string> valid;
  std::vector<std::string> invalid;
};

const Fixture& Shared() {
  static const Fixture* fixture = new Fixture();  // leaked on purpose: outlives every input
  return *fixture;
}

bool FitsChallenge(const std::string& reason) {
  if (reason.empty() || reason.size() > 400) return false;
  for (unsigned char c : reason) {
    if (c < 0x20 || c >= 0x7F || c == '"' || c == '\\') return false;
  }
  return true;
}

void CheckToken(std::string_view input) {
  const Fixture& fixture = Shared();
  auto result = fixture.verifier->Verify(input, kNowS * 1000);
  if (result) {
    FUZZ_CHECK(fixture.IsValidSeed(input));
    FUZZ_CHECK(result->via == Principal::Via::kToken);
    FUZZ_CHECK(!result->subject.empty() && result->subject.size() <= auth::kMaxSubjectBytes);
  } else {
    FUZZ_CHECK(FitsChallenge(result.error().reason));
  }
}

void CheckJwks(std::string_view input) {
  auto jwks = auth::ParseJwks(input);
  if (!jwks) {
    FUZZ_CHECK(jwks.error().code == ErrorCode::kInvalidArgument);
    return;
  }
  FUZZ_CHECK(!jwks->keys.empty() && jwks->keys.size() <= auth::kMaxJwksKeys);
  for (const auto& key : jwks->keys) {
    FUZZ_CHECK(key.pem.starts_with("-----BEGIN PUBLIC KEY-----"));
    FUZZ_CHECK(key.kid.size() <= auth::kMaxKidBytes);
    FUZZ_CHECK(key.alg.empty() || key.alg == "RS256" || key.alg == "ES256");
  }
}

void CheckCertRoles(std::string_view input) {
  auto roles = auth::ParseCertRoles(input);
  if (!roles) {
    FUZZ_CHECK(roles.error().code == ErrorCode::kInvalidArgument);
    return;
  }
  constexpr uint32_t kKnown = kRoleAnyApi | kRolePeer;
  for (const auto& [subject, bits] : *roles) {
    FUZZ_CHECK(!subject.empty() && subject.front() != ' ' && subject.back() != ' ');
    FUZZ_CHECK(subject.find(';') == std::string::npos);
    FUZZ_CHECK(bits != kRoleNone && (bits & ~kKnown) == 0);
  }
}

}  // namespace

std::vector<std::string> Seeds() {
  const Fixture& fixture = Shared();
  std::vector<std::string> seeds = fixture.valid;
  seeds.insert(seeds.end(), fixture.invalid.begin(), fixture.invalid.end());
  seeds.push_back(testing::DefaultJwks());
  seeds.push_back(R"({"keys":[{"kty":"EC","crv":"P-256","x":"AA","y":"AA"},{"kty":"RSA"}]})");
  seeds.push_back("spiffe://dcm/sp-1=dcm-provider;CN=ops,O=acme=dcm-reader,dcm-admin");
  seeds.push_back("a.b.c.d.e");
  return seeds;
}

}  // namespace dcm::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  dcm::fuzz::CheckToken(input);
  dcm::fuzz::CheckJwks(input);
  dcm::fuzz::CheckCertRoles(input);
  return 0;
}
