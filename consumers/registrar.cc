#include "consumers/registrar.h"

#include <algorithm>
#include <future>

#include "consumers/dead_letter.h"
#include "consumers/local_deliveries.h"
#include "projections/instance_projection.h"
#include "src/common/log.h"
#include "src/common/retry.h"
#include "src/common/thread_name.h"

namespace dcm {
namespace {

constexpr int kPollMs = 100;
constexpr int kMetadataTimeoutMs = 5000;
// How long a catch-up may go without reaching the high watermark before it is retried.
constexpr auto kCatchUpTimeout = std::chrono::seconds(30);

}  // namespace

Registrar::Registrar(RegistrarOptions options, Store* store, const RegistryView* registry,
                     Producer* producer, Metrics* metrics, const Clock* clock)
    : options_(std::move(options)),
      store_(store),
      registry_(registry),
      producer_(producer),
      metrics_(metrics),
      clock_(clock),
      decider_(store),
      gaps_("registrar", metrics, store) {}

Registrar::~Registrar() { Stop(); }

Status Registrar::Start() {
  RETURN_IF_ERROR(gaps_.Load());
  ASSIGN_OR_RETURN(consumer_, Consumer::Create(options_.kafka, options_.group_id));
  RETURN_IF_ERROR(consumer_->Subscribe(
      options_.requests_topic,
      Consumer::Rebalance{[this](const std::string&, const std::vector<int32_t>& partitions) {
                            return OnAssign(partitions);
                          },
                          [this] {
                            owner_ = false;
                            StopListening();
                            Logger("registrar")->info("msg=\"registrar partition revoked\"");
                          }}));
  running_ = true;
  thread_ = NamedThread("registrar", [this] { Run(); });
  return OkStatus();
}

void Registrar::Stop() {
  retry_wait_.Interrupt([this] { running_ = false; });
  if (options_.applied) options_.applied->Wake();  // a deletion waiting on the projections
  if (thread_.joinable()) thread_.join();
  StopListening();
  if (consumer_) consumer_->Close();  // leave the group now: a survivor takes over at once
  consumer_.reset();
}

std::map<int32_t, int64_t> Registrar::OnAssign(const std::vector<int32_t>& partitions) {
  std::map<int32_t, int64_t> offsets;
  auto stored = store_->LoadOffsets(ProviderDecider::kName, options_.requests_topic);
  if (!stored) {
    Logger("registrar")
        ->error("msg=\"cannot read decider offsets\" error=\"{}\"", stored.error().message);
    healthy_ = false;
    return offsets;
  }
  for (int32_t p : partitions) {
    auto it = stored->find(p);
    offsets[p] = it == stored->end() ? Consumer::kBeginning : it->second;
  }
  next_offset_ = offsets.count(0) && offsets[0] >= 0 ? offsets[0] : 0;
  catch_up_pending_ = true;  // Run folds the outcomes before it decides anything
  catch_up_targets_.clear();
  caught_up_ = false;
  owner_ = true;
  ListenForDeliveries();
  Logger("registrar")
      ->info("msg=\"registrar owns the request partition\" resume_offset={}", next_offset_);
  return offsets;
}

void Registrar::ListenForDeliveries() {
  StopListening();
  if (!options_.take_deliveries) return;
  deliveries_ = LocalDeliveries::Instance().Register({options_.requests_topic}, true,
                                                     [c = consumer_.get()] { c->Wake(); });
}

void Registrar::StopListening() {
  if (deliveries_) LocalDeliveries::Instance().Unregister(deliveries_);
  deliveries_ = 0;
}

std::vector<KafkaMessage> Registrar::TakeDelivered() {
  if (!deliveries_) return {};
  LocalDeliveries::Positions positions{{options_.requests_topic, {{0, next_offset_}}}};
  auto out = LocalDeliveries::Instance().Take(deliveries_, positions, options_.batch_size);
  if (!out.empty()) {
    metrics_
        ->GetCounter("dcm_registrar_handed_off_total",
                     "Requests taken from this process's acknowledgements instead of the fetch")
        .Inc(out.size());
  }
  return out;
}

Result<std::vector<KafkaMessage>> Registrar::NextBatch() {
  std::vector<KafkaMessage> local;
  if (owner_.load() && !catch_up_pending_) local = TakeDelivered();
  // Polled even with offered requests at hand, without waiting then: the poll serves the
  // group's callbacks and drains the fetched copies.
  auto fetched = consumer_->ConsumeBatch(options_.batch_size, local.empty() ? kPollMs : 0);
  if (local.empty() || !fetched) return fetched;
  for (auto& m : *fetched) {
    if (m.offset > local.back().offset) local.push_back(std::move(m));
  }
  return local;
}

void Registrar::Run() {
  auto logger = Logger("registrar");
  int failures = 0;
  while (running_.load()) {
    auto messages = NextBatch();
    if (!messages) {
      logger->warn("msg=\"consume failed\" error=\"{}\"", messages.error().message);
      continue;
    }
    if (owner_.load() && catch_up_pending_) {
      // Assigned during that poll: fold the outcomes first; the seek reads these again.
      if (!CatchUpOrStandBy(failures)) return;
      continue;
    }
    if (!joined_ && consumer_->AssignedOnce()) joined_ = true;  // caught-up owner, or owns nothing
    if (messages->empty() || !owner_.load()) continue;
    auto processed = ProcessBatch(*messages);
    if (processed && failures > 0) {
      logger->info("msg=\"registrar resumed\" failed_attempts={}", failures);
      failures = 0;
      healthy_ = true;
    }
    if (processed && *processed) {
      // A deletion waits for the projections (notified by their runners, woken by Stop), then
      // the batch is read again.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      for (const auto& [key, targets] : catch_up_targets_) {
        (void)options_.applied->WaitFor(key.first, key.second, targets, deadline,
                                        [&] { return running_.load(); });
      }
      if (auto seek = consumer_->Seek(options_.requests_topic, 0, next_offset_); !seek) {
        logger->warn("msg=\"seek failed\" error=\"{}\"", seek.error().message);
      }
    } else if (!processed) {
      // Nothing of this batch was committed: read it again from the committed offset.
      healthy_ = false;
      if (processed.error().code == ErrorCode::kCorruption) {
        logger->error("msg=\"registrar stopped: its state is unreadable\" error=\"{}\"",
                      processed.error().message);
        return;  // a broken invariant: retrying cannot help
      }
      const auto delay = RetryDelay(++failures);
      if (LogRetry(failures)) {
        logger->warn("msg=\"batch not committed, retrying\" attempt={} retry_in_ms={} error=\"{}\"",
                     failures, delay.count(), processed.error().message);
      }
      if (auto seek = consumer_->Seek(options_.requests_topic, 0, next_offset_); !seek) {
        logger->warn("msg=\"seek failed\" error=\"{}\"", seek.error().message);
      }
      retry_wait_.WaitFor(delay, [this] { return !running_.load(); });
    }
  }
}

