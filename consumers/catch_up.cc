#include "consumers/catch_up.h"

#include <thread>

#include "src/common/log.h"

namespace dcm {

bool WaitForCatchUp(const Store& store, const Consumer& consumer, const std::string& projection,
                    const std::string& topic, const std::vector<int32_t>& partitions,
                    std::chrono::milliseconds timeout, const std::atomic<bool>& running,
                    const std::string& component) {
  auto logger = Logger(component);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool caught_up = true;
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
    while (true) {
      auto offsets = store.LoadOffsets(projection, topic);
      if (offsets && (*offsets)[p] >= marks->second) break;
      if (!running || std::chrono::steady_clock::now() >= deadline) {
        logger->warn("msg=\"{} projection not caught up; acting on the local state\" topic={}",
                     projection, topic);
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  return caught_up;
}

}  // namespace dcm
