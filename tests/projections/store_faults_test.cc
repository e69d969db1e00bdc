// The store's side of SPEC §7's local faults: a disk below the reserve refuses writes before
// RocksDB meets a full disk, a corrupt table file is a storage error (never a poison event), and
// Problem() names both for /readyz.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>

#include "projections/store.h"

namespace dcm {
namespace {

class StoreFaultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("dcm-store-faults-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A store whose filesystem reports free_ bytes free, read at every write.
  std::unique_ptr<Store> OpenGuarded(std::chrono::milliseconds interval = {}) {
    auto store =
        Store::Open((dir_ / "db").string(),
                    StoreOptions{.min_free_bytes = 100 << 20,
                                 .free_space_check_interval = interval,
                                 .free_bytes = [this](const std::string&) -> Result<uint64_t> {
                                   ++readings_;
                                   return free_.load();
                                 }});
    EXPECT_TRUE(store) << store.error().message;
    return store ? std::move(*store) : nullptr;
  }

  static Status Put(Store& store, const std::string& key, const std::string& value) {
    StoreBatch batch;
    batch.Put(key, value);
    return store.Write(batch);
  }

  std::filesystem::path dir_;
  std::atomic<uint64_t> free_{1ull << 30};
  std::atomic<int> readings_{0};
};

TEST_F(StoreFaultsTest, WritesAreRefusedBelowTheFreeSpaceReserveAndResumeWhenSpaceReturns) {
  auto store = OpenGuarded();
  ASSERT_TRUE(Put(*store, "reg/a", "1"));
  EXPECT_EQ(store->Problem(), std::nullopt);

  free_ = 50 << 20;  // below the 100 MiB reserve
  auto refused = Put(*store, "reg/b", "2");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kStorage);
  EXPECT_NE(refused.error().message.find("disk full: 50 MiB free"), std::string::npos);
  EXPECT_FALSE(store->CheckWritable());
  ASSERT_TRUE(store->Problem());
  EXPECT_NE(store->Problem()->find("below the reserve of 100 MiB"), std::string::npos);
  EXPECT_EQ(*store->Get("reg/b"), std::nullopt);  // nothing of the refused batch was written
  EXPECT_EQ(*store->Get("reg/a"), "1");           // reads go on

  free_ = 1ull << 30;
  ASSERT_TRUE(Put(*store, "reg/b", "2"));
  EXPECT_EQ(store->Problem(), std::nullopt);
  EXPECT_EQ(*store->Get("reg/b"), "2");
}

TEST_F(StoreFaultsTest, AFreeSpaceReadingIsReusedForItsInterval) {
  auto store = OpenGuarded(std::chrono::hours(1));
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(Put(*store, "reg/" + std::to_string(i), "v"));
  EXPECT_EQ(readings_.load(), 1);
}

TEST_F(StoreFaultsTest, NoReserveMeansNoFreeSpaceReading) {
  auto store =
      Store::Open((dir_ / "db").string(), StoreOptions{.free_bytes = [this](const std::string&) {
                    ++readings_;
                    return Result<uint64_t>(0);
                  }});
  ASSERT_TRUE(store);
  EXPECT_TRUE(Put(**store, "reg/a", "1"));
  EXPECT_EQ(readings_.load(), 0);
}

TEST_F(StoreFaultsTest, AFlippedByteInATableFileIsAStorageErrorThatProblemNames) {
  const std::string path = (dir_ / "db").string();
  {
    auto store = Store::Open(path);
    ASSERT_TRUE(store);
    for (int i = 0; i < 50; ++i) {
      ASSERT_TRUE(Put(**store, "reg/" + std::to_string(i), std::string(1000, 'a' + i % 26)));
    }
  }
  // Reopening replays the WAL into a level-0 table file.
  ASSERT_TRUE(Store::Open(path));
  std::filesystem::path table;
  for (const auto& f : std::filesystem::directory_iterator(path)) {
    if (f.path().extension() == ".sst") table = f.path();
  }
  ASSERT_FALSE(table.empty()) << "no table file under " << path;
  {
    std::fstream file(table, std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(100);
    char byte = 0;
    file.read(&byte, 1);
    byte = static_cast<char>(byte ^ 0x5a);
    file.seekp(100);
    file.write(&byte, 1);
  }
  auto store = Store::Open(path);
  ASSERT_TRUE(store) << store.error().message;
  auto read = (*store)->Get("reg/0");
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error().code, ErrorCode::kStorage);
  ASSERT_TRUE((*store)->Problem());
  EXPECT_TRUE((*store)->Problem()->starts_with("corrupt: ")) << *(*store)->Problem();
}

}  // namespace
}  // namespace dcm
