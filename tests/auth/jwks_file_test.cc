// JwksFile (src/auth/jwks_file.h): AUTH_JWKS_FILE at start and on Reload (SIGHUP).
#include "src/auth/jwks_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "src/auth/token_verifier.h"
#include "tests/auth/test_tokens.h"

namespace dcm::auth {
namespace {

using testing::Jwk;
using testing::JwksJson;
using testing::RsaKey;

constexpr int64_t kNowS = 1767225600;

class JwksFileTest : public ::testing::Test {
 protected:
  void Write(const std::string& text) {
    std::ofstream out(path_, std::ios::trunc);
    out << text;
  }
  void TearDown() override { std::filesystem::remove(path_); }

  // One file per test: ctest may run the tests of this file in parallel.
  const std::string path_ = ::testing::TempDir() + "jwks_file_test_" +
                            ::testing::UnitTest::GetInstance()->current_test_info()->name() +
                            ".json";
};

TEST_F(JwksFileTest, LoadsKeysAndKeepsSkippedKeyWarnings) {
  Write(JwksJson({Jwk(RsaKey(), "k1"), R"({"kty":"oct","kid":"h"})"}));
  auto file = JwksFile::Load(path_);
  ASSERT_TRUE(file.has_value()) << file.error().message;
  EXPECT_EQ((*file)->Keys()->keys.size(), 1u);
  EXPECT_EQ((*file)->warnings(),
            std::vector<std::string>{
                "key #1 (kid 'h'): key type 'oct' is not supported (RSA and EC are)"});
}

TEST_F(JwksFileTest, UnreadableOrInvalidFileIsAStartupError) {
  auto missing = JwksFile::Load(path_ + ".missing");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(missing.error().message.find("cannot open"), std::string::npos);
  Write(R"({"keys":[]})");
  auto empty = JwksFile::Load(path_);
  ASSERT_FALSE(empty.has_value());
  EXPECT_EQ(empty.error().message, "AUTH_JWKS_FILE " + path_ + ": JWKS has no usable key");
}

TEST_F(JwksFileTest, ReloadSwapsKeysAndAFailedReloadKeepsThem) {
  Write(JwksJson({Jwk(RsaKey(0), "k1")}));
  auto loaded = JwksFile::Load(path_);
  ASSERT_TRUE(loaded.has_value()) << loaded.error().message;
  std::shared_ptr<JwksFile> file = std::move(*loaded);
  auto verifier = TokenVerifier::Create({}, file);
  ASSERT_TRUE(verifier.has_value());
  const auto claims = testing::StandardClaims("alice", kNowS + 60);
  const std::string old_token = testing::MintToken(RsaKey(0), "k1", claims);
  const std::string new_token = testing::MintToken(RsaKey(1), "k2", claims);
  EXPECT_TRUE((*verifier)->Verify(old_token, kNowS * 1000).has_value());
  EXPECT_FALSE((*verifier)->Verify(new_token, kNowS * 1000).has_value());  // until the reload

  Write(JwksJson({Jwk(RsaKey(1), "k2")}));
  ASSERT_TRUE(file->Reload().has_value());
  EXPECT_EQ(file->Generation(), 2u);
  EXPECT_TRUE((*verifier)->Verify(new_token, kNowS * 1000).has_value());
  EXPECT_FALSE((*verifier)->Verify(old_token, kNowS * 1000).has_value());  // cached, yet dropped

  Write("not json");
  EXPECT_FALSE(file->Reload().has_value());
  EXPECT_EQ(file->Generation(), 2u);
  EXPECT_TRUE((*verifier)->Verify(new_token, kNowS * 1000).has_value());
}

}  // namespace
}  // namespace dcm::auth
