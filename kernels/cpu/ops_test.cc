#include "kernels/cpu/ops.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/kernel_path_for_test.h"
#include "tests/util/test_seed.h"

namespace rill::kernels::cpu {
namespace {

// Seed() + k seeds case k; RILL_TEST_SEED replays them (tests/util/test_seed.h).
unsigned Seed() { return static_cast<unsigned>(rill::tests::util::StreamSeed(0)); }

std::vector<float> Randn(int64_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

void ExpectClose(const std::vector<float>& got, const std::vector<double>& want, double rel,
                 double abs) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], abs + rel * std::fabs(want[i])) << "i=" << i;
  }
}

// Each op on the widest path this CPU has, on AVX2 only, and scalar.
class OpsTest : public KernelPathTest {};

TEST_P(OpsTest, RmsNorm) {
  std::mt19937 rng(Seed());
  for (int64_t dim : {576, 13}) {
    const int64_t rows = 3;
    auto x = Randn(rows * dim, rng, 3.0f);
    auto w = Randn(dim, rng);
    std::vector<double> want(rows * dim);
    for (int64_t r = 0; r < rows; ++r) {
      double ss = 0;
      for (int64_t i = 0; i < dim; ++i) ss += double(x[r * dim + i]) * x[r * dim + i];
      const double inv = 1.0 / std::sqrt(ss / dim + 1e-5);
      for (int64_t i = 0; i < dim; ++i) want[r * dim + i] = x[r * dim + i] * inv * w[i];
    }
    std::vector<float> out(rows * dim);
    RmsNorm(x.data(), w.data(), rows, dim, 1e-5f, out.data());
    ExpectClose(out, want, 1e-5, 1e-6);
    RmsNorm(x.data(), w.data(), rows, dim, 1e-5f, x.data());  // in place
    EXPECT_EQ(x, out);
  }
}

TEST_P(OpsTest, LayerNorm) {
  std::mt19937 rng(Seed() + 1);
  const int64_t rows = 2, dim = 100;
  auto x = Randn(rows * dim, rng, 2.0f);
  for (float& v : x) v += 5.0f;
  auto w = Randn(dim, rng), b = Randn(dim, rng);
  std::vector<double> want(rows * dim);
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < dim; ++i) mean += x[r * dim + i];
    mean /= dim;
    for (int64_t i = 0; i < dim; ++i) var += std::pow(x[r * dim + i] - mean, 2);
    var /= dim;
    for (int64_t i = 0; i < dim; ++i) {
      want[r * dim + i] = (x[r * dim + i] - mean) / std::sqrt(var + 1e-5) * w[i] + b[i];
    }
  }
  std::vector<float> out(rows * dim);
  LayerNorm(x.data(), w.data(), b.data(), rows, dim, 1e-5f, out.data());
  ExpectClose(out, want, 1e-5, 1e-5);
}

TEST_P(OpsTest, SwiGluAndGelu) {
  std::mt19937 rng(Seed() + 2);
  const int64_t n = 1537;
  auto g = Randn(n, rng, 4.0f), u = Randn(n, rng);
  g[0] = -100.0f;
  g[1] = 100.0f;
  std::vector<double> want_s(n), want_g(n);
  for (int64_t i = 0; i < n; ++i) {
    const double v = g[i];
    want_s[i] = v / (1.0 + std::exp(-v)) * u[i];
    want_g[i] = 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
  }
  std::vector<float> out(n);
  SwiGlu(g.data(), u.data(), n, out.data());
  ExpectClose(out, want_s, 1e-5, 1e-6);
  Gelu(g.data(), n, out.data());
  ExpectClose(out, want_g, 1e-5, 1e-6);
}

TEST_P(OpsTest, SoftmaxAddScale) {
  std::mt19937 rng(Seed() + 3);
  for (int64_t n : {1, 7, 8, 49152}) {
    auto x = Randn(n, rng, 10.0f);
    if (n > 2) x[2] = -std::numeric_limits<float>::infinity();
    double m = -INFINITY, s = 0;
    for (float v : x) m = std::max<double>(m, v);
    for (float v : x) s += std::exp(v - m);
    std::vector<double> want(n);
    for (int64_t i = 0; i < n; ++i) want[i] = std::exp(x[i] - m) / s;
    Softmax(x.data(), n);
    ExpectClose(x, want, 1e-5, 1e-9);
    if (n > 2) {
      EXPECT_EQ(x[2], 0.0f);
    }
  }
  auto a = Randn(37, rng), b = Randn(37, rng);
  std::vector<float> out(37);
  Add(a.data(), b.data(), 37, out.data());
  for (int i = 0; i < 37; ++i) EXPECT_EQ(out[i], a[i] + b[i]);
  Scale(a.data(), 0.5f, 37, out.data());
  for (int i = 0; i < 37; ++i) EXPECT_EQ(out[i], a[i] * 0.5f);
}

