#include "engine/step_time_model.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace rill::engine {
namespace {

constexpr int kIrlsRounds = 6;
// Huber's threshold in robust standard deviations (1.4826 * MAD).
constexpr double kHuber = 1.0;

struct Sample3 {
  double x[3];
  double y;
  double age_weight;
};

// Weighted least squares over the columns in `use` (the others get 0).
// nullopt when those columns are (nearly) collinear on this data.
std::optional<std::array<double, 3>> Solve(const std::vector<Sample3>& s,
                                           const std::vector<double>& w,
                                           const std::array<bool, 3>& use) {
  int cols[3];
  int m = 0;
  for (int j = 0; j < 3; ++j) {
    if (use[j]) cols[m++] = j;
  }
  double a[3][4] = {};
  for (size_t i = 0; i < s.size(); ++i) {
    for (int p = 0; p < m; ++p) {
      for (int q = 0; q < m; ++q) a[p][q] += w[i] * s[i].x[cols[p]] * s[i].x[cols[q]];
      a[p][3] += w[i] * s[i].x[cols[p]] * s[i].y;
    }
  }
  double diag = 0.0;
  for (int p = 0; p < m; ++p) diag = std::max(diag, a[p][p]);
  if (diag <= 0.0) return std::nullopt;
  // Gaussian elimination with partial pivoting; a tiny pivot is collinearity.
  for (int p = 0; p < m; ++p) {
    int best = p;
    for (int r = p + 1; r < m; ++r) {
      if (std::abs(a[r][p]) > std::abs(a[best][p])) best = r;
    }
    for (int c = 0; c < 4; ++c) std::swap(a[p][c], a[best][c]);
    if (std::abs(a[p][p]) < 1e-9 * diag) return std::nullopt;
    for (int r = 0; r < m; ++r) {
      if (r == p) continue;
      const double f = a[r][p] / a[p][p];
      for (int c = p; c < 4; ++c) a[r][c] -= f * a[p][c];
    }
  }
  std::array<double, 3> coef{};
  for (int p = 0; p < m; ++p) coef[cols[p]] = a[p][3] / a[p][p];
  return coef;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  return v[mid];
}

// The fit over the first column set (from the fullest) whose coefficients
// are all >= 0, Huber-reweighted. When the data cannot tell a fixed cost
// from a per-token one (all steps one size) or says the slope is negative
// (noise), the time is charged per token: pessimistic, so the budget stays
// small until bigger steps are measured. That always solves while any
// sample has a token.
std::array<double, 3> RobustFit(const std::vector<Sample3>& s) {
  using Set = std::array<bool, 3>;
  static constexpr std::array<Set, 4> kSets = {
      {{true, true, true}, {true, true, false}, {false, true, true}, {false, true, false}}};
  // Noise on a shared machine is multiplicative (a neighbour slows a long
  // step as much as a short one, in proportion), so residuals are relative:
  // each sample weighs 1 / time^2.
  std::vector<double> base(s.size()), w(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const double y = std::max(s[i].y, 1e-6);
    base[i] = s[i].age_weight / (y * y);
    w[i] = base[i];
  }
  std::array<double, 3> coef{};
  for (int round = 0; round < kIrlsRounds; ++round) {
    for (const Set& use : kSets) {
      std::optional<std::array<double, 3>> c = Solve(s, w, use);
      if (c.has_value() && (*c)[0] >= 0.0 && (*c)[1] >= 0.0 && (*c)[2] >= 0.0) {
        coef = *c;
        break;
      }
    }
    std::vector<double> abs_res(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
      abs_res[i] = std::abs(s[i].y - (coef[0] + coef[1] * s[i].x[1] + coef[2] * s[i].x[2])) /
                   std::max(s[i].y, 1e-6);
    }
    const double scale = 1.4826 * Median(abs_res);
    if (scale <= 0.0) break;  // An exact fit: nothing to reweight.
    // Huber's weights bound a slow step's pull without ever ignoring it: a
    // redescending weight could reject the first large chunks as outliers
    // of a fit made from small ones, and the budget would never learn.
    for (size_t i = 0; i < s.size(); ++i) {
      const double robust = abs_res[i] <= kHuber * scale ? 1.0 : kHuber * scale / abs_res[i];
      w[i] = base[i] * robust;
    }
  }
  return coef;
}

int ClassOf(int64_t tokens) {
  int c = 0;
  while (tokens > 1 && c + 1 < 16) {
    tokens >>= 1;
    ++c;
  }
  return c;
}

}  // namespace

