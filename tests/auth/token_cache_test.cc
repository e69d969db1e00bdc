// TokenVerifier's cache (token_cache.h): hits skip the signature check, and never outlive the
// token's exp, the cache ttl, or the key generation the token was verified under.
#include "src/auth/token_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "src/auth/token_verifier.h"
#include "tests/auth/test_tokens.h"
#include "tests/auth/verifier_fixture.h"

namespace dcm::auth {
namespace {

using testing::kRsaKid;
using testing::MintToken;
using testing::RsaKey;
using testing::StandardClaims;

TEST_F(VerifierTest, CacheHitGivesTheSamePrincipalWithoutASecondSignatureCheck) {
  Make();
  const std::string token = Rs256("alice", R"("roles":["dcm-user"])");
  auto first = verifier_->Verify(token, kNowMs);
  auto second = verifier_->Verify(token, kNowMs + 1000);
  ASSERT_TRUE(first.has_value() && second.has_value());
  EXPECT_EQ(second->subject, first->subject);
  EXPECT_EQ(second->roles, first->roles);
  EXPECT_EQ(second->via, Principal::Via::kToken);
  const TokenVerifierStats stats = verifier_->stats();
  EXPECT_EQ(stats.signature_checks, 1u);
  EXPECT_EQ(stats.cache_hits, 1u);
  EXPECT_EQ(stats.cache_entries, 1u);
}

TEST_F(VerifierTest, CachedTokenStillExpiresAtExp) {
  Make();
  const std::string token = MintToken(RsaKey(), kRsaKid, StandardClaims("alice", kNowS + 10));
  EXPECT_EQ(Reason(token), "accepted");
  EXPECT_EQ(Reason(token, kNowMs + 69'999), "accepted");  // exp + leeway - 1 ms: a hit
  EXPECT_EQ(verifier_->stats().cache_hits, 1u);
  EXPECT_EQ(Reason(token, kNowMs + 70'000), "token expired");
  EXPECT_EQ(verifier_->stats().signature_checks, 1u);
}

TEST_F(VerifierTest, CacheHitStillChecksNotBefore) {
  Make();
  const std::string token =
      Rs256("alice", "\"nbf\":" + std::to_string(kNowS + 30));  // valid from now - 30 s (leeway)
  EXPECT_EQ(Reason(token), "accepted");
  // A request stamped earlier than the cached one (another thread's clock reading).
  EXPECT_EQ(Reason(token, kNowMs - 31'000), "token not valid yet (nbf is in the future)");
}

TEST_F(VerifierTest, CacheEntryLivesAtMostTheTtl) {
  Make({.cache_ttl_ms = 1000});
  const std::string token = Rs256();
  EXPECT_EQ(Reason(token), "accepted");
  EXPECT_EQ(Reason(token, kNowMs + 999), "accepted");
  EXPECT_EQ(verifier_->stats().signature_checks, 1u);
  EXPECT_EQ(Reason(token, kNowMs + 1000), "accepted");
  EXPECT_EQ(verifier_->stats().signature_checks, 2u);
}

TEST_F(VerifierTest, KeyChangeDropsCachedTokensOfARemovedKey) {
  Make();
  const std::string token = Rs256();
  EXPECT_EQ(Reason(token), "accepted");
  keys_->Set(testing::JwksJson({testing::Jwk(RsaKey(1), "rsa-2")}));  // rsa-1 is gone
  EXPECT_EQ(Reason(token), "unknown signing key id 'rsa-1'");
}

TEST_F(VerifierTest, DisabledCacheChecksEverySignature) {
  Make({.cache_capacity = 0});
  const std::string token = Rs256();
  EXPECT_EQ(Reason(token), "accepted");
  EXPECT_EQ(Reason(token), "accepted");
  EXPECT_EQ(verifier_->stats().signature_checks, 2u);
  EXPECT_EQ(verifier_->stats().cache_entries, 0u);
}

TEST_F(VerifierTest, CacheStaysWithinItsCapacity) {
  Make({.cache_capacity = 32});
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(Reason(Rs256("user-" + std::to_string(i))), "accepted");
  }
  EXPECT_LE(verifier_->stats().cache_entries, 32u);
  EXPECT_GT(verifier_->stats().cache_entries, 0u);
}

TEST_F(VerifierTest, ConcurrentVerifiesAgree) {
  Make();
  const std::vector<std::string> tokens = {
      Rs256("a"), Rs256("b"), MintToken(RsaKey(1), kRsaKid, StandardClaims("x", kNowS + 60))};
  std::atomic<int> accepted{0};
  std::atomic<int> refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        auto result = verifier_->Verify(tokens[i % tokens.size()], kNowMs);
        (result ? accepted : refused)++;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(accepted.load(), 4 * 34);  // i % 3 in {0, 1}: 34 of 50
  EXPECT_EQ(refused.load(), 4 * 16);
}

TEST(TokenCacheTest, EvictsTheEarliestToExpireWhenAShardIsFull) {
  TokenCache cache(16);  // one entry per shard
  TokenCache::Key a{};
  TokenCache::Key b{};
  b[0] = 1;  // same shard (key[31]), another entry
  cache.Insert(a, CachedToken{{}, 0, 0, /*drop_at_ms=*/500, 1}, 0);
  cache.Insert(b, CachedToken{{}, 0, 0, /*drop_at_ms=*/900, 1}, 0);
  EXPECT_FALSE(cache.Lookup(a, 1, 0).has_value());
  EXPECT_TRUE(cache.Lookup(b, 1, 0).has_value());
  EXPECT_FALSE(cache.Lookup(b, 2, 0).has_value());  // another generation: dropped
  EXPECT_EQ(cache.size(), 0u);
}

TEST(TokenCacheTest, KeyIsTheSha256OfTheToken) {
  const TokenCache::Key key = TokenCache::KeyOf("abc");
  EXPECT_EQ(key[0], 0xba);  // SHA-256("abc") = ba7816bf...
  EXPECT_EQ(key[1], 0x78);
  EXPECT_EQ(key[31], 0xad);
}

}  // namespace
}  // namespace dcm::auth
