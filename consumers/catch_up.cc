#include "consumers/catch_up.h"

#include <map>

#include "src/common/log.h"

namespace dcm {

bool WaitForCatchUp(const AppliedOffsets& applied, const Consumer& consumer,
                    const std::string& projection, const std::string& topic,
                    const std::vector<int32_t>& partitions, std::chrono::milliseconds timeout,
                    const std::atomic<bool>& running, const std::string& component) {
  auto logger = Logger(component);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool caught_up = true;
  std::map<int32_t, int64_t> targets;
  for (int32_t p : partitions) {
    auto marks = consumer.QueryWatermarks(topic, p, 5000);
    if (!marks) {
      logger->warn(
          "msg=\"no watermark; acting on the local state\" topic={} partition={} "
          "error=\"{}\"",
          topic, p, marks.error().message);
      caught_up = false;
      continue;
    }
    targets[p] = marks->second;
  }
  if (!applied.WaitFor(projection, topic, targets, deadline, [&] { return running.load(); })) {
    logger->warn("msg=\"{} projection not caught up; acting on the local state\" topic={}",
                 projection, topic);
    return false;
  }
  return caught_up;
}

}  // namespace dcm
