// POST/PUT /providers/{id}/heartbeat (SPEC §8) and `liveness` on the provider API, hermetic:
// the fixture's real registrar path, and a fake heartbeat sink that folds each beat the way the
// prober's forwarded path does (FoldHeartbeat on the projected record). No sockets, no sleeps.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "tests/http/handlers_fixture.h"

namespace dcm::http {
namespace {

class HeartbeatHandlersTest : public HandlersTest {
 protected:
  void SetUp() override {
    HandlersTest::SetUp();
    ApiContext api = Api();
    api.heartbeat = [this](const Provider& p, BeatResult result) -> Result<HealthRecord> {
      beats_.emplace_back(p.id, result);
      if (fail_) return MakeError(ErrorCode::kUnavailable, "prober not running");
      HeartbeatRecord h;
      h.provider_id = p.id;
      h.time_ms = h.seq = h.last_beat_time_ms = clock_.NowMillis();
      h.registration_seq = p.seq;
      h.result = result;
      h.timeout_ms = 12000;
      h.both = p.spec.liveness == Liveness::kBoth;
      HealthRecord record;
      FoldHeartbeat(record, h);
      return record;
    };
    router_ = MakeRouter(api, ops_, AccessContext{});
  }

  static std::string HeartbeatSpec(const std::string& name) {
    return R"({"name":")" + name + R"(","endpoint":"http://127.0.0.1:9/api",)" +
           R"("service_type":"vm","liveness":"heartbeat"})";
  }

  std::string RegisterHeartbeat(const std::string& name) {
    auto r = Call("POST", "/api/v1alpha1/providers?id=" + name, HeartbeatSpec(name));
    EXPECT_EQ(r.status, 201) << r.body;
    return Parse(r).Str("id");
  }

