// The recovery requests a lost provider's resources get (consumers/provider_loss.h, SPEC §8):
// which resources, and ids that every instance derives alike, so the decider runs each once.
#include "consumers/provider_loss.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "events/provider_events.h"

namespace dcm {
namespace {

constexpr int64_t kRemovedAt = 1767225600000;

Resource On(const std::string& id, const std::string& provider_id, int64_t placed_at,
            const std::string& status = "PROVISIONING") {
  Resource r;
  r.id = id;
  r.root = "cii-" + id;
  r.catalog_item_instance_id = "cii-" + id;
  r.provider_name = "edge-" + provider_id;
  r.provider_id = provider_id;
  r.status = status;
  r.create_time_ms = placed_at;
  return r;
}

ProviderChange Removed(const char* by) { return {"p1", std::nullopt, by, "req-gc-1", kRemovedAt}; }

TEST(ProviderLossTest, EveryLiveResourcePlacedBeforeTheRemovalGetsOneRecoveryRequest) {
  const std::vector<Resource> resources = {
      On("r1", "p1", kRemovedAt - 5000), On("r2", "p1", kRemovedAt - 1),
      On("r3", "p2", kRemovedAt - 5000),          // another provider
      On("r4", "p1", kRemovedAt - 5000, "LOST"),  // lost already
      On("r5", "p1", kRemovedAt + 1000)};         // on a later registration of the id
  const auto requests = LossRequests(Removed(event_type::kExpired), resources, true, 42);
  ASSERT_EQ(requests.size(), 2u);
  for (const auto& r : requests) {
    EXPECT_EQ(r.type, event_type::kOperationRequested);
    EXPECT_EQ(r.operation, "recover_lost_resource");
    EXPECT_EQ(r.reason, "provider_expired");
    EXPECT_EQ(r.provider_id, "p1");
    EXPECT_EQ(r.root, "cii-" + r.resource_id);
    EXPECT_EQ(r.catalog_item_instance_id, "cii-" + r.resource_id);
    EXPECT_FALSE(r.new_resource_id.empty()) << "REHYDRATE_ON_PROVIDER_LOSS: a new resource id";
    EXPECT_EQ(r.actor, "dcm/provider-loss");
  }
  EXPECT_EQ(requests[0].resource_id, "r1");
  EXPECT_EQ(requests[1].resource_id, "r2");
  EXPECT_NE(requests[0].request_id, requests[1].request_id);
}

TEST(ProviderLossTest, TheIdsDeriveFromTheRemovalAndTheResourceSoEveryInstanceAsksTheSame) {
  const std::vector<Resource> resources = {On("r1", "p1", kRemovedAt - 5000)};
  const auto a = LossRequests(Removed(event_type::kDeleted), resources, true, 1);
  const auto b = LossRequests(Removed(event_type::kDeleted), resources, true, 2);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(a[0].request_id, b[0].request_id);
  EXPECT_EQ(a[0].new_resource_id, b[0].new_resource_id);
  EXPECT_EQ(a[0].reason, "provider_deleted");
  ProviderChange later = Removed(event_type::kDeleted);
  later.request_id = "req-gc-2";  // another removal (after a registration again)
  EXPECT_NE(LossRequests(later, resources, true, 1)[0].request_id, a[0].request_id);
}

TEST(ProviderLossTest, WithoutRehydrationTheResourcesAreOnlyMarkedLost) {
  const std::vector<Resource> resources = {On("r1", "p1", kRemovedAt - 5000)};
  const auto requests = LossRequests(Removed(event_type::kExpired), resources, false, 1);
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_TRUE(requests[0].new_resource_id.empty());
}

TEST(ProviderLossTest, AnIdChangeOrAnUpsertLosesNothing) {
  const std::vector<Resource> resources = {On("r1", "p1", kRemovedAt - 5000)};
  EXPECT_TRUE(LossRequests(Removed(event_type::kIdChanged), resources, true, 1).empty());
  EXPECT_TRUE(
      LossRequests(ProviderChange{"p1", Provider{}, "", "", 0}, resources, true, 1).empty());
}

}  // namespace
}  // namespace dcm