TEST_P(OpsTest, LogSumExpAndArgMax) {
  std::mt19937 rng(Seed() + 4);
  for (int64_t n : {1, 7, 8, 9, 49152}) {
    auto x = Randn(n, rng, 8.0f);
    if (n > 2) x[1] = -std::numeric_limits<float>::infinity();
    double m = -INFINITY, s = 0;
    for (float v : x) m = std::max<double>(m, v);
    for (float v : x) s += std::exp(v - m);
    EXPECT_NEAR(LogSumExp(x.data(), n), m + std::log(s), 1e-5 * std::max(1.0, std::fabs(m)));
    int64_t want = 0;
    for (int64_t i = 1; i < n; ++i) want = x[i] > x[want] ? i : want;
    EXPECT_EQ(ArgMax(x.data(), n), want) << "n=" << n;
    // Ties go to the lowest index, wherever the lanes split.
    if (n > 20) {
      x[n - 1] = x[13] = x[5] = 1e9f;
      EXPECT_EQ(ArgMax(x.data(), n), 5);
    }
  }
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> all_neg_inf(11, -inf);
  EXPECT_EQ(LogSumExp(all_neg_inf.data(), 11), -inf);
  EXPECT_EQ(ArgMax(all_neg_inf.data(), 11), 0);
  std::vector<float> with_nan = {1.0f, std::nanf(""), 3.0f, 2.0f, 0, 0, 0, 0, 0, -1.0f};
  EXPECT_EQ(ArgMax(with_nan.data(), with_nan.size()), 2);
}

TEST_P(OpsTest, ExpShiftedScaled) {
  std::mt19937 rng(Seed() + 5);
  for (int64_t n : {0, 1, 7, 8, 9, 49152}) {
    auto x = Randn(n, rng, 8.0f);
    if (n > 2) x[1] = -std::numeric_limits<float>::infinity();
    const float shift = 3.5f, scale = 1.0f / 0.7f;
    std::vector<float> out(n, NAN);
    const double sum = ExpShiftedScaled(x.data(), n, shift, scale, out.data());
    std::vector<double> want(n);
    // The argument as the op forms it (in float), exp in double.
    for (int64_t i = 0; i < n; ++i) want[i] = std::exp(double{(x[i] - shift) * scale});
    // Relative to each value (the sampler compares them against min_p).
    ExpectClose(out, want, 2e-6, 1e-37);
    if (n > 2) {
      EXPECT_EQ(out[1], 0.0f) << "a -inf logit must give exactly 0";
    }
    // The returned sum is that of the written values.
    double got_sum = 0.0;
    for (float v : out) got_sum += v;
    EXPECT_NEAR(sum, got_sum, 1e-12 * std::max(1.0, got_sum)) << "n=" << n;
  }
}

TEST_P(OpsTest, LogSumExpGivenMaxMatchesLogSumExp) {
  std::mt19937 rng(Seed() + 6);
  for (int64_t n : {1, 9, 33, 49152}) {
    auto x = Randn(n, rng, 5.0f);
    const float m = x[ArgMax(x.data(), n)];
    EXPECT_EQ(LogSumExpGivenMax(x.data(), n, m), LogSumExp(x.data(), n)) << "n=" << n;
  }
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> all_neg_inf(5, -inf);
  EXPECT_EQ(LogSumExpGivenMax(all_neg_inf.data(), 5, -inf), -inf);
}

// Sequential double running sum: the draw the sampler made before the
// chunked search.
int64_t CumulativeSearchReference(const std::vector<float>& p, double r) {
  int64_t last_positive = -1;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] > 0.0f) last_positive = static_cast<int64_t>(i);
    r -= p[i];
    if (r < 0.0 && p[i] > 0.0f) return static_cast<int64_t>(i);
  }
  return last_positive;
}

TEST_P(OpsTest, CumulativeSearchFindsTheInverseCdf) {
  std::mt19937 rng(Seed() + 7);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (int64_t n : {1, 7, 31, 32, 33, 100, 49152}) {
    std::vector<float> p(n);
    for (float& v : p) v = u(rng) < 0.3f ? 0.0f : u(rng);  // zeros are never drawn
    p[n / 2] = 0.75f;  // at least one entry can be drawn
    double total = 0.0;
    for (float v : p) total += v;
    for (int k = 0; k < 200; ++k) {
      const double r = total * k / 200.0;
      const int64_t got = CumulativeSearch(p.data(), n, r);
      const int64_t want = CumulativeSearchReference(p, r);
      // Chunk sums round differently from the running sum: a draw within
      // rounding of a boundary may land on the neighbouring positive entry.
      if (got != want) {
        double below = 0.0;
        for (int64_t i = 0; i < std::min(got, want); ++i) below += p[i];
        const double boundary = below + p[std::min(got, want)];
        EXPECT_NEAR(r, boundary, 1e-9 * total) << "n=" << n << " r=" << r;
      }
      ASSERT_GE(got, 0);
      EXPECT_GT(p[got], 0.0f);
    }
    // Past the end by rounding: the last positive entry.
    EXPECT_EQ(CumulativeSearch(p.data(), n, total * 2), CumulativeSearchReference(p, total * 2));
  }
  std::vector<float> zeros(40, 0.0f);
  EXPECT_EQ(CumulativeSearch(zeros.data(), 40, 0.0), -1);
}

