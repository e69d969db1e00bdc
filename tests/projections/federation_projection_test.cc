// FederationProjection and FederationView: the fold of dcm.federation (through the wire codec),
// idempotent, rebuilt byte-identically, equal key for key to the decider's own state.
#include "projections/federation_projection.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "projections/federation_decider.h"

namespace dcm {
namespace {

constexpr int64_t kT0 = 1'800'000'000'000;

std::unique_ptr<Store> OpenInMemory(const std::string& path) {
  auto store = Store::Open(path, StoreOptions{.bulk_load = false, .in_memory = true});
  EXPECT_TRUE(store.has_value()) << store.error().message;
  return store ? std::move(*store) : nullptr;
}

template <typename T>
T At(int64_t time_ms, const std::string& id) {
  T r;
  r.event_id = id;
  r.time_ms = time_ms;
  return r;
}

ReservationReceived Reserve(const std::string& id, const std::string& reservation,
                            const std::string& consumer, const std::string& flavor,
                            int64_t time_ms) {
  auto r = At<ReservationReceived>(time_ms, id);
  r.reservation_id = reservation;
  r.flavor_id = flavor;
  r.consumer = consumer;
  r.spec = R"({"cpu":1})";
  r.ttl_ms = 30000;
  return r;
}

ReservationConfirmRequested Confirm(const std::string& id, const std::string& reservation,
                                    const std::string& consumer, int64_t time_ms) {
  auto r = At<ReservationConfirmRequested>(time_ms, id);
  r.reservation_id = reservation;
  r.consumer = consumer;
  return r;
}

// Decides a small history on a decider and returns its outcomes as they go on the wire.
std::vector<CloudEvent> History(Store* store) {
  FederationDecider decider(store, FederationPolicy{.enclave_id = "b"});
  FlavorCapacity capacity = [](const std::string& flavor) -> std::optional<int64_t> {
    if (flavor == "gpu") return std::nullopt;
    return 2;
  };
  std::vector<FederationRequest> requests = {
      Reserve("q1", "res-1", "a", "container", kT0),
      Reserve("q2", "res-2", "c", "container", kT0 + 1),
      Reserve("q3", "res-3", "a", "container", kT0 + 2),  // no capacity
      Reserve("q4", "res-4", "a", "gpu", kT0 + 3),        // unknown flavour
      Confirm("q5", "res-1", "a", kT0 + 4),
      Confirm("q6", "res-2", "c", kT0 + 5),
      Reserve("q7", "res-5", "a", "vm", kT0 + 6),
  };
  auto terminate = At<ContractTerminationRequested>(kT0 + 7, "q8");
  terminate.contract_id = ContractIdFor("b", "res-2");
  terminate.consumer = "c";
  requests.push_back(terminate);
  for (const char* id : {"q9", "q10"}) {  // a relay (a supernode's) and its repeat
    auto relay = At<ReservationRelayRequested>(kT0 + 8, id);
    relay.reservation_id = "res-6";
    relay.flavor_id = "container";
    relay.consumer = "a";
    relay.next_hop = "c";
    relay.owner = "o";
    requests.push_back(relay);
  }
  std::vector<CloudEvent> out;
  int64_t seq = 0;
  for (const auto& request : requests) {
    StoreBatch batch;
    auto outcome = decider.Decide(request, seq++, capacity, batch);
    EXPECT_TRUE(outcome.has_value());
    EXPECT_TRUE(store->Write(batch).has_value());
    if (outcome && *outcome) {
      CloudEvent event = EncodeFederationOutcome(**outcome);
      event.source = "dcm/federation";
      out.push_back(event);
    }
  }
  return out;
}

void Fold(Store* store, FederationProjection& projection, const std::vector<CloudEvent>& events) {
  int64_t offset = 0;
  for (const auto& event : events) {
    StoreBatch batch;
    ASSERT_TRUE(projection.Apply(event, EventPosition{"dcm.federation", 0, offset++}, batch));
    ASSERT_TRUE(store->Write(batch));
    projection.AfterCommit({event});
  }
}

// Every key under `root`, with the root cut off.
std::map<std::string, std::string> KeysUnder(const Store& store, const std::string& root) {
  std::map<std::string, std::string> out;
  EXPECT_TRUE(store.Scan(root, "", [&](std::string_view key, std::string_view value) {
    out.emplace(key.substr(root.size()), value);
    return true;
  }));
  return out;
}

TEST(FederationProjectionTest, TheViewShowsLiveHoldsAndContractsPerFlavourAndConsumer) {
  auto store = OpenInMemory("/fed-view");
  const auto events = History(store.get());
  FederationProjection projection(store.get(), nullptr, nullptr);
  Fold(store.get(), projection, events);
  FederationView view(store.get());
  EXPECT_EQ(*view.Usage("container"), (FlavorUsage{0, 1}));  // res-1 signed, res-2 terminated
  EXPECT_EQ(*view.Usage("vm"), (FlavorUsage{1, 0}));
  EXPECT_EQ(*view.Usage("gpu"), (FlavorUsage{}));
  auto holds = *view.Holds();
  ASSERT_EQ(holds.size(), 1u);
  EXPECT_EQ(holds[0].reservation_id, "res-5");
  auto contracts = *view.ContractsOf("a");
  ASSERT_EQ(contracts.size(), 1u);
  EXPECT_EQ(contracts[0].contract_id, ContractIdFor("b", "res-1"));
  EXPECT_EQ(contracts[0].remote_instance_id, RemoteInstanceIdFor("b", "res-1"));
  EXPECT_TRUE(view.ContractsOf("c")->empty());
  auto ended = *view.Contract(ContractIdFor("b", "res-2"));
  ASSERT_TRUE(ended.has_value());
  EXPECT_EQ(ended->state, reservation_state::kTerminated);
  EXPECT_EQ((*view.Reservation("res-3"))->reason, refusal::kNoCapacity);
  EXPECT_EQ(*view.OutcomeType("q5"), std::optional<std::string>(event_type::kContractSigned));
  EXPECT_EQ(view.Contracts("container")->size(), 1u);
}

TEST(FederationProjectionTest, ARelayIsFoundByTheOwnersContractIdAndUsesNoCapacity) {
  auto store = OpenInMemory("/fed-relay");
  const auto events = History(store.get());
  FederationProjection projection(store.get(), nullptr, nullptr);
  Fold(store.get(), projection, events);
  FederationView view(store.get());
  auto relay = *view.RelayOfContract(ContractIdFor("o", "res-6"));
  ASSERT_TRUE(relay.has_value());
  EXPECT_EQ(relay->reservation_id, "res-6");
  EXPECT_EQ(relay->state, reservation_state::kRelayed);
  EXPECT_EQ(relay->consumer, "a");
  EXPECT_EQ(relay->next_hop, "c");
  EXPECT_EQ(relay->owner, "o");
  EXPECT_EQ(*view.Reservation("res-6"), relay);
  // Contracts this enclave signed, and unknown ids, are no relays.
  EXPECT_FALSE(view.RelayOfContract(ContractIdFor("b", "res-1"))->has_value());
  EXPECT_FALSE(view.RelayOfContract(ContractIdFor("b", "res-6"))->has_value());
  EXPECT_FALSE(view.RelayOfContract("nope")->has_value());
  // Nothing live or counted: the flavour's usage is res-1's contract only.
  EXPECT_EQ(*view.Usage("container"), (FlavorUsage{0, 1}));
  EXPECT_TRUE(view.ContractsOf("a")->size() == 1u);
  EXPECT_EQ(*view.OutcomeType("q10"), std::optional<std::string>(event_type::kReservationRelayed));
}

TEST(FederationProjectionTest, TheProjectionHoldsTheDecidersStateKeyForKey) {
  auto store = OpenInMemory("/fed-same");
  const auto events = History(store.get());
  FederationProjection projection(store.get(), nullptr, nullptr);
  Fold(store.get(), projection, events);
  EXPECT_EQ(KeysUnder(*store, FederationProjection::kPrefix),
            KeysUnder(*store, FederationDecider::kRoot));
}

TEST(FederationProjectionTest, RebuildingFromTheLogGivesByteIdenticalStateAndDuplicatesAreNoOps) {
  auto decided = OpenInMemory("/fed-decided");
  const auto events = History(decided.get());
  auto first = OpenInMemory("/fed-first");
  auto second = OpenInMemory("/fed-second");
  FederationProjection a(first.get(), nullptr, nullptr);
  FederationProjection b(second.get(), nullptr, nullptr);
  Fold(first.get(), a, events);
  // The second folds every event twice in a row (the mock re-delivers retried batches), and the
  // whole log again.
  std::vector<CloudEvent> doubled;
  for (const auto& e : events) {
    doubled.push_back(e);
    doubled.push_back(e);
  }
  Fold(second.get(), b, doubled);
  Fold(second.get(), b, events);
  EXPECT_EQ(*first->Digest(FederationProjection::kPrefix),
            *second->Digest(FederationProjection::kPrefix));
}

TEST(FederationProjectionTest, AnEventThatIsNotAFederationOutcomeIsPoison) {
  auto store = OpenInMemory("/fed-poison");
  FederationProjection projection(store.get(), nullptr, nullptr);
  CloudEvent poison;
  poison.id = "p1";
  poison.type = "dcm.reservation.held";
  poison.time = "2026-01-01T00:00:00.000Z";
  poison.data = R"({"request_id":"x"})";  // lacks seq, request_type, spec, ...
  StoreBatch batch;
  auto applied = projection.Apply(poison, EventPosition{"dcm.federation", 0, 0}, batch);
  ASSERT_FALSE(applied.has_value());
  EXPECT_EQ(applied.error().code, ErrorCode::kCorruption);
}

TEST(FederationProjectionTest, AWaiterGetsTheOutcomeOfItsRequest) {
  auto store = OpenInMemory("/fed-waiters");
  const auto events = History(store.get());
  OutcomeWaiters waiters;
  std::optional<std::string> got;
  waiters.Expect("q1", kT0 + 100000, [&](Result<CloudEvent> outcome) {
    if (outcome) got = outcome->type;
  });
  FederationProjection projection(store.get(), &waiters, nullptr);
  Fold(store.get(), projection, events);
  EXPECT_EQ(got, std::optional<std::string>(event_type::kReservationHeld));
}

}  // namespace
}  // namespace dcm
