// PeerProber (SPEC §10): peers probed with the providers' scheduler and fold, only those whose
// dcm.health partition this instance owns; each probe emits dcm.peer.health_probed and each
// transition dcm.peer.health_changed, keyed by the peer id. Hermetic: a fake clock, a checker that
// answers synchronously, no Kafka (the emit hook records).
#include "consumers/peer_prober.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "consumers/kafka.h"

namespace dcm {
namespace {

class ScriptedChecker final : public HealthChecker {
 public:
  void Check(ProbeRequest request, Done done) override {
    urls.push_back(request.url);
    ProbeResponse r;
    if (up) {
      r.http_status = 200;
      r.body = R"({"status":"healthy","enclave_id":"b"})";
    } else {
      r.failure = ProbeFailure::kConnect;
      r.error = "connection refused";
    }
    done(std::move(r));
  }
  void Forget(const std::string&) override {}

  bool up = true;
  std::vector<std::string> urls;
};

struct Emitted {
  std::string topic;
  CloudEvent event;
};

class PeerProberTest : public ::testing::Test {
 protected:
  PeerProberTest()
      : store_(std::move(
            *Store::Open("/mem/peer-prober", StoreOptions{.bulk_load = false, .in_memory = true}))),
        view_(store_.get(), HealthProjection::kPeerPrefix) {}

  std::unique_ptr<PeerProber> Make(std::vector<int32_t> owned) {
    owned_ = std::move(owned);
    PeerProberOptions o;
    o.peers = {{"b", "http://127.0.0.1:9/"}, {"c", "https://c.example:8443"}};
    o.health_topic = "dcm.health";
    o.probes_topic = "dcm.health-probes";
    o.health.interval = std::chrono::seconds(1);
    o.health.base_backoff = std::chrono::seconds(1);
    o.partitions = 12;
    o.owned_partitions = [this] { return owned_; };
    o.emit = [this](const std::string& topic, const CloudEvent& e) {
      emitted_.push_back({topic, e});
    };
    return std::make_unique<PeerProber>(std::move(o), &view_, &checker_, &metrics_, &clock_);
  }

  std::vector<Emitted> Of(const std::string& type) const {
    std::vector<Emitted> out;
    for (const auto& e : emitted_) {
      if (e.event.type == type) out.push_back(e);
    }
    return out;
  }

  Metrics metrics_;
  FakeClock clock_;
  ScriptedChecker checker_;
  std::unique_ptr<Store> store_;
  HealthView view_;
  std::vector<int32_t> owned_;
  std::vector<Emitted> emitted_;
};

std::vector<int32_t> AllPartitions() {
  std::vector<int32_t> all;
  for (int32_t p = 0; p < 12; ++p) all.push_back(p);
  return all;
}

TEST_F(PeerProberTest, ProbesEveryOwnedPeerAtOnceAndReportsReady) {
  auto prober = Make(AllPartitions());
  prober->Tick();
  EXPECT_EQ(prober->OwnedPeers(), (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(checker_.urls.size(), 2u);
  EXPECT_EQ(checker_.urls[0].find("/federation/v1alpha1/health") != std::string::npos, true);
  const auto probes = Of("dcm.peer.health_probed");
  ASSERT_EQ(probes.size(), 2u);
  EXPECT_EQ(probes[0].topic, "dcm.health-probes");
  const auto changes = Of("dcm.peer.health_changed");
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].topic, "dcm.health");
  auto change = DecodeHealthChange(changes[0].event, kPeerHealth);
  ASSERT_TRUE(change) << change.error().message;
  EXPECT_EQ(change->to, HealthStatus::kReady);
  EXPECT_TRUE(Of("dcm.provider.health_probed").empty());
}

TEST_F(PeerProberTest, APeerThatStopsAnsweringBecomesUnavailableAfterTheThreshold) {
  auto prober = Make(AllPartitions());
  prober->Tick();
  checker_.up = false;
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(std::chrono::milliseconds(1200));
    prober->Tick();
  }
  const auto changes = Of("dcm.peer.health_changed");
  ASSERT_EQ(changes.size(), 4u);  // two Ready, then two Unavailable
  auto last = DecodeHealthChange(changes.back().event, kPeerHealth);
  ASSERT_TRUE(last);
  EXPECT_EQ(last->from, HealthStatus::kReady);
  EXPECT_EQ(last->to, HealthStatus::kUnavailable);
  EXPECT_EQ(last->probe_ids.size(), 3u);
}

TEST_F(PeerProberTest, ProbesOnlyThePeersOfItsPartitionsAndLetsGoOnRevoke) {
  const int32_t b = KeyPartition("b", 12);
  auto prober = Make({b});
  prober->Tick();
  auto owned = prober->OwnedPeers();
  ASSERT_FALSE(owned.empty());
  EXPECT_EQ(owned.front(), "b");
  for (const auto& e : emitted_) EXPECT_EQ(KeyPartition(e.event.subject, 12), b);
  owned_.clear();
  prober->Tick();
  EXPECT_TRUE(prober->OwnedPeers().empty());
  const size_t before = checker_.urls.size();
  clock_.Advance(std::chrono::seconds(5));
  prober->Tick();
  EXPECT_EQ(checker_.urls.size(), before);
}

}  // namespace
}  // namespace dcm
