// FederationDecider (SPEC §10): every rule, hermetic (in-memory store, times from the requests).
#include "projections/federation_decider.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "src/common/uuid.h"

namespace dcm {
namespace {

constexpr int64_t kT0 = 1'800'000'000'000;  // 2027-01-15
constexpr int64_t kSecond = 1000;

std::unique_ptr<Store> OpenInMemory() {
  auto store = Store::Open("/fed-decider", StoreOptions{.bulk_load = false, .in_memory = true});
  EXPECT_TRUE(store.has_value()) << store.error().message;
  return store ? std::move(*store) : nullptr;
}

template <typename T>
T At(int64_t time_ms, const std::string& id) {
  T r;
  r.event_id = id;
  r.time_ms = time_ms;
  r.actor = "dcm-enclave://a";
  return r;
}

ReservationReceived Reserve(const std::string& id, const std::string& reservation, int64_t time_ms,
                            const std::string& consumer = "a",
                            const std::string& flavor = "container-eu", int64_t ttl_ms = 30000) {
  auto r = At<ReservationReceived>(time_ms, id);
  r.reservation_id = reservation;
  r.flavor_id = flavor;
  r.consumer = consumer;
  r.spec = R"({"image":"nginx"})";
  r.ttl_ms = ttl_ms;
  return r;
}

ReservationRelayRequested Relay(const std::string& id, const std::string& reservation,
                                int64_t time_ms, const std::string& consumer = "a",
                                const std::string& next_hop = "c",
                                const std::string& flavor = "container-eu") {
  auto r = At<ReservationRelayRequested>(time_ms, id);
  r.reservation_id = reservation;
  r.flavor_id = flavor;
  r.consumer = consumer;
  r.next_hop = next_hop;
  r.owner = "o";
  return r;
}

template <typename T>
T OnReservation(const std::string& id, const std::string& reservation, int64_t time_ms,
                const std::string& consumer = "a") {
  auto r = At<T>(time_ms, id);
  r.reservation_id = reservation;
  r.consumer = consumer;
  return r;
}

template <typename T>
T OnContract(const std::string& id, const std::string& contract, int64_t time_ms,
             const std::string& consumer = "a") {
  auto r = At<T>(time_ms, id);
  r.contract_id = contract;
  r.consumer = consumer;
  return r;
}

class FederationDeciderTest : public ::testing::Test {
 protected:
  FederationDeciderTest()
      : store_(OpenInMemory()),
        decider_(store_.get(), FederationPolicy{.enclave_id = "b",
                                                .max_hold_ttl_ms = 60 * kSecond,
                                                .contract_ttl_ms = 120 * kSecond}) {}

  // Decides `request` as the next offset and commits it, as the worker does.
  std::optional<FederationOutcome> Decide(const FederationRequest& request) {
    StoreBatch batch;
    auto outcome = decider_.Decide(request, seq_++, capacity_, batch);
    EXPECT_TRUE(outcome.has_value()) << outcome.error().message;
    EXPECT_TRUE(store_->Write(batch).has_value());
    if (outcome && *outcome) outcomes_.push_back(**outcome);
    return outcome ? *outcome : std::nullopt;
  }

  // The outcome of `request`, which must have one, as a T.
  template <typename T>
  T Expect(const FederationRequest& request) {
    auto outcome = Decide(request);
    EXPECT_TRUE(outcome.has_value());
    if (!outcome) return T{};
    EXPECT_TRUE(std::holds_alternative<T>(*outcome)) << "got " << TypeOf(*outcome);
    return std::holds_alternative<T>(*outcome) ? std::get<T>(*outcome) : T{};
  }

  // The decider's keys (root cut off) of the families in `families`, e.g. "hckux".
  std::map<std::string, std::string> Keys(std::string_view families) {
    std::map<std::string, std::string> out;
    const std::string root = FederationDecider::kRoot;
    EXPECT_TRUE(store_->Scan(root, "", [&](std::string_view key, std::string_view value) {
      const std::string_view rest = key.substr(root.size());
      if (families.find(rest[0]) != std::string_view::npos) out.emplace(rest, value);
      return true;
    }));
    return out;
  }

