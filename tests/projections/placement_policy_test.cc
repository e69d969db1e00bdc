// The built-in placement policy (SPEC §3.3): type, hints and region filters, Ready-only,
// least-loaded with ties by name, the failure kinds, the Policy Manager's selection check, and
// determinism. Pure functions: no store, no clock.
#include "projections/placement_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

namespace dcm {
namespace {

PlacementCandidate Candidate(const std::string& name, const std::string& type,
                             HealthStatus health = HealthStatus::kReady, int64_t live = 0,
                             const std::string& region = "eu-west-1") {
  PlacementCandidate c;
  c.provider.id = "id-" + name;
  c.provider.spec.name = name;
  c.provider.spec.service_type = type;
  c.provider.spec.endpoint = "http://" + name + ":8080/api/" + type;
  c.provider.spec.metadata =
      region.empty() ? "{}" : R"({"region_code":")" + region + R"(","zone":")" + region + "a\"}";
  c.health = health;
  c.live_instances = live;
  return c;
}

// The chosen provider's name, or the failure's name and detail.
std::string Chosen(const PlacementChoice& choice) {
  switch (choice.failure) {
    case PlacementFailure::kNone:
      return choice.chosen ? choice.chosen->provider.spec.name : "<none chosen>";
    case PlacementFailure::kNoProvider:
      return "no-provider: " + choice.detail;
    case PlacementFailure::kNotReady:
      return "not-ready: " + choice.detail;
    case PlacementFailure::kBadSpec:
      return "bad-spec: " + choice.detail;
  }
  return "?";
}

TEST(PlacementPolicyTest, FiltersByServiceType) {
  std::vector<PlacementCandidate> cs = {Candidate("c1", "container"), Candidate("v1", "vm"),
                                        Candidate("d1", "database")};
  EXPECT_EQ(Chosen(ChooseProvider(R"({"service_type":"vm"})", cs)), "v1");
  EXPECT_EQ(Chosen(ChooseProvider(R"({"service_type":"container","cpu":2})", cs)), "c1");
  auto none = ChooseProvider(R"({"service_type":"cluster"})", cs);
  EXPECT_EQ(none.failure, PlacementFailure::kNoProvider);
  EXPECT_EQ(none.chosen, nullptr);
  EXPECT_NE(none.detail.find("service_type 'cluster'"), std::string::npos) << none.detail;
}

TEST(PlacementPolicyTest, ChoosesOnlyReadyProviders) {
  for (auto health :
       {HealthStatus::kPending, HealthStatus::kUnhealthy, HealthStatus::kUnavailable}) {
    // The not-Ready one is the least loaded and first by name: it still loses.
    std::vector<PlacementCandidate> cs = {Candidate("a", "vm", health, 0),
                                          Candidate("b", "vm", HealthStatus::kReady, 100)};
    EXPECT_EQ(Chosen(ChooseProvider(R"({"service_type":"vm"})", cs)), "b")
        << HealthStatusName(health);
  }
}

TEST(PlacementPolicyTest, NoReadyProviderIsNotReadyAndNamesTheStates) {
  std::vector<PlacementCandidate> cs = {Candidate("a", "vm", HealthStatus::kPending),
                                        Candidate("b", "vm", HealthStatus::kUnhealthy),
                                        Candidate("c", "vm", HealthStatus::kUnavailable),
                                        Candidate("r", "container", HealthStatus::kReady)};
  auto choice = ChooseProvider(R"({"service_type":"vm"})", cs);
  EXPECT_EQ(choice.failure, PlacementFailure::kNotReady);
  EXPECT_EQ(choice.chosen, nullptr);
  EXPECT_NE(choice.detail.find("3 provider(s)"), std::string::npos) << choice.detail;
  EXPECT_NE(choice.detail.find("a (Pending), b (Unhealthy), c (Unavailable)"), std::string::npos)
      << choice.detail;
}

TEST(PlacementPolicyTest, NotReadyDetailIsBoundedForManyProviders) {
  std::vector<PlacementCandidate> cs;
  for (int i = 0; i < 50; ++i) {
    cs.push_back(Candidate("p" + std::to_string(100 + i), "vm", HealthStatus::kUnavailable));
  }
  auto choice = ChooseProvider(R"({"service_type":"vm"})", cs);
  EXPECT_EQ(choice.failure, PlacementFailure::kNotReady);
  EXPECT_NE(choice.detail.find("and 45 more"), std::string::npos) << choice.detail;
  EXPECT_LT(choice.detail.size(), 400u);
}

TEST(PlacementPolicyTest, LeastLoadedReadyProviderWins) {
  std::vector<PlacementCandidate> cs = {Candidate("a", "vm", HealthStatus::kReady, 7),
                                        Candidate("b", "vm", HealthStatus::kReady, 2),
                                        Candidate("c", "vm", HealthStatus::kReady, 5),
                                        Candidate("d", "vm", HealthStatus::kUnavailable, 0)};
  auto choice = ChooseProvider(R"({"service_type":"vm"})", cs);
  ASSERT_EQ(choice.failure, PlacementFailure::kNone);
  ASSERT_NE(choice.chosen, nullptr);
  EXPECT_EQ(choice.chosen, &cs[1]);  // points into the candidates
  EXPECT_TRUE(choice.detail.empty());
}

TEST(PlacementPolicyTest, TiesGoToTheFirstNameThenTheFirstId) {
  std::vector<PlacementCandidate> cs = {Candidate("zeta", "vm", HealthStatus::kReady, 3),
                                        Candidate("alpha", "vm", HealthStatus::kReady, 3),
                                        Candidate("mid", "vm", HealthStatus::kReady, 3),
                                        Candidate("Alpha", "vm", HealthStatus::kReady, 4)};
  EXPECT_EQ(Chosen(ChooseProvider(R"({"service_type":"vm"})", cs)), "alpha");
  // Byte order: upper case sorts first.
  cs[3].live_instances = 3;
  EXPECT_EQ(Chosen(ChooseProvider(R"({"service_type":"vm"})", cs)), "Alpha");
  // Same name (a registry never has it): the id breaks the tie.
  std::vector<PlacementCandidate> twins = {Candidate("x", "vm"), Candidate("x", "vm")};
  twins[0].provider.id = "id-b";
  twins[1].provider.id = "id-a";
  EXPECT_EQ(ChooseProvider(R"({"service_type":"vm"})", twins).chosen, &twins[1]);
}

TEST(PlacementPolicyTest, ProviderNameHintRestrictsTheChoice) {
  std::vector<PlacementCandidate> cs = {Candidate("a", "vm", HealthStatus::kReady, 0),
                                        Candidate("b", "vm", HealthStatus::kReady, 9),
                                        Candidate("c", "vm", HealthStatus::kUnavailable, 0)};
  EXPECT_EQ(
      Chosen(ChooseProvider(R"({"service_type":"vm","provider_hints":{"provider_name":"b"}})", cs)),
      "b");
  // camelCase spellings are accepted, as elsewhere in requests.
  EXPECT_EQ(
      Chosen(ChooseProvider(R"({"service_type":"vm","providerHints":{"providerName":"b"}})", cs)),
      "b");
  auto not_ready =
      ChooseProvider(R"({"service_type":"vm","provider_hints":{"provider_name":"c"}})", cs);
  EXPECT_EQ(not_ready.failure, PlacementFailure::kNotReady) << not_ready.detail;
  auto unknown =
      ChooseProvider(R"({"service_type":"vm","provider_hints":{"provider_name":"zz"}})", cs);
  EXPECT_EQ(unknown.failure, PlacementFailure::kNoProvider);
  EXPECT_NE(unknown.detail.find("provider_name 'zz'"), std::string::npos) << unknown.detail;
}

TEST(PlacementPolicyTest, ProviderNamesHintRestrictsTheChoice) {
  std::vector<PlacementCandidate> cs = {Candidate("a", "vm", HealthStatus::kReady, 0),
                                        Candidate("b", "vm", HealthStatus::kReady, 9),
                                        Candidate("c", "vm", HealthStatus::kReady, 4),
                                        Candidate("d", "container", HealthStatus::kReady, 0)};
  EXPECT_EQ(Chosen(ChooseProvider(
                R"({"service_type":"vm","provider_hints":{"provider_names":["b","c","d"]}})", cs)),
            "c");  // d is not a vm
  auto none =
      ChooseProvider(R"({"service_type":"vm","provider_hints":{"provider_names":["d"]}})", cs);
  EXPECT_EQ(none.failure, PlacementFailure::kNoProvider);
  auto empty =
      ChooseProvider(R"({"service_type":"vm","provider_hints":{"provider_names":[]}})", cs);
  EXPECT_EQ(empty.failure, PlacementFailure::kNoProvider);
  // Both hints: each restricts.
  EXPECT_EQ(Chosen(ChooseProvider(R"({"service_type":"vm","provider_hints":{"provider_name":"b",)"
                                  R"("provider_names":["a","b"]}})",
                                  cs)),
            "b");
}

TEST(PlacementPolicyTest, RegionHintMatchesTheProvidersRegionCode) {
  std::vector<PlacementCandidate> cs = {
      Candidate("eu", "vm", HealthStatus::kReady, 5, "eu-west-1"),
      Candidate("us", "vm", HealthStatus::kReady, 0, "us-east-1"),
      Candidate("none", "vm", HealthStatus::kReady, 0, ""),
      Candidate("eu-down", "vm", HealthStatus::kUnavailable, 0, "eu-west-1")};
  EXPECT_EQ(Chosen(ChooseProvider(R"({"service_type":"vm"})", cs)), "none");  // no region asked
  EXPECT_EQ(Chosen(ChooseProvider(
                R"({"service_type":"vm","provider_hints":{"region":"eu-west-1"}})", cs)),
            "eu");
  EXPECT_EQ(Chosen(ChooseProvider(
                R"({"service_type":"vm","provider_hints":{"region":"us-east-1"}})", cs)),
            "us");
  auto nowhere =
      ChooseProvider(R"({"service_type":"vm","provider_hints":{"region":"ap-south-1"}})", cs);
  EXPECT_EQ(nowhere.failure, PlacementFailure::kNoProvider);
  EXPECT_NE(nowhere.detail.find("region 'ap-south-1'"), std::string::npos) << nowhere.detail;
  // Region and name together.
  auto mismatch = ChooseProvider(
      R"({"service_type":"vm","provider_hints":{"region":"eu-west-1","provider_name":"us"}})", cs);
  EXPECT_EQ(mismatch.failure, PlacementFailure::kNoProvider);
}

TEST(PlacementPolicyTest, MetadataLabelsRegionMatchesTheProvidersRegionCode) {
  std::vector<PlacementCandidate> cs = {
      Candidate("eu", "vm", HealthStatus::kReady, 5, "eu-west-1"),
      Candidate("us", "vm", HealthStatus::kReady, 0, "us-east-1")};
  EXPECT_EQ(
      Chosen(ChooseProvider(
          R"({"service_type":"vm","metadata":{"labels":{"region":"eu-west-1","x":"y"}}})", cs)),
      "eu");
  // provider_hints.region takes precedence over the label.
  EXPECT_EQ(Chosen(ChooseProvider(R"({"service_type":"vm","provider_hints":{"region":"us-east-1"},)"
                                  R"("metadata":{"labels":{"region":"eu-west-1"}}})",
                                  cs)),
            "us");
  // Labels without a region, or metadata that is not an object: no region filter.
  EXPECT_EQ(
      Chosen(ChooseProvider(R"({"service_type":"vm","metadata":{"labels":{"tier":"gold"}}})", cs)),
      "us");
  EXPECT_EQ(Chosen(ChooseProvider(R"({"service_type":"vm","metadata":"free text"})", cs)), "us");
  auto none =
      ChooseProvider(R"({"service_type":"vm","metadata":{"labels":{"region":"ap-south-1"}}})", cs);
  EXPECT_EQ(none.failure, PlacementFailure::kNoProvider);
  EXPECT_NE(none.detail.find("spec.metadata.labels.region"), std::string::npos) << none.detail;
}

TEST(PlacementPolicyTest, ProviderMetadataWithoutARegionCodeNeverMatchesARegion) {
  std::vector<PlacementCandidate> cs = {Candidate("a", "vm")};
  cs[0].provider.spec.metadata = R"({"region_code":42})";
  EXPECT_EQ(ChooseProvider(R"({"service_type":"vm","provider_hints":{"region":"42"}})", cs).failure,
            PlacementFailure::kNoProvider);
  cs[0].provider.spec.metadata = "not json";
  EXPECT_EQ(ChooseProvider(R"({"service_type":"vm","provider_hints":{"region":"eu-west-1"}})", cs)
                .failure,
            PlacementFailure::kNoProvider);
  EXPECT_EQ(Chosen(ChooseProvider(R"({"service_type":"vm"})", cs)), "a");
}

TEST(PlacementPolicyTest, BadSpecsAreBadSpec) {
  std::vector<PlacementCandidate> cs = {Candidate("a", "vm")};
  for (const char* spec : {
           "",
           "not json",
           "[1,2]",
           R"("vm")",
           "{}",
           R"({"service_type":""})",
           R"({"service_type":7})",
           R"({"service_type":"vm","provider_hints":"a"})",
           R"({"service_type":"vm","provider_hints":{"provider_name":1}})",
           R"({"service_type":"vm","provider_hints":{"provider_names":"a"}})",
           R"({"service_type":"vm","provider_hints":{"provider_names":["a",1]}})",
           R"({"service_type":"vm","provider_hints":{"region":["eu"]}})",
           R"({"service_type":"vm","metadata":{"labels":{"region":1}}})",
       }) {
    auto choice = ChooseProvider(spec, cs);
    EXPECT_EQ(choice.failure, PlacementFailure::kBadSpec) << spec;
    EXPECT_EQ(choice.chosen, nullptr) << spec;
    EXPECT_FALSE(choice.detail.empty()) << spec;
    EXPECT_EQ(CheckSelectedProvider(spec, "a", cs).failure, PlacementFailure::kBadSpec) << spec;
  }
  EXPECT_NE(ChooseProvider("{}", cs).detail.find("service_type"), std::string::npos);
}

TEST(PlacementPolicyTest, NoCandidatesAtAllIsNoProvider) {
  EXPECT_EQ(ChooseProvider(R"({"service_type":"vm"})", {}).failure, PlacementFailure::kNoProvider);
}

TEST(PlacementPolicyTest, CheckSelectedProviderAcceptsOnlyARegisteredReadyProviderOfTheType) {
  std::vector<PlacementCandidate> cs = {Candidate("vm-ok", "vm", HealthStatus::kReady, 50),
                                        Candidate("vm-down", "vm", HealthStatus::kUnavailable),
                                        Candidate("vm-new", "vm", HealthStatus::kPending),
                                        Candidate("vm-sick", "vm", HealthStatus::kUnhealthy),
                                        Candidate("ct", "container", HealthStatus::kReady)};
  const std::string spec = R"({"service_type":"vm"})";
  auto ok = CheckSelectedProvider(spec, "vm-ok", cs);
  EXPECT_EQ(ok.failure, PlacementFailure::kNone);
  EXPECT_EQ(ok.chosen, &cs[0]);  // not the least loaded: the Policy Manager chose

  auto unknown = CheckSelectedProvider(spec, "ghost", cs);
  EXPECT_EQ(unknown.failure, PlacementFailure::kNoProvider);
  EXPECT_NE(unknown.detail.find("'ghost'"), std::string::npos) << unknown.detail;
  EXPECT_NE(unknown.detail.find("not registered"), std::string::npos) << unknown.detail;

  auto wrong_type = CheckSelectedProvider(spec, "ct", cs);
  EXPECT_EQ(wrong_type.failure, PlacementFailure::kNoProvider);
  EXPECT_NE(wrong_type.detail.find("container"), std::string::npos) << wrong_type.detail;

  for (const char* name : {"vm-down", "vm-new", "vm-sick"}) {
    auto not_ready = CheckSelectedProvider(spec, name, cs);
    EXPECT_EQ(not_ready.failure, PlacementFailure::kNotReady) << name;
    EXPECT_EQ(not_ready.chosen, nullptr);
    EXPECT_NE(not_ready.detail.find("not Ready"), std::string::npos) << not_ready.detail;
  }
}

TEST(PlacementPolicyTest, TheChoiceDoesNotDependOnTheInputOrder) {
  std::vector<PlacementCandidate> cs;
  const HealthStatus states[] = {HealthStatus::kReady, HealthStatus::kPending,
                                 HealthStatus::kUnhealthy, HealthStatus::kUnavailable};
  for (int i = 0; i < 40; ++i) {
    cs.push_back(Candidate("p" + std::to_string(i % 20) + (i >= 20 ? "b" : "a"),
                           i % 3 == 0 ? "container" : "vm", states[i % 4], i % 5,
                           i % 2 == 0 ? "eu-west-1" : "us-east-1"));
  }
  const std::vector<std::string> specs = {
      R"({"service_type":"vm"})",
      R"({"service_type":"container"})",
      R"({"service_type":"vm","provider_hints":{"region":"us-east-1"}})",
      R"({"service_type":"vm","metadata":{"labels":{"region":"eu-west-1"}}})",
      R"({"service_type":"vm","provider_hints":{"provider_names":["p4a","p5b","p7a","p8b"]}})",
  };
  std::vector<std::string> expected;
  for (const auto& spec : specs) expected.push_back(Chosen(ChooseProvider(spec, cs)));
  EXPECT_EQ(expected[0], "p0b");  // i = 20: the only Ready vm with 0 live instances
  EXPECT_EQ(expected[4], "p8b");  // i = 28: p4a is Ready but busier, p5b and p7a are not Ready
  std::mt19937 rng(42);
  for (int round = 0; round < 25; ++round) {
    std::shuffle(cs.begin(), cs.end(), rng);
    for (size_t s = 0; s < specs.size(); ++s) {
      EXPECT_EQ(Chosen(ChooseProvider(specs[s], cs)), expected[s]) << specs[s];
    }
  }
}

TEST(PlacementPolicyTest, SpecServiceTypeReadsTheField) {
  EXPECT_EQ(SpecServiceType(R"({"service_type":"vm","cpu":2})"), "vm");
  EXPECT_EQ(SpecServiceType(R"({"serviceType":"container"})"), "container");
  EXPECT_EQ(SpecServiceType(R"({"service_type":3})"), "");
  EXPECT_EQ(SpecServiceType("{}"), "");
  EXPECT_EQ(SpecServiceType("[]"), "");
  EXPECT_EQ(SpecServiceType("nope"), "");
}

}  // namespace
}  // namespace dcm
