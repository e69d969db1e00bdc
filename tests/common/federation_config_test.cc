// Federation settings (SPEC §10, src/common/federation_config.h): a bad peer list, price or
// exported type is a startup error naming the setting.
#include "src/common/federation_config.h"

#include <gtest/gtest.h>

#include "src/common/config.h"

namespace dcm {
namespace {

TEST(FederationConfigTest, ParsesPeersAndDropsTrailingSlashes) {
  auto peers =
      ParseFederationPeers(" b=http://127.0.0.1:8081/ , s=https://s.example:8443/dcm", "a");
  ASSERT_TRUE(peers) << peers.error().message;
  EXPECT_EQ(*peers, (std::vector<PeerConfig>{{"b", "http://127.0.0.1:8081"},
                                             {"s", "https://s.example:8443/dcm"}}));
  auto none = ParseFederationPeers("", "a");
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
}

TEST(FederationConfigTest, RefusesBadPeerListsNamingTheItem) {
  for (const char* bad : {"b", "B=http://x", "b=ftp://x", "b=http://x,b=http://y", "a=http://x",
                          "b=not a url", "b=http://x/?q=1", "-b=http://x"}) {
    auto peers = ParseFederationPeers(bad, "a");
    ASSERT_FALSE(peers) << bad;
    EXPECT_EQ(peers.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(peers.error().message.find("FEDERATION_PEERS"), std::string::npos)
        << peers.error().message;
  }
}

TEST(FederationConfigTest, ParsesPrices) {
  EXPECT_EQ(*ParseFederationPrice("0"), (FederationPrice{0, "EUR", "hour"}));
  EXPECT_EQ(*ParseFederationPrice("0.05 USD/month"), (FederationPrice{0.05, "USD", "month"}));
  for (const char* bad : {"", "-1", "x", "1 EUR", "1 EUR/", "1 E1/h", "1e13"}) {
    auto price = ParseFederationPrice(bad);
    ASSERT_FALSE(price) << bad;
    EXPECT_NE(price.error().message.find("FEDERATION_PRICE"), std::string::npos);
  }
}

TEST(FederationConfigTest, EnclaveIdDefaultsToADnsLabel) {
  EXPECT_EQ(ResolveEnclaveId("enclave-a"), "enclave-a");
  const std::string id = ResolveEnclaveId("");
  EXPECT_FALSE(id.empty());
  FederationConfig f;
  f.enclave_id = id;
  EXPECT_TRUE(ValidateFederationConfig(f, {"vm"}).has_value()) << id;
}

TEST(FederationConfigTest, ValidatesEnclaveIdExportedTypesAndTtl) {
  FederationConfig f;
  f.enclave_id = "Enclave_A";
  EXPECT_FALSE(ValidateFederationConfig(f, {"vm"}).has_value());
  f.enclave_id = "a";
  f.export_service_types = {"container"};
  auto bad_type = ValidateFederationConfig(f, {"vm"});
  ASSERT_FALSE(bad_type);
  EXPECT_NE(bad_type.error().message.find("FEDERATION_EXPORT_SERVICE_TYPES"), std::string::npos);
  EXPECT_TRUE(ValidateFederationConfig(f, {"vm", "container"}).has_value());
  f.flavor_ttl = std::chrono::milliseconds(10);
  EXPECT_FALSE(ValidateFederationConfig(f, {"vm", "container"}).has_value());
  Config config;
  config.dev = true;
  config.federation.export_service_types = {"teleporter"};
  EXPECT_FALSE(ValidateConfig(config).has_value()) << "ValidateConfig checks federation too";
}

}  // namespace
}  // namespace dcm
