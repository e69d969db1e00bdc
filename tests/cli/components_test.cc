// Components (src/cli/components.h): started in order, stopped in reverse, a failed start stops
// what had started, and /readyz checks come from the components that have one.
#include "src/cli/components.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace dcm::cli {
namespace {

class ComponentsTest : public ::testing::Test {
 protected:
  Component Recording(const std::string& name, bool fails = false) {
    return Component{.name = name,
                     .start = [this, name, fails]() -> Status {
                       log_.push_back("start " + name);
                       if (fails) return MakeError(ErrorCode::kUnavailable, name + " failed");
                       return OkStatus();
                     },
                     .stop = [this, name] { log_.push_back("stop " + name); }};
  }
  std::vector<std::string> log_;
};

TEST_F(ComponentsTest, StartsInOrderAndStopsInReverse) {
  Components components;
  components.Add(Recording("store"));
  components.Add(Recording("runner"));
  components.Add(Recording("http"));
  ASSERT_TRUE(components.StartAll());
  components.StopAll();
  EXPECT_EQ(log_, (std::vector<std::string>{"start store", "start runner", "start http",
                                            "stop http", "stop runner", "stop store"}));
}

TEST_F(ComponentsTest, AFailedStartStopsOnlyWhatStartedAndReturnsTheErrorUnchanged) {
  Components components;
  components.Add(Recording("store"));
  components.Add(Recording("registrar", /*fails=*/true));
  components.Add(Recording("http"));
  auto started = components.StartAll();
  ASSERT_FALSE(started);
  EXPECT_EQ(started.error().message, "registrar failed");
  EXPECT_EQ(log_, (std::vector<std::string>{"start store", "start registrar", "stop store"}));
}

TEST_F(ComponentsTest, StopsResourcesWithoutAStartAndStopsOnlyOnce) {
  Components components;
  components.Add({.name = "producer", .stop = [this] { log_.push_back("flush"); }});
  components.Add(Recording("runner"));
  ASSERT_TRUE(components.StartAll());
  components.StopAll();
  components.StopAll();
  EXPECT_EQ(log_, (std::vector<std::string>{"start runner", "stop runner", "flush"}));
}

TEST_F(ComponentsTest, TheDestructorStopsWhatIsStillRunning) {
  {
    Components components;
    components.Add(Recording("runner"));
    ASSERT_TRUE(components.StartAll());
  }
  EXPECT_EQ(log_, (std::vector<std::string>{"start runner", "stop runner"}));
}

TEST_F(ComponentsTest, ChecksComeFromComponentsWithAReadinessCheckInOrder) {
  Components components;
  bool registrar_ready = false;
  components.Add({.name = "producer"});
  components.Add({.name = "projection:registry", .ready = [] { return true; }});
  components.Add({.name = "registrar-consumer",
                  .ready = [&] { return registrar_ready; },
                  .check = "registrar"});
  const auto checks = components.Checks();
  ASSERT_EQ(checks.size(), 2u);
  EXPECT_EQ(checks[0].name, "projection:registry");
  EXPECT_EQ(checks[1].name, "registrar");
  EXPECT_FALSE(checks[1].ready());
  registrar_ready = true;
  EXPECT_TRUE(checks[1].ready());
}

}  // namespace
}  // namespace dcm::cli
