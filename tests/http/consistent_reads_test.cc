// The HTTP edge of consistent reads (SPEC §7): a real ReadBarrier on a FakeClock, handlers as
// lambdas. No sockets, no threads, no sleeps: the barrier's due reads are run by hand.
#include "src/http/consistent_reads.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "src/common/config.h"
#include "src/http/problem.h"
#include "src/http/router.h"

namespace dcm::http {
namespace {

using std::chrono::milliseconds;

class ConsistentReadsTest : public ::testing::Test {
 protected:
  ConsistentReadsTest()
      : barrier_(topics_.EventTopics(),
                 {{"registry", {topics_.Providers()}, topics_.Providers()},
                  {"health", {topics_.Health()}, ""},
                  {"instances", {topics_.Instances()}, topics_.Instances()},
                  {"sp-status", {topics_.Status()}, ""},
                  {"audit", topics_.EventTopics(), ""}},
                 &clock_, milliseconds(5000)),
        reads_(&barrier_) {}

  HttpRequest Get(const std::string& min_position = "") {
    HttpRequest r;
    r.method = "GET";
    r.path = "/api/v1alpha1/events";
    if (!min_position.empty()) r.query.emplace("min_position", min_position);
    return r;
  }

  // Serves a read of `served`; the handler answers 200 "ran" and counts its runs.
  void Read(ReadServedBy served, HttpRequest request) {
    reads_.Read(
        served, std::move(request), [this](HttpResponse r) { answers_.push_back(std::move(r)); },
        [this](const HttpRequest&, Respond respond) {
          ++runs_;
          respond(Json(200, "ran"));
        });
  }

  static const std::string* Header(const HttpResponse& r, const std::string& name) {
    for (const auto& [k, v] : r.headers) {
      if (k == name) return &v;
    }
    return nullptr;
  }

