#include "kernels/cpu/ops.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/cpu_features.h"

namespace rill::cpu {
namespace {

unsigned Seed() {
  static const unsigned seed = [] {
    const unsigned s = std::random_device{}();
    printf("ops_test seed: %u\n", s);
    return s;
  }();
  return seed;
}

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

class OpsTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { SetForceScalar(GetParam()); }
  void TearDown() override { SetForceScalar(false); }
};

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
    if (n > 2) EXPECT_EQ(x[2], 0.0f);
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
    ExpShiftedScaled(x.data(), n, shift, scale, out.data());
    std::vector<double> want(n);
    // The argument as the op forms it (in float), exp in double.
    for (int64_t i = 0; i < n; ++i) want[i] = std::exp(double{(x[i] - shift) * scale});
    // Relative to each value (the sampler compares them against min_p).
    ExpectClose(out, want, 2e-6, 1e-37);
    if (n > 2) EXPECT_EQ(out[1], 0.0f) << "a -inf logit must give exactly 0";
  }
}

TEST_P(OpsTest, RopeBothLayouts) {
  std::mt19937 rng(Seed() + 4);
  const int64_t n_tokens = 3, n_heads = 2, head_dim = 8, rot_dim = 6, stride = 20;
  std::vector<float> inv_freq(rot_dim / 2);
  for (int64_t i = 0; i < rot_dim / 2; ++i) inv_freq[i] = std::pow(100000.0, -2.0 * i / rot_dim);
  const std::vector<int32_t> pos = {0, 5, 100000};
  for (RopeLayout layout : {RopeLayout::kInterleaved, RopeLayout::kNeox}) {
    auto x = Randn(n_tokens * stride, rng);
    std::vector<double> want(x.begin(), x.end());
    for (int64_t t = 0; t < n_tokens; ++t) {
      for (int64_t h = 0; h < n_heads; ++h) {
        const int64_t base = t * stride + h * head_dim;
        for (int64_t i = 0; i < rot_dim / 2; ++i) {
          const int64_t i0 = layout == RopeLayout::kInterleaved ? base + 2 * i : base + i;
          const int64_t i1 = layout == RopeLayout::kInterleaved ? base + 2 * i + 1
                                                                : base + i + rot_dim / 2;
          const double a = double(pos[t]) * inv_freq[i];
          want[i0] = x[i0] * std::cos(a) - x[i1] * std::sin(a);
          want[i1] = x[i0] * std::sin(a) + x[i1] * std::cos(a);
        }
      }
    }
    Rope(x.data(), n_tokens, stride, n_heads, head_dim, rot_dim, pos.data(), inv_freq.data(),
         layout);
    ExpectClose(x, want, 1e-6, 1e-6);  // also checks untouched tail / gaps
  }
}

// Rope keeps its cos/sin table for the next call with the same positions
// and frequencies; a call with other positions, frequencies or mscale must
// not reuse it.
TEST_P(OpsTest, RopeRecomputesWhenInputsChange) {
  std::mt19937 rng(Seed() + 5);
  const int64_t n_heads = 3, head_dim = 8;
  std::vector<float> f1 = {1.0f, 0.1f, 0.01f, 0.001f}, f2 = {0.5f, 0.05f, 0.005f, 0.0005f};
  const std::vector<int32_t> p1 = {3, 4}, p2 = {3, 9}, p3 = {3, 4, 5};
  struct Call {
    const std::vector<int32_t>* pos;
    const std::vector<float>* freq;
    float mscale;
  };
  const Call calls[] = {{&p1, &f1, 1.0f}, {&p1, &f1, 1.0f}, {&p2, &f1, 1.0f}, {&p2, &f2, 1.0f},
                        {&p2, &f2, 0.5f}, {&p3, &f2, 0.5f}, {&p1, &f1, 1.0f}};
  for (const Call& c : calls) {
    const int64_t n_tokens = c.pos->size();
    auto x = Randn(n_tokens * n_heads * head_dim, rng);
    std::vector<double> want(x.begin(), x.end());
    for (int64_t t = 0; t < n_tokens; ++t) {
      for (int64_t h = 0; h < n_heads; ++h) {
        for (int64_t i = 0; i < head_dim / 2; ++i) {
          const int64_t i0 = (t * n_heads + h) * head_dim + i, i1 = i0 + head_dim / 2;
          const double a = double((*c.pos)[t]) * (*c.freq)[i];
          want[i0] = c.mscale * (x[i0] * std::cos(a) - x[i1] * std::sin(a));
          want[i1] = c.mscale * (x[i0] * std::sin(a) + x[i1] * std::cos(a));
        }
      }
    }
    Rope(x.data(), n_tokens, n_heads * head_dim, n_heads, head_dim, head_dim, c.pos->data(),
         c.freq->data(), RopeLayout::kNeox, c.mscale);
    ExpectClose(x, want, 1e-6, 1e-6);
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, OpsTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? "Scalar" : "Avx2";
                         });

}  // namespace
}  // namespace rill::cpu
