#include "projections/store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace dcm {
namespace {

std::unique_ptr<Store> OpenInMemory(const std::string& name = "/mem/store") {
  auto store = Store::Open(name, StoreOptions{.bulk_load = false, .in_memory = true});
  EXPECT_TRUE(store.has_value()) << store.error().message;
  return store ? std::move(*store) : nullptr;
}

std::optional<std::string> GetOrDie(const Store& store, std::string_view key,
                                    const StoreBatch* batch = nullptr) {
  auto value = store.Get(key, batch);
  EXPECT_TRUE(value.has_value()) << value.error().message;
  return value ? *value : std::nullopt;
}

using Entries = std::vector<std::pair<std::string, std::string>>;

Entries ScanAll(const Store& store, std::string_view prefix, std::string_view start_after = "") {
  Entries out;
  auto status = store.Scan(prefix, start_after, [&](std::string_view k, std::string_view v) {
    out.emplace_back(k, v);
    return true;
  });
  EXPECT_TRUE(status.has_value()) << status.error().message;
  return out;
}

TEST(StoreTest, PutGetDeleteThroughABatch) {
  auto store = OpenInMemory();
  ASSERT_TRUE(store);
  StoreBatch batch;
  batch.Put("a/1", "one");
  batch.Put("a/2", "two");
  EXPECT_EQ(batch.Count(), 2u);
  ASSERT_TRUE(store->Write(batch));
  EXPECT_EQ(batch.Count(), 0u);  // a written batch is cleared for reuse
  EXPECT_EQ(GetOrDie(*store, "a/1"), "one");
  EXPECT_EQ(GetOrDie(*store, "a/2"), "two");
  EXPECT_EQ(GetOrDie(*store, "a/3"), std::nullopt);

  batch.Delete("a/1");
  batch.Put("a/2", "TWO");
  ASSERT_TRUE(store->Write(batch));
  EXPECT_EQ(GetOrDie(*store, "a/1"), std::nullopt);
  EXPECT_EQ(GetOrDie(*store, "a/2"), "TWO");
}

TEST(StoreTest, UnwrittenBatchChangesNothing) {
  auto store = OpenInMemory();
  ASSERT_TRUE(store);
  StoreBatch batch;
  batch.Put("k", "v");
  EXPECT_EQ(GetOrDie(*store, "k"), std::nullopt);
  batch.Clear();
  EXPECT_EQ(batch.Count(), 0u);
  ASSERT_TRUE(store->Write(batch));
  EXPECT_EQ(GetOrDie(*store, "k"), std::nullopt);
}

TEST(StoreTest, GetSeesPendingBatchWrites) {
  auto store = OpenInMemory();
  ASSERT_TRUE(store);
  StoreBatch seed;
  seed.Put("kept", "old");
  seed.Put("gone", "old");
  ASSERT_TRUE(store->Write(seed));

  StoreBatch batch;
  batch.Put("new", "pending");
  batch.Put("kept", "newer");
  batch.Delete("gone");
  EXPECT_EQ(GetOrDie(*store, "new", &batch), "pending");
  EXPECT_EQ(GetOrDie(*store, "kept", &batch), "newer");
  EXPECT_EQ(GetOrDie(*store, "gone", &batch), std::nullopt);
  // Without the batch the committed state shows.
  EXPECT_EQ(GetOrDie(*store, "new"), std::nullopt);
  EXPECT_EQ(GetOrDie(*store, "kept"), "old");
  EXPECT_EQ(GetOrDie(*store, "gone"), "old");
  // The last write to a key in a batch wins, in the batch view and after Write.
  batch.Delete("new");
  batch.Put("gone", "back");
  EXPECT_EQ(GetOrDie(*store, "new", &batch), std::nullopt);
  EXPECT_EQ(GetOrDie(*store, "gone", &batch), "back");
  ASSERT_TRUE(store->Write(batch));
  EXPECT_EQ(GetOrDie(*store, "new"), std::nullopt);
  EXPECT_EQ(GetOrDie(*store, "gone"), "back");
  EXPECT_EQ(GetOrDie(*store, "kept"), "newer");
}

TEST(StoreTest, ValuesMayHoldArbitraryBytes) {
  auto store = OpenInMemory();
  ASSERT_TRUE(store);
  const std::string key("k\0ey", 4);
  const std::string value("\0\xFF\x01", 3);
  StoreBatch batch;
  batch.Put(key, value);
  batch.Put("empty", "");
  ASSERT_TRUE(store->Write(batch));
  EXPECT_EQ(GetOrDie(*store, key), value);
  EXPECT_EQ(GetOrDie(*store, "empty"), "");  // present but empty, not missing
}

class StoreScanTest : public testing::Test {
 protected:
  void SetUp() override {
    store_ = OpenInMemory();
    ASSERT_TRUE(store_);
    StoreBatch batch;
    for (const char* key : {"p/a", "p/b", "p/c", "p/d", "q/a", "o/z", "p"}) batch.Put(key, key);
    ASSERT_TRUE(store_->Write(batch));
  }
  std::unique_ptr<Store> store_;
};

TEST_F(StoreScanTest, VisitsOnlyThePrefixInKeyOrder) {
  EXPECT_EQ(ScanAll(*store_, "p/"),
            (Entries{{"p/a", "p/a"}, {"p/b", "p/b"}, {"p/c", "p/c"}, {"p/d", "p/d"}}));
  EXPECT_EQ(ScanAll(*store_, "x/"), Entries{});
}

TEST_F(StoreScanTest, StartsAfterTheGivenSuffixExclusively) {
  EXPECT_EQ(ScanAll(*store_, "p/", "b"), (Entries{{"p/c", "p/c"}, {"p/d", "p/d"}}));
  // A start that is not itself a key starts at the next key.
  EXPECT_EQ(ScanAll(*store_, "p/", "bb"), (Entries{{"p/c", "p/c"}, {"p/d", "p/d"}}));
  EXPECT_EQ(ScanAll(*store_, "p/", "d"), Entries{});
}

TEST_F(StoreScanTest, StopsWhenTheCallbackReturnsFalse) {
  std::vector<std::string> seen;
  ASSERT_TRUE(store_->Scan("p/", "", [&](std::string_view k, std::string_view) {
    seen.emplace_back(k);
    return seen.size() < 2;
  }));
  EXPECT_EQ(seen, (std::vector<std::string>{"p/a", "p/b"}));
}

TEST_F(StoreScanTest, DoesNotSeeUnwrittenBatches) {
  StoreBatch batch;
  batch.Put("p/0", "pending");
  EXPECT_EQ(ScanAll(*store_, "p/").size(), 4u);
}

TEST(StoreOffsetsTest, OffsetsWrittenInTheSameBatchAreLoadedBack) {
  auto store = OpenInMemory();
  ASSERT_TRUE(store);
  StoreBatch batch;
  batch.Put("reg/p/sp-1", "{}");
  store->PutOffset(batch, "registry", "dcm.providers", 0, 17);
  store->PutOffset(batch, "registry", "dcm.providers", 11, 4);
  store->PutOffset(batch, "registry", "dcm.status", 0, 99);
  store->PutOffset(batch, "registrar", "dcm.providers", 0, 5);
  // Not visible before the write: state and offsets land together or not at all.
  auto before = store->LoadOffsets("registry", "dcm.providers");
  ASSERT_TRUE(before.has_value());
  EXPECT_TRUE(before->empty());
  ASSERT_TRUE(store->Write(batch));

  auto offsets = store->LoadOffsets("registry", "dcm.providers");
  ASSERT_TRUE(offsets.has_value()) << offsets.error().message;
  EXPECT_EQ(*offsets, (std::map<int32_t, int64_t>{{0, 17}, {11, 4}}));
  EXPECT_EQ(GetOrDie(*store, "reg/p/sp-1"), "{}");
  auto other = store->LoadOffsets("registrar", "dcm.providers");
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(*other, (std::map<int32_t, int64_t>{{0, 5}}));
  auto none = store->LoadOffsets("registry", "dcm.provider");  // a prefix of a topic name
  ASSERT_TRUE(none.has_value());
  EXPECT_TRUE(none->empty());
}

TEST(StoreOffsetsTest, LaterOffsetsOverwriteEarlierOnes) {
  auto store = OpenInMemory();
  ASSERT_TRUE(store);
  StoreBatch batch;
  store->PutOffset(batch, "registry", "t", 3, 10);
  ASSERT_TRUE(store->Write(batch));
  store->PutOffset(batch, "registry", "t", 3, 25);
  ASSERT_TRUE(store->Write(batch));
  auto offsets = store->LoadOffsets("registry", "t");
  ASSERT_TRUE(offsets.has_value());
  EXPECT_EQ(*offsets, (std::map<int32_t, int64_t>{{3, 25}}));
}

TEST(StoreOffsetsTest, UnreadableOffsetIsCorruption) {
  auto store = OpenInMemory();
  ASSERT_TRUE(store);
  StoreBatch batch;
  batch.Put(Store::OffsetKey("registry", "t", 0), "not-a-number");
  ASSERT_TRUE(store->Write(batch));
  auto offsets = store->LoadOffsets("registry", "t");
  ASSERT_FALSE(offsets.has_value());
  EXPECT_EQ(offsets.error().code, ErrorCode::kCorruption);
}

TEST(StoreDigestTest, EqualContentGivesEqualDigests) {
  auto a = OpenInMemory("/mem/a");
  auto b = OpenInMemory("/mem/b");
  ASSERT_TRUE(a && b);
  StoreBatch ba, bb;
  // Same final content reached through different write orders and histories.
  ba.Put("dec/x", "1");
  ba.Put("dec/y", "2");
  bb.Put("dec/y", "2");
  bb.Put("dec/z", "tmp");
  bb.Put("dec/x", "1");
  ASSERT_TRUE(a->Write(ba));
  ASSERT_TRUE(b->Write(bb));
  bb.Delete("dec/z");
  ASSERT_TRUE(b->Write(bb));
  // Keys outside the prefix do not count.
  ba.Put("reg/other", "x");
  ASSERT_TRUE(a->Write(ba));
  auto da = a->Digest("dec/");
  auto db = b->Digest("dec/");
  ASSERT_TRUE(da.has_value() && db.has_value());
  EXPECT_EQ(*da, *db);
  EXPECT_TRUE(da->ends_with("-2")) << *da;  // the entry count
}

TEST(StoreDigestTest, DifferentContentGivesDifferentDigests) {
  auto store = OpenInMemory();
  ASSERT_TRUE(store);
  std::set<std::string> digests;
  auto digest = [&] {
    auto d = store->Digest("dec/");
    EXPECT_TRUE(d.has_value());
    digests.insert(*d);
  };
  StoreBatch batch;
  digest();  // empty
  batch.Put("dec/a", "1");
  ASSERT_TRUE(store->Write(batch));
  digest();
  batch.Put("dec/a", "2");  // value change
  ASSERT_TRUE(store->Write(batch));
  digest();
  batch.Delete("dec/a");
  batch.Put("dec/b", "2");  // same value, other key
  ASSERT_TRUE(store->Write(batch));
  digest();
  batch.Delete("dec/b");
  batch.Put("dec/b2", "");  // the key/value boundary moved ("dec/b" + "2" vs "dec/b2" + "")
  ASSERT_TRUE(store->Write(batch));
  digest();
  EXPECT_EQ(digests.size(), 5u);
}

// ---- Rebuild support (issue #5): read-only snapshots, first differences, bulk loads.

void PutAll(Store& store, const Entries& entries) {
  StoreBatch batch;
  for (const auto& [k, v] : entries) batch.Put(k, v);
  ASSERT_TRUE(store.Write(batch));
}

class StoreOnDiskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("dcm-store-test-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

TEST_F(StoreOnDiskTest, ReadOnlyOpenSeesASnapshotWhileTheWriterGoesOn) {
  auto writer = Store::Open(Path("live"));
  ASSERT_TRUE(writer) << writer.error().message;
  PutAll(**writer, {{"reg/a", "1"}});
  auto reader = Store::OpenReadOnly(Path("live"));  // the writer still holds the directory
  ASSERT_TRUE(reader) << reader.error().message;
  PutAll(**writer, {{"reg/b", "2"}});
  EXPECT_EQ(GetOrDie(**reader, "reg/a"), "1");
  EXPECT_EQ(GetOrDie(**reader, "reg/b"), std::nullopt);  // written after the snapshot
  StoreBatch batch;
  batch.Put("reg/c", "3");
  EXPECT_FALSE((*reader)->Write(batch));  // read-only
}

TEST_F(StoreOnDiskTest, ReadOnlyOpenOfAMissingStoreFails) {
  EXPECT_FALSE(Store::OpenReadOnly(Path("nothing-here")));
}

TEST_F(StoreOnDiskTest, BulkLoadedStoreReadsFromRocksDbAfterFinishing) {
  auto store = Store::Open(Path("bulk"), StoreOptions{.bulk_load = true, .in_memory = false});
  ASSERT_TRUE(store) << store.error().message;
  PutAll(**store, {{"hl/a", "1"}, {"hl/b", "1"}});
  PutAll(**store, {{"hl/a", "2"}});  // a key indexed by an earlier batch takes the new value
  EXPECT_EQ(GetOrDie(**store, "hl/a"), "2");
  EXPECT_EQ(GetOrDie(**store, "hl/b"), "1");
  ASSERT_TRUE((*store)->FinishBulkLoadWithoutCompaction());
  EXPECT_EQ(GetOrDie(**store, "hl/a"), "2");
  EXPECT_EQ(ScanAll(**store, "hl/"), (Entries{{"hl/a", "2"}, {"hl/b", "1"}}));
}

TEST_F(StoreOnDiskTest, BulkLoadWritesOnlyTheLastValueOfEachTrackedKeyAtFinish) {
  auto store = Store::Open(Path("bulk"), StoreOptions{.bulk_load = true, .in_memory = false});
  ASSERT_TRUE(store) << store.error().message;
  for (int i = 0; i < 50; ++i) PutAll(**store, {{"hl/a", std::to_string(i)}});
  PutAll(**store, {{"hl/gone", "x"}});
  StoreBatch batch;
  batch.Delete("hl/gone");
  batch.Delete("hl/never");  // a delete of a key nobody wrote
  batch.PutUnread("au/1", "one");
  batch.PutUnread("au/2", "two");
  ASSERT_TRUE((*store)->Write(batch));
  EXPECT_EQ(GetOrDie(**store, "hl/a"), "49");
  EXPECT_EQ(GetOrDie(**store, "hl/gone"), std::nullopt);
  // Until the finish, RocksDB holds only the untracked writes.
  EXPECT_EQ(ScanAll(**store, "hl/"), Entries{});
  EXPECT_EQ(ScanAll(**store, "au/"), (Entries{{"au/1", "one"}, {"au/2", "two"}}));
  ASSERT_TRUE((*store)->FinishBulkLoad());
  EXPECT_EQ(ScanAll(**store, ""), (Entries{{"au/1", "one"}, {"au/2", "two"}, {"hl/a", "49"}}));
  // After the finish the store is live: writes go straight to RocksDB.
  PutAll(**store, {{"hl/b", "1"}});
  EXPECT_EQ(ScanAll(**store, "hl/"), (Entries{{"hl/a", "49"}, {"hl/b", "1"}}));
}

class StoreDifferenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    left_ = OpenInMemory("/mem/left");
    right_ = OpenInMemory("/mem/right");
    ASSERT_TRUE(left_ && right_);
    const Entries common = {{"in/a", "1"}, {"in/b", "2"}, {"in/c", "3"}, {"reg/x", "x"}};
    PutAll(*left_, common);
    PutAll(*right_, common);
  }
  std::optional<KeyDifference> First(std::string_view prefix = "in/") {
    auto diff = Store::FirstDifference(*left_, *right_, prefix);
    EXPECT_TRUE(diff) << diff.error().message;
    return diff ? *diff : std::nullopt;
  }
  std::unique_ptr<Store> left_, right_;
};

