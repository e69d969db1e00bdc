// ContractPlacer (consumers/contract_placer.h): a live contract without a resource gets one
// create_resource (asked again only after resubmit_after), a placed one gets nothing, an ended
// contract's resource gets one delete_resource, and a fresh placer's Adopt finds the resource of
// a contract that ended before a crash. Hermetic: in-memory store, no Kafka.
#include "consumers/contract_placer.h"

#include <gtest/gtest.h>

#include "projections/federation_decider.h"

namespace dcm {
namespace {

constexpr int64_t kT0 = 1'800'000'000'000;

class ContractPlacerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::move(*Store::Open("/placer", StoreOptions{.in_memory = true}));
    instances_ = std::make_unique<InstanceView>(store_.get());
    decider_ = std::make_unique<FederationDecider>(
        store_.get(), FederationPolicy{.enclave_id = "b", .contract_ttl_ms = 60000});
    ReservationReceived hold;
    hold.event_id = "q1";
    hold.time_ms = kT0;
    hold.reservation_id = "res-1";
    hold.flavor_id = "f";
    hold.consumer = "a";
    hold.spec = R"({"service_type":"container","image":"nginx"})";
    hold.ttl_ms = 10000;
    Decide(hold);
    ReservationConfirmRequested confirm;
    confirm.event_id = "q2";
    confirm.time_ms = kT0 + 1000;
    confirm.reservation_id = "res-1";
    confirm.consumer = "a";
    Decide(confirm);
  }

  void Decide(const FederationRequest& request) {
    StoreBatch batch;
    ASSERT_TRUE(decider_->Decide(request, seq_++, capacity_, batch).has_value());
    ASSERT_TRUE(store_->Write(batch).has_value());
  }

  std::unique_ptr<ContractPlacer> Placer() {
    ContractPlacerOptions options;
    options.source = "dcm/federation/test";
    options.resubmit_after = std::chrono::seconds(10);
    options.submit = [this](const CloudEvent& e) { asked_.push_back(*DecodeInstanceEvent(e)); };
    return std::make_unique<ContractPlacer>(options,
                                            FederationState(store_.get(), FederationDecider::kRoot),
                                            instances_.get(), &metrics_);
  }

  // The contract's resource, as the saga's resource_placed fact leaves it.
  void PlaceResource() {
    InstanceEvent e;
    e.type = event_type::kResourcePlaced;
    e.event_id = "placed-1";
    e.source = "test";
    e.root = ContractRoot(contract_);
    e.subject = e.root;
    e.time_ms = kT0 + 2000;
    e.request_id = "op-1";
    e.resource_id = instance_;
    e.provider_name = "ctr";
    e.provider_id = "p1";
    e.service_type = "container";
    e.spec = "{}";
    e.intent = "{}";
    e.policy = "builtin";
    InstanceProjection projection(store_.get(), nullptr, &metrics_);
    StoreBatch batch;
    ASSERT_TRUE(
        projection.Apply(EncodeInstanceEvent(e), EventPosition{"dcm.instances", 0, 0, kT0}, batch));
    ASSERT_TRUE(store_->Write(batch).has_value());
  }

  void Terminate() {
    ContractTerminationRequested end;
    end.event_id = "q3";
    end.time_ms = kT0 + 3000;
    end.contract_id = contract_;
    end.consumer = "a";
    Decide(end);
  }

  std::unique_ptr<Store> store_;
  std::unique_ptr<InstanceView> instances_;
  Metrics metrics_;
  std::unique_ptr<FederationDecider> decider_;
  FlavorCapacity capacity_ = [](const std::string&) { return std::optional<int64_t>(2); };
  int64_t seq_ = 0;
  std::vector<InstanceEvent> asked_;
  const std::string contract_ = ContractIdFor("b", "res-1");
  const std::string instance_ = RemoteInstanceIdFor("b", "res-1");
};

TEST_F(ContractPlacerTest, ALiveContractWithoutAResourceGetsOneCreateUntilItIsPlaced) {
  auto placer = Placer();
  ASSERT_TRUE(placer->Reconcile(kT0 + 2000).has_value());
  ASSERT_EQ(asked_.size(), 1u);
  const InstanceEvent& create = asked_[0];
  EXPECT_EQ(create.type, event_type::kOperationRequested);
  EXPECT_EQ(create.operation, "create_resource");
  EXPECT_EQ(create.root, "contract:" + contract_);
  EXPECT_EQ(create.subject, create.root);
  EXPECT_EQ(create.resource_id, instance_);
  EXPECT_EQ(create.service_type, "container");
  EXPECT_EQ(create.spec, R"({"service_type":"container","image":"nginx"})");
  ASSERT_TRUE(placer->Reconcile(kT0 + 11999).has_value());
  EXPECT_EQ(asked_.size(), 1u) << "asked recently: not again";
  ASSERT_TRUE(placer->Reconcile(kT0 + 12000).has_value());
  EXPECT_EQ(asked_.size(), 2u) << "no resource after resubmit_after: asked again";
  PlaceResource();
  ASSERT_TRUE(placer->Reconcile(kT0 + 30000).has_value());
  EXPECT_EQ(asked_.size(), 2u) << "placed: nothing to do";
}

TEST_F(ContractPlacerTest, AnEndedContractsResourceGetsOneDelete) {
  PlaceResource();
  auto placer = Placer();
  Terminate();
  placer->Ended(contract_, instance_);
  ASSERT_TRUE(placer->Reconcile(kT0 + 4000).has_value());
  ASSERT_EQ(asked_.size(), 1u);
  EXPECT_EQ(asked_[0].operation, "delete_resource");
  EXPECT_EQ(asked_[0].root, "contract:" + contract_);
  EXPECT_EQ(asked_[0].resource_id, instance_);
  ASSERT_TRUE(placer->Reconcile(kT0 + 5000).has_value());
  EXPECT_EQ(asked_.size(), 1u);
}

TEST_F(ContractPlacerTest, AdoptFindsTheResourceOfAContractThatEndedBeforeACrash) {
  PlaceResource();
  Terminate();  // the previous owner decided it and crashed before the delete
  auto placer = Placer();
  ASSERT_TRUE(placer->Reconcile(kT0 + 4000).has_value());
  EXPECT_TRUE(asked_.empty()) << "nothing known before Adopt";
  ASSERT_TRUE(placer->Adopt().has_value());
  ASSERT_TRUE(placer->Reconcile(kT0 + 5000).has_value());
  ASSERT_EQ(asked_.size(), 1u);
  EXPECT_EQ(asked_[0].operation, "delete_resource");
  EXPECT_EQ(asked_[0].resource_id, instance_);
}

}  // namespace
}  // namespace dcm
