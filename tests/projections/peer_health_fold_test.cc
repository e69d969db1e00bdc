// Peer enclaves (SPEC §10) fold with the providers' state machine (HealthProjection::kPeers):
// their dcm.peer.* events share dcm.health and the probes topic with the providers', and each
// projection folds only its own.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "events/cloud_event.h"
#include "projections/health_projection.h"

namespace dcm {
namespace {

constexpr int64_t kT0 = 1767225600000;

HealthProbe Probe(const std::string& id, int64_t seq, ProbeFailure failure) {
  HealthProbe p;
  p.probe_id = id + "-probe-" + std::to_string(seq);
  p.time_ms = kT0 + seq * 1000;
  p.provider_id = id;
  p.seq = seq;
  p.registration_seq = 0;
  p.url = "http://peer-b:8080/federation/v1alpha1/health";
  p.failure = failure;
  p.http_status = failure == ProbeFailure::kNone ? 200 : 0;
  p.error = failure == ProbeFailure::kNone ? "" : "connection refused";
  return p;
}

class Folds {
 public:
  Folds()
      : store_(std::move(
            *Store::Open("/mem/peer-health", StoreOptions{.bulk_load = false, .in_memory = true}))),
        providers_(store_.get(), &metrics_),
        peers_(store_.get(), &metrics_, HealthProjection::kPeers),
        provider_view_(store_.get()),
        peer_view_(store_.get(), HealthProjection::kPeerPrefix) {}

  void Apply(const CloudEvent& e) {
    StoreBatch batch;
    ASSERT_TRUE(providers_.Apply(e, EventPosition{"dcm.health", 0, 0, kT0}, batch).has_value());
    ASSERT_TRUE(peers_.Apply(e, EventPosition{"dcm.health", 0, 0, kT0}, batch).has_value());
    ASSERT_TRUE(store_->Write(batch).has_value());
  }

  Metrics metrics_;
  std::unique_ptr<Store> store_;
  HealthProjection providers_;
  HealthProjection peers_;
  HealthView provider_view_;
  HealthView peer_view_;
};

TEST(PeerHealthFoldTest, PeerProbesFoldWithTheProviderStateMachineUnderTheirOwnPrefix) {
  Folds f;
  f.Apply(EncodeHealthProbe(Probe("b", 1, ProbeFailure::kNone), "test", kPeerHealth));
  auto ready = f.peer_view_.Get("b");
  ASSERT_TRUE(ready && *ready);
  EXPECT_EQ((*ready)->status, HealthStatus::kReady);
  for (int64_t seq = 2; seq <= 4; ++seq) {
    f.Apply(EncodeHealthProbe(Probe("b", seq, ProbeFailure::kConnect), "test", kPeerHealth));
  }
  auto down = f.peer_view_.Get("b");
  ASSERT_TRUE(down && *down);
  EXPECT_EQ((*down)->status, HealthStatus::kUnavailable);
  EXPECT_EQ((*down)->consecutive_failures, 3);
  auto as_provider = f.provider_view_.Get("b");
  ASSERT_TRUE(as_provider);
  EXPECT_FALSE(as_provider->has_value()) << "a peer is not a provider";
}

TEST(PeerHealthFoldTest, EachProjectionSkipsTheOthersEvents) {
  Folds f;
  f.Apply(EncodeHealthProbe(Probe("p1", 1, ProbeFailure::kNone), "test"));
  HealthChange change{"b", kT0, HealthStatus::kPending, HealthStatus::kReady, "healthy", 1, {}};
  f.Apply(EncodeHealthChange(change, "test", kPeerHealth));
  EXPECT_TRUE(f.provider_view_.Get("p1")->has_value());
  EXPECT_FALSE(f.peer_view_.Get("p1")->has_value());
  EXPECT_FALSE(f.peer_view_.Get("b")->has_value()) << "transitions are counted, not folded";
}

TEST(PeerHealthFoldTest, ThePeersFoldSkipsProviderRecordsWithoutDecodingThem) {
  Folds f;
  const std::string provider_probe =
      EncodeCloudEvent(EncodeHealthProbe(Probe("p1", 1, ProbeFailure::kNone), "test"));
  const std::string peer_probe =
      EncodeCloudEvent(EncodeHealthProbe(Probe("b", 1, ProbeFailure::kNone), "test", kPeerHealth));
  EXPECT_TRUE(f.peers_.SkipsRaw(provider_probe));
  EXPECT_FALSE(f.peers_.SkipsRaw(peer_probe));
  EXPECT_FALSE(f.providers_.SkipsRaw(provider_probe));
  EXPECT_FALSE(f.providers_.SkipsRaw(peer_probe)) << "the providers' fold decodes every record";
  // A type spelled with JSON escapes is not visible in the raw bytes: such a record is decoded.
  std::string escaped = peer_probe;
  const auto at = escaped.find("dcm.peer.");
  ASSERT_NE(at, std::string::npos);
  escaped.replace(at + 3, 1, "\\u002e");
  ASSERT_EQ(DecodeCloudEvent(escaped)->type, "dcm.peer.health_probed");
  EXPECT_FALSE(f.peers_.SkipsRaw(escaped));
}

TEST(PeerHealthFoldTest, PeerEventsRoundTripAndNameThePeer) {
  const HealthProbe probe = Probe("b", 7, ProbeFailure::kTimeout);
  const CloudEvent e = EncodeHealthProbe(probe, "test", kPeerHealth);
  EXPECT_EQ(e.type, "dcm.peer.health_probed");
  EXPECT_EQ(e.subject, "b");
  EXPECT_NE(e.data.find("\"peer_id\":\"b\""), std::string::npos) << e.data;
  EXPECT_EQ(e.data.find("provider_id"), std::string::npos) << e.data;
  auto decoded = DecodeHealthProbe(e, kPeerHealth);
  ASSERT_TRUE(decoded) << decoded.error().message;
  EXPECT_EQ(*decoded, probe);
  EXPECT_FALSE(DecodeHealthProbe(e).has_value()) << "not a provider probe";
}

}  // namespace
}  // namespace dcm
