// The pure parts of supernode forwarding (src/http/federation_forwarding.h, SPEC §10): a call's
// path headers, the path a forward carries on, and a peer's flavours as they are re-advertised.
#include "src/http/federation_forwarding.h"

#include <gtest/gtest.h>

namespace dcm::http {
namespace {

HttpRequest WithHeaders(std::map<std::string, std::string> headers) {
  HttpRequest r;
  r.headers = std::move(headers);
  return r;
}

TEST(FedHopTest, ACallWithoutPathHeadersStartsWithTheDefaultHopLimit) {
  auto hop = ParseFedHop(WithHeaders({}));
  ASSERT_TRUE(hop);
  EXPECT_EQ(*hop, (FedHop{"", kDefaultFedHopLimit, {}}));
}

TEST(FedHopTest, ThePathHeadersAreReadWithTheCallerLast) {
  auto hop = ParseFedHop(
      WithHeaders({{"fed-request-id", "r-1"}, {"fed-hop-limit", " 2 "}, {"fed-via", "a, s"}}));
  ASSERT_TRUE(hop) << hop.error().message;
  EXPECT_EQ(*hop, (FedHop{"r-1", 2, {"a", "s"}}));
  EXPECT_TRUE(Visited(*hop, "a"));
  EXPECT_FALSE(Visited(*hop, "b"));
}

TEST(FedHopTest, BadPathHeadersAre400sNamingTheHeader) {
  for (auto [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"fed-hop-limit", "0"},
           {"fed-hop-limit", "17"},
           {"fed-hop-limit", "x"},
           {"fed-request-id", ""},
           {"fed-request-id", "a b"},
           {"fed-request-id", std::string(129, 'r')},
           {"fed-via", "a,,b"},
           {"fed-via", "A"},
           {"fed-via", "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q"}}) {
    auto hop = ParseFedHop(WithHeaders({{name, value}}));
    ASSERT_FALSE(hop) << name << "=" << value;
    EXPECT_EQ(hop.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(hop.error().fields.size(), 1u) << name;
  }
}

TEST(FedHopTest, AForwardKeepsTheRequestIdLowersTheLimitAndAddsItselfToTheVisitedSet) {
  const FedHop out = ForwardedHop(FedHop{"r-1", 3, {"a"}}, "s");
  EXPECT_EQ(out, (FedHop{"r-1", 2, {"a", "s"}}));
  EXPECT_EQ(FedHopHeaders(out),
            (std::vector<std::pair<std::string, std::string>>{
                {"Fed-Request-Id", "r-1"}, {"Fed-Hop-Limit", "2"}, {"Fed-Via", "a,s"}}));
}

TEST(ReadvertiseFlavorsTest, EachFlavourComesWithOneHopMoreAndThisEnclaveFirstOnItsPath) {
  auto out = ReadvertiseFlavors(
      "s", R"({"owner":"b","flavors":[{"flavor_id":"f1","owner":"b","price":{"amount":1},)"
           R"("hops":1,"path":["b"],"instances_available":2},)"
           R"({"flavor_id":"f2","owner":"c","hops":2,"path":["t","c"]},)"
           R"({"flavor_id":"f3","owner":"d"}]})");
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(*out, (std::vector<std::string>{
                      R"({"flavor_id":"f1","owner":"b","price":{"amount":1},)"
                      R"("instances_available":2,"hops":2,"path":["s","b"]})",
                      R"({"flavor_id":"f2","owner":"c","hops":3,"path":["s","t","c"]})",
                      R"({"flavor_id":"f3","owner":"d","hops":2,"path":["s","d"]})"}));
}

TEST(ReadvertiseFlavorsTest, FlavoursWithoutIdOrOwnerAreDroppedAndAnotherBodyIsRefused) {
  auto out = ReadvertiseFlavors("s", R"({"flavors":[{"owner":"b"},{"flavor_id":"f"},7]})");
  ASSERT_TRUE(out);
  EXPECT_TRUE(out->empty());
  EXPECT_FALSE(ReadvertiseFlavors("s", R"([1,2])"));
  EXPECT_FALSE(ReadvertiseFlavors("s", "not json"));
}

}  // namespace
}  // namespace dcm::http
