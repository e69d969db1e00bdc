// The recovery a lost contract asks for (consumers/contract_renewer.h, SPEC §10): one request per
// contract however often or by whom it is found lost, named after why. And the repatriation
// (FEDERATION_REPATRIATE): a peer instance comes home only when a local Ready provider fits.
#include "consumers/contract_renewer.h"

#include <gtest/gtest.h>

namespace dcm {
namespace {

ServiceTypeInstance OnPeer() {
  ServiceTypeInstance s;
  s.id = "res-1";
  s.root = "cii-1";
  s.provider_name = "peer:enclave-b";
  s.provider_id = "peer:enclave-b";
  s.placement = EncodeRemotePlacement({"enclave-b", "c-1"});
  return s;
}

PeerAnswer Answer(int status, const char* reason) {
  PeerAnswer a;
  a.http_status = status;
  a.reason = reason;
  return a;
}

TEST(ContractLossRequestTest, AsksToRecoverTheResourceNamingWhyTheContractIsGone) {
  const RemotePlacement remote{"enclave-b", "c-1"};
  const InstanceEvent e = ContractLossRequest(OnPeer(), remote, Answer(410, "expired"), false, 7);
  EXPECT_EQ(e.type, event_type::kOperationRequested);
  EXPECT_EQ(e.operation, OperationName(Operation::kRecoverLostResource));
  EXPECT_EQ(e.root, "cii-1");
  EXPECT_EQ(e.resource_id, "res-1");
  EXPECT_EQ(e.provider_name, "peer:enclave-b");
  EXPECT_EQ(e.reason, "contract_expired");
  EXPECT_EQ(e.new_resource_id, "");
  EXPECT_EQ(e.time_ms, 7);
  EXPECT_EQ(ContractLossRequest(OnPeer(), remote, Answer(410, "revoked"), false, 7).reason,
            "contract_revoked");
  EXPECT_EQ(ContractLossRequest(OnPeer(), remote, Answer(404, "not_found"), false, 7).reason,
            "contract_missing");
}

TEST(ContractLossRequestTest, EveryAskerDerivesTheSameIdsAndRehydrationGetsANewResource) {
  const RemotePlacement remote{"enclave-b", "c-1"};
  const InstanceEvent once = ContractLossRequest(OnPeer(), remote, Answer(410, "expired"), true, 1);
  const InstanceEvent again =
      ContractLossRequest(OnPeer(), remote, Answer(410, "expired"), true, 99);
  EXPECT_EQ(once.request_id, again.request_id);
  EXPECT_FALSE(once.new_resource_id.empty());
  EXPECT_EQ(once.new_resource_id, again.new_resource_id);
  EXPECT_NE(ContractLossRequest(OnPeer(), {"enclave-b", "c-2"}, Answer(410, "expired"), true, 1)
                .request_id,
            once.request_id);
}

Resource PeerResource() {
  Resource r;
  r.id = "res-1";
  r.root = "cii-1";
  r.provider_name = "peer:enclave-b";
  r.provider_id = "peer:enclave-b";
  r.service_type = "vm";
  r.intent = R"({"service_type":"vm","cpu":2})";
  r.placement = EncodeRemotePlacement({"enclave-b", "c-1"});
  return r;
}

PlacementCandidate Local(const std::string& name, const std::string& type, HealthStatus health) {
  PlacementCandidate c;
  c.provider.id = name;
  c.provider.spec.name = name;
  c.provider.spec.service_type = type;
  c.health = health;
  return c;
}

TEST(RepatriationRequestTest, AReadyLocalProviderOfTheTypeBringsTheInstanceHomeWithPreferLocal) {
  const RemotePlacement remote{"enclave-b", "c-1"};
  auto request = RepatriationRequest(
      PeerResource(), remote,
      {Local("db-1", "database", HealthStatus::kReady), Local("vm-1", "vm", HealthStatus::kReady)},
      /*bucket=*/4, /*now_ms=*/120'000);
  ASSERT_TRUE(request.has_value());
  EXPECT_EQ(request->type, event_type::kOperationRequested);
  EXPECT_EQ(request->operation, OperationName(Operation::kRehydrateResource));
  EXPECT_EQ(request->root, "cii-1");
  EXPECT_EQ(request->resource_id, "res-1");
  EXPECT_TRUE(request->prefer_local);
  EXPECT_FALSE(request->new_resource_id.empty());
  EXPECT_EQ(request->time_ms, 120'000);
}

TEST(RepatriationRequestTest, NoLocalProviderOrNoneReadyAsksNothing) {
  const RemotePlacement remote{"enclave-b", "c-1"};
  EXPECT_FALSE(RepatriationRequest(PeerResource(), remote, {}, 4, 1).has_value());
  EXPECT_FALSE(RepatriationRequest(PeerResource(), remote,
                                   {Local("db-1", "database", HealthStatus::kReady)}, 4, 1)
                   .has_value());
  EXPECT_FALSE(RepatriationRequest(PeerResource(), remote,
                                   {Local("vm-1", "vm", HealthStatus::kUnavailable),
                                    Local("vm-2", "vm", HealthStatus::kPending)},
                                   4, 1)
                   .has_value());
}

TEST(RepatriationRequestTest, TheIntentsHintsStillApply) {
  Resource r = PeerResource();
  r.intent = R"({"service_type":"vm","provider_hints":{"provider_name":"vm-2"}})";
  EXPECT_FALSE(RepatriationRequest(r, {"enclave-b", "c-1"},
                                   {Local("vm-1", "vm", HealthStatus::kReady)}, 4, 1)
                   .has_value());
}

TEST(RepatriationRequestTest, OneBucketAsksOnceAndALaterBucketAsksAgain) {
  const RemotePlacement remote{"enclave-b", "c-1"};
  const std::vector<PlacementCandidate> local = {Local("vm-1", "vm", HealthStatus::kReady)};
  auto once = RepatriationRequest(PeerResource(), remote, local, 4, 120'000);
  auto again = RepatriationRequest(PeerResource(), remote, local, 4, 121'000);
  auto later = RepatriationRequest(PeerResource(), remote, local, 5, 150'000);
  auto other = RepatriationRequest(PeerResource(), {"enclave-b", "c-2"}, local, 4, 120'000);
  ASSERT_TRUE(once && again && later && other);
  EXPECT_EQ(once->request_id, again->request_id);
  EXPECT_EQ(once->new_resource_id, again->new_resource_id);
  EXPECT_NE(later->request_id, once->request_id);
  EXPECT_NE(later->new_resource_id, once->new_resource_id);
  EXPECT_NE(other->request_id, once->request_id);
}

}  // namespace
}  // namespace dcm
