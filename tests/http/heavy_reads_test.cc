// HeavyReads (src/http/heavy_reads.h) and the router's use of it (SPEC §7): heavy reads run on
// the bounded pool with a deadline, answered 503 + Retry-After when the queue is full or the
// deadline passed, while /healthz and plain GETs are answered on the caller's thread at once.
// Hermetic: a FakeClock, and a gate task that holds the pool's one thread (no sleeps).
#include "src/http/heavy_reads.h"

#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <string>
#include <thread>

#include "src/common/clock.h"
#include "src/common/metrics.h"
#include "tests/http/handlers_fixture.h"

namespace dcm::http {
namespace {

using namespace std::chrono_literals;

// Holds a pool thread until Open(): Submit(gate.Task(), ...) then Started() waits until it runs.
// The task shares the promises' states and never touches the Gate, which a test may destroy
// before the pool's thread has left the task (the pool outlives it); a Gate destroyed unopened
// lets the task go on.
class Gate {
 public:
  HeavyReads::Task Task() {
    return [started = started_, open = open_](Deadline) {
      started->set_value();
      open.wait();
    };
  }
  void Started() { started_future_.wait(); }
  void Open() { open_promise_->set_value(); }

 private:
  std::shared_ptr<std::promise<void>> started_ = std::make_shared<std::promise<void>>();
  std::future<void> started_future_ = started_->get_future();
  std::shared_ptr<std::promise<void>> open_promise_ = std::make_shared<std::promise<void>>();
  std::shared_future<void> open_ = open_promise_->get_future().share();
};

// A Respond whose answer a test can wait for (it may come from a pool thread).
struct Answer {
  std::shared_ptr<std::promise<HttpResponse>> promise =
      std::make_shared<std::promise<HttpResponse>>();
  std::future<HttpResponse> future = promise->get_future();
  Respond respond() {
    return [p = promise](HttpResponse r) { p->set_value(std::move(r)); };
  }
  bool Ready() const { return future.wait_for(0s) == std::future_status::ready; }
  HttpResponse Get() { return future.get(); }
};

const std::string* Header(const HttpResponse& r, const std::string& name) {
  for (const auto& [k, v] : r.headers) {
    if (k == name) return &v;
  }
  return nullptr;
}

class HeavyReadsTest : public ::testing::Test {
 protected:
  std::unique_ptr<HeavyReads> Pool(size_t queue, std::chrono::milliseconds timeout = 10s) {
    HeavyReadOptions options;
    options.threads = 1;
    options.queue = queue;
    options.timeout = timeout;
    options.clock = &clock_;
    options.metrics = &metrics_;
    auto pool = HeavyReads::Start(options);
    EXPECT_TRUE(pool.has_value());
    return pool ? std::move(*pool) : nullptr;
  }
  uint64_t Outcomes(const std::string& result) {
    return metrics_.GetCounter("dcm_http_heavy_reads_total", "", "result=\"" + result + "\"")
        .Value();
  }

