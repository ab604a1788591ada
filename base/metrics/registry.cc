#include "base/metrics/registry.h"

#include <cmath>
#include <type_traits>

#include <glog/logging.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"

namespace rill::base::metrics {
namespace {

bool ValidName(const std::string& name, bool allow_colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = absl::ascii_isalpha(c) || c == '_' || (allow_colon && c == ':') ||
                    (i > 0 && absl::ascii_isdigit(c));
    if (!ok) return false;
  }
  return true;
}

}  // namespace

const char* MetricTypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kHistogram: return "histogram";
  }
  return "untyped";
}

FamilyBase::FamilyBase(std::string name, std::string help, MetricType type,
                       std::vector<std::string> label_names)
    : name_(std::move(name)),
      help_(std::move(help)),
      type_(type),
      label_names_(std::move(label_names)) {
  CHECK(ValidName(name_, /*allow_colon=*/true)) << "bad metric name '" << name_ << "'";
  for (const std::string& l : label_names_) {
    CHECK(ValidName(l, /*allow_colon=*/false) && l != "le" && l.rfind("__", 0) != 0)
        << "bad label name '" << l << "' of " << name_;
  }
}

template <typename T>
void Family<T>::CheckArity(size_t n) const {
  CHECK_EQ(n, label_names_.size()) << name_ << " has labels " << absl::StrJoin(label_names_, ",");
}

template <typename T>
FamilySnapshot Family<T>::Snapshot() const {
  FamilySnapshot s;
  s.name = name_;
  s.help = help_;
  s.type = type_;
  s.label_names = label_names_;
  absl::MutexLock lock(&mu_);
  for (const auto& [values, child] : children_) {
    FamilySnapshot::Child& c = s.children.emplace_back();
    c.label_values = values;
    if constexpr (std::is_same_v<T, Histogram>) {
      c.histogram = child->Read();
    } else {
      c.value = child->Value();
    }
  }
  return s;
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

void Registry::Register(std::unique_ptr<FamilyBase> family) {
  absl::MutexLock lock(&mu_);
  for (const auto& f : families_) {
    CHECK_NE(f->name(), family->name()) << "metric " << family->name() << " registered twice";
  }
  families_.push_back(std::move(family));
}

CounterFamily& Registry::AddCounter(const std::string& name, const std::string& help,
                                    std::vector<std::string> label_names) {
  CHECK(name.size() > 6 && name.compare(name.size() - 6, 6, "_total") == 0)
      << "counter " << name << " must end in _total";
  auto f = std::make_unique<CounterFamily>(name, help, MetricType::kCounter,
                                           std::move(label_names),
                                           [] { return std::make_unique<Counter>(); });
  CounterFamily& ref = *f;
  Register(std::move(f));
  return ref;
}

GaugeFamily& Registry::AddGauge(const std::string& name, const std::string& help,
                                std::vector<std::string> label_names) {
  auto f = std::make_unique<GaugeFamily>(name, help, MetricType::kGauge, std::move(label_names),
                                         [] { return std::make_unique<Gauge>(); });
  GaugeFamily& ref = *f;
  Register(std::move(f));
  return ref;
}

HistogramFamily& Registry::AddHistogram(const std::string& name, const std::string& help,
                                        std::vector<std::string> label_names,
                                        std::vector<double> bounds) {
  for (size_t i = 0; i < bounds.size(); ++i) {
    CHECK(std::isfinite(bounds[i]) && (i == 0 || bounds[i] > bounds[i - 1]))
        << "histogram " << name << ": bucket bounds must be finite and increasing";
  }
  auto f = std::make_unique<HistogramFamily>(
      name, help, MetricType::kHistogram, std::move(label_names),
      [bounds] { return std::make_unique<Histogram>(bounds); });
  HistogramFamily& ref = *f;
  Register(std::move(f));
  return ref;
}

std::vector<FamilySnapshot> Registry::Collect() const {
  absl::MutexLock lock(&mu_);
  std::vector<FamilySnapshot> out;
  out.reserve(families_.size());
  for (const auto& f : families_) out.push_back(f->Snapshot());
  return out;
}

std::vector<double> Buckets125(double max) {
  std::vector<double> out;
  for (double exponent = 1;; exponent *= 10) {
    for (double m : {1.0, 2.0, 5.0}) {
      if (m * exponent > max) return out;
      out.push_back(m * exponent);
    }
  }
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  std::vector<double> out;
  double v = start;
  for (int i = 0; i < count; ++i, v *= factor) out.push_back(v);
  return out;
}

}  // namespace rill::base::metrics