TEST_P(OpsTest, FirstAboveFindsTheFirstGreater) {
  std::mt19937 rng(Seed() + 9);
  for (int64_t n : {0, 1, 8, 31, 32, 33, 100, 1000}) {
    auto x = Randn(n, rng);
    for (float t : {-10.0f, 0.0f, 1.5f, 2.5f, 10.0f}) {
      int64_t want = n;
      for (int64_t i = 0; i < n && want == n; ++i) want = x[i] > t ? i : want;
      EXPECT_EQ(FirstAbove(x.data(), n, t), want) << "n=" << n << " t=" << t;
    }
  }
  std::vector<float> ties = {1.0f, 1.0f, std::nanf(""), 2.0f};
  EXPECT_EQ(FirstAbove(ties.data(), 4, 1.0f), 3);  // equal and NaN are not above
}

TEST_P(OpsTest, IdsAtLeastKeepsOrder) {
  std::mt19937 rng(Seed() + 8);
  for (int64_t n : {0, 1, 8, 9, 1000}) {
    auto x = Randn(n, rng);
    std::vector<int32_t> got(n, -7);  // room for n, as the contract asks
    got.resize(IdsAtLeast(x.data(), n, 0.5f, got.data()));
    std::vector<int32_t> want;
    for (int64_t i = 0; i < n; ++i) {
      if (x[i] >= 0.5f) want.push_back(static_cast<int32_t>(i));
    }
    EXPECT_EQ(got, want) << "n=" << n;
    std::vector<int32_t> in_range(n);
    in_range.resize(IdsInRange(x.data(), n, -0.25f, 0.5f, in_range.data()));
    want.clear();
    for (int64_t i = 0; i < n; ++i) {
      if (x[i] >= -0.25f && x[i] < 0.5f) want.push_back(static_cast<int32_t>(i));
    }
    EXPECT_EQ(in_range, want) << "n=" << n;
  }
  for (int64_t n : {0, 5, 16, 33, 1000, 49152}) {
    std::vector<float> x(n);
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    for (float& v : x) v = u(rng);
    const float t[4] = {0.0f, 0.01f, 0.3f, 2.0f};
    double sums[4];
    SumsAtLeast(x.data(), n, t, sums);
    for (int k = 0; k < 4; ++k) {
      double want = 0.0;
      for (float v : x) want += v >= t[k] ? v : 0.0;
      // Runs of 256 are summed in float first.
      EXPECT_NEAR(sums[k], want, 2e-6 * std::max(1.0, want)) << "n=" << n << " k=" << k;
    }
  }
  std::vector<float> inf_and_nan = {std::numeric_limits<float>::infinity(), std::nanf(""), 1.0f};
  std::vector<int32_t> got(3);
  got.resize(IdsAtLeast(inf_and_nan.data(), 3, 0.0f, got.data()));
  EXPECT_EQ(got, (std::vector<int32_t>{0, 2}));  // +inf is kept, NaN never
}

INSTANTIATE_KERNEL_PATHS(OpsTest);

// The sampler's probabilities must not depend on the vector width: the
// AVX-512 exps are the AVX2 ones lane for lane.
TEST(OpsWidthTest, ExpShiftedScaledIsBitwiseTheSameAtEveryWidth) {
  if (!UseAvx512()) GTEST_SKIP() << "no AVX-512 on this CPU";
  std::mt19937 rng(Seed() + 10);
  const int64_t n = 49152 + 7;
  auto x = Randn(n, rng, 6.0f);
  x[3] = -std::numeric_limits<float>::infinity();
  std::vector<float> wide(n), narrow(n);
  const double s_wide = ExpShiftedScaled(x.data(), n, 2.0f, 1.3f, wide.data());
  SetDisableAvx512(true);
  const double s_narrow = ExpShiftedScaled(x.data(), n, 2.0f, 1.3f, narrow.data());
  SetDisableAvx512(false);
  EXPECT_EQ(wide, narrow);
  EXPECT_NEAR(s_wide, s_narrow, 1e-12 * s_narrow);  // summed in another order
}

}  // namespace
}  // namespace rill::kernels::cpu