  std::optional<ReservationRecord> Record(const std::string& reservation) {
    auto record = decider_.state().Reservation(reservation);
    EXPECT_TRUE(record.has_value());
    return record.value_or(std::nullopt);
  }

  FlavorUsage Usage(const std::string& flavor = "container-eu") {
    auto usage = decider_.state().Usage(flavor);
    EXPECT_TRUE(usage.has_value());
    return usage.value_or(FlavorUsage{});
  }

  // Confirms a new hold for consumer "a"; returns the contract.
  ContractSigned HoldAndConfirm(const std::string& reservation, int64_t time_ms) {
    Expect<ReservationHeld>(Reserve("r-" + reservation, reservation, time_ms));
    return Expect<ContractSigned>(OnReservation<ReservationConfirmRequested>(
        "c-" + reservation, reservation, time_ms + kSecond));
  }

  std::unique_ptr<Store> store_;
  FederationDecider decider_;
  std::map<std::string, int64_t> flavors_ = {{"container-eu", 2}};
  FlavorCapacity capacity_ = [this](const std::string& flavor) -> std::optional<int64_t> {
    auto it = flavors_.find(flavor);
    return it == flavors_.end() ? std::nullopt : std::optional<int64_t>(it->second);
  };
  int64_t seq_ = 0;
  std::vector<FederationOutcome> outcomes_;
};

TEST_F(FederationDeciderTest, HoldsReduceAvailabilityAtOnceAndTheThirdOfTwoSlotsIsRefused) {
  auto first = Expect<ReservationHeld>(Reserve("q1", "res-1", kT0, "a"));
  EXPECT_EQ(first.expires_at_ms, kT0 + 30 * kSecond);
  EXPECT_EQ(first.capacity, 2);
  EXPECT_EQ(FederationAnswerStatus(first), 201);
  EXPECT_EQ(Usage(), (FlavorUsage{1, 0}));
  Expect<ReservationHeld>(Reserve("q2", "res-2", kT0 + 1, "c"));
  auto third = Expect<ReservationRefused>(Reserve("q3", "res-3", kT0 + 2, "d"));
  EXPECT_EQ(third.reason, refusal::kNoCapacity);
  EXPECT_EQ(third.status, 409);
  EXPECT_EQ(Usage(), (FlavorUsage{2, 0}));
}

TEST_F(FederationDeciderTest, ASecondBuyerCannotHoldTheLastSlot) {
  flavors_["container-eu"] = 1;
  Expect<ReservationHeld>(Reserve("q1", "res-1", kT0, "a"));
  auto second = Expect<ReservationRefused>(Reserve("q2", "res-2", kT0 + 1, "c"));
  EXPECT_EQ(second.reason, refusal::kNoCapacity);
  EXPECT_EQ(FederationAnswerStatus(second), 409);
}

TEST_F(FederationDeciderTest, AnUnknownFlavourIsRefused404AndRemembered) {
  auto refused = Expect<ReservationRefused>(Reserve("q1", "res-1", kT0, "a", "gpu"));
  EXPECT_EQ(refused.reason, refusal::kUnknownFlavor);
  EXPECT_EQ(refused.status, 404);
  flavors_["gpu"] = 5;  // offered later: the same reservation id still gets the same answer
  auto again = Expect<ReservationRefused>(Reserve("q2", "res-1", kT0 + 1, "a", "gpu"));
  EXPECT_TRUE(again.repeat);
  EXPECT_EQ(again.reason, refusal::kUnknownFlavor);
}

TEST_F(FederationDeciderTest, TheSameReservationIdGetsTheSameAnswerAndHoldsOneSlot) {
  auto first = Expect<ReservationHeld>(Reserve("q1", "res-1", kT0));
  auto again = Expect<ReservationHeld>(Reserve("q2", "res-1", kT0 + 5 * kSecond));
  EXPECT_TRUE(again.repeat);
  EXPECT_EQ(again.expires_at_ms, first.expires_at_ms);
  EXPECT_EQ(FederationAnswerStatus(again), 200);
  EXPECT_EQ(Usage(), (FlavorUsage{1, 0}));
}

TEST_F(FederationDeciderTest, ARequestIdIsDecidedOnce) {
  Decide(Reserve("q1", "res-1", kT0));
  StoreBatch batch;
  EXPECT_TRUE(*decider_.AlreadyDecided("q1", batch));
  EXPECT_FALSE(*decider_.AlreadyDecided("q2", batch));
}

TEST_F(FederationDeciderTest, AReservationIdOfAnotherConsumerOrFlavourIsAConflict) {
  flavors_["vm-eu"] = 3;
  Expect<ReservationHeld>(Reserve("q1", "res-1", kT0, "a"));
  EXPECT_EQ(Expect<ReservationRefused>(Reserve("q2", "res-1", kT0, "c")).reason,
            refusal::kConflict);
  EXPECT_EQ(Expect<ReservationRefused>(Reserve("q3", "res-1", kT0, "a", "vm-eu")).reason,
            refusal::kConflict);
  EXPECT_EQ(Usage(), (FlavorUsage{1, 0}));
}

TEST_F(FederationDeciderTest, TheHoldTtlIsCappedByPolicy) {
  auto held = Expect<ReservationHeld>(Reserve("q1", "res-1", kT0, "a", "container-eu", 3600000));
  EXPECT_EQ(held.expires_at_ms, kT0 + 60 * kSecond);
}

TEST_F(FederationDeciderTest, ConfirmOfALiveHoldSignsAContractWithDeterministicIds) {
  auto contract = HoldAndConfirm("res-1", kT0);
  EXPECT_EQ(contract.contract_id, ContractIdFor("b", "res-1"));
  EXPECT_EQ(contract.remote_instance_id, RemoteInstanceIdFor("b", "res-1"));
  EXPECT_NE(contract.contract_id, contract.remote_instance_id);
  EXPECT_EQ(contract.contract_id[14], '5');  // UUIDv5
  EXPECT_EQ(contract.expires_at_ms, kT0 + kSecond + 120 * kSecond);
  EXPECT_EQ(contract.spec, R"({"image":"nginx"})");
  EXPECT_EQ(FederationAnswerStatus(contract), 201);
  EXPECT_EQ(Usage(), (FlavorUsage{0, 1}));
  // A retried confirm (the consumer crashed before recording it) gets the same contract.
  auto again = Expect<ContractSigned>(
      OnReservation<ReservationConfirmRequested>("q9", "res-1", kT0 + 2 * kSecond));
  EXPECT_TRUE(again.repeat);
  EXPECT_EQ(again.contract_id, contract.contract_id);
  EXPECT_EQ(again.expires_at_ms, contract.expires_at_ms);
  EXPECT_EQ(Usage(), (FlavorUsage{0, 1}));
}

TEST_F(FederationDeciderTest, ConfirmAfterTheHoldExpiredIsGoneAndFreesTheSlot) {
  Expect<ReservationHeld>(Reserve("q1", "res-1", kT0));
  auto late = Expect<ReservationExpired>(
      OnReservation<ReservationConfirmRequested>("q2", "res-1", kT0 + 30 * kSecond));
  EXPECT_EQ(FederationAnswerStatus(late), 410);
  EXPECT_EQ(Usage(), (FlavorUsage{0, 0}));
  auto again = Expect<ReservationRefused>(
      OnReservation<ReservationConfirmRequested>("q3", "res-1", kT0 + 31 * kSecond));
  EXPECT_EQ(again.reason, refusal::kExpired);
  EXPECT_EQ(again.status, 410);
}

TEST_F(FederationDeciderTest, ExpiryDecidedBeforeTheConfirmWins) {
  Expect<ReservationHeld>(Reserve("q1", "res-1", kT0));
  auto due = At<ReservationExpiryDue>(kT0 + 31 * kSecond, "x1");
  due.reservation_id = "res-1";
  due.expires_at_ms = kT0 + 30 * kSecond;
  auto expired = Expect<ReservationExpired>(due);
  EXPECT_EQ(FederationAnswerStatus(expired), 200);
  // The confirm was sent in time but decided after the expiry: gone.
  auto confirm = Expect<ReservationRefused>(
      OnReservation<ReservationConfirmRequested>("q2", "res-1", kT0 + 29 * kSecond));
  EXPECT_EQ(confirm.status, 410);
  EXPECT_EQ(Usage(), (FlavorUsage{0, 0}));
}

TEST_F(FederationDeciderTest, ConfirmDecidedBeforeTheExpiryWinsAndTheExpiryIsMoot) {
  Expect<ReservationHeld>(Reserve("q1", "res-1", kT0));
  Expect<ContractSigned>(
      OnReservation<ReservationConfirmRequested>("q2", "res-1", kT0 + 29 * kSecond));
  auto due = At<ReservationExpiryDue>(kT0 + 31 * kSecond, "x1");
  due.reservation_id = "res-1";
  due.expires_at_ms = kT0 + 30 * kSecond;
  EXPECT_FALSE(Decide(due).has_value());
  StoreBatch batch;
  EXPECT_TRUE(*decider_.AlreadyDecided("x1", batch));  // remembered without an outcome
  EXPECT_EQ(Usage(), (FlavorUsage{0, 1}));
}

TEST_F(FederationDeciderTest, AnExpiryThatIsNotDueYetIsMoot) {
  Expect<ReservationHeld>(Reserve("q1", "res-1", kT0));
  auto early = At<ReservationExpiryDue>(kT0 + 10 * kSecond, "x1");
  early.reservation_id = "res-1";
  early.expires_at_ms = kT0 + 30 * kSecond;
  EXPECT_FALSE(Decide(early).has_value());
  EXPECT_EQ(Usage(), (FlavorUsage{1, 0}));
}

TEST_F(FederationDeciderTest, ReleaseFreesTheHoldAndIsIdempotent) {
  Expect<ReservationHeld>(Reserve("q1", "res-1", kT0));
  Expect<ReservationReleased>(
      OnReservation<ReservationReleaseRequested>("q2", "res-1", kT0 + kSecond));
  EXPECT_EQ(Usage(), (FlavorUsage{0, 0}));
  auto again = Expect<ReservationReleased>(
      OnReservation<ReservationReleaseRequested>("q3", "res-1", kT0 + 2 * kSecond));
  EXPECT_TRUE(again.repeat);
  auto reserve_again = Expect<ReservationRefused>(Reserve("q4", "res-1", kT0 + 3 * kSecond));
  EXPECT_EQ(reserve_again.reason, refusal::kReleased);
  EXPECT_EQ(Usage(), (FlavorUsage{0, 0}));
}

TEST_F(FederationDeciderTest, RenewalsExtendTheLeaseAndAnExpiryOfTheOldLeaseIsMoot) {
  auto contract = HoldAndConfirm("res-1", kT0);
  auto renewed = Expect<ContractRenewed>(
      OnContract<ContractRenewalRequested>("n1", contract.contract_id, kT0 + 60 * kSecond));
  EXPECT_EQ(renewed.expires_at_ms, kT0 + 180 * kSecond);
  EXPECT_EQ(FederationAnswerStatus(renewed), 200);
  auto due = At<ContractExpiryDue>(contract.expires_at_ms + kSecond, "x1");
  due.contract_id = contract.contract_id;
  due.expires_at_ms = contract.expires_at_ms;  // the lease before the renewal
  EXPECT_FALSE(Decide(due).has_value());
  EXPECT_EQ(Usage(), (FlavorUsage{0, 1}));
}

TEST_F(FederationDeciderTest, ContractExpiryFreesCapacityAndALateRenewalIsGone) {
  auto contract = HoldAndConfirm("res-1", kT0);
  auto due = At<ContractExpiryDue>(contract.expires_at_ms, "x1");
  due.contract_id = contract.contract_id;
  due.expires_at_ms = contract.expires_at_ms;
  auto expired = Expect<ContractExpired>(due);
  EXPECT_EQ(expired.contract_id, contract.contract_id);
  EXPECT_EQ(Usage(), (FlavorUsage{0, 0}));
  auto renew = Expect<ReservationRefused>(OnContract<ContractRenewalRequested>(
      "n1", contract.contract_id, contract.expires_at_ms + kSecond));
  EXPECT_EQ(renew.reason, refusal::kExpired);
  EXPECT_EQ(renew.status, 410);
  EXPECT_EQ(renew.contract_id, contract.contract_id);
}

TEST_F(FederationDeciderTest, ARenewalPastTheLeaseExpiresTheContractAt410) {
  auto contract = HoldAndConfirm("res-1", kT0);
  auto renew = Expect<ContractExpired>(
      OnContract<ContractRenewalRequested>("n1", contract.contract_id, contract.expires_at_ms));
  EXPECT_EQ(FederationAnswerStatus(renew), 410);
  EXPECT_EQ(Usage(), (FlavorUsage{0, 0}));
}

TEST_F(FederationDeciderTest, TerminationFreesCapacityAndIsIdempotent) {
  flavors_["container-eu"] = 1;
  auto contract = HoldAndConfirm("res-1", kT0);
  EXPECT_EQ(Expect<ReservationRefused>(Reserve("q1", "res-2", kT0 + 2 * kSecond, "c")).reason,
            refusal::kNoCapacity);
  Expect<ContractTerminated>(
      OnContract<ContractTerminationRequested>("t1", contract.contract_id, kT0 + 3 * kSecond));
  EXPECT_EQ(Usage(), (FlavorUsage{0, 0}));
  auto again = Expect<ContractTerminated>(
      OnContract<ContractTerminationRequested>("t2", contract.contract_id, kT0 + 4 * kSecond));
  EXPECT_TRUE(again.repeat);
  Expect<ReservationHeld>(Reserve("q2", "res-3", kT0 + 5 * kSecond, "c"));
}

TEST_F(FederationDeciderTest, RevocationEndsTheContractWithoutAConsumerCheck) {
  auto contract = HoldAndConfirm("res-1", kT0);
  auto revoke = At<ContractRevocationRequested>(kT0 + 5 * kSecond, "v1");
  revoke.contract_id = contract.contract_id;
  revoke.reason = "maintenance";
  auto revoked = Expect<ContractRevoked>(revoke);
  EXPECT_EQ(revoked.reason, "maintenance");
  EXPECT_EQ(revoked.consumer, "a");
  EXPECT_EQ(Usage(), (FlavorUsage{0, 0}));
}

TEST_F(FederationDeciderTest, AnotherConsumersCallsAreForbidden) {
  Expect<ReservationHeld>(Reserve("q1", "res-1", kT0, "a"));
  auto confirm = Expect<ReservationRefused>(
      OnReservation<ReservationConfirmRequested>("q2", "res-1", kT0 + 1, "c"));
  EXPECT_EQ(confirm.reason, refusal::kForbidden);
  EXPECT_EQ(confirm.status, 403);
  EXPECT_EQ(Expect<ReservationRefused>(
                OnReservation<ReservationReleaseRequested>("q3", "res-1", kT0 + 2, "c"))
                .status,
            403);
  auto contract = Expect<ContractSigned>(
      OnReservation<ReservationConfirmRequested>("q4", "res-1", kT0 + 3, "a"));
  EXPECT_EQ(Expect<ReservationRefused>(
                OnContract<ContractRenewalRequested>("q5", contract.contract_id, kT0 + 4, "c"))
                .status,
            403);
  EXPECT_EQ(Expect<ReservationRefused>(
                OnContract<ContractTerminationRequested>("q6", contract.contract_id, kT0 + 5, "c"))
                .status,
            403);
  EXPECT_EQ(Usage(), (FlavorUsage{0, 1}));
}

TEST_F(FederationDeciderTest, CallsOnUnknownReservationsAndContractsAreNotFound) {
  EXPECT_EQ(
      Expect<ReservationRefused>(OnReservation<ReservationConfirmRequested>("q1", "nope", kT0))
          .status,
      404);
  EXPECT_EQ(
      Expect<ReservationRefused>(OnContract<ContractRenewalRequested>("q2", "nope", kT0)).status,
      404);
}

TEST_F(FederationDeciderTest, ReleaseOfAConfirmedReservationIsAConflict) {
  HoldAndConfirm("res-1", kT0);
  EXPECT_EQ(Expect<ReservationRefused>(
                OnReservation<ReservationReleaseRequested>("q1", "res-1", kT0 + 5 * kSecond))
                .reason,
            refusal::kSigned);
}

TEST_F(FederationDeciderTest, ANewRelayGoesToTheNextHopUnderTheOwnersContractIdAndUsesNoCapacity) {
  auto relayed = Expect<ReservationRelayed>(Relay("q1", "res-1", kT0, "a", "c"));
  EXPECT_EQ(relayed.next_hop, "c");
  EXPECT_EQ(relayed.owner, "o");
  EXPECT_EQ(relayed.contract_id, ContractIdFor("o", "res-1"));
  EXPECT_NE(relayed.contract_id, ContractIdFor("b", "res-1"));  // the owner's, not this enclave's
  EXPECT_FALSE(relayed.repeat);
  EXPECT_EQ(FederationAnswerStatus(relayed), 201);
  auto record = Record("res-1");
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->state, reservation_state::kRelayed);
  EXPECT_EQ(record->consumer, "a");
  EXPECT_EQ(record->flavor_id, "container-eu");
  EXPECT_EQ(record->next_hop, "c");
  EXPECT_EQ(record->owner, "o");
  EXPECT_EQ(record->contract_id, relayed.contract_id);
  // n/ and m/ only: no hold, contract, consumer index, usage or expiry.
  EXPECT_EQ(Keys("m"), (std::map<std::string, std::string>{{"m/" + relayed.contract_id, "res-1"}}));
  EXPECT_EQ(Keys("n").size(), 1u);
  EXPECT_TRUE(Keys("hckux").empty());
  EXPECT_EQ(Usage(), FlavorUsage{});
  // A relay consults no capacity: a flavour not offered here relays as well.
  flavors_.clear();
  EXPECT_EQ(Expect<ReservationRelayed>(Relay("q2", "res-2", kT0, "a", "c", "gpu")).flavor_id,
            "gpu");
}

TEST_F(FederationDeciderTest, ARepeatedRelayGetsTheFirstAnswerAndChangesNothing) {
  auto first = Expect<ReservationRelayed>(Relay("q1", "res-1", kT0, "a", "c"));
  const auto before = Keys("nhckmux");
  auto again = Relay("q2", "res-1", kT0 + kSecond, "a", "d");  // another next hop this time
  again.owner = "p";
  auto repeat = Expect<ReservationRelayed>(again);
  EXPECT_TRUE(repeat.repeat);
  EXPECT_EQ(FederationAnswerStatus(repeat), 200);
  EXPECT_EQ(repeat.next_hop, "c");
  EXPECT_EQ(repeat.owner, "o");
  EXPECT_EQ(repeat.contract_id, first.contract_id);
  EXPECT_EQ(Keys("nhckmux"), before);
  EXPECT_EQ(*decider_.state().Decided("q2"),
            std::optional<std::string>(event_type::kReservationRelayed));
}

TEST_F(FederationDeciderTest, ARelayOfAnotherConsumersOrFlavoursReservationIdIsAConflict) {
  Expect<ReservationRelayed>(Relay("q1", "res-1", kT0, "a"));
  auto other_consumer = Expect<ReservationRefused>(Relay("q2", "res-1", kT0, "x"));
  EXPECT_EQ(other_consumer.reason, refusal::kConflict);
  EXPECT_EQ(other_consumer.status, 409);
  EXPECT_NE(other_consumer.detail.find("res-1"), std::string::npos);
  auto other_flavour = Expect<ReservationRefused>(Relay("q3", "res-1", kT0, "a", "c", "vm"));
  EXPECT_EQ(other_flavour.reason, refusal::kConflict);
  auto record = Record("res-1");
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->consumer, "a");
  EXPECT_EQ(record->flavor_id, "container-eu");
}

