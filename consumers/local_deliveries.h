// LocalDeliveries: hands the consumers of this process what a producer of this process had
// acknowledged on their topics, and wakes those that paused.
//
// Why: librdkafka's mock cluster answers an empty fetch only after the whole fetch.wait.max.ms
// and never early when data arrives, so `dcm serve` polls it every few milliseconds, and each
// idle consumer costs the mock and its client ~200 empty fetches a second, ~76 µs of CPU each
// (BENCHMARKS.md, issue #16, session 24). Under load, each reader of a topic also fetches every
// message set a producer of this process wrote there: the mock answers at most one per partition
// per fetch. Against the mock, an assigned consumer that found nothing for a while, or whose next
// records this process produced, unassigns its partitions, keeping its positions (Consumer,
// KafkaOptions::idle_pause_ms). It then takes the acknowledged records that continue its
// positions from here, and assigns its partitions again when a record it was not offered is
// missing (another process wrote in between) or the pause ends. The registrar, a group member
// that never pauses, listens while it owns the request partition: a delivery ends its poll
// (Register's `wake`), and it decides the offered requests that continue its position.
//
//   Producer delivery report ── Delivered(topic, record) ──▶ each listener on `topic`:
//                                                           the record offered, the listener woken
//   Consumer ── Register(topics) at assign ── Take(positions) ── Wait(id, deadline) ── Unregister
//   Registrar ── Register(requests, wake) as it owns the partition ── Take ── Unregister
//
// A record is offered exactly as the log holds it (position, key, value, headers, the CreateTime
// the producer stamped), so a fold cannot tell an offered record from a fetched one.
//
// Thread-safe. Delivered() costs one atomic load while nobody listens.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "consumers/kafka.h"

namespace dcm {

class LocalDeliveries {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  // topic -> partition -> the next offset a consumer needs.
  using Positions = std::map<std::string, std::map<int32_t, int64_t>>;
  // Offers kept per listener; beyond, records are dropped (the listener fetches them).
  static constexpr size_t kMaxOffers = 8192;

  // The one of this process (every Producer reports to it).
  static LocalDeliveries& Instance();

  // A record was acknowledged on `topic`. `record` makes it, called only if a listener on
  // `topic` takes offers. Its listeners wake at the next Notify.
  void Delivered(std::string_view topic, const std::function<KafkaMessage()>& record);
  // Wakes the listeners that records were delivered to since the last Notify: a producer calls
  // it once it served a batch of delivery reports (one wake for the batch, not one a record).
  void Notify();
  // A listener on `topics`: a delivery to one of them from now on ends its next Wait at once,
  // and, with `offers`, is kept for Take. `wake` (optional) also runs at that Notify, under the
  // lock: for a listener that waits elsewhere (the registrar, in its group's poll). Quick only.
  uint64_t Register(std::vector<std::string> topics, bool offers,
                    std::function<void()> wake = nullptr);
  // Blocks until a delivery to one of the listener's topics (true; the flag is then cleared) or
  // `deadline` (false).
  bool Wait(uint64_t id, TimePoint deadline);
  // The offered records that continue `positions`, in offset order per partition, at most `max`;
  // advances `positions` past them and drops offers below them (or of partitions not in
  // `positions`). `oldest_kept` is when the oldest offer kept beyond a position arrived (a record
  // before it was not offered, yet), if any; TimePoint::min() beyond a logical position
  // (Consumer::kBeginning, kEnd), which only a fetch resolves. Null: not wanted (the registrar's
  // poll fetches a missing record anyway).
  std::vector<KafkaMessage> Take(uint64_t id, Positions& positions, size_t max,
                                 std::optional<TimePoint>* oldest_kept = nullptr);
  void Unregister(uint64_t id);

 private:
  struct Offer {
    std::shared_ptr<const KafkaMessage> record;  // one copy for every listener
    TimePoint arrived;
  };
  struct Listener {
    std::vector<std::string> topics;
    bool offers = false;
    bool woken = false;
    bool to_notify = false;  // delivered to since the last Notify
    size_t offered_count = 0;
    // (topic, partition) -> offset -> the record.
    std::map<std::pair<std::string, int32_t>, std::map<int64_t, Offer>> offered;
    std::condition_variable cv;
    std::function<void()> wake;
  };
  std::atomic<size_t> listening_{0};
  std::atomic<bool> to_notify_{false};
  std::mutex mu_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, Listener> listeners_;
};

}  // namespace dcm
