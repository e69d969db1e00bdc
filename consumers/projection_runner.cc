#include "consumers/projection_runner.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "consumers/dead_letter.h"
#include "src/common/log.h"
#include "src/common/retry.h"
#include "src/common/thread_name.h"

namespace dcm {
namespace {
constexpr int kPollMs = 100;
constexpr int kMetadataTimeoutMs = 10000;
}  // namespace

ProjectionRunner::ProjectionRunner(RunnerOptions options, Store* store, Projection* projection,
                                   Producer* producer, Metrics* metrics)
    : options_(std::move(options)),
      store_(store),
      projection_(projection),
      producer_(producer),
      metrics_(metrics),
      gaps_(projection->Name(), metrics, store) {
  topics_.push_back(options_.topic);
  for (const auto& t : options_.more_topics) topics_.push_back(t);
  if (metrics_) {
    lag_gauge_ = &metrics_->GetGauge("dcm_consumer_lag", "Records not yet applied",
                                     "consumer=\"" + projection_->Name() + "\"");
    failures_counter_ = &metrics_->GetCounter(
        "dcm_projection_batch_failures_total",
        "Batches a projection could not commit (store or dead-letter failure) and retried",
        "projection=\"" + projection_->Name() + "\"");
  }
}

ProjectionRunner::~ProjectionRunner() { Stop(); }

Status ProjectionRunner::Start() {
  ASSIGN_OR_RETURN(consumer_, Consumer::Create(options_.kafka, ""));
  RETURN_IF_ERROR(gaps_.Load());
  std::map<std::string, std::map<int32_t, int64_t>> assignment;
  for (const auto& topic : topics_) {
    ASSIGN_OR_RETURN(int partitions,
                     TopicPartitionCount(consumer_->handle(), topic, kMetadataTimeoutMs));
    if (partitions == 0) {
      return MakeError(ErrorCode::kUnavailable, "topic " + topic + " does not exist");
    }
    ASSIGN_OR_RETURN(auto stored, store_->LoadOffsets(projection_->Name(), topic));
    for (int32_t p = 0; p < partitions; ++p) {
      ASSIGN_OR_RETURN(auto marks, consumer_->QueryWatermarks(topic, p, kMetadataTimeoutMs));
      const TopicPartition tp{topic, p};
      targets_[tp] = marks.second;
      auto it = stored.find(p);
      // Below the low watermark the broker no longer has the records (retention).
      const int64_t needed = it == stored.end() ? 0 : it->second;
      if (needed < marks.first) ReportGap(tp, needed, marks.first);
      next_[tp] = std::max(needed, marks.first);
      assignment[topic][p] = next_[tp];
    }
    Logger("runner")->info("msg=\"projection runner started\" projection={} topic={} partitions={}",
                           projection_->Name(), topic, partitions);
  }
  RETURN_IF_ERROR(consumer_->AssignTopics(assignment));
  Publish(next_);
  UpdateProgress();
  running_ = true;
  thread_ = NamedThread("run-" + projection_->Name(), [this] { Run(); });
  return OkStatus();
}

void ProjectionRunner::Stop() {
  retry_wait_.Interrupt([this] { running_ = false; });
  if (thread_.joinable()) thread_.join();
  consumer_.reset();
}

int64_t ProjectionRunner::Lag() const { return lag_.load(); }

void ProjectionRunner::UpdateProgress() {
  int64_t lag = 0;
  bool caught_up = true;
  for (const auto& [tp, next] : next_) {
    const int64_t high = consumer_->HighWatermark(tp.first, tp.second);
    if (high > next) lag += high - next;
    if (next < targets_[tp]) caught_up = false;
  }
  lag_ = lag;
  if (lag_gauge_) lag_gauge_->Set(lag);
  if (caught_up && !caught_up_.exchange(true)) {
    Logger("runner")->info("msg=\"projection caught up\" projection={} applied={}",
                           projection_->Name(), applied_.load());
  }
}

void ProjectionRunner::Run() {
  auto logger = Logger("runner");
  if (options_.nice > 0 && !NiceThisThread(options_.nice)) {
    logger->warn("msg=\"cannot lower the fold's CPU priority\" projection={} error=\"{}\"",
                 projection_->Name(), std::strerror(errno));
  }
  int failures = 0;
  while (running_.load()) {
    auto messages = consumer_->ConsumeBatch(options_.batch_size, kPollMs);
    if (!messages) {
      logger->warn("msg=\"consume failed\" projection={} error=\"{}\"", projection_->Name(),
                   messages.error().message);
      continue;
    }
    if (!messages->empty()) {
      std::map<TopicPartition, int64_t> first;
      if (auto status = ProcessBatch(*messages, first); !status) {
        Retry(first, status.error(), ++failures);
        continue;
      }
      if (failures > 0) {
        logger->info("msg=\"projection resumed\" projection={} failed_attempts={}",
                     projection_->Name(), failures);
        failures = 0;
        healthy_ = true;
      }
    }
    UpdateProgress();
  }
}

void ProjectionRunner::Retry(const std::map<TopicPartition, int64_t>& first, const Error& error,
                             int failures) {
  healthy_ = false;
  if (failures_counter_) failures_counter_->Inc();
  for (const auto& [tp, offset] : first) {
    next_[tp] = offset;
    if (auto sought = consumer_->Seek(tp.first, tp.second, offset); !sought) {
      Logger("runner")->warn("msg=\"seek failed\" projection={} error=\"{}\"", projection_->Name(),
                             sought.error().message);
    }
  }
  const auto delay = RetryDelay(failures);
  if (LogRetry(failures)) {
    Logger("runner")->error(
        "msg=\"projection batch failed, nothing committed; retrying\" projection={} "
        "attempt={} retry_in_ms={} error=\"{}\"",
        projection_->Name(), failures, delay.count(), error.message);
  }
  retry_wait_.WaitFor(delay, [this] { return !running_.load(); });
}

Status ProjectionRunner::ProcessBatch(const std::vector<KafkaMessage>& messages,
                                      std::map<TopicPartition, int64_t>& first) {
  // LockBatch from the first Apply on. A batch of records another writer applied (the registry
  // runner behind the registrar's own outcomes) writes its offsets without it, so that writer
  // never waits for this RocksDB write; it takes the lock for AfterCommit or Abandoned alone.
  std::unique_lock<std::mutex> lock;
  bool locked = false;
  auto lock_batch = [&] {
    if (!locked) lock = projection_->LockBatch();
    locked = true;
  };
  StoreBatch batch;
  std::vector<CloudEvent> applied;
  uint64_t applied_already = 0;
  std::vector<std::future<Status>> dead_letters;
  std::map<TopicPartition, int64_t> touched;
  auto dead_letter = [&](const KafkaMessage& m, const std::string& reason) {
    dead_letters.push_back(DeadLetter(*producer_, options_.dead_letter_topic, m,
                                      projection_->Name(), reason, metrics_));
  };
  for (const auto& m : messages) {
    if (!Advance(m, first, touched)) continue;  // re-delivered after a seek
    if (projection_->SkipsRaw(m.value)) continue;
    const EventPosition position{m.topic, m.partition, m.offset, m.timestamp_ms, m.key, m.value};
    if (projection_->AppliedAlready(position)) {
      ++applied_already;
      continue;
    }
    auto event = DecodeCloudEvent(m.value);
    if (!event) {
      dead_letter(m, event.error().message);
      continue;
    }
    lock_batch();
    if (auto status = projection_->Apply(*event, position, batch); !status) {
      if (status.error().code != ErrorCode::kCorruption) return Abandon(status);
      dead_letter(m, status.error().message);
      continue;
    }
    applied.push_back(std::move(*event));
  }
  for (auto& acked : dead_letters) {
    // Never move past a poison record before it is safe in the dead-letter topic.
    if (auto safe = acked.get(); !safe) {
      lock_batch();
      return Abandon(safe);
    }
  }
  for (const auto& [tp, next] : touched) {
    store_->PutOffset(batch, projection_->Name(), tp.first, tp.second, next);
  }
  auto written = store_->Write(batch);
  lock_batch();
  if (!written) return Abandon(written);
  applied_ += applied.size() + applied_already;
  projection_->AfterCommit(applied);
  Publish(touched);
  return OkStatus();
}

bool ProjectionRunner::Advance(const KafkaMessage& m, std::map<TopicPartition, int64_t>& first,
                               std::map<TopicPartition, int64_t>& touched) {
  TopicPartition tp{m.topic, m.partition};
  auto& next = next_[tp];
  if (m.offset < next) return false;
  if (m.offset > next) ReportGap(tp, next, m.offset);  // reset past records retention dropped
  first.try_emplace(tp, m.offset);
  next = m.offset + 1;
  touched[std::move(tp)] = next;
  return true;
}

Status ProjectionRunner::Abandon(Status failed) {
  projection_->Abandoned();
  return failed;
}

void ProjectionRunner::ReportGap(const TopicPartition& tp, int64_t from, int64_t to) {
  const auto& expiring = options_.expiring_topics;
  if (std::find(expiring.begin(), expiring.end(), tp.first) != expiring.end()) return;
  gaps_.Add(tp.first, tp.second, from, to);
}

void ProjectionRunner::Publish(const std::map<TopicPartition, int64_t>& next) {
  if (!options_.applied) return;
  for (const auto& [tp, offset] : next) {
    options_.applied->Publish(projection_->Name(), tp.first, tp.second, offset);
  }
}

}  // namespace dcm
