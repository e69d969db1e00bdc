// Shared by the TokenVerifier tests: a KeySource whose keys the test sets, and a fixture with a
// verifier over the default test JWKS (tests/auth/test_tokens.h) at a fixed "now".
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>

#include "src/auth/jwks.h"
#include "src/auth/key_source.h"
#include "src/auth/token_verifier.h"
#include "tests/auth/test_tokens.h"

namespace dcm::auth {

// Keys set by the test; RefreshForUnknownKey counts calls and publishes `next_jwks` if set.
class FakeKeySource final : public KeySource {
 public:
  explicit FakeKeySource(const std::string& jwks) { Set(jwks); }
  FakeKeySource() = default;

  void Set(const std::string& jwks) {
    auto parsed = ParseJwks(jwks);
    ASSERT_TRUE(parsed.has_value()) << parsed.error().message;
    holder_.Publish(std::move(parsed->keys));
  }
  void MarkUnavailable(std::string why) { holder_.MarkUnavailable(std::move(why)); }

  std::shared_ptr<const KeySnapshot> Keys() const override { return holder_.Current(); }
  uint64_t Generation() const override { return holder_.Generation(); }
  bool RefreshForUnknownKey(uint64_t seen_generation, int64_t /*now_ms*/) override {
    ++refresh_requests;
    if (next_jwks) {
      Set(*next_jwks);
      next_jwks.reset();
    }
    return holder_.Generation() != seen_generation;
  }

  int refresh_requests = 0;
  std::optional<std::string> next_jwks;

 private:
  KeySetHolder holder_;
};

class VerifierTest : public ::testing::Test {
 protected:
  static constexpr int64_t kNowS = 1767225600;  // 2026-01-01T00:00:00Z, FakeClock's default
  static constexpr int64_t kNowMs = kNowS * 1000;

  void SetUp() override { keys_ = std::make_shared<FakeKeySource>(testing::DefaultJwks()); }

  // A verifier over keys_ with `options` (issuer and audience unset unless the test sets them).
  TokenVerifier& Make(TokenVerifierOptions options = {}) {
    auto created = TokenVerifier::Create(std::move(options), keys_);
    EXPECT_TRUE(created.has_value()) << created.error().message;
    verifier_ = std::move(*created);
    return *verifier_;
  }

  // An RS256 token for `sub` valid for 5 minutes, with `extra` claims.
  static std::string Rs256(std::string_view sub = "alice", std::string_view extra = "") {
    return testing::MintToken(testing::RsaKey(), testing::kRsaKid,
                              testing::StandardClaims(sub, kNowS + 300, extra));
  }

  // The reason `token` is refused at `now_ms`, or "accepted".
  std::string Reason(std::string_view token, int64_t now_ms = kNowMs) {
    auto result = verifier_->Verify(token, now_ms);
    return result ? "accepted" : result.error().reason;
  }

  std::shared_ptr<FakeKeySource> keys_;
  std::unique_ptr<TokenVerifier> verifier_;
};

}  // namespace dcm::auth