bool Registrar::CatchUpOrStandBy(int& failures) {
  auto logger = Logger("registrar");
  auto caught_up = CatchUp();
  if (caught_up && !*caught_up) {
    // A gap in the outcome log: this state cannot be known. Leave the group so that an instance
    // with a whole state decides.
    logger->error(
        "msg=\"registrar stands by: the outcome log lost records its state needs\" gaps=\"{}\"",
        gaps_.Describe());
    healthy_ = false;
    owner_ = false;
    consumer_->Close();
    return false;
  }
  if (caught_up && failures > 0) {
    logger->info("msg=\"registrar resumed\" failed_attempts={}", failures);
    failures = 0;
    healthy_ = true;
  } else if (!caught_up) {
    healthy_ = false;
    const auto delay = RetryDelay(++failures);
    if (LogRetry(failures)) {
      logger->warn("msg=\"catch-up failed, retrying\" attempt={} retry_in_ms={} error=\"{}\"",
                   failures, delay.count(), caught_up.error().message);
    }
    retry_wait_.WaitFor(delay, [this] { return !running_.load(); });
  }
  return true;
}

Result<bool> Registrar::CatchUp() {
  const std::string& outcomes = options_.outcomes_topic;
  ASSIGN_OR_RETURN(const int partitions,
                   TopicPartitionCount(producer_->handle(), outcomes, kMetadataTimeoutMs));
  ASSIGN_OR_RETURN(auto stored, store_->LoadOffsets(ProviderDecider::kName, outcomes));
  // A catch-up cut short (and retried) stored how far its folded outcomes answer requests.
  ASSIGN_OR_RETURN(auto decided,
                   store_->LoadOffsets(ProviderDecider::kName, options_.requests_topic));
  next_offset_ = std::max(next_offset_, decided.count(0) ? decided[0] : 0);
  Offsets from, high;
  bool gap = false;
  for (int32_t p = 0; p < partitions; ++p) {
    ASSIGN_OR_RETURN(const auto marks, consumer_->QueryWatermarks(outcomes, p, kMetadataTimeoutMs));
    high[p] = marks.second;
    if (auto it = stored.find(p); it != stored.end()) {
      from[p] = it->second;
    } else {
      // A fresh store needs the whole outcome log; a state decided before outcome offsets were
      // kept (from the request log) needs what is left of it.
      from[p] = stored.empty() && next_offset_ > 0 ? marks.first : 0;
    }
    if (from[p] < marks.first) {
      gaps_.Add(outcomes, p, from[p], marks.first);
      gap = true;
    }
  }
  if (gap) return false;
  ASSIGN_OR_RETURN(const auto folded, FoldOutcomes(from, high));
  if (!folded) return false;
  int64_t resume = std::max(next_offset_, *folded);
  ASSIGN_OR_RETURN(const auto requests,
                   consumer_->QueryWatermarks(options_.requests_topic, 0, kMetadataTimeoutMs));
  if (resume < requests.first) {
    // Requests nobody decided before retention dropped them (their callers were answered 503).
    gaps_.Add(options_.requests_topic, 0, resume, requests.first);
    resume = requests.first;
  }
  RETURN_IF_ERROR(consumer_->Seek(options_.requests_topic, 0, resume));
  Logger("registrar")
      ->info("msg=\"registrar caught up with the outcome log\" partitions={} resume_offset={}",
             partitions, resume);
  next_offset_ = resume;
  catch_up_pending_ = false;
  return true;
}

