// FederationWorker: the one decision maker for the provider enclave's capacity (SPEC §10, issue
// #17), in the registrar's pattern (consumers/registrar.h).
//
// Every `dcm serve` of an enclave that exports flavours runs one, all in the consumer group
// `<prefix>federation` on the one-partition topic dcm.federation-requests, so exactly one of them
// owns the partition and decides every request in the topic's total order:
//
//   revoked ──assign──▶ owner: catch up (fold dcm.federation from the stored outcome offsets to
//      ▲                the high watermark: what other owners decided), seek past the last
//      │                request those outcomes answer
//      │                  │  poll batch ─▶ FederationDecider::Decide each request ─▶ produce the
//      └────revoke────────┘  outcomes to dcm.federation (key: reservation id) ─▶ wait for acks ─▶
//                            commit decider state + request offset + outcome offsets in one
//                            RocksDB batch
//
// Remembered request ids (fdec/q/) are in the store, so they survive a restart; a worker that
// crashed after producing but before committing folds its own outcomes at the next catch-up and
// skips their requests. The decider's state is the fold of the outcome log, never of the request
// log. A gap in the outcome log (retention dropped records the state needs) makes the worker
// stand by, unhealthy, deciding nothing (as the registrar does).
//
// The sweeper runs on the owner's thread every `sweep_interval`: each live hold or contract whose
// lease has ended (the decider's own expiry index, fdec/x/) gets an expiry_due request produced
// to dcm.federation-requests, with an id derived from the lease (UUIDv5 of kind, id and
// expires_at), so sweeping twice asks once. It is decided in order like any request: a confirm
// or renewal decided first wins, and a replay decides the same way (the request carries its
// time).
//
// What a decision needs beyond the request and the state is the flavour's capacity
// (FederationWorkerOptions::capacity, the flavour derivation's seam). It is consulted for new
// reservations only; the outcome records it (`capacity`).
#pragma once

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "consumers/contract_placer.h"
#include "consumers/kafka.h"
#include "projections/federation_decider.h"
#include "src/common/clock.h"
#include "src/common/metrics.h"
#include "src/common/retry.h"

namespace dcm {

struct FederationWorkerOptions {
  std::string requests_topic;             // dcm.federation-requests (one partition)
  std::string outcomes_topic;             // dcm.federation
  std::string dead_letter_topic;          // poison requests
  std::string group_id;                   // <prefix>federation
  std::string source = "dcm/federation";  // `source` of the outcomes (and sweeps: + "-sweeper")
  KafkaOptions kafka;
  size_t batch_size = 500;
  FederationPolicy policy;
  FlavorCapacity capacity;  // null: no flavour is offered (every reservation: unknown_flavor)
  // Between sweeps; 0: no sweeper. A due lease is asked again after `resweep_after` while its
  // expiry is still undecided.
  std::chrono::milliseconds sweep_interval{1000};
  std::chrono::milliseconds resweep_after{5000};
  // Keeps the contracts' instances in step (reconciled at each sweep); null: none.
  ContractPlacer* placer = nullptr;
};

class FederationWorker {
 public:
  FederationWorker(FederationWorkerOptions options, Store* store, Producer* producer,
                   Metrics* metrics, const Clock* clock);
  ~FederationWorker();

  Status Start();
  void Stop();
  bool IsOwner() const { return owner_.load(); }
  bool Healthy() const { return healthy_.load(); }

  // The expiry_due requests for every lease due at `now_ms` (what a sweep produces). Read-only;
  // exposed for tests.
  Result<std::vector<FederationRequest>> DueRequests(int64_t now_ms) const;

 private:
  void Run();
  Result<bool> CatchUp();
  // The outcomes [from, high) of every partition; nullopt at a gap.
  using Offsets = std::map<int32_t, int64_t>;
  Result<std::optional<std::vector<FederationOutcome>>> ReadOutcomes(const Offsets& from,
                                                                     const Offsets& high);
  Status FoldOutcomes(std::vector<FederationOutcome> outcomes, const Offsets& high);
  Status ProcessBatch(const std::vector<KafkaMessage>& messages);
  // Decides one request record into `batch`; the outcome to produce, if any.
  Result<std::optional<FederationOutcome>> DecideRecord(
      const KafkaMessage& m, StoreBatch& batch, std::vector<std::future<Status>>& dead_letters);
  struct Produced {
    std::string key;
    std::string value;
    std::future<Result<KafkaPosition>> acked;
  };
  Status CommitBatch(StoreBatch& batch, std::vector<std::future<Status>>& dead_letters,
                     std::vector<Produced>& produced, int64_t next);
  std::map<int32_t, int64_t> OnAssign(const std::vector<int32_t>& partitions);
  void Sweep();

  FederationWorkerOptions options_;
  Store* store_;
  Producer* producer_;
  Metrics* metrics_;
  const Clock* clock_;
  FederationDecider decider_;
  std::unique_ptr<Consumer> consumer_;
  std::thread thread_;
  std::atomic<bool> running_{false};
  std::atomic<bool> owner_{false};
  std::atomic<bool> healthy_{true};
  RetryWait retry_wait_;
  // Runner thread only:
  bool catch_up_pending_ = false;
  Offsets outcomes_next_;
  int64_t next_offset_ = 0;
  int64_t next_sweep_ms_ = 0;
  std::unordered_map<std::string, int64_t> swept_;  // expiry request id -> when produced
};

}  // namespace dcm
