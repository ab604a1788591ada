// The CUDA checker is only as good as its references, and this machine has
// no GPU: so the references are checked here against the independent CPU
// kernels (kernels/cpu) and against the sampling rules they document.
#include "kernels/cuda/reference.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cuda/sampling_rng.h"

namespace rill::kernels::cuda::ref {
namespace {

std::vector<Bf16> Random(std::mt19937& rng, size_t n, float lo = -1, float hi = 1) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<Bf16> v(n);
  for (auto& x : v) x = ToBf16(d(rng));
  return v;
}

// tol is absolute below magnitude 1 and relative above (bf16 keeps 8 bits).
void ExpectNear(const std::vector<float>& got, const std::vector<float>& want, float tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * std::max(1.0f, std::fabs(want[i]))) << "at " << i;
  }
}

TEST(ReferenceTest, Bf16RoundsToNearestEven) {
  EXPECT_EQ(ToBf16(1.0f), 0x3F80);
  EXPECT_EQ(ToFloat(0x3F80), 1.0f);
  EXPECT_EQ(ToBf16(1.0f + 1.0f / 256), 0x3F80);  // halfway: to even
  EXPECT_EQ(ToBf16(1.0f + 3.0f / 256), 0x3F82);  // halfway: to even (up)
  EXPECT_TRUE(std::isnan(ToFloat(ToBf16(NAN))));
  EXPECT_EQ(ToFloat(ToBf16(-2.5f)), -2.5f);
}

TEST(ReferenceTest, RmsNormResidualMatchesCpuKernel) {
  std::mt19937 rng(1);
  const int rows = 3, hidden = 576;
  auto x = Random(rng, rows * hidden), res = Random(rng, rows * hidden), w = Random(rng, hidden);
  std::vector<Bf16> out(rows * hidden);
  auto res0 = res;
  RmsNormResidual(x.data(), res.data(), w.data(), out.data(), rows, hidden, 1e-5f);
  std::vector<float> sum(rows * hidden), want(rows * hidden);
  for (int i = 0; i < rows * hidden; ++i) {
    sum[i] = ToFloat(ToBf16(ToFloat(res0[i]) + ToFloat(x[i])));
    EXPECT_EQ(ToFloat(res[i]), sum[i]);
  }
  auto wf = ToFloat(w);
  kernels::cpu::RmsNorm(sum.data(), wf.data(), rows, hidden, 1e-5f, want.data());
  ExpectNear(ToFloat(out), want, 2e-2f);
}

TEST(ReferenceTest, RopeMatchesCpuKernelInBothLayouts) {
  std::mt19937 rng(2);
  const int tokens = 4, qh = 9, kvh = 3, d = 64, rot = 32;
  std::vector<int32_t> pos = {0, 1, 77, 4000};
  std::vector<float> inv(rot / 2);
  for (int i = 0; i < rot / 2; ++i) inv[i] = std::pow(10000.0f, -2.0f * i / rot);
  for (bool neox : {true, false}) {
    auto q = Random(rng, tokens * qh * d), k = Random(rng, tokens * kvh * d);
    auto qf = ToFloat(q), kf = ToFloat(k);
    Rope(q.data(), k.data(), pos.data(), inv.data(), tokens, qh, kvh, d, rot, neox);
    auto layout = neox ? kernels::cpu::RopeLayout::kNeox : kernels::cpu::RopeLayout::kInterleaved;
    kernels::cpu::Rope(qf.data(), tokens, qh * d, qh, d, rot, pos.data(), inv.data(), layout);
    kernels::cpu::Rope(kf.data(), tokens, kvh * d, kvh, d, rot, pos.data(), inv.data(), layout);
    ExpectNear(ToFloat(q), qf, 1.6e-2f);
    ExpectNear(ToFloat(k), kf, 1.6e-2f);
  }
}

