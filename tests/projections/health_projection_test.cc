// HealthProjection: probe events folded into RocksDB (in memory), idempotently and
// deterministically; malformed events are poison (kCorruption) for the runner to dead-letter.
#include "projections/health_projection.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "events/cloud_event.h"
#include "src/common/json_writer.h"

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

TEST(HealthProjectionTest, ABatchThatWasNeverWrittenDoesNotLeakIntoTheNextOne) {
  // The projection remembers decoded records between events; a batch the runner dropped must
  // not be seen through that memory.
  Health h("/mem/health-dropped");
  Health clean("/mem/health-dropped-clean");
  ASSERT_TRUE(h.Apply({Probe("a", 1, ProbeFailure::kNone)}));
  ASSERT_TRUE(clean.Apply({Probe("a", 1, ProbeFailure::kNone)}));
  StoreBatch dropped;
  for (int seq = 2; seq <= 4; ++seq) {
    ASSERT_TRUE(h.projection_.Apply(Probe("a", seq, ProbeFailure::kTimeout),
                                    EventPosition{"dcm.health", 0, 0, kT0}, dropped));
  }
  ASSERT_TRUE(h.Apply({Probe("a", 3, ProbeFailure::kTimeout)}));
  ASSERT_TRUE(clean.Apply({Probe("a", 3, ProbeFailure::kTimeout)}));
  EXPECT_EQ(h.Digest(), clean.Digest());
  auto a = h.view_.Get("a");
  ASSERT_TRUE(a && *a);
  EXPECT_EQ((*a)->seq, 3);
  EXPECT_EQ((*a)->consecutive_failures, 1);
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
  future.schema_version = kHealthProbedSchemaVersion + 1;
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

// --- schema evolution: health_probed v1 (latency_ms) and v2 (latency_us) fold alike -------------

// The event a build before schema v2 wrote for `p`: latency_ms as a float, in the same position.
CloudEvent EncodeAsVersion1(const HealthProbe& p) {
  CloudEvent e = EncodeHealthProbe(p, "dcm/prober/test");
  const std::string v2_field = R"("latency_us":)" + std::to_string(p.latency_us);
  JsonWriter ms;
  ms.Double(static_cast<double>(p.latency_us) / 1000.0);
  e.data.replace(e.data.find(v2_field), v2_field.size(), R"("latency_ms":)" + ms.str());
  e.schema_version = 1;
  return e;
}

// Two providers through every state: a goes Ready → (3 timeouts) Unavailable → Ready →
// Unhealthy → Ready; b goes Unavailable, is re-registered (reset) and ends Unhealthy. Latencies
// have fractional milliseconds, some whose ms × 1000 is not exact in binary (4.095 × 1000 is
// 4094.9999999999995): a step that truncated instead of rounding would change the state.
std::vector<HealthProbe> ProbeSequence() {
  struct Step {
    const char* id;
    int64_t seq;
    int64_t registration_seq;
    ProbeFailure failure;
    int64_t latency_us;
  };
  const Step steps[] = {
      {"a", 1, 1, ProbeFailure::kNone, 1'875},
      {"b", 1, 1, ProbeFailure::kConnect, 333},
      {"a", 2, 1, ProbeFailure::kTimeout, 5'000'125},
      {"b", 2, 1, ProbeFailure::kConnect, 4'095},
      {"a", 3, 1, ProbeFailure::kTimeout, 5'000'001},
      {"b", 3, 1, ProbeFailure::kConnect, 1},
      {"a", 4, 1, ProbeFailure::kTimeout, 4'999'999},
      {"b", 4, 2, ProbeFailure::kNone, 0},
      {"a", 5, 1, ProbeFailure::kNone, 2'500},
      {"a", 6, 1, ProbeFailure::kReportedUnhealthy, 123'457},
      {"b", 5, 2, ProbeFailure::kHttpStatus, 7'000},
      {"a", 7, 1, ProbeFailure::kNone, 1'003},
      {"b", 6, 2, ProbeFailure::kReportedUnhealthy, 2'006},
  };
  std::vector<HealthProbe> probes;
  for (const Step& s : steps) {
    HealthProbe p;
    p.probe_id = std::string(s.id) + "-probe-" + std::to_string(s.seq);
    p.time_ms = kT0 + s.seq * 1000;
    p.provider_id = s.id;
    p.seq = s.seq;
    p.registration_seq = s.registration_seq;
    p.url = "http://sp/health";
    p.failure = s.failure;
    p.http_status =
        s.failure == ProbeFailure::kNone || s.failure == ProbeFailure::kReportedUnhealthy ? 200
        : s.failure == ProbeFailure::kHttpStatus                                          ? 503
                                                                                          : 0;
    p.latency_us = s.latency_us;
    p.error = s.failure == ProbeFailure::kNone ? "" : "failed";
    probes.push_back(p);
  }
  return probes;
}

enum class Versions { kAllV1, kAllV2, kAlternating, kAlternatingFromV2 };

std::vector<CloudEvent> Log(Versions versions) {
  std::vector<CloudEvent> log;
  const auto probes = ProbeSequence();
  for (size_t i = 0; i < probes.size(); ++i) {
    bool v1 = versions == Versions::kAllV1;
    if (versions == Versions::kAlternating) v1 = i % 2 == 0;
    if (versions == Versions::kAlternatingFromV2) v1 = i % 2 == 1;
    log.push_back(v1 ? EncodeAsVersion1(probes[i])
                     : EncodeHealthProbe(probes[i], "dcm/prober/test"));
  }
  return log;
}

std::vector<HealthRecord> Records(const Health& h) {
  std::vector<HealthRecord> records;
  EXPECT_TRUE(h.view_.ForEach([&](const HealthRecord& r) {
    records.push_back(r);
    return true;
  }));
  return records;
}

TEST(HealthProjectionTest, ALogMixingV1AndV2ProbesReplaysToTheSameState) {
  const auto v1_log = Log(Versions::kAllV1);
  ASSERT_EQ(v1_log[0].schema_version, 1);
  ASSERT_NE(v1_log[0].data.find("latency_ms"), std::string::npos);
  Health all_v2("/mem/health-all-v2");
  Health all_v1("/mem/health-all-v1");
  Health mixed("/mem/health-mixed");
  Health mixed_other("/mem/health-mixed-other");
  ASSERT_TRUE(all_v2.Apply(Log(Versions::kAllV2)));
  ASSERT_TRUE(all_v1.Apply(v1_log));
  ASSERT_TRUE(mixed.Apply(Log(Versions::kAlternating)));
  ASSERT_TRUE(mixed_other.Apply(Log(Versions::kAlternatingFromV2)));

  // The state machine moved: a is Ready again after Unavailable and Unhealthy, b was reset by
  // its re-registration and ends Unhealthy.
  auto a = all_v2.view_.Get("a");
  auto b = all_v2.view_.Get("b");
  ASSERT_TRUE(a && *a && b && *b);
  EXPECT_EQ((*a)->status, HealthStatus::kReady);
  EXPECT_EQ((*a)->last_latency_us, 1'003);
  EXPECT_EQ((*b)->status, HealthStatus::kUnhealthy);
  EXPECT_EQ((*b)->registration_seq, 2);
  EXPECT_EQ((*b)->last_latency_us, 2'006);

  const std::string digest = all_v2.Digest();
  EXPECT_EQ(all_v1.Digest(), digest);
  EXPECT_EQ(mixed.Digest(), digest);
  EXPECT_EQ(mixed_other.Digest(), digest);
  EXPECT_EQ(Records(all_v1), Records(all_v2));
  EXPECT_EQ(Records(mixed), Records(all_v2));
}

TEST(HealthProjectionTest, EveryStepOfAV1OrMixedLogFoldsAsItsV2Twin) {
  for (Versions versions :
       {Versions::kAllV1, Versions::kAlternating, Versions::kAlternatingFromV2}) {
    Health v2("/mem/health-step-v2-" + std::to_string(static_cast<int>(versions)));
    Health mixed("/mem/health-step-mixed-" + std::to_string(static_cast<int>(versions)));
    const auto twins = Log(Versions::kAllV2);
    const auto log = Log(versions);
    for (size_t i = 0; i < log.size(); ++i) {
      SCOPED_TRACE(i);
      ASSERT_TRUE(v2.Apply({twins[i]}));
      ASSERT_TRUE(mixed.Apply({log[i]}));
      EXPECT_EQ(mixed.Digest(), v2.Digest());
    }
  }
}

TEST(HealthProjectionTest, ApplyingEveryEventOfAMixedLogTwiceLeavesTheSameDigest) {
  Health once("/mem/health-once");
  Health twice("/mem/health-twice");
  Health with_twin("/mem/health-with-twin");
  const auto log = Log(Versions::kAlternating);
  const auto other = Log(Versions::kAlternatingFromV2);  // each event's twin in the other version
  ASSERT_TRUE(once.Apply(log));
  for (size_t i = 0; i < log.size(); ++i) {
    ASSERT_TRUE(twice.Apply({log[i]}));
    ASSERT_TRUE(twice.Apply({log[i]}));
    ASSERT_TRUE(with_twin.Apply({log[i], other[i]}));  // a redelivery written by another build
  }
  ASSERT_TRUE(twice.Apply(log));  // and the whole log replayed on top
  EXPECT_EQ(twice.Digest(), once.Digest());
  EXPECT_EQ(with_twin.Digest(), once.Digest());
}

}  // namespace
}  // namespace dcm
