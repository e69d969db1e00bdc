// Clock: the only source of "now" in the code base, so tests can use FakeClock and never sleep.
// Thread-safety: SystemClock is stateless; FakeClock is safe to read from many threads and
// advanced by the test thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace dcm {

using TimePoint = std::chrono::system_clock::time_point;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint Now() const = 0;
  int64_t NowMillis() const;
};

class SystemClock final : public Clock {
 public:
  TimePoint Now() const override { return std::chrono::system_clock::now(); }
  static SystemClock& Instance();
};

class FakeClock final : public Clock {
 public:
  explicit FakeClock(int64_t start_millis = 1767225600000 /* 2026-01-01T00:00:00Z */)
      : millis_(start_millis) {}
  TimePoint Now() const override { return TimePoint(std::chrono::milliseconds(millis_.load())); }
  void Advance(std::chrono::milliseconds d) { millis_ += d.count(); }
  void Set(int64_t millis) { millis_ = millis; }

 private:
  std::atomic<int64_t> millis_;
};

// When bounded work gives up (heavy reads, SPEC §7): `at` on `clock`. The default never passes.
struct Deadline {
  const Clock* clock = nullptr;
  TimePoint at = TimePoint::max();
  bool Passed() const { return clock != nullptr && clock->Now() >= at; }
};

}  // namespace dcm
