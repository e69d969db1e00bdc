// The federation sweeper's requests (consumers/federation_worker.h): one expiry_due per lease
// that has ended, at the sweep's time, with an id derived from the lease so that sweeping twice
// asks once; none before the lease ends. Hermetic: in-memory store, no Kafka.
#include <gtest/gtest.h>

#include "consumers/federation_worker.h"

namespace dcm {
namespace {

constexpr int64_t kT0 = 1'800'000'000'000;

TEST(FederationSweepTest, EndedLeasesGetOneExpiryRequestWithAStableId) {
  auto store = std::move(*Store::Open("/sweep", StoreOptions{.in_memory = true}));
  const FederationPolicy policy{.enclave_id = "b", .contract_ttl_ms = 60000};
  FederationDecider decider(store.get(), policy);
  const FlavorCapacity capacity = [](const std::string&) { return std::optional<int64_t>(5); };
  auto decide = [&](FederationRequest request, int64_t seq) {
    StoreBatch batch;
    ASSERT_TRUE(decider.Decide(request, seq, capacity, batch).has_value());
    ASSERT_TRUE(store->Write(batch).has_value());
  };
  ReservationReceived hold;
  hold.event_id = "q1";
  hold.time_ms = kT0;
  hold.reservation_id = "res-hold";
  hold.flavor_id = "container";
  hold.consumer = "a";
  hold.spec = "{}";
  hold.ttl_ms = 10000;
  decide(hold, 0);
  ReservationReceived held = hold;
  held.event_id = "q2";
  held.reservation_id = "res-contract";
  decide(held, 1);
  ReservationConfirmRequested confirm;
  confirm.event_id = "q3";
  confirm.time_ms = kT0 + 1000;
  confirm.reservation_id = "res-contract";
  confirm.consumer = "a";
  decide(confirm, 2);  // contract until kT0 + 61 s

  Metrics metrics;
  FederationWorkerOptions options;
  options.policy = policy;
  FederationWorker worker(options, store.get(), nullptr, &metrics, &SystemClock::Instance());
  EXPECT_TRUE(worker.DueRequests(kT0 + 9999)->empty());
  auto due = *worker.DueRequests(kT0 + 10000);
  ASSERT_EQ(due.size(), 1u);
  const auto& expiry = std::get<ReservationExpiryDue>(due[0]);
  EXPECT_EQ(expiry.reservation_id, "res-hold");
  EXPECT_EQ(expiry.expires_at_ms, kT0 + 10000);
  EXPECT_EQ(expiry.time_ms, kT0 + 10000);
  // A later sweep asks for the same lease under the same id (decided once).
  auto later = *worker.DueRequests(kT0 + 70000);
  ASSERT_EQ(later.size(), 2u);
  EXPECT_EQ(EnvelopeOf(later[0]).event_id, expiry.event_id);
  const auto& contract = std::get<ContractExpiryDue>(later[1]);
  EXPECT_EQ(contract.contract_id, ContractIdFor("b", "res-contract"));
  EXPECT_EQ(contract.expires_at_ms, kT0 + 61000);
  // Decided, the expiry frees the lease: nothing is due any more.
  decide(later[0], 3);
  decide(later[1], 4);
  EXPECT_TRUE(worker.DueRequests(kT0 + 80000)->empty());
  EXPECT_EQ(*decider.state().Usage("container"), FlavorUsage{});
}

}  // namespace
}  // namespace dcm
