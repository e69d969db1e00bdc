#include "src/common/metrics.h"

#include <fmt/format.h>

#include <cassert>

namespace dcm {

const std::vector<double>& Histogram::Buckets() {
  static const std::vector<double> kBuckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                               0.01,   0.025,   0.05,   0.1,   0.25,   0.5,
                                               1,      2.5,     5,      10};
  return kBuckets;
}

Histogram::Histogram() : buckets_(new std::atomic<uint64_t>[Buckets().size()]) {
  for (size_t i = 0; i < Buckets().size(); ++i) buckets_[i] = 0;
}

void Histogram::Observe(double seconds) {
  // A wall clock stepping back gives a negative latency; casting it (or NaN, or infinity) to
  // uint64_t below is undefined behaviour. Clamp to [0, 1e12 s].
  if (!(seconds >= 0)) seconds = 0;
  if (seconds > 1e12) seconds = 1e12;
  const auto& b = Buckets();
  for (size_t i = 0; i < b.size(); ++i) {
    if (seconds <= b[i]) {
      buckets_[i].fetch_add(1, std::memory_order_relaxed);
      break;
    }
  }
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_micros_.fetch_add(static_cast<uint64_t>(seconds * 1e6), std::memory_order_relaxed);
}

std::vector<uint64_t> Histogram::CumulativeCounts() const {
  std::vector<uint64_t> out(Buckets().size());
  uint64_t running = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    out[i] = running;
  }
  return out;
}

Metrics::Family& Metrics::FamilyFor(const std::string& name, const std::string& help,
                                    const char* type) {
  auto& f = families_[name];
  if (f.type.empty()) {
    f.help = help;
    f.type = type;
  }
  assert(f.type == type && "one metric name, one type");
  return f;
}

Counter& Metrics::GetCounter(const std::string& name, const std::string& help,
                             const std::string& labels) {
  std::lock_guard lock(mu_);
  auto& slot = FamilyFor(name, help, "counter").counters[labels];
  if (!slot) slot = std::make_unique<Counter>();
  return *slot;
}

Gauge& Metrics::GetGauge(const std::string& name, const std::string& help,
                         const std::string& labels) {
  std::lock_guard lock(mu_);
  auto& slot = FamilyFor(name, help, "gauge").gauges[labels];
  if (!slot) slot = std::make_unique<Gauge>();
  return *slot;
}

Histogram& Metrics::GetHistogram(const std::string& name, const std::string& help,
                                 const std::string& labels) {
  std::lock_guard lock(mu_);
  auto& slot = FamilyFor(name, help, "histogram").histograms[labels];
  if (!slot) slot = std::make_unique<Histogram>();
  return *slot;
}

std::string Metrics::RenderPrometheus() const {
  std::lock_guard lock(mu_);
  std::string out;
  auto braces = [](const std::string& labels) {
    return labels.empty() ? std::string() : "{" + labels + "}";
  };
  for (const auto& [name, f] : families_) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, f.help, name, f.type);
    for (const auto& [labels, c] : f.counters) {
      out += fmt::format("{}{} {}\n", name, braces(labels), c->Value());
    }
    for (const auto& [labels, g] : f.gauges) {
      out += fmt::format("{}{} {}\n", name, braces(labels), g->Value());
    }
    for (const auto& [labels, h] : f.histograms) {
      const auto counts = h->CumulativeCounts();
      const auto& bounds = Histogram::Buckets();
      const std::string sep = labels.empty() ? "" : labels + ",";
      for (size_t i = 0; i < bounds.size(); ++i) {
        out += fmt::format("{}_bucket{{{}le=\"{}\"}} {}\n", name, sep, bounds[i], counts[i]);
      }
      out += fmt::format("{}_bucket{{{}le=\"+Inf\"}} {}\n", name, sep, h->Count());
      out += fmt::format("{}_sum{} {}\n{}_count{} {}\n", name, braces(labels), h->Sum(), name,
                         braces(labels), h->Count());
    }
  }
  return out;
}

}  // namespace dcm