TEST(ReferenceTest, ActivationsMatchCpuKernels) {
  std::mt19937 rng(3);
  const int rows = 2, ffn = 100;
  auto gu = Random(rng, rows * 2 * ffn, -5, 5);
  std::vector<Bf16> out(rows * ffn);
  SwiGlu(gu.data(), out.data(), rows, ffn);
  auto f = ToFloat(gu);
  std::vector<float> want(rows * ffn);
  for (int r = 0; r < rows; ++r) {
    kernels::cpu::SwiGlu(f.data() + r * 2 * ffn, f.data() + r * 2 * ffn + ffn, ffn,
                         want.data() + r * ffn);
  }
  ExpectNear(ToFloat(out), want, 5e-2f);
  std::vector<Bf16> g(rows * 2 * ffn);
  Gelu(gu.data(), g.data(), g.size());
  std::vector<float> gw(g.size());
  kernels::cpu::Gelu(f.data(), f.size(), gw.data());
  ExpectNear(ToFloat(g), gw, 5e-2f);
}

TEST(ReferenceTest, PrefillAndDecodeMatchCpuPagedAttention) {
  std::mt19937 rng(4);
  PagedAttentionShape s;
  s.q_heads = 6;
  s.kv_heads = 2;
  s.head_dim = 16;
  s.block_size = 4;
  s.max_blocks_per_seq = 10;
  const int ctx = 37, n = 5;  // a chunk of 5 queries after 32 cached tokens
  const size_t cache = size_t(s.max_blocks_per_seq) * s.block_size * s.kv_heads * s.head_dim;
  auto k = Random(rng, cache), v = Random(rng, cache), q = Random(rng, n * s.q_heads * s.head_dim);
  std::vector<int32_t> table = {3, 9, 0, 1, 7, 2, 8, 4, 6, 5};
  std::vector<int32_t> start = {0, n}, lens = {ctx};
  std::vector<float> out(q.size());
  PagedAttentionPrefill(q.data(), k.data(), v.data(), table.data(), start.data(), lens.data(),
                        out.data(), 1, s);
  auto kf = ToFloat(k), vf = ToFloat(v), qf = ToFloat(q);
  std::vector<float> want(q.size());
  kernels::cpu::PagedAttentionArgs a;
  a.q = qf.data();
  a.out = want.data();
  a.k_cache = kf.data();
  a.v_cache = vf.data();
  a.block_table = table.data();
  a.block_table_len = table.size();
  a.block_size = s.block_size;
  a.start_pos = ctx - n;
  a.n_q = n;
  a.context_len = ctx;
  a.num_heads = s.q_heads;
  a.num_kv_heads = s.kv_heads;
  a.head_dim = s.head_dim;
  ASSERT_TRUE(kernels::cpu::ValidatePagedAttentionArgs(a).ok());
  kernels::cpu::PagedAttention(a);
  ExpectNear(out, want, 1e-4f);
  // The last query of the chunk is a decode step over the whole context.
  std::vector<float> dec(s.q_heads * s.head_dim);
  const size_t last = size_t(n - 1) * s.q_heads * s.head_dim;
  PagedAttentionDecode(q.data() + last, k.data(), v.data(), table.data(), lens.data(), dec.data(),
                       1, s);
  ExpectNear(dec, std::vector<float>(want.begin() + last, want.end()), 1e-4f);
}

TEST(ReferenceTest, GemmAndLogprob) {
  std::vector<Bf16> x = ToBf16(std::vector<float>{1, 2, 3, 4, 5, 6});  // 2x3
  std::vector<Bf16> w = ToBf16(std::vector<float>{1, 0, 0, 0, 1, 1});  // 2x3
  std::vector<float> y(4);
  Gemm(x.data(), w.data(), y.data(), 2, 2, 3);
  EXPECT_EQ(y, (std::vector<float>{1, 5, 4, 11}));
  std::vector<float> l = {1.0f, 2.0f, 3.0f};
  EXPECT_NEAR(Logprob(l.data(), 2, 3), 3.0f - kernels::cpu::LogSumExp(l.data(), 3), 1e-6);
  EXPECT_EQ(Logprob(l.data(), 3, 3), -INFINITY);
}

