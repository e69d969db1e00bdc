// The hand-over between the rebuild's consume thread and its fold threads (consumers/rebuild.h):
// a batch decoded once, and one bounded queue per fold group.
//
//   ConsumeLoop (rebuild_consume.h) ─▶ DecodedBatch (shared, read-only) ─▶ BatchQueue × groups ─▶
//   FoldLoop (rebuild_fold.h), one per group
#pragma once

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "events/cloud_event.h"
#include "src/common/result.h"

namespace dcm::rebuild_detail {

using Clock = std::chrono::steady_clock;

// How long the consume and fold threads wait for a message or a batch before they look around
// (stalls, closed queues).
constexpr int kPollMs = 100;

// One consume batch, decoded once for every projection that reads it. Owns the librdkafka
// messages: keys and values are read in place (no copy) until the fold is done with them.
struct DecodedBatch {
  struct Entry {
    rd_kafka_message_t* raw = nullptr;
    int topic = 0;  // index into the rebuild's topic list
    Result<CloudEvent> event = MakeError(ErrorCode::kInternal, "not decoded");
  };
  std::vector<Entry> entries;
  // Partitions the consumer found complete without a message at target - 1 (offset gaps of
  // transaction markers): (topic index, partition).
  std::vector<std::pair<int, int32_t>> completed;

  DecodedBatch() = default;
  DecodedBatch(const DecodedBatch&) = delete;
  DecodedBatch& operator=(const DecodedBatch&) = delete;
  ~DecodedBatch() {
    for (auto& e : entries) rd_kafka_message_destroy(e.raw);
  }
};

// Single producer, single consumer, bounded: the consume thread feeds one per fold group.
// Closing it ends the group's fold (with an error, or because the group finished).
class BatchQueue {
 public:
  explicit BatchQueue(size_t depth) : depth_(depth) {}

  // False when the queue was closed (the fold gave up).
  bool Push(std::shared_ptr<const DecodedBatch> batch) {
    std::unique_lock lock(mu_);
    not_full_.wait(lock, [&] { return closed_ || items_.size() < depth_; });
    if (closed_) return false;
    items_.push_back(std::move(batch));
    not_empty_.notify_one();
    return true;
  }

  // nullptr on timeout or when closed; `error` tells which.
  std::shared_ptr<const DecodedBatch> Pop(std::chrono::milliseconds timeout,
                                          std::optional<Error>* error) {
    std::unique_lock lock(mu_);
    not_empty_.wait_for(lock, timeout, [&] { return closed_ || !items_.empty(); });
    if (!items_.empty()) {
      auto batch = std::move(items_.front());
      items_.pop_front();
      not_full_.notify_one();
      return batch;
    }
    if (closed_) *error = error_;
    return nullptr;
  }

  bool Closed() {
    std::lock_guard lock(mu_);
    return closed_;
  }

  void Close(std::optional<Error> error = std::nullopt) {
    std::lock_guard lock(mu_);
    closed_ = true;
    if (error && !error_) error_ = std::move(error);
    not_full_.notify_all();
    not_empty_.notify_all();
  }

 private:
  const size_t depth_;
  std::mutex mu_;
  std::condition_variable not_full_, not_empty_;
  std::deque<std::shared_ptr<const DecodedBatch>> items_;
  bool closed_ = false;
  std::optional<Error> error_;
};

}  // namespace dcm::rebuild_detail