  std::vector<std::pair<std::string, BeatResult>> beats_;
  bool fail_ = false;
};

TEST_F(HeartbeatHandlersTest, AHeartbeatForAnUnknownIdIs404ProblemJson) {
  auto r = Call("POST", "/api/v1alpha1/providers/nobody/heartbeat");
  ASSERT_EQ(r.status, 404) << r.body;
  EXPECT_EQ(r.content_type, "application/problem+json");
  EXPECT_EQ(Parse(r).Int("status"), 404);
  EXPECT_NE(Parse(r).Str("detail").find("register it again"), std::string::npos);
  EXPECT_TRUE(beats_.empty());
}

TEST_F(HeartbeatHandlersTest, ABeatWithoutABodyAnswers200WithTheHealthDetailReady) {
  const std::string id = RegisterHeartbeat("edge-1");
  for (const char* method : {"POST", "PUT"}) {
    auto r = Call(method, "/api/v1alpha1/providers/" + id + "/heartbeat", "", {});
    ASSERT_EQ(r.status, 200) << method << " " << r.body;
    auto body = Parse(r);
    EXPECT_EQ(body.Str("status"), "Ready");
    EXPECT_EQ(body.Int("consecutive_successes"), 1);
    EXPECT_EQ(body.Str("last_transition_reason"), "heartbeat");
    EXPECT_TRUE(body.Has("last_heartbeat_time"));
    EXPECT_FALSE(body.Has("last_probe_time")) << "a heartbeat is not a probe";
  }
  ASSERT_EQ(beats_.size(), 2u);
  EXPECT_EQ(beats_[0], std::make_pair(id, BeatResult::kHealthy));
}

TEST_F(HeartbeatHandlersTest, AnUnhealthyStatusIsPassedOnInAnyCaseAndOtherMembersAreIgnored) {
  const std::string id = RegisterHeartbeat("edge-1");
  auto r = Call("POST", "/api/v1/providers/" + id + "/heartbeat",
                R"({"status":"UNhealthy","uptime_s":17})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Parse(r).Str("status"), "Unhealthy");
  auto healthy = Call("POST", "/api/v1/providers/" + id + "/heartbeat", R"({"status":"healthy"})");
  ASSERT_EQ(healthy.status, 200) << healthy.body;
  ASSERT_EQ(beats_.size(), 2u);
  EXPECT_EQ(beats_[0].second, BeatResult::kReportedUnhealthy);
  EXPECT_EQ(beats_[1].second, BeatResult::kHealthy);
}

TEST_F(HeartbeatHandlersTest, ABadBodyIs400NamingTheFieldAndIsNotABeat) {
  const std::string id = RegisterHeartbeat("edge-1");
  const std::string path = "/api/v1alpha1/providers/" + id + "/heartbeat";
  const std::pair<const char*, const char*> cases[] = {{R"({"status":"sleepy"})", "status"},
                                                       {R"({"status":1})", "status"},
                                                       {"[1]", "body"},
                                                       {"{not json", "body"},
                                                       {"\"healthy\"", "body"}};
  for (const auto& [body, field] : cases) {
    auto r = Call("POST", path, body);
    ASSERT_EQ(r.status, 400) << body << " " << r.body;
    EXPECT_EQ(r.content_type, "application/problem+json");
    EXPECT_EQ(Parse(r).ErrorFields(), std::vector<std::string>{field}) << body;
  }
  EXPECT_TRUE(beats_.empty());
}

TEST_F(HeartbeatHandlersTest, AProbedProviderRefusesHeartbeatsWith409) {
  const std::string id = Register("sp-probed");
  auto r = Call("POST", "/api/v1alpha1/providers/" + id + "/heartbeat");
  ASSERT_EQ(r.status, 409) << r.body;
  EXPECT_NE(Parse(r).Str("detail").find("liveness probe"), std::string::npos);
  EXPECT_TRUE(beats_.empty());
}

TEST_F(HeartbeatHandlersTest, ABothProviderTakesBeatsAndShowsEachSignalPendingUntilProbed) {
  auto reg = Call("POST", "/api/v1alpha1/providers?id=edge-b",
                  R"({"name":"edge-b","endpoint":"http://127.0.0.1:9/api",)"
                  R"("service_type":"vm","liveness":"Both"})");
  ASSERT_EQ(reg.status, 201) << reg.body;
  EXPECT_EQ(Parse(reg).Str("liveness"), "both");
  EXPECT_EQ(Parse(Call("GET", "/api/v1alpha1/providers/edge-b")).Str("liveness"), "both");
  auto r = Call("PUT", "/api/v1alpha1/providers/edge-b/heartbeat", "", {});
  ASSERT_EQ(r.status, 200) << r.body;
  auto body = Parse(r);
  EXPECT_EQ(body.Str("status"), "Pending") << "Ready needs the probes too";
  EXPECT_EQ(body.Str("probe_status"), "Pending");
  EXPECT_EQ(body.Str("heartbeat_status"), "Ready");
  ASSERT_EQ(beats_.size(), 1u);
  EXPECT_EQ(beats_[0], std::make_pair(std::string("edge-b"), BeatResult::kHealthy));
}

TEST_F(HeartbeatHandlersTest, AnInstanceWithoutAProberAnswers503) {
  const std::string id = RegisterHeartbeat("edge-1");
  router_ = MakeRouter(Api(), ops_, AccessContext{});  // no heartbeat sink
  auto r = Call("POST", "/api/v1alpha1/providers/" + id + "/heartbeat");
  EXPECT_EQ(r.status, 503) << r.body;
}

TEST_F(HeartbeatHandlersTest, ASinkErrorIsAProblemNotACrash) {
  const std::string id = RegisterHeartbeat("edge-1");
  fail_ = true;
  auto r = Call("POST", "/api/v1alpha1/providers/" + id + "/heartbeat");
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(r.content_type, "application/problem+json");
}

TEST_F(HeartbeatHandlersTest, LivenessIsStoredAndRenderedProbeByDefault) {
  const std::string probed = Register("sp-probed");
  const std::string edge = RegisterHeartbeat("edge-1");
  EXPECT_EQ(Parse(Call("GET", "/api/v1alpha1/providers/" + probed)).Str("liveness"), "probe");
  EXPECT_EQ(Parse(Call("GET", "/api/v1alpha1/providers/" + edge)).Str("liveness"), "heartbeat");
  auto list = Call("GET", "/api/v1alpha1/providers");
  ASSERT_EQ(list.status, 200);
  auto liveness = Parse(list).Column("providers", "liveness");
  std::sort(liveness.begin(), liveness.end());
  EXPECT_EQ(liveness, (std::vector<std::string>{"heartbeat", "probe"}));
}

TEST_F(HeartbeatHandlersTest, AnUnknownLivenessIs400WithAFieldError) {
  auto r = Call("POST", "/api/v1alpha1/providers",
                R"({"name":"x","endpoint":"http://x/","service_type":"vm","liveness":"push"})");
  ASSERT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(Parse(r).ErrorFields(), std::vector<std::string>{"liveness"});
}

TEST_F(HeartbeatHandlersTest, AnUpdateCanSwitchLiveness) {
  const std::string id = RegisterHeartbeat("edge-1");
  auto r = Call("PUT", "/api/v1alpha1/providers/" + id,
                R"({"name":"edge-1","endpoint":"http://127.0.0.1:9/api","service_type":"vm"})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Parse(r).Str("liveness"), "probe");
  EXPECT_EQ(Call("POST", "/api/v1alpha1/providers/" + id + "/heartbeat").status, 409);
}

}  // namespace
}  // namespace dcm::http