Result<std::optional<int64_t>> Registrar::FoldOutcomes(const Offsets& from, const Offsets& high) {
  ASSIGN_OR_RETURN(auto read, ReadOutcomes(from, high));
  if (!read) return std::optional<int64_t>();
  // In decision order: outcomes of different providers share names across partitions (a rename
  // frees a name another provider then takes), and `seq` is the request's offset in the
  // one-partition request log.
  std::stable_sort(
      read->begin(), read->end(),
      [](const ProviderOutcome& a, const ProviderOutcome& b) { return a.seq < b.seq; });
  int64_t resume = 0, folded = 0;
  for (size_t i = 0; i < read->size();) {
    StoreBatch batch;
    for (size_t end = std::min(read->size(), i + options_.batch_size); i < end; ++i) {
      resume = std::max(resume, (*read)[i].seq + 1);
      ASSIGN_OR_RETURN(const bool applied, decider_.Fold((*read)[i], batch));
      folded += applied ? 1 : 0;
    }
    if (i == read->size()) {  // the offsets with the last of it: a crash before folds it again
      for (const auto& [p, next] : high) {
        store_->PutOffset(batch, ProviderDecider::kName, options_.outcomes_topic, p, next);
      }
      store_->PutOffset(batch, ProviderDecider::kName, options_.requests_topic, 0,
                        std::max(next_offset_, resume));
    }
    RETURN_IF_ERROR(store_->Write(batch));
  }
  outcomes_next_ = high;
  Logger("registrar")->info("msg=\"outcomes folded\" read={} folded={}", read->size(), folded);
  return std::optional<int64_t>(resume);
}