std::vector<float> Logits(std::mt19937& rng, int vocab) {
  std::normal_distribution<float> d(0, 2);
  std::vector<float> l(vocab);
  for (auto& x : l) x = d(rng);
  return l;
}

int Count(const std::vector<bool>& v) { return std::count(v.begin(), v.end(), true); }

TEST(ReferenceTest, GreedyAndTopOneAreArgmax) {
  std::mt19937 rng(5);
  auto l = Logits(rng, 5000);
  SamplingParams p;
  p.temperature = 0;
  EXPECT_EQ(Sample(l.data(), p, l.size()), kernels::cpu::ArgMax(l.data(), l.size()));
  p.temperature = 1.5f;
  p.top_k = 1;
  for (uint64_t s = 0; s < 20; ++s) {
    p.seed = s;
    EXPECT_EQ(Sample(l.data(), p, l.size()), kernels::cpu::ArgMax(l.data(), l.size()));
  }
}

TEST(ReferenceTest, FiltersKeepWhatTheyPromise) {
  std::mt19937 rng(6);
  auto l = Logits(rng, 3000);
  std::vector<bool> kept;
  SamplingParams p;
  p.top_k = 40;
  int t = Sample(l.data(), p, l.size(), &kept);
  EXPECT_EQ(Count(kept), 40);
  EXPECT_TRUE(kept[t]);
  p = SamplingParams();
  p.min_p = 0.1f;
  Sample(l.data(), p, l.size(), &kept);
  const float mx = *std::max_element(l.begin(), l.end());
  for (size_t i = 0; i < l.size(); ++i) {
    EXPECT_EQ(kept[i], std::exp(l[i] - mx) >= 0.1f) << i;
  }
  p = SamplingParams();
  p.top_p = 0.5f;
  Sample(l.data(), p, l.size(), &kept);
  double z = 0, in = 0, smallest_in = 1e30;
  for (size_t i = 0; i < l.size(); ++i) {
    z += std::exp(l[i] - mx);
    if (kept[i]) {
      in += std::exp(l[i] - mx);
      smallest_in = std::min<double>(smallest_in, std::exp(l[i] - mx));
    }
  }
  EXPECT_GE(in, 0.5 * z);
  EXPECT_LT(in - smallest_in, 0.5 * z);  // minimal: dropping the smallest falls short
}

TEST(ReferenceTest, SamplingIsSeededAndFollowsTheDistribution) {
  std::vector<float> l = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  SamplingParams p;
  p.seed = 42;
  const int first = Sample(l.data(), p, 3);
  EXPECT_EQ(Sample(l.data(), p, 3), first);
  std::vector<int> hits(3);
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    p.step = i;
    ++hits[Sample(l.data(), p, 3)];
  }
  EXPECT_NEAR(hits[0] / double(n), 0.5, 0.02);
  EXPECT_NEAR(hits[1] / double(n), 0.3, 0.02);
  EXPECT_NEAR(hits[2] / double(n), 0.2, 0.02);
}

TEST(ReferenceTest, OrderedKeysSortLikeFloats) {
  std::vector<float> v = {-INFINITY, -3.5f, -1e-30f, -0.0f, 0.0f, 1e-30f, 2.0f, INFINITY};
  for (size_t i = 1; i < v.size(); ++i) EXPECT_LE(OrderedKey(v[i - 1]), OrderedKey(v[i])) << i;
  EXPECT_LT(OrderedKey(-1.0f), OrderedKey(1.0f));
  for (uint64_t s = 0; s < 1000; ++s) {
    const float u = SampleUniform(s, s * 7);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
  }
}

}  // namespace
}  // namespace rill::kernels::cuda::ref
