// HeartbeatClient (src/sim/heartbeat_client.h) against a scripted transport: no socket, no
// clock, no sleep. Each test feeds answers and checks the requests sent and the delays
// returned.
#include "src/sim/heartbeat_client.h"

#include <gtest/gtest.h>

#include <deque>
#include <functional>
#include <string>
#include <vector>

namespace dcm::sim {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

constexpr char kBody[] = R"({"name":"sp-1","liveness":"heartbeat"})";

http::HttpResponse Answer(int status, std::string body = "{}") {
  http::HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

Result<http::HttpResponse> Refused() {
  return MakeError(ErrorCode::kUnavailable, "connect to 127.0.0.1:1: Connection refused");
}

// Answers from a script, in order (an empty script answers 200 {"id":"id-1"}); records every
// request.
struct Script {
  std::deque<std::function<Result<http::HttpResponse>(const HeartbeatRequest&)>> answers;
  std::vector<HeartbeatRequest> sent;

  void Then(int status, std::string body = "{}") {
    answers.push_back([=](const HeartbeatRequest&) { return Answer(status, body); });
  }
  void ThenRefused() {
    answers.push_back([](const HeartbeatRequest&) { return Refused(); });
  }
  HeartbeatTransport Transport() {
    return [this](const HeartbeatRequest& r) -> Result<http::HttpResponse> {
      sent.push_back(r);
      if (answers.empty()) return Answer(200, R"({"id":"id-1"})");
      auto next = std::move(answers.front());
      answers.pop_front();
      return next(r);
    };
  }
};

HeartbeatOptions Options() {
  HeartbeatOptions o;
  o.interval = 5s;
  o.backoff_base = 1s;
  o.backoff_cap = 60s;
  o.jitter = 0.2;
  return o;
}

// Registered on URL 0 with id "id-1" (one POST answered 201).
HeartbeatClient Registered(Script& s, size_t urls, std::function<double()> uniform) {
  HeartbeatClient c(kBody, urls, Options(), std::move(uniform));
  s.Then(201, R"({"id":"id-1"})");
  const auto step = c.Step(s.Transport(), BeatHealth::kHealthy);
  EXPECT_TRUE(step.registered);
  EXPECT_EQ(step.next, 0ms);
  s.sent.clear();
  return c;
}

TEST(HeartbeatClientTest, RegistersWithTheBodyThenBeatsAtOnceThenEveryInterval) {
  Script s;
  HeartbeatClient c(kBody, 1, Options(), [] { return 0.5; });
  s.Then(201, R"({"id":"id-1"})");
  s.Then(200);
  s.Then(200);
  EXPECT_EQ(c.Step(s.Transport(), BeatHealth::kHealthy).next, 0ms);
  EXPECT_EQ(c.Step(s.Transport(), BeatHealth::kHealthy).next, 5s);
  EXPECT_EQ(c.Step(s.Transport(), BeatHealth::kUnhealthy).next, 5s);
  ASSERT_EQ(s.sent.size(), 3u);
  EXPECT_EQ(s.sent[0].method, "POST");
  EXPECT_EQ(s.sent[0].target, "/api/v1alpha1/providers");
  EXPECT_EQ(s.sent[0].body, kBody);
  EXPECT_EQ(s.sent[1].method, "PUT");
  EXPECT_EQ(s.sent[1].target, "/api/v1alpha1/providers/id-1/heartbeat");
  EXPECT_EQ(s.sent[1].body, R"({"status":"healthy"})");
  EXPECT_EQ(s.sent[2].body, R"({"status":"unhealthy"})");
  EXPECT_EQ(c.beats(), 2u);
  EXPECT_EQ(c.id(), "id-1");
}

TEST(HeartbeatClientTest, ABeatAnswered404RegistersAgainUnderTheSameIdAndBeatsThereFirst) {
  Script s;
  HeartbeatClient c = Registered(s, 1, [] { return 0.5; });
  s.Then(200);  // a beat
  s.Then(404, R"({"title":"Not Found"})");
  s.Then(201, R"({"id":"id-1"})");
  s.Then(200);
  EXPECT_EQ(c.Step(s.Transport(), BeatHealth::kHealthy).next, 5s);
  const auto after_404 = c.Step(s.Transport(), BeatHealth::kHealthy);
  EXPECT_EQ(after_404.next, 0ms);  // at once
  EXPECT_FALSE(c.registered());
  const auto again = c.Step(s.Transport(), BeatHealth::kHealthy);
  EXPECT_TRUE(again.registered);
  EXPECT_EQ(again.next, 0ms);
  EXPECT_EQ(c.Step(s.Transport(), BeatHealth::kHealthy).next, 5s);
  ASSERT_EQ(s.sent.size(), 4u);
  EXPECT_EQ(s.sent[2].method, "POST");
  EXPECT_EQ(s.sent[2].target, "/api/v1alpha1/providers?id=id-1");
  EXPECT_EQ(s.sent[2].body, kBody);
  EXPECT_EQ(s.sent[3].method, "PUT");
  EXPECT_EQ(s.sent[3].target, "/api/v1alpha1/providers/id-1/heartbeat");
}

TEST(HeartbeatClientTest, A404ToTheFirstBeatAfterRegisteringBacksOffInsteadOfLooping) {
  Script s;
  HeartbeatClient c = Registered(s, 1, [] { return 0.5; });
  s.Then(404);
  EXPECT_EQ(c.Step(s.Transport(), BeatHealth::kHealthy).next, 1s);
  EXPECT_FALSE(c.registered());
}

TEST(HeartbeatClientTest, ABeatAnswered409RegistersAgainAfterABackoff) {
  Script s;
  HeartbeatClient c = Registered(s, 1, [] { return 0.5; });
  s.Then(200);
  s.Then(409);
  c.Step(s.Transport(), BeatHealth::kHealthy);
  EXPECT_EQ(c.Step(s.Transport(), BeatHealth::kHealthy).next, 1s);
  EXPECT_FALSE(c.registered());
  c.Step(s.Transport(), BeatHealth::kHealthy);
  EXPECT_EQ(s.sent.back().method, "POST");
}

TEST(HeartbeatClientTest, FailsOverToTheNextUrlAtOnceOn5xxRefusedAndTimeoutAndBeatsThere) {
  Script s;
  HeartbeatClient c = Registered(s, 4, [] { return 0.5; });
  s.Then(503);
  s.ThenRefused();
  s.answers.push_back([](const HeartbeatRequest&) -> Result<http::HttpResponse> {
    return MakeError(ErrorCode::kTimeout, "PUT http://127.0.0.1:3/x: timed out");
  });
  s.Then(200);
  s.Then(200);
  EXPECT_EQ(c.Step(s.Transport(), BeatHealth::kHealthy).next, 0ms);
  EXPECT_EQ(c.Step(s.Transport(), BeatHealth::kHealthy).next, 0ms);
  EXPECT_EQ(c.Step(s.Transport(), BeatHealth::kHealthy).next, 0ms);
  EXPECT_EQ(c.Step(s.Transport(), BeatHealth::kHealthy).next, 5s);
  EXPECT_EQ(c.Step(s.Transport(), BeatHealth::kHealthy).next, 5s);
  ASSERT_EQ(s.sent.size(), 5u);
  std::vector<size_t> urls;
  for (const auto& r : s.sent) {
    urls.push_back(r.url);
    EXPECT_EQ(r.method, "PUT");
  }
  EXPECT_EQ(urls, (std::vector<size_t>{0, 1, 2, 3, 3}));  // stays on the one that answered
}

TEST(HeartbeatClientTest, ARegistrationFailsOverInUrlOrderAndWrapsAround) {
  Script s;
  HeartbeatClient c(kBody, 3, Options(), [] { return 0.5; });
  for (int i = 0; i < 4; ++i) s.Then(502);
  s.Then(201, R"({"id":"id-9"})");
  s.Then(200);
  for (int i = 0; i < 6; ++i) c.Step(s.Transport(), BeatHealth::kHealthy);
  std::vector<size_t> urls;
  for (const auto& r : s.sent) urls.push_back(r.url);
  EXPECT_EQ(urls, (std::vector<size_t>{0, 1, 2, 0, 1, 1}));
  EXPECT_EQ(s.sent[4].method, "POST");
  EXPECT_EQ(s.sent[5].method, "PUT");  // the first beat goes where it registered
  EXPECT_EQ(s.sent[5].target, "/api/v1alpha1/providers/id-9/heartbeat");
}

// Every URL answers 503: one round over the URLs, then 1, 2, 4, … s, capped at 60 s.
std::vector<milliseconds> RoundDelays(size_t urls, int rounds, double uniform) {
  Script s;
  HeartbeatClient c(kBody, urls, Options(), [=] { return uniform; });
  std::vector<milliseconds> delays;
  for (size_t i = 0; i < urls * static_cast<size_t>(rounds); ++i) {
    s.Then(503);
    const auto next = c.Step(s.Transport(), BeatHealth::kHealthy).next;
    EXPECT_TRUE(next.has_value());
    if ((i + 1) % urls == 0) {
      delays.push_back(*next);
    } else {
      EXPECT_EQ(*next, 0ms) << "within a round the next URL is tried at once";
    }
  }
  return delays;
}

TEST(HeartbeatClientTest, WhenEveryUrlFailsTheRoundsAreSpaced1248UpTo60Seconds) {
  const std::vector<milliseconds> nominal{1s, 2s, 4s, 8s, 16s, 32s, 60s, 60s, 60s};
  EXPECT_EQ(RoundDelays(2, 9, 0.5), nominal);  // no jitter at the middle
  EXPECT_EQ(RoundDelays(1, 9, 0.5), nominal);
}

TEST(HeartbeatClientTest, TheJitterStaysWithin20PercentAndNeverAbove60Seconds) {
  const std::vector<milliseconds> nominal{1s, 2s, 4s, 8s, 16s, 32s, 60s, 60s, 60s};
  for (double u : {0.0, 0.1, 0.37, 0.5, 0.83, 0.999999}) {
    const auto delays = RoundDelays(3, 9, u);
    ASSERT_EQ(delays.size(), nominal.size());
    for (size_t i = 0; i < delays.size(); ++i) {
      EXPECT_GE(delays[i].count(), nominal[i].count() * 8 / 10) << "u=" << u << " i=" << i;
      EXPECT_LE(delays[i].count(), std::min<int64_t>(nominal[i].count() * 12 / 10, 60000))
          << "u=" << u << " i=" << i;
    }
  }
  EXPECT_EQ(RoundDelays(1, 1, 0.0).front(), 800ms);
  EXPECT_EQ(RoundDelays(1, 5, 0.999999).back().count(), 19199);  // 16 s · 1.2, just under
}

TEST(HeartbeatClientTest, ABeatAcceptedResetsTheBackoff) {
  Script s;
  HeartbeatClient c = Registered(s, 1, [] { return 0.5; });
  for (int i = 0; i < 4; ++i) s.Then(503);
  s.Then(200);
  s.Then(503);
  std::vector<milliseconds> delays;
  for (int i = 0; i < 6; ++i) delays.push_back(*c.Step(s.Transport(), BeatHealth::kHealthy).next);
  EXPECT_EQ(delays, (std::vector<milliseconds>{1s, 2s, 4s, 8s, 5s, 1s}));
  EXPECT_EQ(c.backoff().failures(), 1);
}

TEST(HeartbeatClientTest, ASilentProviderSendsNoBeatButStillRegisters) {
  Script s;
  HeartbeatClient c(kBody, 1, Options(), [] { return 0.5; });
  EXPECT_TRUE(c.Step(s.Transport(), BeatHealth::kSilent).registered);
  EXPECT_EQ(c.Step(s.Transport(), BeatHealth::kSilent).next, 5s);
  EXPECT_EQ(s.sent.size(), 1u);  // the registration only
}

TEST(HeartbeatClientTest, ARegistrationAnswered4xxIsRejectedAndNotRetried) {
  Script s;
  HeartbeatClient c(kBody, 2, Options(), [] { return 0.5; });
  s.Then(400, R"({"title":"Bad Request","detail":"liveness"})");
  const auto step = c.Step(s.Transport(), BeatHealth::kHealthy);
  EXPECT_FALSE(step.next.has_value());
  EXPECT_NE(c.last_error().find("400"), std::string::npos);
}

TEST(HeartbeatClientTest, DeregisterDeletesTheIdFailingOverAndIsANoOpWhenUnregistered) {
  Script s;
  HeartbeatClient fresh(kBody, 2, Options(), [] { return 0.5; });
  EXPECT_TRUE(fresh.Deregister(s.Transport()).has_value());
  EXPECT_TRUE(s.sent.empty());

  HeartbeatClient c = Registered(s, 2, [] { return 0.5; });
  s.Then(503);
  s.Then(204);
  EXPECT_TRUE(c.Deregister(s.Transport()).has_value());
  ASSERT_EQ(s.sent.size(), 2u);
  EXPECT_EQ(s.sent[0].method, "DELETE");
  EXPECT_EQ(s.sent[0].target, "/api/v1alpha1/providers/id-1");
  EXPECT_EQ(s.sent[0].url, 0u);
  EXPECT_EQ(s.sent[1].url, 1u);
  EXPECT_FALSE(c.registered());
}

TEST(HeartbeatClientTest, DeregisterFailsWhenEveryUrlFails) {
  Script s;
  HeartbeatClient c = Registered(s, 2, [] { return 0.5; });
  s.Then(503);
  s.ThenRefused();
  EXPECT_FALSE(c.Deregister(s.Transport()).has_value());
  EXPECT_TRUE(c.registered());
}

}  // namespace
}  // namespace dcm::sim
