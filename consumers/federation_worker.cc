#include "consumers/federation_worker.h"

#include <algorithm>

#include "consumers/dead_letter.h"
#include "src/common/log.h"
#include "src/common/thread_name.h"
#include "src/common/uuid.h"

namespace dcm {
namespace {

constexpr int kPollMs = 100;
constexpr int kMetadataTimeoutMs = 5000;
constexpr auto kCatchUpTimeout = std::chrono::seconds(30);
constexpr size_t kMaxDuePerSweep = 1000;

std::shared_ptr<spdlog::logger> WorkerLogger() {
  static auto logger = Logger("federation");
  return logger;
}

// The Kafka key of an outcome: its reservation (every outcome of one reservation and its contract
// on one partition, in order), else what the event is about.
std::string OutcomeKey(const FederationOutcome& outcome, const CloudEvent& event) {
  const std::string& reservation = BaseOf(outcome).reservation_id;
  return reservation.empty() ? event.subject : reservation;
}

// The contract a (new, not repeated) outcome ended, if any.
const ContractFact* EndedContract(const FederationOutcome& outcome) {
  if (BaseOf(outcome).repeat) return nullptr;
  if (const auto* o = std::get_if<ContractExpired>(&outcome)) return o;
  if (const auto* o = std::get_if<ContractTerminated>(&outcome)) return o;
  if (const auto* o = std::get_if<ContractRevoked>(&outcome)) return o;
  return nullptr;
}

}  // namespace

FederationWorker::FederationWorker(FederationWorkerOptions options, Store* store,
                                   Producer* producer, Metrics* metrics, const Clock* clock)
    : options_(std::move(options)),
      store_(store),
      producer_(producer),
      metrics_(metrics),
      clock_(clock),
      decider_(store, options_.policy) {}

FederationWorker::~FederationWorker() { Stop(); }

Status FederationWorker::Start() {
  ASSIGN_OR_RETURN(consumer_, Consumer::Create(options_.kafka, options_.group_id));
  RETURN_IF_ERROR(consumer_->Subscribe(
      options_.requests_topic,
      Consumer::Rebalance{[this](const std::string&, const std::vector<int32_t>& partitions) {
                            return OnAssign(partitions);
                          },
                          [this] {
                            owner_ = false;
                            WorkerLogger()->info("msg=\"federation partition revoked\"");
                          }}));
  running_ = true;
  thread_ = NamedThread("federation", [this] { Run(); });
  return OkStatus();
}

void FederationWorker::Stop() {
  retry_wait_.Interrupt([this] { running_ = false; });
  if (thread_.joinable()) thread_.join();
  if (consumer_) consumer_->Close();
  consumer_.reset();
}

std::map<int32_t, int64_t> FederationWorker::OnAssign(const std::vector<int32_t>& partitions) {
  std::map<int32_t, int64_t> offsets;
  auto stored = store_->LoadOffsets(FederationDecider::kName, options_.requests_topic);
  if (!stored) {
    WorkerLogger()->error("msg=\"cannot read federation decider offsets\" error=\"{}\"",
                          stored.error().message);
    healthy_ = false;
    return offsets;
  }
  for (int32_t p : partitions) {
    auto it = stored->find(p);
    offsets[p] = it == stored->end() ? Consumer::kBeginning : it->second;
  }
  next_offset_ = offsets.count(0) && offsets[0] >= 0 ? offsets[0] : 0;
  catch_up_pending_ = true;
  owner_ = true;
  WorkerLogger()->info("msg=\"federation worker owns the request partition\" resume_offset={}",
                       next_offset_);
  return offsets;
}

void FederationWorker::Run() {
  auto logger = WorkerLogger();
  int failures = 0;
  while (running_.load()) {
    auto messages = consumer_->ConsumeBatch(options_.batch_size, kPollMs);
    if (!messages) {
      logger->warn("msg=\"consume failed\" error=\"{}\"", messages.error().message);
      continue;
    }
    Status step = OkStatus();
    if (owner_.load() && catch_up_pending_) {
      auto caught_up = CatchUp();
      if (caught_up && !*caught_up) {
        logger->error("msg=\"federation worker stands by: the outcome log lost records\"");
        healthy_ = false;
        owner_ = false;
        consumer_->Close();
        return;
      }
      if (!caught_up) step = tl::unexpected(caught_up.error());
    } else if (owner_.load()) {
      if (!messages->empty()) step = ProcessBatch(*messages);
      if (step) Sweep();
    }
    if (step) {
      if (failures > 0) logger->info("msg=\"federation worker resumed\" failed={}", failures);
      failures = 0;
      healthy_ = true;
      continue;
    }
    healthy_ = false;
    if (step.error().code == ErrorCode::kCorruption) {
      logger->error("msg=\"federation worker stopped: its state is unreadable\" error=\"{}\"",
                    step.error().message);
      return;
    }
    const auto delay = RetryDelay(++failures);
    if (LogRetry(failures)) {
      logger->warn("msg=\"federation batch not committed, retrying\" attempt={} error=\"{}\"",
                   failures, step.error().message);
    }
    if (!catch_up_pending_) {
      if (auto seek = consumer_->Seek(options_.requests_topic, 0, next_offset_); !seek) {
        logger->warn("msg=\"seek failed\" error=\"{}\"", seek.error().message);
      }
    }
    retry_wait_.WaitFor(delay, [this] { return !running_.load(); });
  }
}

Result<bool> FederationWorker::CatchUp() {
  const std::string& outcomes = options_.outcomes_topic;
  ASSIGN_OR_RETURN(const int partitions,
                   TopicPartitionCount(producer_->handle(), outcomes, kMetadataTimeoutMs));
  ASSIGN_OR_RETURN(auto stored, store_->LoadOffsets(FederationDecider::kName, outcomes));
  Offsets from, high;
  for (int32_t p = 0; p < partitions; ++p) {
    ASSIGN_OR_RETURN(const auto marks, consumer_->QueryWatermarks(outcomes, p, kMetadataTimeoutMs));
    high[p] = marks.second;
    auto it = stored.find(p);
    from[p] = it == stored.end() ? 0 : it->second;
    if (from[p] < marks.first) return false;  // retention dropped outcomes the state needs
  }
  ASSIGN_OR_RETURN(auto read, ReadOutcomes(from, high));
  if (!read) return false;
  int64_t resume = next_offset_;
  for (const auto& outcome : *read) resume = std::max(resume, BaseOf(outcome).seq + 1);
  RETURN_IF_ERROR(FoldOutcomes(std::move(*read), high));
  if (options_.placer) RETURN_IF_ERROR(options_.placer->Adopt());
  ASSIGN_OR_RETURN(const auto requests,
                   consumer_->QueryWatermarks(options_.requests_topic, 0, kMetadataTimeoutMs));
  if (resume < requests.first) {
    WorkerLogger()->warn("msg=\"requests nobody decided were dropped by retention\" from={} to={}",
                         resume, requests.first);
    resume = requests.first;
  }
  RETURN_IF_ERROR(consumer_->Seek(options_.requests_topic, 0, resume));
  WorkerLogger()->info("msg=\"federation worker caught up with the outcome log\" resume_offset={}",
                       resume);
  next_offset_ = resume;
  catch_up_pending_ = false;
  return true;
}

Status FederationWorker::FoldOutcomes(std::vector<FederationOutcome> outcomes,
                                      const Offsets& high) {
  // In decision order (a topic made with several partitions spreads them by reservation).
  std::stable_sort(outcomes.begin(), outcomes.end(),
                   [](const auto& a, const auto& b) { return BaseOf(a).seq < BaseOf(b).seq; });
  size_t folded = 0;
  for (size_t i = 0; i < outcomes.size() || i == 0;) {
    StoreBatch batch;
    for (size_t end = std::min(outcomes.size(), i + options_.batch_size); i < end; ++i) {
      ASSIGN_OR_RETURN(const bool applied, decider_.Fold(outcomes[i], batch));
      folded += applied ? 1 : 0;
    }
    if (i >= outcomes.size()) {  // the offsets with the last of it: a crash before folds again
      for (const auto& [p, next] : high) {
        store_->PutOffset(batch, FederationDecider::kName, options_.outcomes_topic, p, next);
      }
    }
    RETURN_IF_ERROR(store_->Write(batch));
    if (outcomes.empty()) break;
  }
  outcomes_next_ = high;
  WorkerLogger()->info("msg=\"federation outcomes folded\" read={} folded={}", outcomes.size(),
                       folded);
  return OkStatus();
}

Result<std::optional<std::vector<FederationOutcome>>> FederationWorker::ReadOutcomes(
    const Offsets& from, const Offsets& high) {
  std::vector<FederationOutcome> read;
  Offsets next = from;
  std::map<int32_t, int64_t> assignment;
  for (const auto& [p, offset] : from) {
    if (offset < high.at(p)) assignment[p] = offset;
  }
  if (assignment.empty()) return std::optional(std::move(read));
  ASSIGN_OR_RETURN(auto reader, Consumer::Create(options_.kafka, ""));
  RETURN_IF_ERROR(reader->Assign(options_.outcomes_topic, assignment));
  const auto deadline = std::chrono::steady_clock::now() + kCatchUpTimeout;
  auto done = [&] {
    for (const auto& [p, offset] : next) {
      if (offset < high.at(p)) return false;
    }
    return true;
  };
  while (!done()) {
    if (!running_.load()) return MakeError(ErrorCode::kUnavailable, "federation worker stopping");
    if (std::chrono::steady_clock::now() > deadline) {
      return MakeError(ErrorCode::kTimeout, "the outcome log was not read to its end in time");
    }
    ASSIGN_OR_RETURN(auto messages, reader->ConsumeBatch(options_.batch_size, kPollMs));
    for (const auto& m : messages) {
      int64_t& at = next[m.partition];
      if (m.offset < at || m.offset >= high.at(m.partition)) continue;
      if (m.offset > at) return std::optional<std::vector<FederationOutcome>>();  // a gap
      at = m.offset + 1;
      // Poison is the projection runner's to dead-letter; it decided nothing.
      auto event = DecodeCloudEvent(m.value);
      if (!event || !IsFederationOutcomeType(event->type)) continue;
      if (auto outcome = DecodeFederationOutcome(*event)) read.push_back(std::move(*outcome));
    }
  }
  return std::optional(std::move(read));
}

Result<std::optional<FederationOutcome>> FederationWorker::DecideRecord(
    const KafkaMessage& m, StoreBatch& batch, std::vector<std::future<Status>>& dead_letters) {
  auto dead_letter = [&](const std::string& why) {
    dead_letters.push_back(
        DeadLetter(*producer_, options_.dead_letter_topic, m, "federation", why, metrics_));
    return std::optional<FederationOutcome>();
  };
  auto event = DecodeRequestRecord(m);
  if (!event) return dead_letter(event.error().message);
  ASSIGN_OR_RETURN(const bool seen, decider_.AlreadyDecided(event->id, batch));
  if (seen) return std::optional<FederationOutcome>();  // re-delivered: decided once
  if (!IsFederationRequestType(event->type)) {
    return dead_letter("not a federation request type: " + event->type.substr(0, 128));
  }
  auto request = DecodeFederationRequest(*event);
  if (request) return decider_.Decide(*request, m.offset, options_.capacity, batch);
  if (request.error().code != ErrorCode::kInvalidArgument) {
    return dead_letter(request.error().message);
  }
  return std::optional(decider_.RefuseInvalid(*event, request.error(), m.offset, batch));
}

Status FederationWorker::ProcessBatch(const std::vector<KafkaMessage>& messages) {
  RETURN_IF_ERROR(store_->CheckWritable());
  StoreBatch batch;
  std::vector<std::future<Status>> dead_letters;
  std::vector<Produced> produced;
  std::vector<std::pair<std::string, std::string>> ended;  // contract id, its instance id
  int64_t next = next_offset_;
  for (const auto& m : messages) {
    if (m.offset < next) continue;
    next = m.offset + 1;
    ASSIGN_OR_RETURN(auto outcome, DecideRecord(m, batch, dead_letters));
    if (!outcome) continue;
    BaseOf(*outcome).source = options_.source;
    metrics_
        ->GetCounter("dcm_federation_decisions_total",
                     "Federation requests decided by this instance, by outcome type",
                     std::string("type=\"") + TypeOf(*outcome) + "\"")
        .Inc();
    if (const auto* fact = EndedContract(*outcome)) {
      ended.emplace_back(fact->contract_id, fact->remote_instance_id);
    }
    const CloudEvent out = EncodeFederationOutcome(*outcome);
    Produced& p =
        produced.emplace_back(Produced{OutcomeKey(*outcome, out), EncodeCloudEvent(out), {}});
    p.acked = producer_->ProducePositioned(options_.outcomes_topic, p.key, p.value);
  }
  RETURN_IF_ERROR(CommitBatch(batch, dead_letters, produced, next));
  if (options_.placer) {
    for (const auto& [contract_id, instance_id] : ended)
      options_.placer->Ended(contract_id, instance_id);
  }
  return OkStatus();
}

Status FederationWorker::CommitBatch(StoreBatch& batch,
                                     std::vector<std::future<Status>>& dead_letters,
                                     std::vector<Produced>& produced, int64_t next) {
  for (auto& acked : dead_letters) RETURN_IF_ERROR(acked.get());
  Offsets outcomes_next = outcomes_next_;
  for (auto& p : produced) {
    ASSIGN_OR_RETURN(const KafkaPosition position, p.acked.get());
    int64_t& at = outcomes_next[position.partition];
    if (position.offset < at) continue;
    at = position.offset + 1;
    store_->PutOffset(batch, FederationDecider::kName, options_.outcomes_topic, position.partition,
                      at);
  }
  store_->PutOffset(batch, FederationDecider::kName, options_.requests_topic, 0, next);
  RETURN_IF_ERROR(store_->Write(batch));
  next_offset_ = next;
  outcomes_next_ = std::move(outcomes_next);
  return OkStatus();
}

Result<std::vector<FederationRequest>> FederationWorker::DueRequests(int64_t now_ms) const {
  ASSIGN_OR_RETURN(const auto due, decider_.state().Due(now_ms, kMaxDuePerSweep));
  std::vector<FederationRequest> out;
  const std::string ns = FederationIdNamespace();
  for (const DueLease& lease : due) {
    FederationEnvelope envelope;
    envelope.event_id = UuidV5(ns, std::string(lease.contract ? "expiry:c/" : "expiry:h/") +
                                       lease.id + "@" + std::to_string(lease.expires_at_ms));
    envelope.source = options_.source + "-sweeper";
    envelope.time_ms = now_ms;
    envelope.actor = options_.source;
    if (lease.contract) {
      ContractExpiryDue r;
      static_cast<FederationEnvelope&>(r) = envelope;
      r.contract_id = lease.id;
      r.expires_at_ms = lease.expires_at_ms;
      out.push_back(std::move(r));
    } else {
      ReservationExpiryDue r;
      static_cast<FederationEnvelope&>(r) = envelope;
      r.reservation_id = lease.id;
      r.expires_at_ms = lease.expires_at_ms;
      out.push_back(std::move(r));
    }
  }
  return out;
}

void FederationWorker::Sweep() {
  if (options_.sweep_interval.count() <= 0) return;
  const int64_t now = clock_->NowMillis();
  if (now < next_sweep_ms_) return;
  next_sweep_ms_ = now + options_.sweep_interval.count();
  auto due = DueRequests(now);
  if (!due) {
    WorkerLogger()->warn("msg=\"federation sweep failed\" error=\"{}\"", due.error().message);
    return;
  }
  std::erase_if(swept_, [&](const auto& entry) {
    return entry.second + options_.resweep_after.count() <= now;
  });
  for (const auto& request : *due) {
    const std::string& id = EnvelopeOf(request).event_id;
    if (!swept_.emplace(id, now).second) continue;  // asked recently; not decided yet
    const CloudEvent event = EncodeFederationRequest(request);
    producer_->Produce(options_.requests_topic, event.subject, EncodeCloudEvent(event), {},
                       [id](Result<KafkaPosition> delivered) {
                         if (!delivered) {
                           WorkerLogger()->warn(
                               "msg=\"expiry request not produced\" id={} error=\"{}\"", id,
                               delivered.error().message);
                         }
                       });
  }
  if (options_.placer) {
    if (auto placed = options_.placer->Reconcile(now); !placed) {
      WorkerLogger()->warn("msg=\"contract placement pass failed\" error=\"{}\"",
                           placed.error().message);
    }
  }
}

}  // namespace dcm