TEST_F(FederationDeciderTest, ARelayOfAReservationIdDecidedHereIsAConflict) {
  Expect<ReservationHeld>(Reserve("q1", "res-1", kT0));
  auto held_here = Expect<ReservationRefused>(Relay("q2", "res-1", kT0 + kSecond));
  EXPECT_EQ(held_here.reason, refusal::kConflict);
  EXPECT_EQ(held_here.status, 409);
  EXPECT_NE(held_here.detail.find("held"), std::string::npos) << held_here.detail;
  EXPECT_EQ(Record("res-1")->state, reservation_state::kHeld);
  EXPECT_EQ(Usage(), (FlavorUsage{1, 0}));
  EXPECT_TRUE(Keys("m").empty());
  flavors_["container-eu"] = 0;  // refused here (no capacity): still this enclave's id
  Expect<ReservationRefused>(Reserve("q3", "res-2", kT0));
  EXPECT_EQ(Expect<ReservationRefused>(Relay("q4", "res-2", kT0)).reason, refusal::kConflict);
  EXPECT_EQ(Record("res-2")->state, reservation_state::kRefused);
}

TEST_F(FederationDeciderTest, LocalCallsOnARelayedReservationIdAreConflicts) {
  auto relayed = Expect<ReservationRelayed>(Relay("q1", "res-1", kT0));
  for (const FederationRequest& call :
       {FederationRequest(Reserve("q2", "res-1", kT0)),
        FederationRequest(OnReservation<ReservationConfirmRequested>("q3", "res-1", kT0)),
        FederationRequest(OnReservation<ReservationReleaseRequested>("q4", "res-1", kT0)),
        FederationRequest(OnContract<ContractRenewalRequested>("q5", relayed.contract_id, kT0))}) {
    auto refused = Expect<ReservationRefused>(call);
    EXPECT_EQ(refused.reason, refusal::kConflict) << TypeOf(call);
    EXPECT_EQ(refused.status, 409) << TypeOf(call);
  }
  EXPECT_EQ(Record("res-1")->state, reservation_state::kRelayed);
  EXPECT_TRUE(Keys("hckux").empty());
}