  Topics topics_;
  FakeClock clock_;
  ReadBarrier barrier_;
  ConsistentReads reads_;
  std::vector<HttpResponse> answers_;
  int runs_ = 0;
};

TEST_F(ConsistentReadsTest, ACaughtUpReadRunsAtOnceAndAnswersItsPosition) {
  barrier_.Acknowledge(topics_.Providers(), 0, 4);
  barrier_.Applied("audit", topics_.Providers(), 0, 4);
  Read(ReadServedBy::kAudit, Get());
  ASSERT_EQ(answers_.size(), 1u);
  EXPECT_EQ(runs_, 1);
  EXPECT_EQ(answers_[0].status, 200);
  const std::string* token = Header(answers_[0], kPositionHeader);
  ASSERT_NE(token, nullptr);
  EXPECT_EQ(*token, EncodePosition(barrier_.Acknowledged()));
}

TEST_F(ConsistentReadsTest, AnEventsReadAfterAWriteRunsOnlyOnceTheAuditHoldsTheWrite) {
  barrier_.Acknowledge(topics_.Providers(), 0, 4);
  Read(ReadServedBy::kAudit, Get());
  EXPECT_EQ(runs_, 0);
  EXPECT_TRUE(answers_.empty());
  barrier_.Applied("audit", topics_.Providers(), 0, 4);
  EXPECT_EQ(barrier_.RunDue(), 1u);
  ASSERT_EQ(answers_.size(), 1u);
  EXPECT_EQ(runs_, 1);
  EXPECT_NE(Header(answers_[0], kPositionHeader), nullptr);
}

TEST_F(ConsistentReadsTest, AMinPositionNotReachedInTheReadWaitIs503WithRetryAfter) {
  ReadPosition min;
  min.Raise(4, 2, 9);  // dcm.instances partition 2
  Read(ReadServedBy::kInstances, Get(EncodePosition(min)));
  clock_.Advance(milliseconds(5000));
  EXPECT_EQ(barrier_.RunDue(), 1u);
  ASSERT_EQ(answers_.size(), 1u);
  EXPECT_EQ(runs_, 0);
  EXPECT_EQ(answers_[0].status, 503);
  ASSERT_NE(Header(answers_[0], "Retry-After"), nullptr);
  EXPECT_EQ(Header(answers_[0], kPositionHeader), nullptr);  // it reflects nothing
}

TEST_F(ConsistentReadsTest, AMinPositionReachedAnswersWithAPositionCoveringIt) {
  ReadPosition min;
  min.Raise(1, 0, 7);
  barrier_.Applied("registry", topics_.Providers(), 0, 7);
  Read(ReadServedBy::kProviders, Get(EncodePosition(min)));
  ASSERT_EQ(answers_.size(), 1u);
  EXPECT_EQ(answers_[0].status, 200);
  EXPECT_EQ(*Header(answers_[0], kPositionHeader), EncodePosition(min));
}

TEST_F(ConsistentReadsTest, AMalformedMinPositionIs400AndRunsNothing) {
  for (const std::string bad : {"!", "AQ==", "Ag", "AR8AAQ"}) {
    answers_.clear();
    Read(ReadServedBy::kProviders, Get(bad));
    ASSERT_EQ(answers_.size(), 1u) << bad;
    EXPECT_EQ(answers_[0].status, 400) << bad;
    EXPECT_NE(answers_[0].body.find("min_position"), std::string::npos) << answers_[0].body;
  }
  EXPECT_EQ(runs_, 0);
}

TEST_F(ConsistentReadsTest, OnlyASuccessfulWriteAnswersThePositionItWasAcknowledgedAt) {
  Respond respond = reads_.Write([this](HttpResponse r) { answers_.push_back(std::move(r)); });
  barrier_.Acknowledge(topics_.ProviderRequests(), 0, 3);
  barrier_.Acknowledge(topics_.Providers(), 0, 3);
  respond(Json(201, "{}"));
  ASSERT_EQ(answers_.size(), 1u);
  const std::string* token = Header(answers_[0], kPositionHeader);
  ASSERT_NE(token, nullptr);
  auto decoded = DecodePosition(*token, topics_.EventTopics().size());
  ASSERT_TRUE(decoded);
  EXPECT_EQ(decoded->entries().size(), 2u);
  reads_.Write([this](HttpResponse r) { answers_.push_back(std::move(r)); })(Json(409, "{}"));
  ASSERT_EQ(answers_.size(), 2u);
  EXPECT_EQ(Header(answers_[1], kPositionHeader), nullptr);
}

TEST_F(ConsistentReadsTest, TheRouterSendsApiCallsThroughTheEdgeAndOperationsEndpointsNot) {
  const ProviderRules rules({"vm"});
  ApiContext api;
  api.provider_rules = &rules;
  api.consistency = &reads_;
  Handler router = MakeRouter(api, OpsContext{}, AccessContext{});
  HttpRequest types;
  types.method = "GET";
  types.path = "/api/v1alpha1/service-types";
  router(types, [this](HttpResponse r) { answers_.push_back(std::move(r)); });
  HttpRequest healthz;
  healthz.method = "GET";
  healthz.path = "/healthz";
  router(healthz, [this](HttpResponse r) { answers_.push_back(std::move(r)); });
  ASSERT_EQ(answers_.size(), 2u);
  EXPECT_EQ(answers_[0].status, 200);
  EXPECT_NE(Header(answers_[0], kPositionHeader), nullptr);
  EXPECT_EQ(answers_[1].status, 200);
  EXPECT_EQ(Header(answers_[1], kPositionHeader), nullptr);
}

TEST(ReadServedByRouteTest, EveryApiReadIsServedByTheProjectionsItRenders) {
  for (const RouteInfo& route : RouteTable()) {
    if (!route.api || route.method != "GET") continue;
    const ReadServedBy served = ReadServedByRoute(route.pattern, false);
    if (route.pattern == "/events" || route.pattern.ends_with("/history")) {
      EXPECT_EQ(served, ReadServedBy::kAudit) << route.pattern;
    } else if (route.pattern == "/service-types" || route.pattern == "/peers") {
      // Nothing the API writes: service types are configured, peers probed.
      EXPECT_EQ(served, ReadServedBy::kNothing) << route.pattern;
    } else if (route.pattern.starts_with("/providers")) {
      EXPECT_EQ(served, ReadServedBy::kProviders) << route.pattern;
    } else {
      EXPECT_EQ(served, ReadServedBy::kInstances) << route.pattern;
    }
    EXPECT_EQ(ReadServedByRoute(route.pattern, true), ReadServedBy::kAudit) << route.pattern;
  }
}

}  // namespace
}  // namespace dcm::http
