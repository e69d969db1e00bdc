#include "consumers/rebuild_consume.h"

#include <algorithm>

#include "src/common/log.h"

namespace dcm::rebuild_detail {

ConsumeLoop::ConsumeLoop(rd_kafka_t* rk, const Plan& plan, size_t batch_size,
                         std::vector<BatchQueue*> queues)
    : rk_(rk), plan_(plan), batch_size_(batch_size), queues_(std::move(queues)) {
  for (size_t t = 0; t < plan.topics.size(); ++t) {
    auto& delivered = delivered_.emplace_back();
    for (const auto& range : plan.ranges[t]) {
      delivered.push_back(range.low);
      if (range.end > range.low) ++open_;
    }
  }
}

void ConsumeLoop::Run() {
  rd_kafka_queue_t* queue = rd_kafka_queue_get_consumer(rk_);
  std::vector<rd_kafka_message_t*> raw(batch_size_);
  while (open_ > 0) {
    ssize_t n = rd_kafka_consume_batch_queue(queue, 0, raw.data(), raw.size());
    if (n <= 0) {
      rd_kafka_message_t* first = rd_kafka_consume_queue(queue, kPollMs);
      if (!first) {
        if (!PushCompletedByPosition()) break;
        continue;
      }
      raw[0] = first;
      const ssize_t more = rd_kafka_consume_batch_queue(queue, 0, raw.data() + 1, raw.size() - 1);
      n = 1 + std::max<ssize_t>(more, 0);
    }
    if (!PushToAll(Decode(raw.data(), static_cast<size_t>(n)))) break;
  }
  rd_kafka_queue_destroy(queue);
}

int ConsumeLoop::TopicIndex(rd_kafka_topic_t* rkt) {
  auto it = topic_of_.find(rkt);
  if (it != topic_of_.end()) return it->second;
  const std::string name = rd_kafka_topic_name(rkt);
  int index = -1;
  for (size_t t = 0; t < plan_.topics.size(); ++t) {
    if (plan_.topics[t] == name) index = static_cast<int>(t);
  }
  topic_of_.emplace(rkt, index);
  return index;
}

std::unique_ptr<DecodedBatch> ConsumeLoop::Decode(rd_kafka_message_t** raw, size_t n) {
  auto batch = std::make_unique<DecodedBatch>();
  batch->entries.reserve(n);
  static auto logger = Logger("rebuild");
  for (size_t i = 0; i < n; ++i) {
    rd_kafka_message_t* m = raw[i];
    const int t = m->err ? -1 : TopicIndex(m->rkt);
    if (t < 0 || m->partition < 0 || static_cast<size_t>(m->partition) >= plan_.ranges[t].size() ||
        m->offset >= plan_.ranges[t][m->partition].end) {
      if (m->err && m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        logger->warn("msg=\"consumer error\" error=\"{}\"", rd_kafka_message_errstr(m));
      }
      rd_kafka_message_destroy(m);  // an error, or beyond the target: not part of the rebuild
      continue;
    }
    MarkDelivered(t, m->partition, m->offset + 1);
    auto& entry = batch->entries.emplace_back();
    entry.raw = m;
    entry.topic = t;
    entry.event = DecodeCloudEvent(
        std::string_view(static_cast<const char*>(m->payload ? m->payload : ""), m->len));
  }
  return batch;
}

void ConsumeLoop::MarkDelivered(int t, int32_t p, int64_t next) {
  auto& delivered = delivered_[t][p];
  const int64_t end = plan_.ranges[t][p].end;
  if (delivered < end && next >= end) {
    --open_;
    Pause(t, p);
  }
  delivered = std::max(delivered, next);
}

void ConsumeLoop::Pause(int t, int32_t p) {
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(list, plan_.topics[t].c_str(), p);
  rd_kafka_pause_partitions(rk_, list);  // best effort: later messages are dropped anyway
  rd_kafka_topic_partition_list_destroy(list);
}

// Offsets may have gaps (transaction markers on a real broker): a partition whose fetch
// position passed its end without a message at end - 1 is complete too. False when closed.
bool ConsumeLoop::PushCompletedByPosition() {
  auto batch = std::make_unique<DecodedBatch>();
  for (size_t t = 0; t < plan_.topics.size(); ++t) {
    for (size_t p = 0; p < plan_.ranges[t].size(); ++p) {
      const int64_t end = plan_.ranges[t][p].end;
      if (delivered_[t][p] >= end || end <= plan_.ranges[t][p].low) continue;
      rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(1);
      rd_kafka_topic_partition_list_add(list, plan_.topics[t].c_str(), static_cast<int32_t>(p));
      if (rd_kafka_position(rk_, list) == RD_KAFKA_RESP_ERR_NO_ERROR &&
          list->elems[0].offset >= end) {
        MarkDelivered(static_cast<int>(t), static_cast<int32_t>(p), end);
        batch->completed.emplace_back(static_cast<int>(t), static_cast<int32_t>(p));
      }
      rd_kafka_topic_partition_list_destroy(list);
    }
  }
  if (batch->completed.empty()) return !AllClosed();
  return PushToAll(std::move(batch));
}

bool ConsumeLoop::AllClosed() const {
  for (BatchQueue* queue : queues_) {
    if (!queue->Closed()) return false;
  }
  return true;
}

// Hands the batch to every fold group still running; false once none is.
bool ConsumeLoop::PushToAll(std::shared_ptr<const DecodedBatch> batch) {
  bool any = false;
  for (BatchQueue* queue : queues_) any = queue->Push(batch) || any;
  return any;
}

}  // namespace dcm::rebuild_detail
