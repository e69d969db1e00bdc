// OidcKeys (src/auth/oidc_keys.h) with a fake HTTP fetch and explicit times: discovery, the
// issuer check, refresh on unknown kid (rate-limited), periodic refresh, and failures.
#include "src/auth/oidc_keys.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "src/auth/token_verifier.h"
#include "tests/auth/test_tokens.h"

namespace dcm::auth {
namespace {

using testing::Jwk;
using testing::JwksJson;
using testing::RsaKey;

constexpr char kIssuer[] = "https://idp.example/realms/dcm";
constexpr char kDiscoveryUrl[] = "https://idp.example/realms/dcm/.well-known/openid-configuration";
constexpr char kJwksUrl[] = "https://idp.example/realms/dcm/certs";
constexpr int64_t kNowS = 1767225600;
constexpr int64_t kNowMs = kNowS * 1000;

// Answers GETs from a map; counts them per URL. Thread-safe.
class FakeIssuer {
 public:
  FakeIssuer() {
    Set(kDiscoveryUrl,
        std::string(R"({"issuer":")") + kIssuer + R"(","jwks_uri":")" + kJwksUrl + R"("})");
    Set(kJwksUrl, JwksJson({Jwk(RsaKey(0), "k1")}));
  }
  void Set(const std::string& url, std::string body) {
    std::lock_guard lock(mu_);
    bodies_[url] = std::move(body);
  }
  void Remove(const std::string& url) {
    std::lock_guard lock(mu_);
    bodies_.erase(url);
  }
  int Gets(const std::string& url) {
    std::lock_guard lock(mu_);
    return gets_[url];
  }
  HttpFetch Fetch() {
    return [this](const std::string& url) -> Result<std::string> {
      std::lock_guard lock(mu_);
      ++gets_[url];
      auto it = bodies_.find(url);
      if (it == bodies_.end()) return MakeError(ErrorCode::kUnavailable, "connection refused");
      return it->second;
    };
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::string> bodies_;
  std::map<std::string, int> gets_;
};

class OidcKeysTest : public ::testing::Test {
 protected:
  std::shared_ptr<OidcKeys> Make(OidcKeysOptions options = {}) {
    if (options.issuer.empty()) options.issuer = kIssuer;
    auto created = OidcKeys::Create(std::move(options), issuer_.Fetch());
    EXPECT_TRUE(created.has_value()) << created.error().message;
    return std::shared_ptr<OidcKeys>(std::move(*created));
  }

  std::unique_ptr<TokenVerifier> Verifier(std::shared_ptr<OidcKeys> keys) {
    auto created = TokenVerifier::Create({.issuer = kIssuer}, std::move(keys));
    EXPECT_TRUE(created.has_value()) << created.error().message;
    return std::move(*created);
  }

  static std::string Token(int key_index, const std::string& kid) {
    return testing::MintToken(
        RsaKey(key_index), kid,
        testing::StandardClaims("alice", kNowS + 3600, std::string(R"("iss":")") + kIssuer + '"'));
  }

  static std::string Reason(TokenVerifier& verifier, const std::string& token, int64_t now_ms) {
    auto result = verifier.Verify(token, now_ms);
    return result ? "accepted" : result.error().reason;
  }

  FakeIssuer issuer_;
};

TEST_F(OidcKeysTest, StartDiscoversTheJwksUriAndLoadsItsKeys) {
  auto keys = Make();
  ASSERT_TRUE(keys->Start(kNowMs).has_value());
  EXPECT_EQ(issuer_.Gets(kDiscoveryUrl), 1);
  EXPECT_EQ(issuer_.Gets(kJwksUrl), 1);
  ASSERT_EQ(keys->Keys()->keys.size(), 1u);
  EXPECT_EQ(keys->Keys()->keys[0].kid, "k1");
  EXPECT_EQ(keys->Generation(), 1u);
  auto verifier = Verifier(keys);
  EXPECT_EQ(Reason(*verifier, Token(0, "k1"), kNowMs), "accepted");
}

TEST_F(OidcKeysTest, IssuerWithTrailingSlashFindsTheSameDiscoveryUrl) {
  issuer_.Set(kDiscoveryUrl,
              std::string(R"({"issuer":")") + kIssuer + R"(/","jwks_uri":")" + kJwksUrl + R"("})");
  auto keys = Make({.issuer = std::string(kIssuer) + "/"});
  EXPECT_TRUE(keys->Start(kNowMs).has_value());
  EXPECT_EQ(issuer_.Gets(kDiscoveryUrl), 1);
}

TEST_F(OidcKeysTest, RefusesDiscoveryDocumentOfAnotherIssuer) {
  issuer_.Set(kDiscoveryUrl,
              std::string(R"({"issuer":"https://evil.example","jwks_uri":")") + kJwksUrl + R"("})");
  auto keys = Make();
  auto started = keys->Start(kNowMs);
  ASSERT_FALSE(started.has_value());
  EXPECT_EQ(started.error().message,
            std::string("discovery document ") + kDiscoveryUrl +
                " names issuer 'https://evil.example', not AUTH_ISSUER_URL '" + kIssuer + "'");
  EXPECT_EQ(issuer_.Gets(kJwksUrl), 0);
  EXPECT_TRUE(keys->Keys()->keys.empty());
}

TEST_F(OidcKeysTest, UnreachableIssuerAtStartGivesA401ReasonNotACrash) {
  issuer_.Remove(kDiscoveryUrl);
  auto keys = Make();
  auto started = keys->Start(kNowMs);
  ASSERT_FALSE(started.has_value());
  EXPECT_EQ(started.error().message,
            std::string("issuer unreachable: GET ") + kDiscoveryUrl + ": connection refused");
  auto verifier = Verifier(keys);
  EXPECT_EQ(Reason(*verifier, Token(0, "k1"), kNowMs + 1000),
            "signing keys not loaded (the issuer could not be reached)");
}

TEST_F(OidcKeysTest, RefusesDiscoveryDocumentWithoutAJwksUri) {
  issuer_.Set(kDiscoveryUrl, std::string(R"({"issuer":")") + kIssuer + R"(","jwks_uri":"certs"})");
  auto keys = Make();
  auto started = keys->Start(kNowMs);
  ASSERT_FALSE(started.has_value());
  EXPECT_EQ(started.error().message,
            std::string("discovery document ") + kDiscoveryUrl + " has no valid jwks_uri");
}

TEST_F(OidcKeysTest, FirstTokenAfterTheIssuerCameBackLoadsTheKeys) {
  issuer_.Remove(kJwksUrl);
  auto keys = Make();
  ASSERT_FALSE(keys->Start(kNowMs).has_value());
  auto verifier = Verifier(keys);
  issuer_.Set(kJwksUrl, JwksJson({Jwk(RsaKey(0), "k1")}));
  // Within min_refresh_interval of the failed start: no new attempt, still the start's reason.
  EXPECT_EQ(Reason(*verifier, Token(0, "k1"), kNowMs + 5'000),
            "signing keys not loaded (the issuer could not be reached)");
  EXPECT_EQ(Reason(*verifier, Token(0, "k1"), kNowMs + 10'000), "accepted");
  EXPECT_EQ(keys->refresh_attempts(), 2u);
}

TEST_F(OidcKeysTest, TickRetriesAFailedStartAfterTheMinimumInterval) {
  issuer_.Remove(kDiscoveryUrl);
  auto keys = Make();
  ASSERT_FALSE(keys->Start(kNowMs).has_value());
  issuer_.Set(kDiscoveryUrl,
              std::string(R"({"issuer":")") + kIssuer + R"(","jwks_uri":")" + kJwksUrl + R"("})");
  keys->Tick(kNowMs + 9'999);
  EXPECT_EQ(keys->refresh_attempts(), 1u);
  keys->Tick(kNowMs + 10'000);
  EXPECT_EQ(keys->refresh_attempts(), 2u);
  EXPECT_EQ(keys->Keys()->keys.size(), 1u);
  EXPECT_EQ(keys->Keys()->unavailable, "");
}

TEST_F(OidcKeysTest, TickRefreshesPeriodicallyAndReusesTheJwksUri) {
  auto keys = Make({.refresh_interval_ms = 60'000});
  ASSERT_TRUE(keys->Start(kNowMs).has_value());
  keys->Tick(kNowMs + 59'999);
  EXPECT_EQ(issuer_.Gets(kJwksUrl), 1);
  keys->Tick(kNowMs + 60'000);
  EXPECT_EQ(issuer_.Gets(kJwksUrl), 2);
  EXPECT_EQ(issuer_.Gets(kDiscoveryUrl), 1);
  EXPECT_EQ(keys->Generation(), 1u);  // same keys: same generation, the cache stays
}

TEST_F(OidcKeysTest, FailedRefreshKeepsTheKeysAndRediscoversNextTime) {
  auto keys = Make({.refresh_interval_ms = 60'000});
  ASSERT_TRUE(keys->Start(kNowMs).has_value());
  auto verifier = Verifier(keys);
  issuer_.Set(kJwksUrl, "<html>oops</html>");
  keys->Tick(kNowMs + 60'000);
  EXPECT_EQ(keys->refresh_attempts(), 2u);
  EXPECT_EQ(keys->Keys()->keys.size(), 1u);
  EXPECT_EQ(Reason(*verifier, Token(0, "k1"), kNowMs + 60'000), "accepted");
  issuer_.Set(kJwksUrl, JwksJson({Jwk(RsaKey(0), "k1")}));
  keys->Tick(kNowMs + 70'000);  // a failure is retried after min_refresh_interval
  EXPECT_EQ(issuer_.Gets(kDiscoveryUrl), 2);
  EXPECT_EQ(keys->refresh_attempts(), 3u);
}

// Key rotation: the issuer publishes k2 and signs with it; the first k2 token triggers one
// refresh and verifies, without a restart. Then k1 is withdrawn: its tokens stop verifying,
// cached or not.
TEST_F(OidcKeysTest, RotationPicksUpANewKidWithOneRefreshAndDropsTheOldKey) {
  auto keys = Make();
  ASSERT_TRUE(keys->Start(kNowMs).has_value());
  auto verifier = Verifier(keys);
  const std::string old_token = Token(0, "k1");
  EXPECT_EQ(Reason(*verifier, old_token, kNowMs), "accepted");

  issuer_.Set(kJwksUrl, JwksJson({Jwk(RsaKey(0), "k1"), Jwk(RsaKey(1), "k2")}));
  EXPECT_EQ(Reason(*verifier, Token(1, "k2"), kNowMs + 10'000), "accepted");
  EXPECT_EQ(issuer_.Gets(kJwksUrl), 2);
  EXPECT_EQ(Reason(*verifier, old_token, kNowMs + 10'000), "accepted");

  issuer_.Set(kJwksUrl, JwksJson({Jwk(RsaKey(1), "k2")}));
  keys->Tick(kNowMs + 10'000 + 5 * 60'000);
  EXPECT_EQ(Reason(*verifier, old_token, kNowMs + 10'000 + 5 * 60'000),
            "unknown signing key id 'k1'");
}

TEST_F(OidcKeysTest, UnknownKidRefreshesAtMostOncePerMinimumInterval) {
  auto keys = Make();
  ASSERT_TRUE(keys->Start(kNowMs).has_value());
  auto verifier = Verifier(keys);
  EXPECT_EQ(Reason(*verifier, Token(1, "forged-1"), kNowMs + 10'000),
            "unknown signing key id 'forged-1'");
  EXPECT_EQ(Reason(*verifier, Token(1, "forged-2"), kNowMs + 15'000),
            "unknown signing key id 'forged-2'");
  EXPECT_EQ(issuer_.Gets(kJwksUrl), 2);  // Start, then one refresh for both tokens
  EXPECT_EQ(Reason(*verifier, Token(1, "forged-3"), kNowMs + 20'000),
            "unknown signing key id 'forged-3'");
  EXPECT_EQ(issuer_.Gets(kJwksUrl), 3);
}

TEST_F(OidcKeysTest, UnknownKidRightAfterStartIsRateLimitedToo) {
  auto keys = Make();
  ASSERT_TRUE(keys->Start(kNowMs).has_value());
  auto verifier = Verifier(keys);
  EXPECT_EQ(Reason(*verifier, Token(1, "k2"), kNowMs + 1), "unknown signing key id 'k2'");
  EXPECT_EQ(keys->refresh_attempts(), 1u);
}

TEST_F(OidcKeysTest, ConcurrentUnknownKidTokensShareOneFetch) {
  auto keys = Make();
  ASSERT_TRUE(keys->Start(kNowMs).has_value());
  auto verifier = Verifier(keys);
  issuer_.Set(kJwksUrl, JwksJson({Jwk(RsaKey(0), "k1"), Jwk(RsaKey(1), "k2")}));
  const std::string token = Token(1, "k2");
  std::atomic<int> accepted{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      if (verifier->Verify(token, kNowMs + 30'000)) ++accepted;
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(accepted.load(), 8);
  EXPECT_EQ(issuer_.Gets(kJwksUrl), 2);  // Start + exactly one refresh
}

TEST_F(OidcKeysTest, RefreshThreadStartsAndStopsPromptly) {
  auto keys = Make();
  FakeClock clock(kNowMs);
  keys->StartRefreshThread(clock, std::chrono::hours(1));
  keys->StopRefreshThread();                // does not wait for the hour
  keys->StopRefreshThread();                // idempotent
  EXPECT_EQ(keys->refresh_attempts(), 1u);  // the first Tick ran at once
  EXPECT_EQ(keys->Keys()->keys.size(), 1u);
}

TEST_F(OidcKeysTest, WithTheRefreshThreadAnUnknownKidNeverFetchesOnTheCallersThread) {
  auto keys = Make();
  FakeClock clock(kNowMs);
  keys->StartRefreshThread(clock, std::chrono::hours(1));
  for (int i = 0; i < 5000 && keys->Keys()->keys.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(keys->refresh_attempts(), 1u);  // the first Tick
  const uint64_t first_generation = keys->Generation();
  auto verifier = Verifier(keys);
  issuer_.Set(kJwksUrl, JwksJson({Jwk(RsaKey(0), "k1"), Jwk(RsaKey(1), "k2")}));
  clock.Advance(std::chrono::seconds(11));  // past min_refresh_interval
  const std::string rotated = Token(1, "k2");
  EXPECT_EQ(Reason(*verifier, rotated, clock.NowMillis()), "unknown signing key id 'k2'")
      << "the caller's thread only asks for the refresh";
  for (int i = 0; i < 5000 && keys->Generation() == first_generation; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(keys->refresh_attempts(), 2u) << "one refresh, on the refresh thread";
  EXPECT_EQ(Reason(*verifier, rotated, clock.NowMillis()), "accepted");
  keys->StopRefreshThread();
}

TEST_F(OidcKeysTest, CreateRefusesBadOptions) {
  EXPECT_FALSE(OidcKeys::Create({.issuer = "not a url"}, issuer_.Fetch()).has_value());
  EXPECT_FALSE(OidcKeys::Create({.issuer = kIssuer, .min_refresh_interval_ms = 0}, issuer_.Fetch())
                   .has_value());
  EXPECT_FALSE(OidcKeys::Create({.issuer = kIssuer}, nullptr).has_value());
}

}  // namespace
}  // namespace dcm::auth
