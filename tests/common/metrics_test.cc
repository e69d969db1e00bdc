#include "src/common/metrics.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>

namespace dcm {
namespace {

bool Contains(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

TEST(MetricsTest, RendersCounterWithHelpTypeAndLabels) {
  Metrics m;
  m.GetCounter("dcm_events_total", "Events seen", R"(type="a")").Inc();
  m.GetCounter("dcm_events_total", "Events seen", R"(type="b")").Inc(5);
  m.GetCounter("dcm_events_total", "Events seen", R"(type="a")").Inc(2);
  EXPECT_EQ(m.RenderPrometheus(),
            "# HELP dcm_events_total Events seen\n"
            "# TYPE dcm_events_total counter\n"
            "dcm_events_total{type=\"a\"} 3\n"
            "dcm_events_total{type=\"b\"} 5\n");
}

TEST(MetricsTest, SameNameAndLabelsReturnsTheSameObject) {
  Metrics m;
  Counter& a = m.GetCounter("c", "h");
  Counter& b = m.GetCounter("c", "h");
  EXPECT_EQ(&a, &b);
  EXPECT_NE(&a, &m.GetCounter("c", "h", R"(x="1")"));
}

TEST(MetricsTest, RendersGaugeWithoutBracesWhenUnlabelled) {
  Metrics m;
  Gauge& g = m.GetGauge("dcm_cleanup_queue_depth", "Records queued");
  g.Set(10);
  g.Add(-3);
  EXPECT_EQ(g.Value(), 7);
  EXPECT_EQ(m.RenderPrometheus(),
            "# HELP dcm_cleanup_queue_depth Records queued\n"
            "# TYPE dcm_cleanup_queue_depth gauge\n"
            "dcm_cleanup_queue_depth 7\n");
}

TEST(MetricsTest, GaugeMayGoNegative) {
  Metrics m;
  m.GetGauge("g", "h").Add(-2);
  EXPECT_TRUE(Contains(m.RenderPrometheus(), "\ng -2\n"));
}

TEST(MetricsTest, HistogramBucketsAreCumulative) {
  Metrics m;
  Histogram& h = m.GetHistogram("dcm_probe_seconds", "Probe latency", R"(result="ok")");
  h.Observe(0.00005);  // first bucket (0.0001)
  h.Observe(0.003);    // 0.005
  h.Observe(0.003);    // 0.005
  h.Observe(2);        // 2.5
  h.Observe(60);       // only +Inf
  EXPECT_EQ(h.Count(), 5u);
  const auto counts = h.CumulativeCounts();
  ASSERT_EQ(counts.size(), Histogram::Buckets().size());
  EXPECT_EQ(counts.front(), 1u);
  EXPECT_EQ(counts.back(), 4u);  // 10 s bucket excludes the 60 s sample
  for (size_t i = 1; i < counts.size(); ++i) EXPECT_GE(counts[i], counts[i - 1]);
  EXPECT_NEAR(h.Sum(), 62.00605, 1e-5);
}

TEST(MetricsTest, RendersHistogramSeries) {
  Metrics m;
  Histogram& h = m.GetHistogram("lat", "Latency", R"(op="get")");
  h.Observe(0.001);
  h.Observe(0.5);
  const std::string text = m.RenderPrometheus();
  EXPECT_TRUE(Contains(text, "# HELP lat Latency\n# TYPE lat histogram\n")) << text;
  EXPECT_TRUE(Contains(text, "lat_bucket{op=\"get\",le=\"0.0001\"} 0\n")) << text;
  EXPECT_TRUE(Contains(text, "lat_bucket{op=\"get\",le=\"0.001\"} 1\n")) << text;
  EXPECT_TRUE(Contains(text, "lat_bucket{op=\"get\",le=\"0.5\"} 2\n")) << text;
  EXPECT_TRUE(Contains(text, "lat_bucket{op=\"get\",le=\"10\"} 2\n")) << text;
  EXPECT_TRUE(Contains(text, "lat_bucket{op=\"get\",le=\"+Inf\"} 2\n")) << text;
  EXPECT_TRUE(Contains(text, "lat_sum{op=\"get\"} 0.501\n")) << text;
  EXPECT_TRUE(Contains(text, "lat_count{op=\"get\"} 2\n")) << text;
}

TEST(MetricsTest, RendersUnlabelledHistogramWithLeOnly) {
  Metrics m;
  m.GetHistogram("h", "help").Observe(1);
  const std::string text = m.RenderPrometheus();
  EXPECT_TRUE(Contains(text, "h_bucket{le=\"1\"} 1\n")) << text;
  EXPECT_TRUE(Contains(text, "h_bucket{le=\"+Inf\"} 1\n")) << text;
  EXPECT_TRUE(Contains(text, "h_sum 1\n")) << text;
  EXPECT_TRUE(Contains(text, "h_count 1\n")) << text;
}

TEST(MetricsTest, RendersFamiliesSortedByNameOncePerFamily) {
  Metrics m;
  m.GetCounter("zeta", "z").Inc();
  m.GetCounter("alpha", "a", R"(k="1")").Inc();
  m.GetCounter("alpha", "a", R"(k="2")").Inc();
  const std::string text = m.RenderPrometheus();
  EXPECT_LT(text.find("# HELP alpha"), text.find("# HELP zeta"));
  EXPECT_EQ(text.find("# TYPE alpha"), text.rfind("# TYPE alpha"));
}

TEST(MetricsTest, HistogramCountsNegativeAndNanObservationsAsZero) {
  Metrics m;
  Histogram& h = m.GetHistogram("h", "help");
  h.Observe(-0.5);  // a wall clock that stepped back
  h.Observe(std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(h.Count(), 2u);
  EXPECT_EQ(h.CumulativeCounts().front(), 2u);
  EXPECT_EQ(h.Sum(), 0.0);
}

TEST(MetricsTest, HistogramCountsInfiniteObservationsInTheInfBucketOnly) {
  Metrics m;
  Histogram& h = m.GetHistogram("h", "help");
  h.Observe(std::numeric_limits<double>::infinity());
  EXPECT_EQ(h.Count(), 1u);
  EXPECT_EQ(h.CumulativeCounts().back(), 0u);
  EXPECT_EQ(h.Sum(), 1e12);
}

TEST(MetricsTest, EmptyRegistryRendersNothing) {
  Metrics m;
  EXPECT_EQ(m.RenderPrometheus(), "");
}

}  // namespace
}  // namespace dcm
