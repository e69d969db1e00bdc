#include "src/common/uuid.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace dcm {
namespace {

// Lowercase, hyphenated, version 4, RFC 4122 variant.
void ExpectUuidV4(const std::string& id) {
  ASSERT_EQ(id.size(), 36u) << id;
  EXPECT_TRUE(IsUuid(id)) << id;
  for (size_t i = 0; i < id.size(); ++i) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      EXPECT_EQ(id[i], '-') << id;
    } else {
      EXPECT_TRUE((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')) << id;
    }
  }
  EXPECT_EQ(id[14], '4') << id;
  EXPECT_NE(std::string("89ab").find(id[19]), std::string::npos) << id;
}

TEST(UuidTest, NewUuidV4IsWellFormed) {
  for (int i = 0; i < 100; ++i) ExpectUuidV4(NewUuidV4());
}

TEST(UuidTest, NewUuidV4IsUnique) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) seen.insert(NewUuidV4());
  EXPECT_EQ(seen.size(), 1000u);
}

TEST(UuidTest, DeterministicUuidIsStableForTheSameSeed) {
  EXPECT_EQ(DeterministicUuid("provider:req-1"), DeterministicUuid("provider:req-1"));
  ExpectUuidV4(DeterministicUuid("provider:req-1"));
  ExpectUuidV4(DeterministicUuid(""));
}

TEST(UuidTest, DeterministicUuidDiffersAcrossSeeds) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) seen.insert(DeterministicUuid("seed-" + std::to_string(i)));
  EXPECT_EQ(seen.size(), 1000u);
  EXPECT_NE(DeterministicUuid("ab"), DeterministicUuid("ba"));
  EXPECT_NE(DeterministicUuid("a"), DeterministicUuid(std::string("a\0", 2)));
}

TEST(UuidTest, DeterministicUuidIsPinned) {
  // Generated provider ids and outcome event ids are persisted: the derivation must not change
  // between releases, or a re-decided request would get a different id.
  EXPECT_EQ(DeterministicUuid("outcome:req-1"), DeterministicUuid("outcome:req-1"));
  const std::string pinned = DeterministicUuid("provider:00000000-0000-4000-8000-000000000001");
  EXPECT_EQ(pinned, "19d09f46-a0cf-4e94-81c0-ffee445bcfd2");
}

TEST(UuidTest, IsUuidAcceptsCanonicalForms) {
  EXPECT_TRUE(IsUuid("123e4567-e89b-42d3-a456-426614174000"));
  EXPECT_TRUE(IsUuid("123E4567-E89B-42D3-A456-426614174000"));
  EXPECT_TRUE(IsUuid("00000000-0000-0000-0000-000000000000"));
}

TEST(UuidTest, IsUuidRejectsMalformed) {
  for (const char* text :
       {"", "123e4567e89b42d3a456426614174000", "123e4567-e89b-42d3-a456-42661417400",
        "123e4567-e89b-42d3-a456-4266141740000", "123e4567-e89b-42d3-a456_426614174000",
        "g23e4567-e89b-42d3-a456-426614174000", "{123e4567-e89b-42d3-a456-426614174000}"}) {
    EXPECT_FALSE(IsUuid(text)) << text;
  }
}

TEST(UuidV5Test, MatchesRfc4122NameBasedUuidsAsPythonSpellsThem) {
  // python3 -c "import uuid; print(uuid.uuid5(uuid.NAMESPACE_DNS, 'www.example.com'))"
  EXPECT_EQ(UuidV5(kUuidNamespaceDns, "www.example.com"), "2ed6657d-e927-568b-95e1-2665a8aea6a2");
  EXPECT_TRUE(IsUuid(UuidV5(kUuidNamespaceUrl, "")));
  EXPECT_EQ(UuidV5(kUuidNamespaceUrl, "a"), UuidV5(kUuidNamespaceUrl, "a"));
  EXPECT_NE(UuidV5(kUuidNamespaceUrl, "a"), UuidV5(kUuidNamespaceDns, "a"));
  EXPECT_EQ(UuidV5(kUuidNamespaceUrl, "x")[14], '5');
}

}  // namespace
}  // namespace dcm
