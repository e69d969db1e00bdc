// ProjectionCatalog: every entry builds the projection it names, the entries own disjoint key
// prefixes and distinct names, and topics follow the deployment's prefix.
#include "projections/projection_catalog.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

namespace dcm {
namespace {

std::unique_ptr<Store> MemStore() {
  auto store = Store::Open("/catalog", StoreOptions{.bulk_load = false, .in_memory = true});
  EXPECT_TRUE(store);
  return std::move(*store);
}

TEST(ProjectionCatalogTest, EachFactoryBuildsTheProjectionItNames) {
  auto store = MemStore();
  Topics topics;
  Metrics metrics;
  const ProjectionSet set = BuildProjections(
      ProjectionCatalog(topics),
      ProjectionDeps{.store = store.get(), .topics = &topics, .metrics = &metrics});
  ASSERT_EQ(set.projections.size(), set.entries.size());
  for (size_t i = 0; i < set.entries.size(); ++i) {
    ASSERT_NE(set.projections[i], nullptr) << set.entries[i].name;
    EXPECT_EQ(set.projections[i]->Name(), set.entries[i].name);
  }
}

TEST(ProjectionCatalogTest, NamesAndPrefixesAreDistinctAndPrefixesDoNotNest) {
  const auto entries = ProjectionCatalog(Topics{});
  std::set<std::string> names;
  for (const auto& entry : entries) EXPECT_TRUE(names.insert(entry.name).second) << entry.name;
  for (const auto& a : entries) {
    ASSERT_FALSE(a.prefix.empty()) << a.name;
    for (const auto& b : entries) {
      if (&a == &b) continue;
      EXPECT_NE(b.prefix.rfind(a.prefix, 0), 0u) << a.prefix << " is a prefix of " << b.prefix;
    }
  }
}

TEST(ProjectionCatalogTest, TopicsFollowTheDeploymentPrefix) {
  Topics topics;
  topics.prefix = "t1.";
  for (const auto& entry : ProjectionCatalog(topics)) {
    ASSERT_FALSE(entry.topics.empty()) << entry.name;
    for (const auto& topic : entry.topics) EXPECT_EQ(topic.rfind("t1.", 0), 0u) << topic;
    EXPECT_GT(entry.fold_cost, 0) << entry.name;
  }
}

// What no write's answer waits for folds at a lower CPU priority (--background-fold-nice): the
// audit index and providers' and peers' health. Every projection a write completes keeps its
// priority: the registry (provider writes), instances and federation (their waiters).
TEST(ProjectionCatalogTest, OnlyTheAuditIndexAndTheHealthFoldsRunInTheBackground) {
  std::set<std::string> background;
  for (const auto& entry : ProjectionCatalog(Topics{})) {
    if (entry.background) background.insert(entry.name);
  }
  EXPECT_EQ(background, (std::set<std::string>{"audit", "health", "peer-health"}));
}

TEST(ProjectionCatalogTest, ServesTheSixProjectionsInServeOrder) {
  std::vector<std::string> names;
  std::vector<std::string> labels;
  for (const auto& entry : ProjectionCatalog(Topics{})) {
    names.push_back(entry.name);
    labels.push_back(entry.TopicLabel());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"registry", "health", "peer-health", "instances",
                                             "sp-status", "federation", "audit"}));
  EXPECT_EQ(labels, (std::vector<std::string>{"dcm.providers", "*", "*", "dcm.instances",
                                              "dcm.status", "dcm.federation", "*"}));
}

TEST(ProjectionCatalogTest, HealthFoldsTransitionsAndProbesAndOnlyProbeStateExpires) {
  const Topics topics;
  for (const auto& entry : ProjectionCatalog(topics)) {
    if (entry.name == "health" || entry.name == "peer-health") {
      EXPECT_EQ(entry.topics, (std::vector<std::string>{"dcm.health", "dcm.health-probes"}));
    }
    if (entry.name == "audit") {
      EXPECT_NE(std::find(entry.topics.begin(), entry.topics.end(), "dcm.health-probes"),
                entry.topics.end());
    }
    EXPECT_EQ(static_cast<bool>(entry.expires),
              entry.name == "health" || entry.name == "peer-health" || entry.name == "audit")
        << entry.name;
  }
}

TEST(ProjectionCatalogTest, TimeTravelFoldsStateNotTheAuditIndex) {
  for (const auto& entry : ProjectionCatalog(Topics{})) {
    // The audit index does not read dcm.federation yet, so time travel cannot fold it; no past
    // answer renders peers.
    EXPECT_EQ(entry.as_of,
              entry.name != "audit" && entry.name != "federation" && entry.name != "peer-health")
        << entry.name;
  }
}

TEST(ProjectionCatalogTest, FindReturnsTheTypedProjectionOrNull) {
  auto store = MemStore();
  Topics topics;
  const ProjectionSet set = BuildProjections(
      ProjectionCatalog(topics), ProjectionDeps{.store = store.get(), .topics = &topics});
  EXPECT_NE(set.Find<Projection>("registry"), nullptr);
  EXPECT_EQ(set.Find<Projection>("no-such-projection"), nullptr);
}

}  // namespace
}  // namespace dcm
