// The pure rules of a placement on a peer (src/common/federation_ports.h, SPEC §10): which
// offers are worth a hold and in what order, the ids a resumed saga repeats, and the placement
// record a resource on a peer carries.
#include "src/common/federation_ports.h"

#include <gtest/gtest.h>

#include "src/common/uuid.h"

namespace dcm {
namespace {

PeerOffer Offer(const char* peer, const char* flavor, double price, int hops = 1,
                std::optional<int64_t> available = 1, const char* region = "") {
  PeerOffer o;
  o.peer = peer;
  o.flavor_id = flavor;
  o.owner = peer;
  o.region = region;
  o.price = price;
  o.hops = hops;
  o.instances_available = available;
  return o;
}

std::vector<std::string> Flavors(const std::vector<PeerOffer>& offers) {
  std::vector<std::string> out;
  for (const auto& o : offers) out.push_back(o.flavor_id);
  return out;
}

TEST(RankOffersTest, CheapestFirstThenFewestHopsThenByName) {
  const auto ranked = RankOffers({Offer("c", "f-c", 2), Offer("b", "f-b2", 1, 2),
                                  Offer("b", "f-b1", 1, 1), Offer("a", "f-a", 1, 1)},
                                 "");
  EXPECT_EQ(Flavors(ranked), (std::vector<std::string>{"f-a", "f-b1", "f-b2", "f-c"}));
}

TEST(RankOffersTest, AFlavourOfferedDirectlyAndThroughAForwardingPeerIsKeptOnTheShortestRoute) {
  PeerOffer direct = Offer("b", "f-b", 1, 1);
  PeerOffer via_s = Offer("s", "f-b", 1, 2);
  via_s.owner = "b";
  const auto ranked = RankOffers({via_s, direct}, "");
  ASSERT_EQ(ranked.size(), 1u);
  EXPECT_EQ(ranked[0].peer, "b");
  EXPECT_EQ(ranked[0].hops, 1);
}

TEST(RankOffersTest, DropsFullOffersKeepsUnlimitedAndFiltersTheRegion) {
  const auto ranked =
      RankOffers({Offer("a", "full", 0, 1, 0), Offer("a", "unlimited", 0, 1, {}),
                  Offer("b", "eu", 1, 1, 3, "eu-1"), Offer("c", "us", 0, 1, 3, "us-1")},
                 "eu-1");
  EXPECT_EQ(Flavors(ranked), (std::vector<std::string>{"eu"}));
  EXPECT_EQ(
      Flavors(RankOffers({Offer("a", "full", 0, 1, 0), Offer("a", "unlimited", 0, 1, {})}, "")),
      (std::vector<std::string>{"unlimited"}));
}

TEST(RankOffersTest, TheSameOffersInAnyOrderRankTheSame) {
  std::vector<PeerOffer> offers = {Offer("b", "x", 1), Offer("a", "y", 1), Offer("a", "x", 1)};
  const auto once = RankOffers(offers, "");
  std::reverse(offers.begin(), offers.end());
  EXPECT_EQ(RankOffers(offers, ""), once);
}

TEST(ReservationIdForTest, IsAUuidV5OfTheOperationResourceAndPeer) {
  const std::string request = "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c61";
  const std::string id = ReservationIdFor(request, "r1", "enclave-b");
  EXPECT_EQ(id, UuidV5(request, "reservation/r1/enclave-b"));
  EXPECT_EQ(id[14], '5');
  EXPECT_EQ(ReservationIdFor(request, "r1", "enclave-b"), id);  // a resumed saga repeats it
  EXPECT_NE(ReservationIdFor(request, "r1", "enclave-c"), id);  // each peer its own
  EXPECT_NE(ReservationIdFor(request, "r2", "enclave-b"), id);
  EXPECT_TRUE(IsUuid(ReservationIdFor("not-a-uuid", "r1", "enclave-b")));
}

TEST(PeerProviderNameTest, NamesThePeerAndReadsItBack) {
  EXPECT_EQ(PeerProviderName("enclave-b"), "peer:enclave-b");
  EXPECT_EQ(PeerOfProviderName("peer:enclave-b"), "enclave-b");
  EXPECT_EQ(PeerOfProviderName("sim-vm-0"), "");
}

TEST(RemotePlacementTest, RoundTripsAndRejectsAnythingElse) {
  const RemotePlacement p{"enclave-b", "c-1"};
  const std::string json = EncodeRemotePlacement(p);
  EXPECT_EQ(json, R"({"kind":"remote","peer":"enclave-b","contract_id":"c-1"})");
  EXPECT_EQ(DecodeRemotePlacement(json), p);
  for (const char* bad :
       {"", "[]", "not json", R"({"kind":"local","peer":"b","contract_id":"c"})",
        R"({"kind":"remote","contract_id":"c"})", R"({"kind":"remote","peer":"b"})"}) {
    EXPECT_EQ(DecodeRemotePlacement(bad), std::nullopt) << bad;
  }
}

TEST(FederationAllowedTest, OnlyNeverKeepsARequestHome) {
  EXPECT_TRUE(FederationAllowed(R"({"service_type":"container"})"));
  EXPECT_TRUE(FederationAllowed(R"({"service_type":"container","federation":"allow"})"));
  EXPECT_FALSE(FederationAllowed(R"({"service_type":"container","federation":"never"})"));
}

}  // namespace
}  // namespace dcm