Result<std::optional<std::vector<ProviderOutcome>>> Registrar::ReadOutcomes(const Offsets& from,
                                                                            const Offsets& high) {
  const std::string& outcomes = options_.outcomes_topic;
  std::vector<ProviderOutcome> read;
  Offsets next = from;
  std::map<int32_t, int64_t> assignment;
  for (const auto& [p, offset] : from) {
    if (offset < high.at(p)) assignment[p] = offset;
  }
  if (assignment.empty()) return std::optional(std::move(read));
  ASSIGN_OR_RETURN(auto reader, Consumer::Create(options_.kafka, ""));
  RETURN_IF_ERROR(reader->Assign(outcomes, assignment));
  const auto deadline = std::chrono::steady_clock::now() + kCatchUpTimeout;
  auto done = [&] {
    for (const auto& [p, offset] : next) {
      if (offset < high.at(p)) return false;
    }
    return true;
  };
  while (!done()) {
    if (!running_.load()) return MakeError(ErrorCode::kUnavailable, "registrar stopping");
    if (std::chrono::steady_clock::now() > deadline) {
      return MakeError(ErrorCode::kTimeout, "the outcome log was not read to its end in time");
    }
    ASSIGN_OR_RETURN(auto messages, reader->ConsumeBatch(options_.batch_size, kPollMs));
    for (const auto& m : messages) {
      int64_t& at = next[m.partition];
      if (m.offset < at || m.offset >= high.at(m.partition)) continue;
      if (m.offset > at) {  // retention dropped records while they were read
        gaps_.Add(outcomes, m.partition, at, m.offset);
        return std::optional<std::vector<ProviderOutcome>>();
      }
      at = m.offset + 1;
      // What is not an outcome (poison) the registry runner dead-letters; it decided nothing.
      auto event = DecodeCloudEvent(m.value);
      if (!event || !IsProviderOutcomeType(event->type)) continue;
      if (auto outcome = DecodeProviderOutcome(*event)) read.push_back(std::move(*outcome));
    }
  }
  return std::optional(std::move(read));
}

Result<DecisionInputs> Registrar::InputsFor(const ProviderRequest& request) const {
  DecisionInputs inputs;
  if (request.kind != RequestKind::kDelete || request.force) return inputs;
  ASSIGN_OR_RETURN(auto recorded, registry_->OutcomeType(request.request_id));
  if (recorded) {
    // Re-deciding: a recorded rejection of an existing, owned provider was the live-instance
    // check (every other rejection is decided before it, the same way again).
    inputs.live_instances = *recorded == event_type::kRejected ? 1 : 0;
  } else if (options_.live_instances) {
    ASSIGN_OR_RETURN(inputs.live_instances, options_.live_instances(request.id));
  }
  return inputs;
}

Result<bool> Registrar::ProjectionsCaughtUp() {
  if (caught_up_ || !options_.applied) return true;
  if (catch_up_targets_.empty()) {
    for (const auto& [projection, topic] :
         {std::pair<std::string, std::string>{RegistryProjection::kName, options_.outcomes_topic},
          std::pair<std::string, std::string>{InstanceProjection::kName,
                                              options_.instances_topic}}) {
      if (topic.empty()) continue;
      ASSIGN_OR_RETURN(const int partitions,
                       TopicPartitionCount(producer_->handle(), topic, 10000));
      auto& targets = catch_up_targets_[{projection, topic}];
      for (int32_t p = 0; p < partitions; ++p) {
        ASSIGN_OR_RETURN(auto marks, consumer_->QueryWatermarks(topic, p, 5000));
        targets[p] = marks.second;
      }
    }
    Logger("registrar")
        ->info(
            "msg=\"a deletion waits until the registry and instance projections have caught "
            "up\"");
  }
  for (const auto& [key, targets] : catch_up_targets_) {
    for (const auto& [partition, target] : targets) {
      if (options_.applied->Next(key.first, key.second, partition) < target) return false;
    }
  }
  caught_up_ = true;
  return true;
}

