#include "consumers/retention_gap.h"

#include <gtest/gtest.h>

namespace dcm {
namespace {

std::unique_ptr<Store> OpenInMemory() {
  auto store = Store::Open("/mem/gaps", StoreOptions{.bulk_load = false, .in_memory = true});
  EXPECT_TRUE(store) << store.error().message;
  return std::move(*store);
}

TEST(RetentionGapsTest, AGapIsCountedDescribedAndReportedOnce) {
  Metrics metrics;
  RetentionGaps gaps("registry", &metrics);
  EXPECT_TRUE(gaps.Empty());
  EXPECT_EQ(gaps.Describe(), "");
  gaps.Add("dcm.providers", 0, 0, 10);
  gaps.Add("dcm.providers", 0, 0, 10);  // found again (a retried catch-up): the same gap
  gaps.Add("dcm.providers", 1, 5, 5);   // nothing missing: no gap
  EXPECT_FALSE(gaps.Empty());
  EXPECT_EQ(gaps.Describe(), "dcm.providers[0]: offsets 0..9 (10 records) dropped by retention");
  EXPECT_EQ(metrics
                .GetCounter("dcm_retention_gap_records_total", "",
                            "consumer=\"registry\",topic=\"dcm.providers\"")
                .Value(),
            10u);
}

// A restart resumes past the gap, so only the store remembers it: it is reported again.
TEST(RetentionGapsTest, AKeptGapIsReportedAfterARestart) {
  auto store = OpenInMemory();
  Metrics metrics;
  {
    RetentionGaps gaps("audit", &metrics, store.get());
    ASSERT_TRUE(gaps.Load());
    gaps.Add("dcm.provider-requests", 0, 0, 9171);
    gaps.Add("dcm.instances", 3, 12, 40);
  }
  RetentionGaps restarted("audit", &metrics, store.get());
  EXPECT_TRUE(restarted.Empty());
  ASSERT_TRUE(restarted.Load());
  EXPECT_EQ(restarted.Describe(),
            "dcm.instances[3]: offsets 12..39 (28 records) dropped by retention; "
            "dcm.provider-requests[0]: offsets 0..9170 (9171 records) dropped by retention");
  RetentionGaps other("registry", &metrics, store.get());  // another consumer's gaps are its own
  ASSERT_TRUE(other.Load());
  EXPECT_TRUE(other.Empty());
}

}  // namespace
}  // namespace dcm
