// The rebuild's consume thread (consumers/rebuild.h): fetch, decode each CloudEvent once, hand
// the batch to every fold group's queue. Pauses each partition once it is delivered up to its
// end; with offset gaps (transaction markers) a partition whose fetch position passed its end
// counts as delivered too.
//
// Thread-safety: Run on one thread; the plan is read-only while it runs.
#pragma once

#include <librdkafka/rdkafka.h>

#include <memory>
#include <unordered_map>
#include <vector>

#include "consumers/rebuild_plan.h"
#include "consumers/rebuild_queue.h"

namespace dcm::rebuild_detail {

class ConsumeLoop {
 public:
  ConsumeLoop(rd_kafka_t* rk, const Plan& plan, size_t batch_size, std::vector<BatchQueue*> queues);

  // Runs until every partition is delivered up to its end or every queue is closed.
  void Run();

 private:
  int TopicIndex(rd_kafka_topic_t* rkt);
  std::unique_ptr<DecodedBatch> Decode(rd_kafka_message_t** raw, size_t n);
  void MarkDelivered(int t, int32_t p, int64_t next);
  void Pause(int t, int32_t p);
  bool PushCompletedByPosition();
  bool AllClosed() const;
  bool PushToAll(std::shared_ptr<const DecodedBatch> batch);

  rd_kafka_t* rk_;
  const Plan& plan_;
  const size_t batch_size_;
  std::vector<BatchQueue*> queues_;
  std::vector<std::vector<int64_t>> delivered_;  // [topic][partition]: next offset handed over
  size_t open_ = 0;
  std::unordered_map<rd_kafka_topic_t*, int> topic_of_;
};

}  // namespace dcm::rebuild_detail
