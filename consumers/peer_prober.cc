#include "consumers/peer_prober.h"

#include <algorithm>

#include "consumers/kafka.h"
#include "src/common/log.h"
#include "src/common/url.h"
#include "src/common/uuid.h"

namespace dcm {
namespace {

constexpr std::chrono::milliseconds kTick{100};

}  // namespace

PeerProber::PeerProber(PeerProberOptions options, const HealthView* peer_health,
                       HealthChecker* checker, Metrics* metrics, const Clock* clock)
    : options_(std::move(options)),
      peer_health_(peer_health),
      checker_(checker),
      clock_(clock),
      scheduler_(ScheduleOptionsOf(options_.health), std::random_device{}()) {
  probes_ = &metrics->GetCounter("dcm_peer_probes_total", "Probes of peer enclaves (SPEC §10)");
  changes_ = &metrics->GetCounter("dcm_peer_health_changes_total",
                                  "Health transitions of peer enclaves (SPEC §10)");
}

PeerProber::~PeerProber() { Stop(); }

void PeerProber::Start() {
  std::lock_guard lock(run_mu_);
  if (running_ || options_.peers.empty()) return;
  running_ = true;
  thread_ = std::thread([this] {
    std::unique_lock lock(run_mu_);
    while (running_) {
      lock.unlock();
      Tick();
      lock.lock();
      wake_.wait_for(lock, kTick, [this] { return !running_; });
    }
  });
}

void PeerProber::Stop() {
  {
    std::lock_guard lock(run_mu_);
    running_ = false;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mu_);
  scheduler_.Clear();  // completions still in flight are dropped (stale tokens)
  owned_.clear();
}

void PeerProber::SyncOwnership() {
  const auto partitions = options_.owned_partitions();
  const std::set<int32_t> owned(partitions.begin(), partitions.end());
  const auto now = clock_->Now();
  for (const PeerConfig& peer : options_.peers) {
    const bool mine = owned.count(KeyPartition(peer.id, options_.partitions)) > 0;
    if (mine == (owned_.count(peer.id) > 0)) continue;
    if (!mine) {
      scheduler_.Remove(peer.id);
      owned_.erase(peer.id);
      continue;
    }
    std::optional<HealthRecord> record;
    if (auto stored = peer_health_->Get(peer.id); stored && *stored) record = **stored;
    // Never probed: at once; else keep the previous owner's phase.
    scheduler_.Upsert(ProbeTarget{peer.id, JoinUrlPath(peer.url, kPeerHealthPath), 0}, record, now,
                      !record.has_value());
    owned_.insert(peer.id);
  }
}

void PeerProber::Tick() {
  std::vector<ProbeTask> tasks;
  {
    std::lock_guard lock(mu_);
    SyncOwnership();
    tasks = scheduler_.TakeDue(clock_->Now(), nullptr);
  }
  for (const ProbeTask& task : tasks) {
    checker_->Check(ProbeRequest{"peer:" + task.id, task.url, options_.health.timeout},
                    [this, task](ProbeResponse response) { Finish(task, std::move(response)); });
  }
}

void PeerProber::Finish(const ProbeTask& task, ProbeResponse response) {
  std::lock_guard lock(mu_);  // emitted under mu_: one peer's events stay in fold order
  auto done = scheduler_.Complete(task, std::move(response), clock_->Now(), NewUuidV4());
  if (!done) return;  // no longer owned
  probes_->Inc();
  options_.emit(options_.probes_topic,
                EncodeHealthProbe(done->probe, options_.source, kPeerHealth));
  if (!done->change) return;
  const HealthChange& c = *done->change;
  changes_->Inc();
  Logger("peer-prober")
      ->info("msg=\"peer health changed\" peer={} from={} to={} reason=\"{}\"", c.provider_id,
             HealthStatusName(c.from), HealthStatusName(c.to), c.reason);
  options_.emit(options_.health_topic, EncodeHealthChange(c, options_.source, kPeerHealth));
}

std::vector<std::string> PeerProber::OwnedPeers() const {
  std::lock_guard lock(mu_);
  return {owned_.begin(), owned_.end()};
}

}  // namespace dcm
