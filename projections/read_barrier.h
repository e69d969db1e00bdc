// ReadBarrier: consistent reads (SPEC §7). A read served by this instance reflects every write
// this instance acknowledged before it, in every projection that serves the read, and a read
// asking for `?min_position=` waits, bounded, until those projections have applied it.
//
//   write answered 2xx ── Acknowledge(topic, partition, next) ─▶ acknowledged position A
//     (the command bus, for the request and the outcome, before it answers)
//   ProjectionRunner ─▶ AppliedOffsets::Publish ─▶ Applied(projection, topic, partition, next)
//   read ── CaughtUp(projections, min) ─▶ yes: go on inline (the common case, nothing kept)
//                                      └▶ no: Keep(then): `then(true)` once caught up,
//                                         `then(false)` at the deadline (--read-wait), from the
//                                         barrier's thread
//
// "Caught up" for a read served by projections S, with the instance's acknowledged position A
// and the requested minimum M: every projection in S has applied, for every partition of a topic
// it consumes, at least A's and M's offset. One exception keeps the common case free: a
// projection that completes this instance's writes on a topic (the registry for the providers
// topic, the instance projection for the instances topic) holds every outcome this instance
// acknowledged there before the write was answered (the registrar may even have folded it itself,
// ahead of the runner), so A is not checked against it on that topic; M always is.
//
// The read's own position (its DCM-Position header) is A ∪ M: every write the read is guaranteed
// to reflect.
//
// Waiting reads never block the caller: they are kept with their continuation, which the barrier's
// thread runs when a runner's published batch makes them caught up, or at their deadline. Cost on
// the hot path: a write takes one mutex and updates a vector of a few entries; a read that is
// already caught up takes two mutexes and compares a few integers.
//
// Thread-safety: every method may be called from any thread; continuations run outside the lock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "projections/read_position.h"
#include "src/common/clock.h"
#include "src/common/metrics.h"

namespace dcm {

class ReadBarrier {
 public:
  struct ProjectionTopics {
    std::string name;                 // Projection::Name()
    std::vector<std::string> topics;  // the topics its runner folds
    std::string completes;            // the topic whose outcomes complete writes here ("": none)
  };
  using Continue = std::function<void(bool caught_up)>;

  // `topics`: Topics::EventTopics(), whose indices number the topics of a ReadPosition. At most
  // 32 projections. With `metrics`: counter dcm_read_waits_total{result="caught_up"|"timed_out"}
  // (reads that had to wait, by how the wait ended).
  ReadBarrier(std::vector<std::string> topics, std::vector<ProjectionTopics> projections,
              const Clock* clock, std::chrono::milliseconds read_wait, Metrics* metrics = nullptr);
  ~ReadBarrier();
  ReadBarrier(const ReadBarrier&) = delete;
  ReadBarrier& operator=(const ReadBarrier&) = delete;

  // The set of the named projections, for Wait (unknown names are left out).
  uint32_t Mask(std::initializer_list<std::string_view> names) const;
  size_t topic_count() const { return topics_.size(); }
  std::chrono::milliseconds read_wait() const { return read_wait_; }

  // ---- writes ----
  // This instance acknowledged `topic`/`partition` up to `next` (unknown topics are ignored).
  void Acknowledge(std::string_view topic, int32_t partition, int64_t next);
  // Every position this instance acknowledged so far.
  ReadPosition Acknowledged() const;

  // ---- projections ----
  // `projection` applied `topic`/`partition` up to `next`: AppliedOffsets' observer.
  void Applied(std::string_view projection, std::string_view topic, int32_t partition,
               int64_t next);

  // ---- reads ----
  // Whether the projections in `mask` have caught up now with the acknowledged position (stored
  // in `*acknowledged`: the read's position is it joined with `min`) and `min`.
  bool CaughtUp(uint32_t mask, const ReadPosition& min, ReadPosition* acknowledged) const;
  // For a read CaughtUp found behind: keeps `then` and calls it once, later, with true when the
  // projections caught up or false at the deadline (--read-wait from now). If they caught up
  // meanwhile, calls then(true) at once, on this thread.
  void Keep(uint32_t mask, ReadPosition acknowledged, ReadPosition min, Continue then);

  // Runs the kept continuations that are due (caught up, or past their deadline); returns how
  // many ran. The thread started by Start calls it; tests call it with a FakeClock.
  size_t RunDue();
  size_t Pending() const;

  // A thread that runs RunDue when a batch is applied, and at least every 20 ms for deadlines.
  // Stop runs every kept continuation with false (their connections answer 503 or are gone).
  void Start();
  void Stop();

 private:
  struct Waiter {
    uint32_t mask;
    ReadPosition acknowledged;
    ReadPosition min;
    TimePoint deadline;
    Continue then;
  };
  int Topic(std::string_view name) const;
  int64_t AppliedNext(size_t projection, uint8_t topic, int32_t partition) const;  // holds mu_
  bool Reached(uint32_t mask, const ReadPosition& acknowledged,
               const ReadPosition& min) const;  // holds mu_

  const std::vector<std::string> topics_;
  const Clock* clock_;
  const std::chrono::milliseconds read_wait_;
  Counter* caught_up_ = nullptr;  // null without metrics
  Counter* timed_out_ = nullptr;
  std::vector<std::string> names_;  // projection i
  std::vector<uint64_t> consumes_;  // projection i: bit t set when it folds topic t
  std::vector<int> completes_;      // projection i: the topic it completes writes of, or -1

  mutable std::mutex ack_mu_;
  ReadPosition acknowledged_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  // applied_[i * topics + t][partition] = next offset projection i will read there.
  std::vector<std::vector<int64_t>> applied_;
  std::vector<Waiter> waiters_;
  bool dirty_ = false;  // a batch was applied since RunDue last looked
  bool running_ = false;
  std::thread thread_;
};

}  // namespace dcm
