// The three Prometheus value kinds, one labelled child each: Counter, Gauge,
// Histogram. Updates are lock-free atomics (no allocation, no mutex), so the
// engine loop can update them every step; any thread may read them.
#ifndef RILL_BASE_METRICS_METRIC_H_
#define RILL_BASE_METRICS_METRIC_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace rill::base::metrics {

// A double updated with compare-and-swap (C++17 has no atomic<double>::fetch_add).
class AtomicDouble {
 public:
  void Add(double v) {
    double old = value_.load(std::memory_order_relaxed);
    while (!value_.compare_exchange_weak(old, old + v, std::memory_order_relaxed)) {
    }
  }
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  double Get() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// Only goes up (Prometheus resets are process restarts).
class Counter {
 public:
  void Increment(double v = 1.0) {
    if (v > 0) value_.Add(v);
  }
  double Value() const { return value_.Get(); }

 private:
  AtomicDouble value_;
};

class Gauge {
 public:
  void Set(double v) { value_.Set(v); }
  void Add(double v) { value_.Add(v); }
  double Value() const { return value_.Get(); }

 private:
  AtomicDouble value_;
};

// Cumulative buckets are computed when read; Observe touches one bucket.
class Histogram {
 public:
  // `bounds`: finite upper bounds, strictly increasing (+Inf is implicit).
  explicit Histogram(const std::vector<double>& bounds);

  void Observe(double v);

  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // One per bound, then +Inf (== count).
    double sum = 0.0;
    uint64_t count = 0;
  };
  Snapshot Read() const;
  uint64_t Count() const { return count_.load(std::memory_order_relaxed); }
  double Sum() const { return sum_.Get(); }

 private:
  const std::vector<double> bounds_;
  // One per bound plus the +Inf bucket; non-cumulative.
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;
  std::atomic<uint64_t> count_{0};
  AtomicDouble sum_;
};

}  // namespace rill::base::metrics

#endif  // RILL_BASE_METRICS_METRIC_H_
