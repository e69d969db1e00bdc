// NiceThisThread lowers the CPU priority of the calling thread only: the background folds yield
// to the write path while the process's other threads keep theirs.
#include "src/common/thread_name.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

namespace dcm {
namespace {

int NicenessOf(pid_t tid) { return getpriority(PRIO_PROCESS, static_cast<id_t>(tid)); }

TEST(NiceThisThreadTest, AddsToTheCallingThreadsNicenessAndLeavesTheOthers) {
  const pid_t caller = gettid();
  const int caller_before = NicenessOf(caller);
  int before = 0, after = 0;
  bool ok = false;
  std::thread t([&] {
    before = NicenessOf(gettid());
    ok = NiceThisThread(3);
    after = NicenessOf(gettid());
  });
  t.join();
  ASSERT_TRUE(ok);
  EXPECT_EQ(after, std::min(before + 3, 19));
  EXPECT_EQ(NicenessOf(caller), caller_before);
}

}  // namespace
}  // namespace dcm
