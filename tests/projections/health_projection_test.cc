// HealthProjection: probe events folded into RocksDB (in memory), idempotently and
// deterministically; malformed events are poison (kCorruption) for the runner to dead-letter.
#include "projections/health_projection.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "events/cloud_event.h"

namespace dcm {
namespace {

constexpr int64_t kT0 = 1767225600000;

std::unique_ptr<Store> OpenInMemory(const std::string& path) {
  auto store = Store::Open(path, StoreOptions{.bulk_load = false, .in_memory = true});
  EXPECT_TRUE(store.has_value());
  return store ? std::move(*store) : nullptr;
}

CloudEvent Probe(const std::string& id, int64_t seq, ProbeFailure failure, int64_t reg = 1) {
  HealthProbe p;
  p.probe_id = id + "-probe-" + std::to_string(seq);
  p.time_ms = kT0 + seq * 1000;
  p.provider_id = id;
  p.seq = seq;
  p.registration_seq = reg;
  p.url = "http://sp/health";
  p.failure = failure;
  p.http_status = failure == ProbeFailure::kNone ? 200 : 0;
  p.latency_us = 1500;
  p.error = failure == ProbeFailure::kNone ? "" : "refused";
  return EncodeHealthProbe(p, "dcm/prober/test");
}

class Health {
 public:
  explicit Health(const std::string& path)
      : store_(OpenInMemory(path)), projection_(store_.get(), &metrics_), view_(store_.get()) {}

  Status Apply(const std::vector<CloudEvent>& events) {
    StoreBatch batch;
    for (const auto& e : events) {
      RETURN_IF_ERROR(projection_.Apply(e, EventPosition{"dcm.health", 0, 0, kT0}, batch));
    }
    return store_->Write(batch);
  }
  std::string Digest() const { return *store_->Digest(HealthProjection::kPrefix); }

  Metrics metrics_;
  std::unique_ptr<Store> store_;
  HealthProjection projection_;
  HealthView view_;
};

TEST(HealthProjectionTest, FoldsProbesIntoOneRecordPerProvider) {
  Health h("/mem/health-fold");
  ASSERT_TRUE(
      h.Apply({Probe("a", 1, ProbeFailure::kNone), Probe("b", 1, ProbeFailure::kConnect),
               Probe("b", 2, ProbeFailure::kConnect), Probe("b", 3, ProbeFailure::kConnect)}));
  auto a = h.view_.Get("a");
  ASSERT_TRUE(a && *a);
  EXPECT_EQ((*a)->status, HealthStatus::kReady);
  EXPECT_EQ((*a)->last_latency_us, 1500);
  auto b = h.view_.Get("b");
  ASSERT_TRUE(b && *b);
  EXPECT_EQ((*b)->status, HealthStatus::kUnavailable);
  EXPECT_EQ((*b)->consecutive_failures, 3);
  EXPECT_EQ((*b)->last_error, "refused");
  auto none = h.view_.Get("c");
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->has_value());
  std::vector<std::string> ids;
  ASSERT_TRUE(h.view_.ForEach([&](const HealthRecord& r) {
    ids.push_back(r.provider_id);
    return true;
  }));
  EXPECT_EQ(ids, (std::vector<std::string>{"a", "b"}));
}

TEST(HealthProjectionTest, SeveralProbesOfOneProviderInOneBatchAllCount) {
  Health one_batch("/mem/health-one");
  Health per_event("/mem/health-each");
  std::vector<CloudEvent> events;
  for (int i = 1; i <= 6; ++i) {
    events.push_back(Probe("a", i, i % 3 ? ProbeFailure::kTimeout : ProbeFailure::kNone));
  }
  ASSERT_TRUE(one_batch.Apply(events));
  for (const auto& e : events) ASSERT_TRUE(per_event.Apply({e}));
  EXPECT_EQ(one_batch.Digest(), per_event.Digest());
}

TEST(HealthProjectionTest, DuplicatedBatchesLeaveByteIdenticalState) {
  Health clean("/mem/health-clean");
  Health duplicated("/mem/health-dup");
  std::vector<CloudEvent> events;
  for (int i = 1; i <= 10; ++i) events.push_back(Probe("a", i, ProbeFailure::kTimeout));
  ASSERT_TRUE(clean.Apply(events));
  ASSERT_TRUE(duplicated.Apply({events.begin(), events.begin() + 6}));
  ASSERT_TRUE(duplicated.Apply({events.begin() + 2, events.end()}));  // 2..5 again
  EXPECT_EQ(clean.Digest(), duplicated.Digest());
}

TEST(HealthProjectionTest, HealthChangedIsAcceptedButDoesNotChangeState) {
  Health h("/mem/health-changed");
  ASSERT_TRUE(h.Apply({Probe("a", 1, ProbeFailure::kNone)}));
  const std::string before = h.Digest();
  HealthChange c{"a", kT0,          HealthStatus::kPending, HealthStatus::kReady, "healthy probe",
                 1,   {"a-probe-1"}};
  ASSERT_TRUE(h.Apply({EncodeHealthChange(c, "dcm/prober/test")}));
  EXPECT_EQ(h.Digest(), before);
}

TEST(HealthProjectionTest, MalformedEventsArePoison) {
  Health h("/mem/health-poison");
  std::vector<CloudEvent> poison;
  CloudEvent other = Probe("a", 1, ProbeFailure::kNone);
  other.type = "dcm.provider.something_else";
  poison.push_back(other);
  CloudEvent no_seq = Probe("a", 1, ProbeFailure::kNone);
  no_seq.data = R"({"provider_id":"a","registration_seq":1,"failure_threshold":3,)"
                R"("success_threshold":1})";
  poison.push_back(no_seq);
  CloudEvent bad_class = Probe("a", 1, ProbeFailure::kNone);
  bad_class.data.replace(bad_class.data.find("null"), 4, "\"meteor\"");
  poison.push_back(bad_class);
  CloudEvent wrong_subject = Probe("a", 1, ProbeFailure::kNone);
  wrong_subject.subject = "b";
  poison.push_back(wrong_subject);
  CloudEvent future = Probe("a", 1, ProbeFailure::kNone);
  future.schema_version = kHealthEventSchemaVersion + 1;
  poison.push_back(future);
  CloudEvent bad_change = Probe("a", 1, ProbeFailure::kNone);
  bad_change.type = event_type::kHealthChanged;
  poison.push_back(bad_change);
  for (const auto& e : poison) {
    SCOPED_TRACE(e.data);
    StoreBatch batch;
    auto status = h.projection_.Apply(e, EventPosition{"dcm.health", 0, 0, kT0}, batch);
    ASSERT_FALSE(status.has_value());
    EXPECT_EQ(status.error().code, ErrorCode::kCorruption);
  }
}

}  // namespace
}  // namespace dcm
