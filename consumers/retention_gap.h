// Retention gaps (SPEC §7): records a consumer needed that the log no longer holds, because
// the broker's retention (or the dev mock's 5 MiB cap per partition) dropped them before the
// consumer read them. A gap is counted (dcm_retention_gap_records_total{consumer,topic}),
// logged once, and described for /readyz; what it means is the consumer's call (a projection
// misses history; the registrar cannot rebuild its state from a truncated outcome log).
//
// Gaps are kept in the consumer's store (gap/<consumer>/<topic>/<partition>/<from> -> to), so a
// restart, which resumes past the gap, still reports it: the state lacks those records for good.
//
// Thread-safety: Add from the consumer's thread, the rest from any.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "projections/store.h"
#include "src/common/metrics.h"

namespace dcm {

class RetentionGaps {
 public:
  // `store` null: gaps are not kept.
  RetentionGaps(std::string consumer, Metrics* metrics, Store* store = nullptr)
      : consumer_(std::move(consumer)), metrics_(metrics), store_(store) {}

  // The gaps kept from earlier runs (call before the consumer reads).
  Status Load();
  // Offsets [from, to) of `topic`'s `partition` are gone.
  void Add(const std::string& topic, int32_t partition, int64_t from, int64_t to);
  bool Empty() const;
  // "dcm.providers[0]: offsets 0..1233 (1234 records) dropped by retention; ..." or "".
  std::string Describe() const;

 private:
  struct Gap {
    std::string topic;
    int32_t partition;
    int64_t from;
    int64_t to;
  };
  const std::string consumer_;
  Metrics* const metrics_;
  Store* const store_;
  mutable std::mutex mu_;
  std::vector<Gap> gaps_;
};

}  // namespace dcm
