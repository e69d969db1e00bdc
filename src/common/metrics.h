// Metrics: counters, gauges and histograms rendered as Prometheus text (GET /metrics).
// Thread-safety: registration takes a mutex; updates are lock-free atomics, so hot paths hold
// a reference obtained once (`auto& c = metrics.GetCounter(...)`) and only increment it.
// Metric objects live as long as the registry and never move.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace dcm {

class Counter {
 public:
  void Inc(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

class Gauge {
 public:
  void Set(int64_t v) { value_.store(v, std::memory_order_relaxed); }
  void Add(int64_t v) { value_.fetch_add(v, std::memory_order_relaxed); }
  int64_t Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> value_{0};
};

// Fixed buckets in seconds, chosen for latencies from 100 µs to 10 s.
class Histogram {
 public:
  static const std::vector<double>& Buckets();
  Histogram();
  void Observe(double seconds);
  uint64_t Count() const { return count_.load(std::memory_order_relaxed); }
  // Rendering helpers.
  std::vector<uint64_t> CumulativeCounts() const;
  double Sum() const { return sum_micros_.load(std::memory_order_relaxed) / 1e6; }

 private:
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_micros_{0};
};

class Metrics {
 public:
  // `labels` is the Prometheus label set without braces, e.g. `type="dcm.provider.registered"`.
  Counter& GetCounter(const std::string& name, const std::string& help,
                      const std::string& labels = "");
  Gauge& GetGauge(const std::string& name, const std::string& help, const std::string& labels = "");
  Histogram& GetHistogram(const std::string& name, const std::string& help,
                          const std::string& labels = "");

  std::string RenderPrometheus() const;

 private:
  struct Family {
    std::string help;
    std::string type;
    std::map<std::string, std::unique_ptr<Counter>> counters;
    std::map<std::string, std::unique_ptr<Gauge>> gauges;
    std::map<std::string, std::unique_ptr<Histogram>> histograms;
  };
  Family& FamilyFor(const std::string& name, const std::string& help, const char* type);

  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
};

}  // namespace dcm
