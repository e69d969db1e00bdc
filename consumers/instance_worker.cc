#include "consumers/instance_worker.h"

#include <algorithm>

#include "consumers/catch_up.h"
#include "consumers/dead_letter.h"
#include "src/common/log.h"
#include "src/common/thread_name.h"

namespace dcm {
namespace {

using std::chrono::milliseconds;

constexpr char kOffsetsName[] = "instance-worker";  // this worker's request offsets in the Store
constexpr int kPollMs = 100;
constexpr milliseconds kRetryDelay{1000};  // back-off before re-reading a batch Kafka refused
constexpr milliseconds kOverlayTimeout{10000};
constexpr size_t kMaxOverlay = 100000;  // writes in the decider's overlay before intake waits

}  // namespace

InstanceWorker::InstanceWorker(InstanceWorkerOptions options, Store* store, AppliedOffsets* applied,
                               const InstanceView* instances, const RegistryView* registry,
                               const HealthView* health, ServiceProviderApi* sp,
                               PolicyEngine* policy, Producer* producer, Metrics* metrics,
                               const Clock* clock)
    : options_(std::move(options)),
      store_(store),
      applied_(applied),
      instances_(instances),
      registry_(registry),
      health_(health),
      producer_(producer),
      metrics_(metrics),
      clock_(clock),
      decider_(store, applied, options_.instances_topic),
      emitter_({options_.instances_topic, options_.source, options_.crash_after_fact}, producer,
               &decider_, clock),
      sagas_({registry, health, sp, policy, clock, options_.federation, options_.discovery_timeout,
              options_.hold_ttl},
             &emitter_, &decider_, &pool_, metrics, &running_),
      cleanup_({options_.cleanup_interval, options_.cleanup_max_retries, options_.federation},
               instances, registry, health, sp, &emitter_, &pool_, metrics) {}

InstanceWorker::~InstanceWorker() { Stop(); }

Status InstanceWorker::CheckTopics() {
  ASSIGN_OR_RETURN(partitions_,
                   TopicPartitionCount(producer_->handle(), options_.instances_topic, 10000));
  ASSIGN_OR_RETURN(int request_partitions,
                   TopicPartitionCount(producer_->handle(), options_.requests_topic, 10000));
  if (partitions_ == 0 || request_partitions != partitions_) {
    return MakeError(ErrorCode::kInvalidArgument,
                     "topics " + options_.requests_topic + " and " + options_.instances_topic +
                         " must exist with the same number of partitions (found " +
                         std::to_string(request_partitions) + " and " +
                         std::to_string(partitions_) + ")");
  }
  emitter_.SetPartitions(partitions_);
  return OkStatus();
}

Status InstanceWorker::Start() {
  RETURN_IF_ERROR(CheckTopics());
  ASSIGN_OR_RETURN(consumer_, Consumer::Create(options_.kafka, options_.group_id));
  Consumer::Rebalance rebalance;
  rebalance.on_assign = [this](const std::string&, const std::vector<int32_t>& partitions) {
    return OnAssigned(partitions);
  };
  rebalance.on_revoke = [this] { OnRevoked(); };
  RETURN_IF_ERROR(consumer_->Subscribe(options_.requests_topic, std::move(rebalance)));
  running_ = true;
  pool_.Start(options_.threads, "saga");
  group_thread_ = NamedThread("instance-group", [this] { GroupLoop(); });
  cleanup_.Start();
  if (options_.federation) StartRenewer();
  return OkStatus();
}

// SPEC §10: the contracts of this instance's roots on peers are renewed here; a lost one becomes
// a recover_lost_resource request, produced like a client's.
void InstanceWorker::StartRenewer() {
  ContractRenewerOptions options;
  options.rehydrate = options_.rehydrate_on_loss;
  options.repatriate = options_.repatriate;
  options.repatriate_interval = options_.repatriate_interval;
  options.registry = registry_;
  options.health = health_;
  options.submit = [this](const InstanceEvent& request) {
    producer_->Produce(
        options_.requests_topic, request.root, EncodeCloudEvent(EncodeInstanceEvent(request)), {},
        [root = request.root](Result<KafkaPosition> delivered) {
          if (delivered) return;
          Logger("contract-renewer")
              ->error(
                  "msg=\"renewer request not delivered; a lost contract's recovery is asked "
                  "again at the next start, a repatriation at its next check\" root={} "
                  "error=\"{}\"",
                  root, delivered.error().message);
        },
        KeyPartition(request.root, partitions_));
  };
  renewer_ = std::make_unique<ContractRenewer>(std::move(options), instances_, options_.federation,
                                               &emitter_, metrics_, clock_);
  renewer_->Start();
}

void InstanceWorker::Stop() {
  if (!running_.exchange(false)) return;
  applied_->Wake();  // a takeover waiting for the projection gives up
  if (group_thread_.joinable()) group_thread_.join();
  cleanup_.Stop();
  if (renewer_) renewer_->Stop();
  pool_.Stop();
  if (consumer_) consumer_->Close();  // leave the group so the survivors take over at once
}

std::vector<int32_t> InstanceWorker::OwnedPartitions() const {
  const auto owned = emitter_.Owned();
  return {owned.begin(), owned.end()};
}

// ---- ownership --------------------------------------------------------------------------------

std::map<int32_t, int64_t> InstanceWorker::OnAssigned(const std::vector<int32_t>& partitions) {
  // What the previous owner produced must be in the local projection before its sagas resume.
  (void)WaitForCatchUp(*applied_, *consumer_, InstanceProjection::kName, options_.instances_topic,
                       partitions, options_.catch_up_timeout, running_, "instance-worker");
  // The overlay may still hold this worker's facts from an earlier ownership of these
  // partitions; the projection has them now, and newer ones on top: read the store.
  decider_.Compact(/*force=*/true);
  emitter_.Own(partitions);
  const size_t resumed = ResumeSagas(partitions);
  std::map<int32_t, int64_t> offsets;
  auto stored = store_->LoadOffsets(kOffsetsName, options_.requests_topic);
  for (int32_t p : partitions) {
    auto it = stored ? stored->find(p) : std::map<int32_t, int64_t>::iterator();
    offsets[p] = stored && it != stored->end() ? it->second : Consumer::kBeginning;
  }
  joined_ = true;
  Logger("instance-worker")
      ->info("msg=\"instance partitions assigned\" partitions={} resumed={}", partitions.size(),
             resumed);
  return offsets;
}

size_t InstanceWorker::ResumeSagas(const std::vector<int32_t>& partitions) {
  const std::set<int32_t> mine(partitions.begin(), partitions.end());
  auto sagas = instances_->ListSagas(
      [&](const std::string& root) { return mine.count(emitter_.PartitionOf(root)) > 0; });
  if (!sagas) {
    Logger("instance-worker")
        ->error("msg=\"cannot read sagas\" error=\"{}\"", sagas.error().message);
    healthy_ = false;
    return 0;
  }
  for (auto& saga : *sagas) {
    Logger("instance-worker")
        ->info("msg=\"resuming operation\" operation={} root={} request_id={} steps={}",
               saga.started.operation, saga.started.root, saga.started.request_id,
               saga.steps.size());
    sagas_.Dispatch(std::move(saga));  // unless it still runs here
  }
  return sagas->size();
}

void InstanceWorker::OnRevoked() {
  emitter_.DisownAll();
  Logger("instance-worker")->info("msg=\"instance partitions revoked\"");
}

// ---- intake -----------------------------------------------------------------------------------

void InstanceWorker::GroupLoop() {
  auto logger = Logger("instance-worker");
  while (running_) {
    auto messages = consumer_->ConsumeBatch(options_.batch_size, kPollMs);
    // The group gave this worker nothing (more instances than partitions): no OnAssigned came.
    if (!joined_ && consumer_->AssignedOnce()) joined_ = true;
    if (!messages) {
      logger->warn("msg=\"request poll failed\" error=\"{}\"", messages.error().message);
      continue;
    }
    if (messages->empty()) continue;
    if (auto status = Intake(*messages); !status) {
      logger->warn("msg=\"request batch not decided; re-reading it\" error=\"{}\"",
                   status.error().message);
      std::map<int32_t, int64_t> first;
      for (const auto& m : *messages) first.emplace(m.partition, m.offset);
      for (auto [p, offset] : first) {
        (void)consumer_->Seek(options_.requests_topic, p, offset);
      }
      std::this_thread::sleep_for(kRetryDelay);  // Kafka or the Store refused: back off
    }
  }
}

Status InstanceWorker::Intake(const std::vector<KafkaMessage>& messages) {
  CompactDecider();
  std::vector<std::future<Status>> dead_letters;
  std::vector<FactEmitter::Sent> sent;
  std::vector<Saga> to_run;
  StartedInBatch batch;
  std::map<int32_t, int64_t> next;
  Status decided = OkStatus();
  for (const auto& m : messages) {
    if (!emitter_.OwnsPartition(m.partition)) continue;
    auto request = DecodeRequest(m);
    if (!request) {
      dead_letters.push_back(DeadLetter(*producer_, options_.dead_letter_topic, m,
                                        "instance-worker", request.error().message, metrics_));
      next[m.partition] = m.offset + 1;
      continue;
    }
    decided = DecideOne(*request, batch, sent, to_run);
    if (!decided) break;  // the facts produced so far are still folded and committed below
    next[m.partition] = m.offset + 1;
  }
  // On failure the batch is read again; what was acknowledged is in the decider's state then.
  RETURN_IF_ERROR(Commit(dead_letters, sent, next));
  for (auto& saga : to_run) sagas_.Dispatch(std::move(saga));
  return decided;
}

Status InstanceWorker::DecideOne(const InstanceEvent& request, StartedInBatch& batch,
                                 std::vector<FactEmitter::Sent>& sent, std::vector<Saga>& to_run) {
  ASSIGN_OR_RETURN(auto decision, decider_.Decide(request, batch));
  using Kind = InstanceDecision::Kind;
  if (decision.kind == Kind::kFailed || decision.kind == Kind::kStarted) {
    ASSIGN_OR_RETURN(auto fact, ToInstanceFact(decision.fact));
    sent.push_back(emitter_.Produce(request.root, std::move(fact)));
  }
  if (decision.kind == Kind::kFailed) {
    CountInstanceOutcome(metrics_, decision.fact.operation, decision.fact.reason);
  } else if (decision.kind == Kind::kStarted) {
    batch[request.root] = request.request_id;
  }
  if (decision.kind == Kind::kResume || decision.kind == Kind::kStarted) {
    to_run.push_back(std::move(decision.saga));
  }
  return OkStatus();
}

Status InstanceWorker::Commit(std::vector<std::future<Status>>& dead_letters,
                              std::vector<FactEmitter::Sent>& sent,
                              const std::map<int32_t, int64_t>& next) {
  Status result = OkStatus();
  for (auto& ack : dead_letters) {
    if (auto status = ack.get(); !status && result) result = status;
  }
  for (auto& s : sent) {
    if (auto status = emitter_.Fold(s); !status && result) result = status;
  }
  RETURN_IF_ERROR(result);
  StoreBatch offsets;
  for (auto [p, offset] : next) {
    store_->PutOffset(offsets, kOffsetsName, options_.requests_topic, p, offset);
  }
  return store_->Write(offsets);
}

Result<InstanceEvent> InstanceWorker::DecodeRequest(const KafkaMessage& m) {
  ASSIGN_OR_RETURN(auto event, DecodeRequestRecord(m));
  ASSIGN_OR_RETURN(auto request, DecodeInstanceEvent(event));
  if (request.type != event_type::kOperationRequested) {
    return MakeError(ErrorCode::kCorruption, "not a request: " + request.type);
  }
  return request;
}

void InstanceWorker::CompactDecider() {
  if (decider_.Compact() || decider_.OverlaySize() < kMaxOverlay) return;
  // Far ahead of the local projection: let it catch up rather than grow the overlay.
  if (decider_.CompactBy(std::chrono::steady_clock::now() + kOverlayTimeout,
                         [this] { return running_.load(); }) ||
      decider_.OverlaySize() < kMaxOverlay) {
    return;
  }
  Logger("instance-worker")->warn("msg=\"projection behind this worker's facts\"");
}

}  // namespace dcm
