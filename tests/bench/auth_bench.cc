// TokenVerifier cost (src/auth/token_verifier.h): a cold verification (header and claims
// parsed, libjwt checks the signature) for RS256 (RSA-2048) and ES256 (P-256), and a cache hit
// (SHA-256 of the token, one shard lookup, exp/nbf check, principal copy), on 1 and 2 threads
// sharing one verifier, as the HTTP threads do.
//
//   build/tests/bench/auth_bench [--benchmark_filter=Hit]
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "src/auth/jwks.h"
#include "src/auth/key_source.h"
#include "src/auth/token_verifier.h"
#include "tests/auth/test_tokens.h"

namespace dcm::auth {
namespace {

constexpr int64_t kNowS = 1767225600;

class StaticKeys final : public KeySource {
 public:
  StaticKeys() {
    auto jwks = ParseJwks(testing::DefaultJwks());
    if (!jwks) std::abort();
    holder_.Publish(std::move(jwks->keys));
  }
  std::shared_ptr<const KeySnapshot> Keys() const override { return holder_.Current(); }
  uint64_t Generation() const override { return holder_.Generation(); }

 private:
  KeySetHolder holder_;
};

// A realistic token: Keycloak-sized claims (~1 KiB encoded).
std::string Claims() {
  return testing::StandardClaims(
      "3f1c9a7e-5b2d-4e8f-9a61-0c7d2b4e8f10", kNowS + 3600,
      R"("iss":"https://idp.example/realms/dcm","aud":["dcm","account"],"iat":1767225600,)"
      R"("typ":"Bearer","azp":"dcm-cli","session_state":"8d2b4e8f-10c7-4d2b-9a61-3f1c9a7e5b2d",)"
      R"("realm_access":{"roles":["dcm-reader","dcm-user","offline_access"]},)"
      R"("scope":"openid profile email","email_verified":true,"name":"Alice Example",)"
      R"("preferred_username":"alice","email":"alice@example.com")");
}

TokenVerifier& Verifier(bool cached) {
  static const std::shared_ptr<KeySource> keys = std::make_shared<StaticKeys>();
  auto make = [](size_t capacity) {
    auto created = TokenVerifier::Create(
        {.issuer = "https://idp.example/realms/dcm", .audience = "dcm", .cache_capacity = capacity},
        keys);
    if (!created) std::abort();
    return std::move(*created);
  };
  static const std::unique_ptr<TokenVerifier> with_cache = make(10000);
  static const std::unique_ptr<TokenVerifier> without_cache = make(0);
  return cached ? *with_cache : *without_cache;
}

void Run(benchmark::State& state, TokenVerifier& verifier, const std::string& token) {
  for (auto _ : state) {
    auto result = verifier.Verify(token, kNowS * 1000);
    if (!result) {
      state.SkipWithError(result.error().reason.c_str());
      break;
    }
    benchmark::DoNotOptimize(result->roles);
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_VerifyColdRs256(benchmark::State& state) {
  static const std::string token =
      testing::MintToken(testing::RsaKey(), testing::kRsaKid, Claims());
  Run(state, Verifier(/*cached=*/false), token);
}

void BM_VerifyColdEs256(benchmark::State& state) {
  static const std::string token = testing::MintToken(testing::EcKey(), testing::kEcKid, Claims());
  Run(state, Verifier(/*cached=*/false), token);
}

void BM_VerifyCachedHit(benchmark::State& state) {
  static const std::string token =
      testing::MintToken(testing::RsaKey(), testing::kRsaKid, Claims());
  static const bool warm = Verifier(/*cached=*/true).Verify(token, kNowS * 1000).has_value();
  if (!warm) state.SkipWithError("token refused");
  Run(state, Verifier(/*cached=*/true), token);
}

// Every thread its own token (its own cache shard, most likely): no shared cache line.
void BM_VerifyCachedHitPerThreadToken(benchmark::State& state) {
  static const std::vector<std::string> tokens = [] {
    std::vector<std::string> out;
    for (int i = 0; i < 8; ++i) {
      out.push_back(
          testing::MintToken(testing::RsaKey(), testing::kRsaKid, Claims() + std::string(i, ' ')));
    }
    return out;
  }();
  const std::string& token = tokens[state.thread_index() % tokens.size()];
  if (!Verifier(/*cached=*/true).Verify(token, kNowS * 1000)) state.SkipWithError("refused");
  Run(state, Verifier(/*cached=*/true), token);
}

BENCHMARK(BM_VerifyColdRs256)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_VerifyColdEs256)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_VerifyCachedHit)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_VerifyCachedHitPerThreadToken)->Threads(2)->UseRealTime();

}  // namespace
}  // namespace dcm::auth

BENCHMARK_MAIN();