TEST_F(StoreDifferenceTest, IdenticalPrefixesHaveNoDifference) { EXPECT_EQ(First(), std::nullopt); }

TEST_F(StoreDifferenceTest, NamesTheFirstChangedKeyWithBothValues) {
  PutAll(*left_, {{"in/b", "two"}, {"in/c", "three"}});
  const auto diff = First();
  ASSERT_TRUE(diff);
  EXPECT_EQ(diff->key, "in/b");
  EXPECT_EQ(diff->left, "two");
  EXPECT_EQ(diff->right, "2");
}

TEST_F(StoreDifferenceTest, NamesAKeyOnlyOneSideHolds) {
  PutAll(*right_, {{"in/ab", "extra"}});
  auto diff = First();
  ASSERT_TRUE(diff);
  EXPECT_EQ(diff->key, "in/ab");
  EXPECT_EQ(diff->left, std::nullopt);
  EXPECT_EQ(diff->right, "extra");

  StoreBatch batch;
  batch.Delete("in/ab");
  ASSERT_TRUE(right_->Write(batch));
  batch.Delete("in/c");  // the last key: missing at the end of one side
  ASSERT_TRUE(right_->Write(batch));
  diff = First();
  ASSERT_TRUE(diff);
  EXPECT_EQ(diff->key, "in/c");
  EXPECT_EQ(diff->left, "3");
  EXPECT_EQ(diff->right, std::nullopt);
}

TEST_F(StoreDifferenceTest, IgnoresKeysOutsideThePrefix) {
  PutAll(*left_, {{"reg/x", "changed"}, {"io/z", "z"}});
  EXPECT_EQ(First("in/"), std::nullopt);
  ASSERT_TRUE(First("reg/"));
}

TEST(StoreTopLevelPrefixesTest, ListsEachFirstSegmentOnce) {
  auto store = OpenInMemory();
  ASSERT_TRUE(store);
  PutAll(*store, {{"__offset/registry/t/000001", "5"},
                  {"au/e/1", ""},
                  {"au/i/2", ""},
                  {"dec/n", "1"},
                  {"plain", "no slash"},
                  {"reg/a", "1"},
                  {"reg/b", "2"}});
  auto prefixes = store->TopLevelPrefixes();
  ASSERT_TRUE(prefixes);
  EXPECT_EQ(*prefixes, (std::vector<std::string>{"__offset/", "au/", "dec/", "plain", "reg/"}));
}

}  // namespace
}  // namespace dcm