TEST_F(FederationDeciderTest, FoldingTheOutcomesRebuildsTheSameStateByteForByte) {
  auto contract = HoldAndConfirm("res-1", kT0);
  Expect<ReservationRelayed>(Relay("q0", "res-9", kT0 + kSecond));
  Expect<ReservationHeld>(Reserve("q1", "res-2", kT0 + 2 * kSecond, "c"));
  Expect<ReservationRefused>(Reserve("q2", "res-3", kT0 + 3 * kSecond, "d"));
  Expect<ContractRenewed>(
      OnContract<ContractRenewalRequested>("n1", contract.contract_id, kT0 + 10 * kSecond));
  Expect<ReservationReleased>(
      OnReservation<ReservationReleaseRequested>("q3", "res-2", kT0 + 11 * kSecond, "c"));
  // Another store folds the outcomes (each twice: duplicates are no-ops).
  auto other = OpenInMemory();
  FederationDecider follower(other.get(), decider_.policy());
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto& outcome : outcomes_) {
      StoreBatch batch;
      ASSERT_TRUE(follower.Fold(outcome, batch).has_value());
      ASSERT_TRUE(other->Write(batch).has_value());
    }
  }
  EXPECT_EQ(*other->Digest(FederationDecider::kRoot), *store_->Digest(FederationDecider::kRoot));
  // Re-deciding on the follower gives the answers the leader gave.
  StoreBatch batch;
  auto again = follower.Decide(Reserve("q4", "res-1", kT0 + 12 * kSecond), 99, capacity_, batch);
  ASSERT_TRUE(again.has_value() && again->has_value());
  EXPECT_TRUE(std::holds_alternative<ReservationHeld>(**again));
  EXPECT_TRUE(BaseOf(**again).repeat);
}

}  // namespace
}  // namespace dcm
