// PeerProber: health of the peer enclaves this enclave federates with (SPEC §10), probed and
// folded exactly as providers are (SPEC §3.2): the same ProbeScheduler (consumers/
// probe_scheduler.h), the same state machine (projections/health_state.h) and the same event
// data, under the types dcm.peer.health_probed / dcm.peer.health_changed (events/
// health_events.h kPeerHealth), folded by the peer-health projection (HealthProjection::kPeers).
//
//   FEDERATION_PEERS ─▶ the peers whose key partition of dcm.health this instance's prober group
//                       owns (Prober::OwnedPartitions), so each peer is probed by one instance
//   Tick: ownership synced (seeded from the peer-health projection) ─▶ due probes launched
//         ─▶ GET {url}/federation/v1alpha1/health (HealthChecker, not filtered by the outbound
//            policy: peers are operator-configured) ─▶ fold ─▶ emit peer health_probed to the
//            probes topic (+ peer health_changed to dcm.health), keyed by the peer id
//
// Peers never re-register: every probe is of registration 0, so a peer is Pending until its
// first probe and then follows the fold. Thread-safety: Start/Stop from one thread; Tick from
// the prober's own thread (or a test); the checker's completions from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "consumers/probe_scheduler.h"
#include "events/cloud_event.h"
#include "projections/health_projection.h"
#include "src/common/clock.h"
#include "src/common/config.h"
#include "src/common/health_check.h"
#include "src/common/metrics.h"

namespace dcm {

// The path peers answer their health on (src/http/federation_handlers.h).
inline constexpr char kPeerHealthPath[] = "/federation/v1alpha1/health";

struct PeerProberOptions {
  std::vector<PeerConfig> peers;
  std::string health_topic;  // peer health_changed
  std::string probes_topic;  // peer health_probed
  std::string source = "dcm/peer-prober";
  HealthCheckConfig health;  // interval, timeout, thresholds, backoff: the providers' settings
  int32_t partitions = 1;    // of health_topic: a peer is owned with KeyPartition(id, partitions)
  // The partitions of health_topic this instance's prober group owns now.
  std::function<std::vector<int32_t>()> owned_partitions;
  // Produces `event` to `topic`, keyed (and partitioned) by its subject.
  std::function<void(const std::string& topic, const CloudEvent& event)> emit;
};

class PeerProber {
 public:
  PeerProber(PeerProberOptions options, const HealthView* peer_health, HealthChecker* checker,
             Metrics* metrics, const Clock* clock);
  ~PeerProber();

  void Start();  // the thread that calls Tick every 100 ms
  void Stop();

  // Follows the ownership and launches the due probes. Completions fold and emit.
  void Tick();
  // The peers this instance probes now, sorted.
  std::vector<std::string> OwnedPeers() const;

 private:
  void SyncOwnership();  // mu_ held
  void Finish(const ProbeTask& task, ProbeResponse response);

  PeerProberOptions options_;
  const HealthView* peer_health_;
  HealthChecker* checker_;
  const Clock* clock_;
  Counter* probes_ = nullptr;
  Counter* changes_ = nullptr;

  mutable std::mutex mu_;
  ProbeScheduler scheduler_;
  std::set<std::string> owned_;

  std::mutex run_mu_;
  std::condition_variable wake_;
  bool running_ = false;
  std::thread thread_;
};

}  // namespace dcm
