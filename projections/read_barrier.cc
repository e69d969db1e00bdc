#include "projections/read_barrier.h"

#include <algorithm>

#include "src/common/thread_name.h"

namespace dcm {
namespace {
constexpr auto kDeadlineTick = std::chrono::milliseconds(20);
}  // namespace

ReadBarrier::ReadBarrier(std::vector<std::string> topics, std::vector<ProjectionTopics> projections,
                         const Clock* clock, std::chrono::milliseconds read_wait, Metrics* metrics)
    : topics_(std::move(topics)), clock_(clock), read_wait_(read_wait) {
  if (metrics) {
    const std::string help = "Reads that waited for this instance to reach their position";
    caught_up_ = &metrics->GetCounter("dcm_read_waits_total", help, "result=\"caught_up\"");
    timed_out_ = &metrics->GetCounter("dcm_read_waits_total", help, "result=\"timed_out\"");
  }
  projections.resize(std::min<size_t>(projections.size(), 32));
  for (const auto& p : projections) {
    names_.push_back(p.name);
    uint64_t consumes = 0;
    for (const auto& t : p.topics) {
      if (const int i = Topic(t); i >= 0) consumes |= uint64_t{1} << i;
    }
    consumes_.push_back(consumes);
    completes_.push_back(p.completes.empty() ? -1 : Topic(p.completes));
  }
  applied_.resize(names_.size() * topics_.size());
}

ReadBarrier::~ReadBarrier() { Stop(); }

int ReadBarrier::Topic(std::string_view name) const {
  for (size_t i = 0; i < topics_.size() && i < 64; ++i) {
    if (topics_[i] == name) return static_cast<int>(i);
  }
  return -1;
}

uint32_t ReadBarrier::Mask(std::initializer_list<std::string_view> names) const {
  uint32_t mask = 0;
  for (auto name : names) {
    for (size_t i = 0; i < names_.size(); ++i) {
      if (names_[i] == name) mask |= uint32_t{1} << i;
    }
  }
  return mask;
}

void ReadBarrier::Acknowledge(std::string_view topic, int32_t partition, int64_t next) {
  const int t = Topic(topic);
  if (t < 0 || partition < 0) return;
  std::lock_guard lock(ack_mu_);
  acknowledged_.Raise(static_cast<uint8_t>(t), partition, next);
}

ReadPosition ReadBarrier::Acknowledged() const {
  std::lock_guard lock(ack_mu_);
  return acknowledged_;
}

void ReadBarrier::Applied(std::string_view projection, std::string_view topic, int32_t partition,
                          int64_t next) {
  const int t = Topic(topic);
  if (t < 0 || partition < 0) return;
  for (size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] != projection) continue;
    bool wake = false;
    {
      std::lock_guard lock(mu_);
      auto& nexts = applied_[i * topics_.size() + static_cast<size_t>(t)];
      if (nexts.size() <= static_cast<size_t>(partition)) {
        nexts.resize(static_cast<size_t>(partition) + 1, 0);
      }
      if (next <= nexts[static_cast<size_t>(partition)]) return;
      nexts[static_cast<size_t>(partition)] = next;
      wake = !waiters_.empty();
      dirty_ = dirty_ || wake;
    }
    if (wake) cv_.notify_one();
    return;
  }
}

int64_t ReadBarrier::AppliedNext(size_t projection, uint8_t topic, int32_t partition) const {
  const auto& nexts = applied_[projection * topics_.size() + topic];
  const auto p = static_cast<size_t>(partition);
  return p < nexts.size() ? nexts[p] : 0;
}

bool ReadBarrier::Reached(uint32_t mask, const ReadPosition& acknowledged,
                          const ReadPosition& min) const {
  for (size_t i = 0; i < names_.size(); ++i) {
    if ((mask & (uint32_t{1} << i)) == 0) continue;
    for (const auto& e : acknowledged.entries()) {
      if (((consumes_[i] >> e.topic) & 1) == 0 || completes_[i] == e.topic) continue;
      if (AppliedNext(i, e.topic, e.partition) < e.next) return false;
    }
    for (const auto& e : min.entries()) {
      if (((consumes_[i] >> e.topic) & 1) == 0) continue;
      if (AppliedNext(i, e.topic, e.partition) < e.next) return false;
    }
  }
  return true;
}

bool ReadBarrier::CaughtUp(uint32_t mask, const ReadPosition& min,
                           ReadPosition* acknowledged) const {
  *acknowledged = Acknowledged();
  if (mask == 0) return true;
  std::lock_guard lock(mu_);
  return Reached(mask, *acknowledged, min);
}

void ReadBarrier::Keep(uint32_t mask, ReadPosition acknowledged, ReadPosition min, Continue then) {
  {
    std::lock_guard lock(mu_);
    if (!Reached(mask, acknowledged, min)) {
      waiters_.push_back(Waiter{mask, std::move(acknowledged), std::move(min),
                                clock_->Now() + read_wait_, std::move(then)});
      return;
    }
  }
  then(true);
}

size_t ReadBarrier::RunDue() {
  std::vector<std::pair<Continue, bool>> due;
  {
    std::lock_guard lock(mu_);
    dirty_ = false;
    if (waiters_.empty()) return 0;
    const TimePoint now = clock_->Now();
    std::vector<Waiter> kept;
    for (auto& w : waiters_) {
      const bool reached = Reached(w.mask, w.acknowledged, w.min);
      if (reached || now >= w.deadline) {
        due.emplace_back(std::move(w.then), reached);
      } else {
        kept.push_back(std::move(w));
      }
    }
    waiters_.swap(kept);
  }
  for (auto& [then, reached] : due) {
    if (caught_up_) (reached ? caught_up_ : timed_out_)->Inc();
    then(reached);
  }
  return due.size();
}

size_t ReadBarrier::Pending() const {
  std::lock_guard lock(mu_);
  return waiters_.size();
}

void ReadBarrier::Start() {
  std::lock_guard lock(mu_);
  if (running_) return;
  running_ = true;
  thread_ = NamedThread("read-barrier", [this] {
    std::unique_lock lock(mu_);
    while (running_) {
      cv_.wait_for(lock, kDeadlineTick, [this] { return dirty_ || !running_; });
      if (!running_) break;
      lock.unlock();
      RunDue();
      lock.lock();
    }
  });
}

void ReadBarrier::Stop() {
  {
    std::lock_guard lock(mu_);
    running_ = false;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::vector<Waiter> left;
  {
    std::lock_guard lock(mu_);
    left.swap(waiters_);
  }
  for (auto& w : left) w.then(false);
}

}  // namespace dcm