  FakeClock clock_;
  Metrics metrics_;
};

TEST_F(HeavyReadsTest, ATaskRunsOnAPoolThreadWithItsDeadline) {
  auto pool = Pool(4, 7s);
  Answer answer;
  const TimePoint submitted = clock_.Now();
  std::thread::id ran_on;
  pool->Submit(
      [&, respond = answer.respond()](Deadline deadline) {
        ran_on = std::this_thread::get_id();
        EXPECT_EQ(deadline.at, submitted + 7s);
        EXPECT_FALSE(deadline.Passed());
        respond(HttpResponse{200, "text/plain", "done", {}});
      },
      answer.respond());
  EXPECT_EQ(answer.Get().body, "done");
  EXPECT_NE(ran_on, std::this_thread::get_id());
  EXPECT_EQ(Outcomes("run"), 1u);
}

TEST_F(HeavyReadsTest, AFullQueueAnswers503WithRetryAfterAtOnce) {
  auto pool = Pool(1);
  Gate gate;
  Answer held, queued, refused;
  pool->Submit(gate.Task(), held.respond());
  gate.Started();
  pool->Submit([](Deadline) {}, queued.respond());  // waits: the queue holds one
  pool->Submit([](Deadline) { ADD_FAILURE() << "must not run"; }, refused.respond());
  ASSERT_TRUE(refused.Ready()) << "answered on the submitting thread, without waiting";
  const HttpResponse r = refused.Get();
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.content_type, "application/problem+json");
  ASSERT_NE(Header(r, "Retry-After"), nullptr);
  EXPECT_EQ(*Header(r, "Retry-After"), "1");
  EXPECT_NE(r.body.find("busy with heavy reads"), std::string::npos) << r.body;
  EXPECT_EQ(pool->Queued(), 1u);
  EXPECT_EQ(Outcomes("queue_full"), 1u);
  gate.Open();
}

TEST_F(HeavyReadsTest, AReadThatWaitedPastItsDeadlineIsAnswered503WithoutRunning) {
  auto pool = Pool(4, 5s);
  Gate gate;
  Answer held, late;
  pool->Submit(gate.Task(), held.respond());
  gate.Started();
  bool ran = false;
  pool->Submit([&](Deadline) { ran = true; }, late.respond());
  clock_.Advance(6s);
  gate.Open();
  const HttpResponse r = late.Get();
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(Header(r, "Retry-After"), nullptr);
  EXPECT_FALSE(ran);
  EXPECT_EQ(Outcomes("expired"), 1u);
}

TEST_F(HeavyReadsTest, BadOptionsAreRefused) {
  HeavyReadOptions options;
  options.threads = 0;
  EXPECT_FALSE(HeavyReads::Start(options).has_value());
  options.threads = 1;
  options.queue = 0;
  EXPECT_FALSE(HeavyReads::Start(options).has_value());
  options.queue = 1;
  options.timeout = 0ms;
  EXPECT_FALSE(HeavyReads::Start(options).has_value());
}

// The router sends heavy reads to the pool and answers everything else on the calling thread.
class RouterHeavyReadsTest : public HandlersTest {
 protected:
  void SetUp() override {
    HandlersTest::SetUp();
    HeavyReadOptions options;
    options.threads = 1;
    options.queue = 1;
    options.clock = &clock_;
    auto pool = HeavyReads::Start(options);
    ASSERT_TRUE(pool.has_value());
    pool_ = std::move(*pool);
    ApiContext api = Api();
    api.heavy_reads = pool_.get();
    router_ = MakeRouter(api, ops_, AccessContext{});
    ASSERT_EQ(Call("POST", "/api/v1alpha1/providers", Spec("sp-a")).status, 201);
  }

  // Calls the router; the answer may come later from the pool.
  Answer Async(const std::string& target) {
    Answer answer;
    HttpRequest req;
    req.method = "GET";
    req.target = target;
    const auto q = target.find('?');
    req.path = target.substr(0, q);
    if (q != std::string::npos) {
      const std::string pair = target.substr(q + 1);
      const auto eq = pair.find('=');
      req.query.emplace(pair.substr(0, eq), eq == std::string::npos ? "" : pair.substr(eq + 1));
    }
    router_(std::move(req), answer.respond());
    return answer;
  }

  std::unique_ptr<HeavyReads> pool_;
};

TEST_F(RouterHeavyReadsTest, PlainGetsAreAnsweredAtOnceWhileThePoolIsSaturated) {
  Gate gate;
  Answer held;
  pool_->Submit(gate.Task(), held.respond());
  gate.Started();
  Answer queued = Async("/api/v1alpha1/providers?type=vm");  // heavy: a filtered scan, queued
  EXPECT_FALSE(queued.Ready());
  Answer refused = Async("/api/v1alpha1/providers?type=vm");
  ASSERT_TRUE(refused.Ready());
  EXPECT_EQ(refused.Get().status, 503);
  for (const char* target : {"/healthz", "/readyz", "/api/v1alpha1/health",
                             "/api/v1alpha1/providers", "/api/v1alpha1/service-types"}) {
    Answer plain = Async(target);
    ASSERT_TRUE(plain.Ready()) << target << " must not wait for the pool";
    EXPECT_EQ(plain.Get().status, 200) << target;
  }
  gate.Open();
  const HttpResponse later = queued.Get();
  EXPECT_EQ(later.status, 200) << later.body;
  EXPECT_NE(later.body.find("\"name\":\"sp-a\""), std::string::npos) << later.body;
}

TEST_F(RouterHeavyReadsTest, AsOfHistoryEventsAndAdminProjectionsAreHeavy) {
  Gate gate;
  Answer held;
  pool_->Submit(gate.Task(), held.respond());
  gate.Started();
  Answer filler = Async("/api/v1alpha1/providers?as_of=2026-01-01T00:00:00Z");
  for (const char* target : {"/api/v1alpha1/providers?as_of=2026-01-01T00:00:00Z",
                             "/api/v1alpha1/providers/x/history", "/api/v1alpha1/events",
                             "/admin/projections", "/api/v1alpha1/providers?health_status=Ready"}) {
    Answer r = Async(target);
    ASSERT_TRUE(r.Ready()) << target;
    EXPECT_EQ(r.Get().status, 503) << target << " went to the (full) pool";
  }
  gate.Open();
  filler.Get();
}

}  // namespace
}  // namespace dcm::http