Status Registrar::CommitBatch(StoreBatch& batch, std::vector<std::future<Status>>& dead_letters,
                              std::vector<Produced>& produced, int64_t next) {
  // Produced together once decided: the producer does not linger (ProviderOutcomeOptions).
  for (Produced& p : produced) {
    p.acked = producer_->ProducePositioned(options_.outcomes_topic, p.key, p.value);
  }
  for (auto& acked : dead_letters) RETURN_IF_ERROR(acked.get());
  std::vector<KafkaPosition> positions;
  positions.reserve(produced.size());
  for (auto& p : produced) {
    ASSIGN_OR_RETURN(auto position, p.acked.get());
    positions.push_back(position);
  }
  store_->PutOffset(batch, ProviderDecider::kName, options_.requests_topic, 0, next);
  // This instance's outcomes are in its state already: a later catch-up starts after them.
  Offsets outcomes_next = outcomes_next_;
  for (const auto& position : positions) {
    int64_t& next = outcomes_next[position.partition];
    if (position.offset < next) continue;
    next = position.offset + 1;
    store_->PutOffset(batch, ProviderDecider::kName, options_.outcomes_topic, position.partition,
                      next);
  }
  RegistryProjection* registry = options_.registry;
  std::unique_lock<std::mutex> lock;
  std::vector<std::pair<int32_t, int64_t>> own;
  std::vector<CloudEvent> applied;
  if (registry) {
    lock = registry->LockBatch();
    for (size_t i = 0; i < produced.size(); ++i) {
      // The bytes on the topic, decoded as the runner would: the fold sees what a rebuild sees.
      auto event = DecodeCloudEvent(produced[i].value);
      const EventPosition position{options_.outcomes_topic, positions[i].partition,
                                   positions[i].offset,     clock_->NowMillis(),
                                   produced[i].key,         produced[i].value};
      // Folded already: the runner got there first and answered its waiter (its offsets are
      // published before it releases LockBatch).
      if (options_.applied &&
          options_.applied->Next(registry->Name(), options_.outcomes_topic,
                                 positions[i].partition) > positions[i].offset) {
        continue;
      }
      // An outcome it cannot fold is left to the runner (which dead-letters what is poison).
      if (!event || !registry->ApplyOwn(*event, position, batch)) continue;
      own.emplace_back(position.partition, position.offset);
      applied.push_back(std::move(*event));
    }
  }
  if (auto written = store_->Write(batch); !written) {
    if (registry) registry->Abandoned();
    return written;
  }
  next_offset_ = next;
  outcomes_next_ = outcomes_next;
  if (registry) registry->Committed(own, applied);
  return OkStatus();
}

Result<bool> Registrar::ProcessBatch(const std::vector<KafkaMessage>& messages) {
  // A store that refuses writes (disk full) would fail the commit: decide nothing, so that no
  // outcome is produced again at every retry.
  RETURN_IF_ERROR(store_->CheckWritable());
  StoreBatch batch;
  std::vector<std::future<Status>> pending;
  std::vector<Produced> produced;
  int64_t next = next_offset_;
  bool deferred = false;
  auto& decisions = metrics_->GetCounter("dcm_registrar_decisions_total",
                                         "Requests decided by this instance's registrar");
  for (const auto& m : messages) {
    if (m.offset < next) continue;
    next = m.offset + 1;
    auto event = DecodeRequestRecord(m);
    if (!event) {
      pending.push_back(DeadLetter(*producer_, options_.dead_letter_topic, m, "registrar",
                                   event.error().message, metrics_));
      continue;
    }
    ASSIGN_OR_RETURN(bool seen, decider_.AlreadyDecided(event->id, batch));
    if (seen) continue;  // a re-delivered or duplicated request: decided once
    const auto kind = RequestKindOfType(event->type);
    if (!kind) {
      pending.push_back(DeadLetter(*producer_, options_.dead_letter_topic, m, "registrar",
                                   "not a provider request type: " + event->type, metrics_));
      continue;
    }
    ProviderOutcome outcome;
    auto request = DecodeProviderRequest(*event, options_.rules);
    if (request && request->kind == RequestKind::kDelete && !request->force) {
      ASSIGN_OR_RETURN(const bool caught_up, ProjectionsCaughtUp());
      if (!caught_up) {  // decide it once the projections hold what came before
        next = m.offset;
        deferred = true;
        break;
      }
    }
    if (request) {
      ASSIGN_OR_RETURN(const DecisionInputs inputs, InputsFor(*request));
      ASSIGN_OR_RETURN(outcome, decider_.Decide(*request, m.offset, m.timestamp_ms, batch, inputs));
    } else if (request.error().code == ErrorCode::kInvalidArgument) {
      outcome = decider_.RejectInvalid(event->id, *kind, request.error(), m.offset, batch);
      outcome.actor = event->actor;
    } else {
      pending.push_back(DeadLetter(*producer_, options_.dead_letter_topic, m, "registrar",
                                   request.error().message, metrics_));
      continue;
    }
    decisions.Inc();
    ASSIGN_OR_RETURN(bool known, registry_->HasOutcome(outcome.request_id));
    if (known) continue;  // re-decided after a takeover; the outcome is already on the topic
    const CloudEvent out = EncodeProviderOutcome(outcome, options_.source, clock_->NowMillis());
    produced.push_back(Produced{out.subject, EncodeCloudEvent(out), {}});
  }
  RETURN_IF_ERROR(CommitBatch(batch, pending, produced, next));
  return deferred;
}

}  // namespace dcm