void StepShape::AddChunk(int64_t start, int64_t n) {
  tokens += n;
  kv_reads += static_cast<double>(n) * (static_cast<double>(start) + 0.5 * static_cast<double>(n + 1));
}

StepTimeModel::StepTimeModel() {
  for (std::vector<Sample>& v : samples_) v.reserve(kPerClass);
}

void StepTimeModel::Observe(const StepShape& shape, absl::Duration step_time) {
  if (shape.tokens <= 0) return;
  const int c = ClassOf(shape.tokens);
  const Sample s{static_cast<double>(shape.tokens), shape.kv_reads,
                 absl::ToDoubleSeconds(step_time), num_observed_++};
  if (static_cast<int>(samples_[c].size()) < kPerClass) {
    samples_[c].push_back(s);
  } else {
    samples_[c][next_[c]] = s;
  }
  next_[c] = (next_[c] + 1) % kPerClass;
  if (shape.tokens <= kExactSizes) {
    Exact& e = exact_[shape.tokens];
    e.seconds[e.count % kExactKept] = s.seconds;
    e.step[e.count % kExactKept] = s.step;
    ++e.count;
  }
  Refit();
}

absl::Duration StepTimeModel::RecentTime(int64_t tokens) const {
  if (tokens < 1 || tokens > kExactSizes || exact_[tokens].count < kMinExact) {
    return absl::ZeroDuration();
  }
  const Exact& e = exact_[tokens];
  std::vector<double> v;
  for (int i = 0; i < std::min(e.count, kExactKept); ++i) {
    if (num_observed_ - e.step[i] <= kExactMaxAge) v.push_back(e.seconds[i]);
  }
  if (static_cast<int>(v.size()) < kMinExact) return absl::ZeroDuration();
  return absl::Seconds(Median(std::move(v)));
}

void StepTimeModel::Refit() {
  // Columns scaled to ~1 so the solver's collinearity test is meaningful.
  double max_tokens = 1.0, max_kv = 1.0;
  std::vector<Sample3> s;
  for (const std::vector<Sample>& v : samples_) {
    for (const Sample& x : v) {
      max_tokens = std::max(max_tokens, x.tokens);
      max_kv = std::max(max_kv, x.kv_reads);
    }
  }
  for (const std::vector<Sample>& v : samples_) {
    for (const Sample& x : v) {
      const double age = static_cast<double>(num_observed_ - 1 - x.step);
      s.push_back({{1.0, x.tokens / max_tokens, x.kv_reads / max_kv},
                   x.seconds,
                   std::exp2(-age / kHalfLifeSteps)});
    }
  }
  ready_ = !s.empty();
  if (!ready_) return;
  const std::array<double, 3> c = RobustFit(s);
  coef_ = {c[0], c[1] / max_tokens, c[2] / max_kv};
}

absl::Duration StepTimeModel::Predict(const StepShape& shape) const {
  return absl::Seconds(coef_[0] + coef_[1] * static_cast<double>(shape.tokens) +
                       coef_[2] * shape.kv_reads);
}

int64_t StepTimeModel::largest_observed_tokens() const {
  for (int c = kClasses - 1; c >= 0; --c) {
    if (samples_[c].empty()) continue;
    double m = 0.0;
    for (const Sample& x : samples_[c]) m = std::max(m, x.tokens);
    return static_cast<int64_t>(m);
  }
  return 0;
}

}  // namespace rill::engine
