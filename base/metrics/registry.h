// A set of metric families (name, help, type, label names) and their
// labelled children, read as a snapshot for the exposition (text_format.h).
// Thread-safe. Hot paths look a child up once and keep the reference:
// children live as long as the registry (Remove aside), so an update is one
// atomic operation.
#ifndef RILL_BASE_METRICS_REGISTRY_H_
#define RILL_BASE_METRICS_REGISTRY_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "base/metrics/metric.h"

namespace rill::base::metrics {

enum class MetricType { kCounter, kGauge, kHistogram };
const char* MetricTypeName(MetricType type);

// What one family holds at the time of reading.
struct FamilySnapshot {
  std::string name;
  std::string help;
  MetricType type = MetricType::kCounter;
  std::vector<std::string> label_names;
  struct Child {
    std::vector<std::string> label_values;  // One per label name.
    double value = 0.0;                     // Counter and gauge.
    Histogram::Snapshot histogram;          // Histogram.
  };
  std::vector<Child> children;  // Ordered by label values.
};

class FamilyBase {
 public:
  FamilyBase(std::string name, std::string help, MetricType type,
             std::vector<std::string> label_names);
  virtual ~FamilyBase() = default;
  virtual FamilySnapshot Snapshot() const = 0;
  const std::string& name() const { return name_; }

 protected:
  const std::string name_;
  const std::string help_;
  const MetricType type_;
  const std::vector<std::string> label_names_;
};

template <typename T>
class Family : public FamilyBase {
 public:
  Family(std::string name, std::string help, MetricType type, std::vector<std::string> label_names,
         std::function<std::unique_ptr<T>()> make)
      : FamilyBase(std::move(name), std::move(help), type, std::move(label_names)),
        make_(std::move(make)) {}

  // The child with these label values (one per label name, in order),
  // created at 0 on first use. CHECK-fails on a wrong number of values.
  T& Labels(const std::vector<std::string>& label_values) {
    CheckArity(label_values.size());
    absl::MutexLock lock(&mu_);
    std::unique_ptr<T>& child = children_[label_values];
    if (child == nullptr) child = make_();
    return *child;
  }
  // Forgets a child (e.g. an info gauge whose labels changed). References
  // to it must no longer be used.
  void Remove(const std::vector<std::string>& label_values) {
    absl::MutexLock lock(&mu_);
    children_.erase(label_values);
  }

  FamilySnapshot Snapshot() const override;

 private:
  void CheckArity(size_t n) const;

  const std::function<std::unique_ptr<T>()> make_;
  mutable absl::Mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<T>> children_ ABSL_GUARDED_BY(mu_);
};

using CounterFamily = Family<Counter>;
using GaugeFamily = Family<Gauge>;
using HistogramFamily = Family<Histogram>;

class Registry {
 public:
  // Names follow Prometheus ([a-zA-Z_:][a-zA-Z0-9_:]*; labels without ':'
  // and not "le"); a bad or duplicate name is a programmer error (CHECK).
  // Counter names end in "_total", as the exposition writes them.
  CounterFamily& AddCounter(const std::string& name, const std::string& help,
                            std::vector<std::string> label_names = {});
  GaugeFamily& AddGauge(const std::string& name, const std::string& help,
                        std::vector<std::string> label_names = {});
  // `bounds`: finite, strictly increasing bucket upper bounds.
  HistogramFamily& AddHistogram(const std::string& name, const std::string& help,
                                std::vector<std::string> label_names, std::vector<double> bounds);

  // Every family, in the order they were added.
  std::vector<FamilySnapshot> Collect() const;

 private:
  void Register(std::unique_ptr<FamilyBase> family);

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<FamilyBase>> families_ ABSL_GUARDED_BY(mu_);
};

// Prometheus-style bucket helpers.
// 1, 2, 5, 10, 20, 50, ... while <= `max` (vLLM's build_1_2_5_buckets).
std::vector<double> Buckets125(double max);
// start, start*factor, ... `count` bounds.
std::vector<double> ExponentialBuckets(double start, double factor, int count);

}  // namespace rill::base::metrics

#endif  // RILL_BASE_METRICS_REGISTRY_H_
