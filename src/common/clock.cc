#include "src/common/clock.h"

namespace dcm {

int64_t Clock::NowMillis() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Now().time_since_epoch()).count();
}

SystemClock& SystemClock::Instance() {
  static SystemClock clock;
  return clock;
}

}  // namespace dcm
