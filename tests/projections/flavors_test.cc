// Flavours (SPEC §10, projections/flavors.h): derived from Ready providers' metadata.resources,
// their live instances and the active holds; the selector; memory quantities.
#include "projections/flavors.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace dcm {
namespace {

constexpr int64_t kNow = 1767225600000;

FlavorOptions Options(std::vector<std::string> types = {"container"}) {
  return FlavorOptions{"enclave-b", std::move(types), FederationPrice{0.05, "EUR", "hour"},
                       std::chrono::seconds(30)};
}

FlavorSupply Supply(std::string type, std::string region, std::optional<int64_t> max,
                    int64_t live) {
  FlavorSupply s;
  s.service_type = std::move(type);
  s.region = std::move(region);
  s.max_instances = max;
  s.live_instances = live;
  return s;
}

class FakeHolds final : public HeldCapacity {
 public:
  HeldAmount ActiveHolds(const std::string& flavor_id) const override {
    auto it = held.find(flavor_id);
    return it == held.end() ? HeldAmount{} : it->second;
  }
  std::map<std::string, HeldAmount> held;
};

TEST(FlavorsTest, OneFlavourPerExportedTypeAndRegionSummingItsProviders) {
  const auto flavors =
      DeriveFlavors({Supply("container", "eu", 2, 0), Supply("container", "eu", 3, 1),
                     Supply("container", "us", 4, 0), Supply("vm", "eu", 9, 0)},
                    Options(), nullptr, kNow);
  ASSERT_EQ(flavors.size(), 2u);  // vm is not exported
  EXPECT_EQ(flavors[0].service_type, "container");
  EXPECT_EQ(flavors[0].region, "eu");
  EXPECT_EQ(flavors[0].owner, "enclave-b");
  EXPECT_EQ(flavors[0].instances_available, 4);  // 2 + 3 - 1 live
  EXPECT_EQ(flavors[1].region, "us");
  EXPECT_EQ(flavors[1].instances_available, 4);
  EXPECT_EQ(flavors[0].expires_at_ms, kNow + 30000);
  EXPECT_EQ(flavors[0].price, (FederationPrice{0.05, "EUR", "hour"}));
}

TEST(FlavorsTest, NothingExportedOrNoReadySupplyMeansNoFlavour) {
  EXPECT_TRUE(DeriveFlavors({Supply("container", "eu", 2, 0)}, Options({}), nullptr, kNow).empty());
  EXPECT_TRUE(DeriveFlavors({}, Options(), nullptr, kNow).empty());
}

TEST(FlavorsTest, AProviderWithoutABoundMakesTheFlavourUnlimited) {
  const auto flavors =
      DeriveFlavors({Supply("container", "eu", 2, 0), Supply("container", "eu", std::nullopt, 5)},
                    Options(), nullptr, kNow);
  ASSERT_EQ(flavors.size(), 1u);
  EXPECT_FALSE(flavors[0].instances_available.has_value());
  EXPECT_FALSE(flavors[0].cpu_available.has_value());
}

TEST(FlavorsTest, LiveInstancesAndHoldsTakeAvailabilityDownToZeroNeverBelow) {
  FakeHolds holds;
  const std::string id = FlavorId("enclave-b", "container", "eu");
  holds.held[id] = HeldAmount{1, 0.5, 1 << 20};
  FlavorSupply s = Supply("container", "eu", 2, 0);
  s.total_cpu = 4;
  s.cpu_used = 1.5;
  s.total_memory = 8 << 20;
  s.memory_used = 2 << 20;
  auto flavors = DeriveFlavors({s}, Options(), &holds, kNow);
  ASSERT_EQ(flavors.size(), 1u);
  EXPECT_EQ(flavors[0].instances_available, 1);
  EXPECT_EQ(flavors[0].cpu_available, 2.0);
  EXPECT_EQ(flavors[0].memory_available, 5 << 20);
  holds.held[id].instances = 5;
  flavors = DeriveFlavors({s}, Options(), &holds, kNow);
  EXPECT_EQ(flavors[0].instances_available, 0);
}

TEST(FlavorsTest, FlavorIdIsDeterministicAndNamesEnclaveTypeAndRegion) {
  EXPECT_EQ(FlavorId("b", "container", "eu"), FlavorId("b", "container", "eu"));
  EXPECT_NE(FlavorId("b", "container", "eu"), FlavorId("a", "container", "eu"));
  EXPECT_NE(FlavorId("b", "container", "eu"), FlavorId("b", "vm", "eu"));
  EXPECT_NE(FlavorId("b", "container", "eu"), FlavorId("b", "container", "us"));
}

// A selector with one field set by `set`.
template <typename Set>
FlavorSelector Selector(Set set) {
  FlavorSelector s;
  set(s);
  return s;
}

TEST(FlavorsTest, SelectorMatchesFieldsAndRanges) {
  Flavor f;
  f.flavor_id = "f1";
  f.service_type = "container";
  f.region = "eu";
  f.instances_available = 2;
  f.cpu_available = 3.5;
  f.memory_available = 1000;
  f.price.amount = 0.05;
  using S = FlavorSelector&;
  EXPECT_TRUE(Matches(FlavorSelector{}, f));
  EXPECT_TRUE(Matches(Selector([](S s) {
                        s.service_type = "container";
                        s.instances_available_min = 1;
                      }),
                      f));
  EXPECT_FALSE(Matches(Selector([](S s) { s.service_type = "vm"; }), f));
  EXPECT_FALSE(Matches(Selector([](S s) { s.region = "us"; }), f));
  EXPECT_FALSE(Matches(Selector([](S s) { s.flavor_id = "f2"; }), f));
  EXPECT_FALSE(Matches(Selector([](S s) { s.instances_available_min = 3; }), f));
  EXPECT_FALSE(Matches(Selector([](S s) { s.instances_available_max = 1; }), f));
  EXPECT_TRUE(Matches(Selector([](S s) {
                        s.cpu_available_min = 3.5;
                        s.cpu_available_max = 4;
                      }),
                      f));
  EXPECT_FALSE(Matches(Selector([](S s) { s.memory_available_min = 1001; }), f));
  EXPECT_FALSE(Matches(Selector([](S s) { s.price_max = 0.01; }), f));
  EXPECT_TRUE(Matches(Selector([](S s) { s.price_min = 0.05; }), f));
}

TEST(FlavorsTest, UnlimitedIsAboveEveryMinimumAndBelowNoMaximum) {
  Flavor f;
  f.service_type = "container";
  EXPECT_TRUE(Matches(Selector([](FlavorSelector& s) { s.instances_available_min = 1000000; }), f));
  EXPECT_FALSE(Matches(Selector([](FlavorSelector& s) { s.instances_available_max = 10; }), f));
}

TEST(FlavorsTest, MemoryQuantities) {
  EXPECT_EQ(ParseMemoryQuantity("1TB"), int64_t{1000000000000});
  EXPECT_EQ(ParseMemoryQuantity("512Mi"), int64_t{512} << 20);
  EXPECT_EQ(ParseMemoryQuantity("4Gi"), int64_t{4} << 30);
  EXPECT_EQ(ParseMemoryQuantity("1.5G"), int64_t{1500000000});
  EXPECT_EQ(ParseMemoryQuantity("2048"), 2048);
  EXPECT_EQ(ParseMemoryQuantity("100B"), 100);
  EXPECT_FALSE(ParseMemoryQuantity("lots").has_value());
  EXPECT_FALSE(ParseMemoryQuantity("-1Gi").has_value());
  EXPECT_FALSE(ParseMemoryQuantity("").has_value());
}

}  // namespace
}  // namespace dcm
