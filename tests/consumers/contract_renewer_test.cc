// The recovery a lost contract asks for (consumers/contract_renewer.h, SPEC §10): one request per
// contract however often or by whom it is found lost, named after why.
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

}  // namespace
}  // namespace dcm
