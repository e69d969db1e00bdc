#include "consumers/prober.h"

#include <algorithm>
#include <limits>
#include <type_traits>

#include "consumers/catch_up.h"
#include "src/common/log.h"
#include "src/common/thread_name.h"
#include "src/common/time_format.h"
#include "src/common/uuid.h"

namespace dcm {
namespace {

using std::chrono::milliseconds;

constexpr std::chrono::microseconds kLaunchWindow{5000};
// The finest step of heartbeat expiry checks (SPEC §8 asks for 1 s).
constexpr milliseconds kExpiryGranularity{100};

constexpr ProbeFailure kFailures[] = {
    ProbeFailure::kNone,       ProbeFailure::kTimeout, ProbeFailure::kConnect,
    ProbeFailure::kDns,        ProbeFailure::kTls,     ProbeFailure::kBlocked,
    ProbeFailure::kHttpStatus, ProbeFailure::kBadBody, ProbeFailure::kReportedUnhealthy};

}  // namespace

Prober::Prober(ProberOptions options, const Store* store, const RegistryView* registry,
               const HealthView* health, HealthChecker* checker, Producer* producer,
               Metrics* metrics, const Clock* clock)
    : options_(std::move(options)),
      store_(store),
      registry_(registry),
      health_(health),
      checker_(checker),
      producer_(producer),
      metrics_(metrics),
      clock_(clock),
      scheduler_(ScheduleOptionsOf(options_.health), std::random_device{}()),
      tracker_(options_.heartbeat) {
  static_assert(std::size(kFailures) == std::extent_v<decltype(probes_by_result_)>);
  for (size_t i = 0; i < std::size(kFailures); ++i) {
    const auto name = ProbeFailureName(kFailures[i]);
    probes_by_result_[i] = &metrics_->GetCounter(
        "dcm_probes_total", "Health probes by result (healthy or the failure class)",
        "result=\"" + std::string(name.empty() ? "healthy" : name) + "\"");
  }
  latency_ = &metrics_->GetHistogram("dcm_probe_latency_seconds", "Health probe latency");
  lag_ = &metrics_->GetHistogram("dcm_probe_scheduler_lag_seconds",
                                 "How late probes start after their due time");
  in_flight_ = &metrics_->GetGauge("dcm_probes_in_flight", "Health probes awaiting an answer");
  owned_gauge_ = &metrics_->GetGauge("dcm_prober_providers", "Providers this instance probes");
  partitions_gauge_ =
      &metrics_->GetGauge("dcm_prober_partitions", "dcm.health partitions this instance owns");
  heartbeat_gauge_ = &metrics_->GetGauge("dcm_heartbeat_providers",
                                         "Heartbeat providers whose expiry this instance decides");
  changes_ = &metrics_->GetCounter("dcm_health_changes_total", "Provider health state changes");
  emit_failures_ = &metrics_->GetCounter("dcm_health_events_failed_total",
                                         "Health events the broker did not acknowledge");
  heartbeats_ = &metrics_->GetCounter("dcm_heartbeats_total",
                                      "Provider heartbeats accepted by this instance");
  expiries_ = &metrics_->GetCounter("dcm_heartbeat_expiries_total",
                                    "Providers this instance made Unavailable (heartbeat_expired)");
  gc_requests_ = &metrics_->GetCounter(
      "dcm_provider_gc_requests_total",
      "Expiry requests for providers silent for PROVIDER_GC_AFTER (SPEC §8), by this instance");
}

Prober::~Prober() { Stop(); }

std::string Prober::HealthUrl(const std::string& endpoint) {
  std::string url = endpoint;
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url + "/health";
}

Status Prober::Start() {
  ASSIGN_OR_RETURN(partitions_,
                   TopicPartitionCount(producer_->handle(), options_.health_topic, 10000));
  if (partitions_ == 0) {
    return MakeError(ErrorCode::kUnavailable, "topic " + options_.health_topic + " is missing");
  }
  if (ProbesTopic() != options_.health_topic) {
    ASSIGN_OR_RETURN(const int32_t probe_partitions,
                     TopicPartitionCount(producer_->handle(), ProbesTopic(), 10000));
    if (probe_partitions != partitions_) {
      return MakeError(ErrorCode::kInvalidArgument,
                       "topic " + ProbesTopic() + " has " + std::to_string(probe_partitions) +
                           " partitions and " + options_.health_topic + " has " +
                           std::to_string(partitions_) +
                           ": they must be equal (a provider's probes and transitions share a "
                           "partition number); create " +
                           ProbesTopic() + " with " + std::to_string(partitions_));
    }
  }
  ASSIGN_OR_RETURN(consumer_, Consumer::Create(options_.kafka, options_.group_id));
  Consumer::Rebalance rebalance;
  rebalance.on_assign = [this](const std::string&, const std::vector<int32_t>& partitions) {
    // Runs inside ConsumeBatch on the group thread; the slow part (catching up) runs after it.
    pending_assign_ = partitions;
    assigned_ = true;
    return std::map<int32_t, int64_t>();
  };
  rebalance.on_revoke = [this] { OnRevoked(); };
  rebalance.pause_assigned = true;
  RETURN_IF_ERROR(consumer_->Subscribe(options_.health_topic, std::move(rebalance)));
  if (options_.health.insecure_skip_verify) {
    Logger("prober")->warn(
        "msg=\"TLS verification of provider health endpoints is OFF "
        "(HEALTH_CHECK_INSECURE_SKIP_VERIFY)\"");
  }
  running_ = true;
  group_thread_ = NamedThread("prober-group", [this] { GroupLoop(); });
  scheduler_thread_ = NamedThread("prober-sched", [this] { SchedulerLoop(); });
  return OkStatus();
}

void Prober::Stop() {
  if (!running_.exchange(false)) return;
  wake_.notify_all();
  if (options_.applied) options_.applied->Wake();  // a takeover waiting for the projection
  if (scheduler_thread_.joinable()) scheduler_thread_.join();
  if (group_thread_.joinable()) group_thread_.join();
  if (consumer_) consumer_->Close();  // leave the group so the survivors take over at once
}

void Prober::GroupLoop() {
  auto logger = Logger("prober");
  auto last_reconcile = std::chrono::steady_clock::now();
  while (running_) {
    auto messages = consumer_->ConsumeBatch(64, 200);
    if (!messages) {
      logger->warn("msg=\"prober group poll failed\" error=\"{}\"", messages.error().message);
    }
    if (assigned_) {
      auto partitions = std::move(pending_assign_);
      pending_assign_.clear();
      assigned_ = false;
      if (!partitions.empty()) OnAssigned(partitions);
      joined_ = true;
      last_reconcile = std::chrono::steady_clock::now();
    } else if (std::chrono::steady_clock::now() - last_reconcile > options_.reconcile_interval) {
      std::set<int32_t> owned;
      {
        std::lock_guard lock(mu_);
        owned = owned_;
      }
      if (!owned.empty()) Reconcile(owned);
      last_reconcile = std::chrono::steady_clock::now();
    }
    // The group gave this instance nothing (more instances than partitions): no on_assign came.
    if (!joined_ && consumer_->AssignedOnce()) joined_ = true;
  }
}

void Prober::OnAssigned(const std::vector<int32_t>& partitions) {
  auto logger = Logger("prober");
  // What the previous owner produced must be in the local projection before its records seed
  // ours (consumers/catch_up.h).
  if (options_.applied) {
    const auto deadline = std::chrono::steady_clock::now() + options_.catch_up_timeout;
    for (const std::string* topic :
         {static_cast<const std::string*>(&options_.health_topic), &ProbesTopic()}) {
      const auto left = std::max(std::chrono::milliseconds(0),
                                 std::chrono::duration_cast<std::chrono::milliseconds>(
                                     deadline - std::chrono::steady_clock::now()));
      (void)WaitForCatchUp(*options_.applied, *consumer_, HealthProjection::kName, *topic,
                           partitions, left, running_, "prober");
      if (ProbesTopic() == options_.health_topic) break;
    }
  }
  {
    std::lock_guard lock(mu_);
    owned_.insert(partitions.begin(), partitions.end());
    partitions_gauge_->Set(static_cast<int64_t>(owned_.size()));
  }
  Reconcile(std::set<int32_t>(partitions.begin(), partitions.end()));
  logger->info("msg=\"prober partitions assigned\" partitions={} providers={}", partitions.size(),
               OwnedProviders());
}

void Prober::OnRevoked() {
  {
    std::lock_guard lock(mu_);
    // The next owner times expiry from the log: record the beats coalesced here first.
    for (const auto& record : tracker_.Unrecorded(clock_->NowMillis())) {
      Emit(ProbesTopic(), EncodeHeartbeatRecord(record, options_.source));
    }
    owned_.clear();
    scheduler_.Clear();
    tracker_.Clear();
    SetOwnedGauges();
    partitions_gauge_->Set(0);
  }
  // Every health event this instance produced must be in Kafka before the next owner reads the
  // high watermark (Emit enqueues under mu_, so nothing is enqueued after the Clear above).
  if (auto flushed = producer_->Flush(10000); !flushed) {
    Logger("prober")->warn("msg=\"flush on revoke incomplete\" error=\"{}\"",
                           flushed.error().message);
  }
  Logger("prober")->info("msg=\"prober partitions revoked\"");
}

void Prober::Reconcile(const std::set<int32_t>& partitions) {
  ProviderFilter filter;
  filter.accept = [&](const Provider& p) {
    return partitions.count(KeyPartition(p.id, partitions_)) > 0;
  };
  auto page = registry_->List(filter, "", SIZE_MAX);
  if (!page) {
    Logger("prober")->warn("msg=\"cannot read the registry\" error=\"{}\"", page.error().message);
    return;
  }
  std::set<std::string> known;
  {
    std::lock_guard lock(mu_);
    for (auto& id : scheduler_.Ids()) known.insert(std::move(id));
    for (auto& id : tracker_.Ids()) known.insert(std::move(id));
  }
  std::vector<std::optional<HealthRecord>> records(page->providers.size());
  for (size_t i = 0; i < page->providers.size(); ++i) {
    if (known.count(page->providers[i].id)) continue;
    auto record = health_->Get(page->providers[i].id);
    if (record) records[i] = std::move(*record);
  }
  std::vector<std::string> forget;
  {
    std::lock_guard lock(mu_);
    std::set<std::string> present;
    for (size_t i = 0; i < page->providers.size(); ++i) {
      const Provider& p = page->providers[i];
      if (!owned_.count(KeyPartition(p.id, partitions_))) continue;  // revoked meanwhile
      present.insert(p.id);
      if (Track(p, records[i], false)) forget.push_back(p.id);
    }
    for (const auto& id : scheduler_.Ids()) {
      if (partitions.count(KeyPartition(id, partitions_)) && !present.count(id)) {
        scheduler_.Remove(id);
        forget.push_back(id);
      }
    }
    for (const auto& id : tracker_.Ids()) {
      if (partitions.count(KeyPartition(id, partitions_)) && !present.count(id)) {
        tracker_.Remove(id);
      }
    }
    SetOwnedGauges();
  }
  for (const auto& id : forget) checker_->Forget(id);
  wake_.notify_one();
}

bool Prober::Owns(const std::string& id) const {
  return owned_.count(KeyPartition(id, partitions_)) > 0;
}

void Prober::OnProvidersChanged(const std::vector<ProviderChange>& changes) {
  if (!running_) return;
  for (const auto& change : changes) {
    {
      std::lock_guard lock(mu_);
      if (!Owns(change.id)) continue;
      if (!change.provider) {
        scheduler_.Remove(change.id);
        tracker_.Remove(change.id);
        SetOwnedGauges();
      }
    }
    if (!change.provider) {
      checker_->Forget(change.id);
      continue;
    }
    std::optional<HealthRecord> record;
    if (auto stored = health_->Get(change.id); stored) record = std::move(*stored);
    bool url_changed = false;
    {
      std::lock_guard lock(mu_);
      if (!Owns(change.id)) continue;  // revoked meanwhile
      url_changed = Track(*change.provider, record, true);
      SetOwnedGauges();
    }
    if (url_changed) checker_->Forget(change.id);
  }
  wake_.notify_one();
}

void Prober::SchedulerLoop() {
  std::vector<std::chrono::microseconds> lags;
  std::unique_lock lock(mu_);
  while (running_) {
    ExpireDue();
    const auto now = clock_->Now();
    lags.clear();
    // Probes due within the next few ms start now: one wake-up per batch instead of one timed
    // wait per probe (1,000/s at 10k providers), for a shift far below the ±10% jitter.
    auto tasks = scheduler_.TakeDue(now + kLaunchWindow, &lags);
    in_flight_->Set(static_cast<int64_t>(scheduler_.in_flight()));
    if (!tasks.empty()) {
      lock.unlock();
      for (auto lag : lags) {
        // TakeDue measured against now + kLaunchWindow; early starts count as on time.
        lag_->Observe(static_cast<double>(std::max<int64_t>(0, (lag - kLaunchWindow).count())) /
                      1e6);
      }
      for (const auto& task : tasks) Launch(task);
      lock.lock();
      continue;
    }
    // Sleep until the next due probe; completions, changes and assignments wake us earlier.
    // Microseconds, not milliseconds: a wait rounded down to 0 ms would spin until the due time,
    // which at 1,000 probes/s is always.
    std::chrono::microseconds wait =
        std::min<std::chrono::microseconds>(std::chrono::seconds(1), UntilNextExpiry(now));
    if (auto next = scheduler_.NextDue();
        next && scheduler_.in_flight() < static_cast<size_t>(options_.health.max_in_flight)) {
      wait = std::clamp(std::chrono::duration_cast<std::chrono::microseconds>(*next - now),
                        std::chrono::microseconds(0), wait);
    }
    if (wait.count() > 0) wake_.wait_for(lock, wait);
  }
}

void Prober::Launch(const ProbeTask& task) {
  checker_->Check(ProbeRequest{task.id, task.url, options_.health.timeout},
                  [this, task](ProbeResponse response) { Finish(task, std::move(response)); });
}

void Prober::Finish(const ProbeTask& task, ProbeResponse response) {
  if (!running_) return;
  bool notify = false;
  {
    std::lock_guard lock(mu_);
    // Only a full in-flight budget keeps the scheduler waiting on completions; the next due
    // time of this provider is an interval away, never earlier than what it waits for.
    notify = scheduler_.in_flight() >= static_cast<size_t>(options_.health.max_in_flight);
    if (tracker_.Has(task.id)) {  // liveness both: the transition is the combined status's
      if (auto stored = health_->Get(task.id); stored && *stored) {
        scheduler_.RefreshBeatSignal(task.id, **stored);
      }
    }
    auto done = scheduler_.Complete(task, std::move(response), clock_->Now(), NewUuidV4());
    if (done) {
      const HealthProbe& probe = done->probe;
      for (size_t i = 0; i < std::size(kFailures); ++i) {
        if (kFailures[i] == probe.failure) probes_by_result_[i]->Inc();
      }
      latency_->Observe(static_cast<double>(probe.latency_us) / 1e6);
      // Enqueued under mu_: OnRevoked's flush then covers everything this owner produced.
      Emit(ProbesTopic(), EncodeHealthProbe(probe, options_.source));
      if (done->change) {
        const HealthChange& c = *done->change;
        changes_->Inc();
        Logger("prober")->info("msg=\"provider health changed\" id={} from={} to={} reason=\"{}\"",
                               c.provider_id, HealthStatusName(c.from), HealthStatusName(c.to),
                               c.reason);
        Emit(options_.health_topic, EncodeHealthChange(c, options_.source));
      }
    }
  }
  if (notify) wake_.notify_one();
}

bool Prober::Track(const Provider& p, const std::optional<HealthRecord>& record,
                   bool registered_now) {
  if (p.spec.liveness == Liveness::kHeartbeat) {  // never probed (SPEC §8)
    const bool was_probed = scheduler_.Remove(p.id);
    tracker_.Upsert(p.id, p.seq, record);
    return was_probed;
  }
  if (p.spec.liveness == Liveness::kBoth) {  // probed and tracked
    tracker_.Upsert(p.id, p.seq, record, true);
  } else {
    tracker_.Remove(p.id);
  }
  return scheduler_.Upsert({p.id, HealthUrl(p.spec.endpoint), p.seq}, record, clock_->Now(),
                           registered_now);
}

Result<HealthRecord> Prober::Beat(const Provider& p, BeatResult result) {
  if (!running_ || partitions_ == 0) {
    return MakeError(ErrorCode::kUnavailable, "this instance's prober is not running");
  }
  std::optional<HealthRecord> projected;
  if (auto stored = health_->Get(p.id); stored) projected = std::move(*stored);
  heartbeats_->Inc();
  const int64_t now = clock_->NowMillis();
  std::lock_guard lock(mu_);
  if (Owns(p.id)) {
    // Ahead of the registry listener, if need be.
    tracker_.Upsert(p.id, p.seq, projected, p.spec.liveness == Liveness::kBoth);
    SetOwnedGauges();
    if (auto outcome = tracker_.Beat(p.id, result, now, projected, NewUuidV4())) {
      EmitBeat(*outcome);
      return std::move(outcome->health);
    }
  }
  // Not ours: recorded as it comes, which is how the owner learns of it (its projection).
  HeartbeatRecord h;
  h.time_ms = now;
  h.provider_id = p.id;
  h.seq = now;
  h.registration_seq = p.seq;
  h.result = result;
  h.last_beat_time_ms = now;
  h.timeout_ms = options_.heartbeat.timeout.count();
  h.forwarded = true;
  h.both = p.spec.liveness == Liveness::kBoth;
  HealthRecord health = projected.value_or(HealthRecord{});
  health.provider_id = p.id;
  FoldHeartbeat(health, h);
  Emit(ProbesTopic(), EncodeHeartbeatRecord(h, options_.source));
  return health;
}

void Prober::EmitBeat(const BeatOutcome& outcome) {
  if (outcome.record) {
    Emit(ProbesTopic(), EncodeHeartbeatRecord(*outcome.record, options_.source));
  }
  if (!outcome.change) return;
  const HealthChange& c = *outcome.change;
  changes_->Inc();
  Logger("prober")->info("msg=\"provider health changed\" id={} from={} to={} reason=\"{}\"",
                         c.provider_id, HealthStatusName(c.from), HealthStatusName(c.to), c.reason);
  Emit(options_.health_topic, EncodeHealthChange(c, options_.source));
}

void Prober::ExpireDue() {
  // Not on every turn of the loop (up to a thousand a second): at the earliest deadline, but at
  // most every kExpiryGranularity and at least once a second. A beat only moves a deadline later;
  // a provider a first beat arms is due a timeout later; one taken over already past its
  // deadline is expired at the next scan.
  const int64_t now = clock_->NowMillis();
  if (now < next_expiry_check_ms_) return;
  if (now >= next_refresh_ms_) {
    // Beats forwarded by other instances arm providers this tracker has no deadline for.
    next_refresh_ms_ = now + 1000;
    for (const auto& id : tracker_.Unarmed()) {
      if (auto stored = health_->Get(id); stored && *stored) tracker_.Refresh(id, *stored);
    }
  }
  for (const auto& id : tracker_.Due(now)) {
    std::optional<HealthRecord> projected;  // a beat forwarded by another instance postpones it
    if (auto stored = health_->Get(id); stored) projected = std::move(*stored);
    if (auto outcome = tracker_.Expire(id, now, projected, NewUuidV4())) {
      expiries_->Inc();
      EmitBeat(*outcome);
    }
  }
  for (const auto& candidate : tracker_.GcDue(now)) RequestGc(candidate);
  const int64_t next = tracker_.NextDeadline().value_or(std::numeric_limits<int64_t>::max());
  next_expiry_check_ms_ = std::clamp(next, now + kExpiryGranularity.count(), now + 1000);
}

// The request id derives from the registration, so an instance that asks again (a takeover after
// a crash) asks the same request, which the registrar decides once.
void Prober::RequestGc(const GcCandidate& c) {
  ProviderRequest r;
  r.kind = RequestKind::kExpire;
  r.request_id = DeterministicUuid("expire:" + c.id + ":" + std::to_string(c.registration_seq));
  r.id = c.id;
  r.registration_seq = c.registration_seq;
  r.last_heartbeat_time = FormatRfc3339Millis(c.last_beat_ms);
  r.gc_after_ms = options_.heartbeat.gc_after.count();
  r.actor = "dcm/prober";
  const CloudEvent event = EncodeProviderRequest(r, options_.source, clock_->NowMillis());
  gc_requests_->Inc();
  Logger("prober")->info(
      "msg=\"provider expiry requested\" provider={} last_heartbeat={} gc_after_ms={}", c.id,
      r.last_heartbeat_time, r.gc_after_ms);
  producer_->Produce(
      options_.requests_topic, event.subject, EncodeCloudEvent(event), {},
      [this](Result<KafkaPosition> delivered) {
        if (delivered) return;
        emit_failures_->Inc();
        Logger("prober")->warn("msg=\"expiry request not delivered\" error=\"{}\"",
                               delivered.error().message);
      },
      0);
}

std::chrono::microseconds Prober::UntilNextExpiry(TimePoint now) const {
  const auto until = TimePoint(milliseconds(next_expiry_check_ms_)) - now;
  return std::max(std::chrono::microseconds(0),
                  std::chrono::duration_cast<std::chrono::microseconds>(until));
}

const std::string& Prober::ProbesTopic() const {
  return options_.probes_topic.empty() ? options_.health_topic : options_.probes_topic;
}

void Prober::Emit(const std::string& topic, const CloudEvent& event) {
  producer_->Produce(
      topic, event.subject, EncodeCloudEvent(event), {},
      [this](Result<KafkaPosition> delivered) {
        if (delivered) return;
        emit_failures_->Inc();
        Logger("prober")->warn("msg=\"health event not delivered\" error=\"{}\"",
                               delivered.error().message);
      },
      KeyPartition(event.subject, partitions_));
}

void Prober::SetOwnedGauges() {
  owned_gauge_->Set(static_cast<int64_t>(scheduler_.size()));
  heartbeat_gauge_->Set(static_cast<int64_t>(tracker_.size()));
}

std::vector<std::string> Prober::HeartbeatProviders() const {
  std::vector<std::string> ids;
  {
    std::lock_guard lock(mu_);
    ids = tracker_.Ids();
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

size_t Prober::OwnedProviders() const {
  std::lock_guard lock(mu_);
  return scheduler_.size();
}

std::vector<int32_t> Prober::OwnedPartitions() const {
  std::lock_guard lock(mu_);
  return {owned_.begin(), owned_.end()};
}

}  // namespace dcm
