// DecodedCache: decoded records reused only while the stored JSON is the one they came from.
#include "projections/decoded_cache.h"

#include <gtest/gtest.h>

#include <charconv>
#include <string>

namespace dcm {
namespace {

int decodes = 0;

Result<int> DecodeNumber(std::string_view json) {
  ++decodes;
  int n = 0;
  const auto [end, ec] = std::from_chars(json.data(), json.data() + json.size(), n);
  if (ec != std::errc() || end != json.data() + json.size()) {
    return MakeError(ErrorCode::kCorruption, "not a number");
  }
  return n;
}

class DecodedCacheTest : public ::testing::Test {
 protected:
  void SetUp() override { decodes = 0; }
  int FindOrDie(const std::string& key, const std::string& json) {
    auto found = cache_.Find(key, json);
    EXPECT_TRUE(found) << found.error().message;
    return found ? **found : -1;
  }
  DecodedCache<int> cache_{&DecodeNumber, 3};
};

TEST_F(DecodedCacheTest, TheSameJsonIsDecodedOnce) {
  EXPECT_EQ(FindOrDie("a", "7"), 7);
  EXPECT_EQ(FindOrDie("a", "7"), 7);
  EXPECT_EQ(decodes, 1);
}

TEST_F(DecodedCacheTest, OtherJsonUnderTheKeyIsDecodedAgain) {
  EXPECT_EQ(FindOrDie("a", "7"), 7);
  EXPECT_EQ(FindOrDie("a", "8"), 8);  // changed behind the cache's back, or a dropped batch
  EXPECT_EQ(decodes, 2);
}

TEST_F(DecodedCacheTest, WrittenRecordsAreFoundWithoutDecoding) {
  cache_.Written("a", "5", 5);
  EXPECT_EQ(FindOrDie("a", "5"), 5);
  auto found = cache_.Find("a", "5");
  ASSERT_TRUE(found);
  **found = 6;  // changed in place, then written
  cache_.Written("a", "6");
  EXPECT_EQ(FindOrDie("a", "6"), 6);
  EXPECT_EQ(decodes, 0);
}

TEST_F(DecodedCacheTest, ForgottenAndEvictedKeysAreDecodedAgain) {
  cache_.Written("a", "1", 1);
  cache_.Forget("a");
  EXPECT_EQ(FindOrDie("a", "1"), 1);
  EXPECT_EQ(decodes, 1);
  cache_.Written("b", "2", 2);
  cache_.Written("c", "3", 3);
  cache_.Written("d", "4", 4);  // over the bound of 3: everything goes
  EXPECT_EQ(FindOrDie("b", "2"), 2);
  EXPECT_EQ(decodes, 2);
}

TEST_F(DecodedCacheTest, UndecodableJsonIsAnErrorAndNotRemembered) {
  cache_.Written("a", "1", 1);
  EXPECT_FALSE(cache_.Find("a", "x"));
  EXPECT_EQ(FindOrDie("a", "1"), 1);  // the bad JSON evicted the entry: decoded again
  EXPECT_EQ(decodes, 2);
}

}  // namespace
}  // namespace dcm
