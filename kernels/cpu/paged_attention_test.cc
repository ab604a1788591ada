#include "kernels/cpu/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/kernel_path_for_test.h"
#include "kernels/cpu/quant_types.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/util/test_seed.h"

namespace rill::kernels::cpu {
namespace {

// Seed() + k seeds case k; RILL_TEST_SEED replays them (tests/util/test_seed.h).
unsigned Seed() { return static_cast<unsigned>(rill::tests::util::StreamSeed(0)); }

struct Case {
  int num_heads, num_kv_heads, head_dim, block_size;
  int64_t start_pos, n_q;
  int64_t sliding_window = 0;  // 0: plain causal
  float softcap = 0.0f;        // 0: none
  float scale = 0.0f;          // 0: 1 / sqrt(head_dim)
};

// The kernel paths: the widest this CPU has (AVX-512 block updates where
// the head size is a multiple of 16), AVX2 only, scalar.
class PagedAttentionTest : public KernelPathTest {
 protected:
  void SetUp() override {
    if (GetParam() == KernelPath::kWidest && !UseAvx512()) {
      GTEST_SKIP() << "no AVX-512 on this CPU";
    }
    KernelPathTest::SetUp();
  }
};

TEST_P(PagedAttentionTest, MatchesNaive) {
  std::mt19937 rng(Seed());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  ThreadPool pool(2);
  const std::vector<Case> cases = {
      {9, 3, 64, 16, 0, 1},   {9, 3, 64, 16, 40, 1},  {9, 3, 64, 16, 0, 37},
      {4, 4, 12, 5, 23, 9},   {8, 1, 32, 16, 15, 2},  {2, 2, 8, 1, 3, 4},
      // Head sizes 16k (AVX-512 kernel) with odd 16-dim tails, 8 (mod 16),
      // and blocks of more than 16 keys or not a multiple of 16.
      {4, 2, 80, 32, 50, 3},  {4, 2, 128, 20, 33, 2}, {6, 3, 48, 7, 9, 5},
      {2, 1, 72, 24, 30, 2},  {2, 1, 256, 16, 5, 3},
      // Sliding windows: starting inside a block, a window of 1, windows
      // that leave whole split pieces empty (300 + keys, split at 256) or
      // span two pieces, and a window longer than the context (no effect).
      {9, 3, 64, 16, 0, 37, 8}, {4, 4, 12, 5, 23, 9, 5}, {2, 1, 80, 32, 50, 3, 1},
      {2, 2, 8, 1, 3, 4, 2},    {4, 2, 64, 16, 300, 5, 37}, {4, 2, 48, 16, 400, 3, 300},
      {4, 2, 32, 16, 10, 6, 1000},
      // Gemma 2: soft-capped scores with an explicit scale, with and
      // without a window.
      {4, 2, 64, 16, 20, 7, 0, 1.5f, 0.3f}, {4, 2, 80, 16, 300, 3, 9, 2.0f, 0.0f},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "heads " << c.num_heads << "/" << c.num_kv_heads
                                    << " hd " << c.head_dim << " bs " << c.block_size
                                    << " start " << c.start_pos << " n_q " << c.n_q
                                    << " window " << c.sliding_window);
    const int64_t ctx = c.start_pos + c.n_q;
    const int64_t n_blocks_seq = (ctx + c.block_size - 1) / c.block_size;
    const int64_t pool_blocks = n_blocks_seq + 5;
    const int64_t row = int64_t{c.num_kv_heads} * c.head_dim;
    // Shuffled physical blocks; the rest of the cache is garbage that must
    // never be read into the result.
    std::vector<int32_t> ids(pool_blocks);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    std::vector<int32_t> table(ids.begin(), ids.begin() + n_blocks_seq);
    std::vector<float> kc(pool_blocks * c.block_size * row, 1e6f);
    std::vector<float> vc(pool_blocks * c.block_size * row, 1e6f);
    std::vector<float> k(ctx * row), v(ctx * row);
    for (float& x : k) x = normal(rng);
    for (float& x : v) x = normal(rng);
    // Prefix first, then the chunk's own rows, as the model would.
    WriteKv(k.data(), v.data(), c.start_pos, 0, table.data(), c.block_size, c.num_kv_heads,
            c.head_dim, kc.data(), vc.data());
    WriteKv(k.data() + c.start_pos * row, v.data() + c.start_pos * row, c.n_q, c.start_pos,
            table.data(), c.block_size, c.num_kv_heads, c.head_dim, kc.data(), vc.data());

    const int64_t qrow = int64_t{c.num_heads} * c.head_dim;
    std::vector<float> q(c.n_q * qrow), out(c.n_q * qrow, -7.0f);
    for (float& x : q) x = normal(rng);
    PagedAttentionArgs a;
    a.q = q.data();
    a.out = out.data();
    a.k_cache = kc.data();
    a.v_cache = vc.data();
    a.block_table = table.data();
    a.block_table_len = table.size();
    a.block_size = c.block_size;
    a.start_pos = c.start_pos;
    a.n_q = c.n_q;
    a.context_len = ctx;
    a.num_heads = c.num_heads;
    a.num_kv_heads = c.num_kv_heads;
    a.head_dim = c.head_dim;
    a.sliding_window = c.sliding_window;
    a.logit_softcap = c.softcap;
    a.scale = c.scale;
    a.pool = &pool;
    ASSERT_TRUE(ValidatePagedAttentionArgs(a).ok()) << ValidatePagedAttentionArgs(a);
    PagedAttention(a);

    const double scale = c.scale != 0.0f ? c.scale : 1.0 / std::sqrt(double(c.head_dim));
    const int group = c.num_heads / c.num_kv_heads;
    for (int64_t i = 0; i < c.n_q; ++i) {
      for (int h = 0; h < c.num_heads; ++h) {
        const int kvh = h / group;
        const int64_t n_keys = c.start_pos + i + 1;
        // Keys before the window get no weight (s stays -inf).
        const int64_t first =
            c.sliding_window > 0 ? std::max<int64_t>(0, n_keys - c.sliding_window) : 0;
        std::vector<double> s(n_keys, -INFINITY);
        double m = -INFINITY;
        for (int64_t p = first; p < n_keys; ++p) {
          double d = 0;
          for (int e = 0; e < c.head_dim; ++e) {
            d += double(q[i * qrow + h * c.head_dim + e]) * k[p * row + kvh * c.head_dim + e];
          }
          s[p] = d * scale;
          if (c.softcap != 0.0f) s[p] = c.softcap * std::tanh(s[p] / c.softcap);
          m = std::max(m, s[p]);
        }
        double l = 0;
        for (double& x : s) l += (x = std::exp(x - m));
        for (int e = 0; e < c.head_dim; ++e) {
          double want = 0;
          for (int64_t p = 0; p < n_keys; ++p) want += s[p] * v[p * row + kvh * c.head_dim + e];
          want /= l;
          ASSERT_NEAR(out[i * qrow + h * c.head_dim + e], want, 1e-5 + 1e-5 * std::fabs(want))
              << "q " << i << " head " << h << " e " << e;
        }
      }
    }

    // Chunk invariance: the last query alone gives the same bits.
    std::vector<float> last(qrow);
    PagedAttentionArgs a1 = a;
    a1.q = q.data() + (c.n_q - 1) * qrow;
    a1.out = last.data();
    a1.start_pos = ctx - 1;
    a1.n_q = 1;
    a1.pool = nullptr;
    PagedAttention(a1);
    for (int64_t e = 0; e < qrow; ++e) ASSERT_EQ(last[e], out[(c.n_q - 1) * qrow + e]) << e;
  }
}

// Several sequences in one call (one parallel loop, query tiles, GQA heads
// taken together) give the same bits as each sequence alone, single-threaded.
TEST_P(PagedAttentionTest, BatchEqualsEachSequenceAlone) {
  std::mt19937 rng(Seed() + 1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  ThreadPool pool(2);
  const int heads = 9, kv_heads = 3, hd = 64, bs = 16;
  const int64_t row = int64_t{kv_heads} * hd, qrow = int64_t{heads} * hd;
  const int64_t cache_blocks = 96;
  std::vector<float> kc(cache_blocks * bs * row), vc(cache_blocks * bs * row);
  for (float& x : kc) x = normal(rng);
  for (float& x : vc) x = normal(rng);
  std::vector<int32_t> ids(cache_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  // (start_pos, n_q): decodes, a prefill that spans several query tiles, a
  // chunk that starts mid-block.
  const std::vector<std::pair<int64_t, int64_t>> shapes = {
      {0, 1}, {300, 1}, {0, 37}, {45, 19}, {130, 1}, {7, 9}};
  std::vector<std::vector<int32_t>> tables;
  std::vector<std::vector<float>> qs, outs;
  std::vector<PagedAttentionArgs> all;
  size_t next_block = 0;
  for (const auto& [start, n_q] : shapes) {
    const int64_t ctx = start + n_q;
    const int64_t nb = (ctx + bs - 1) / bs;
    ASSERT_LE(next_block + nb, ids.size());
    tables.emplace_back(ids.begin() + next_block, ids.begin() + next_block + nb);
    next_block += nb;
    qs.emplace_back(n_q * qrow);
    for (float& x : qs.back()) x = normal(rng);
    outs.emplace_back(n_q * qrow, -7.0f);
  }
  for (size_t i = 0; i < shapes.size(); ++i) {
    PagedAttentionArgs a;
    a.q = qs[i].data();
    a.out = outs[i].data();
    a.k_cache = kc.data();
    a.v_cache = vc.data();
    a.block_table = tables[i].data();
    a.block_table_len = tables[i].size();
    a.block_size = bs;
    a.start_pos = shapes[i].first;
    a.n_q = shapes[i].second;
    a.context_len = a.start_pos + a.n_q;
    a.num_heads = heads;
    a.num_kv_heads = kv_heads;
    a.head_dim = hd;
    all.push_back(a);
  }
  PagedAttentionBatch(all, &pool);
  for (size_t i = 0; i < all.size(); ++i) {
    std::vector<float> alone(outs[i].size(), -9.0f);
    PagedAttentionArgs a = all[i];
    a.out = alone.data();
    a.pool = nullptr;
    PagedAttention(a);
    for (size_t e = 0; e < alone.size(); ++e) ASSERT_EQ(alone[e], outs[i][e]) << "seq " << i << " " << e;
    // And each query alone (as a decode would compute it).
    for (int64_t t = 0; t < a.n_q; ++t) {
      std::vector<float> one(qrow);
      PagedAttentionArgs a1 = a;
      a1.q = qs[i].data() + t * qrow;
      a1.out = one.data();
      a1.start_pos = a.start_pos + t;
      a1.n_q = 1;
      a1.context_len = a1.start_pos + 1;
      PagedAttention(a1);
      for (int64_t e = 0; e < qrow; ++e) ASSERT_EQ(one[e], outs[i][t * qrow + e]) << i << " q " << t;
    }
  }
}

// An f16 cache: WriteKv stores the rows as halves and attention reads them
// back; the result matches a float64 reference computed on the rounded K/V
// (the rounding is the only change), is batch invariant, and an f16 and an
// f32 sequence may share one PagedAttentionBatch call.
TEST_P(PagedAttentionTest, F16CacheMatchesNaiveOnRoundedRows) {
  std::mt19937 rng(Seed() + 7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  ThreadPool pool(2);
  const int heads = 9, kv_heads = 3, hd = 64, bs = 16;
  const int64_t row = int64_t{kv_heads} * hd, qrow = int64_t{heads} * hd;
  for (const auto& [start, n_q] : std::vector<std::pair<int64_t, int64_t>>{
           {0, 1}, {40, 1}, {0, 37}, {300, 1}, {17, 9}}) {
    SCOPED_TRACE(::testing::Message() << "start " << start << " n_q " << n_q);
    const int64_t ctx = start + n_q;
    const int64_t nb = (ctx + bs - 1) / bs, pool_blocks = nb + 3;
    std::vector<int32_t> ids(pool_blocks);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    std::vector<int32_t> table(ids.begin(), ids.begin() + nb);
    // Garbage that must never reach the result: large halves.
    std::vector<uint16_t> kc(pool_blocks * bs * row, F32ToF16(3e4f));
    std::vector<uint16_t> vc(kc.size(), F32ToF16(3e4f));
    std::vector<float> k(ctx * row), v(ctx * row), kf(kc.size()), vf(vc.size());
    for (float& x : k) x = 2.0f * normal(rng);
    for (float& x : v) x = 2.0f * normal(rng);
    WriteKv(k.data(), v.data(), ctx, 0, table.data(), bs, kv_heads, hd, kc.data(), vc.data(),
            KvDtype::kF16);
    // The same rows in an f32 cache, for the mixed-dtype batch below.
    WriteKv(k.data(), v.data(), ctx, 0, table.data(), bs, kv_heads, hd, kf.data(), vf.data());
    std::vector<float> q(n_q * qrow), out(n_q * qrow, -7.0f);
    for (float& x : q) x = normal(rng);
    PagedAttentionArgs a;
    a.q = q.data();
    a.out = out.data();
    a.k_cache = kc.data();
    a.v_cache = vc.data();
    a.kv_dtype = KvDtype::kF16;
    a.block_table = table.data();
    a.block_table_len = table.size();
    a.block_size = bs;
    a.start_pos = start;
    a.n_q = n_q;
    a.context_len = ctx;
    a.num_heads = heads;
    a.num_kv_heads = kv_heads;
    a.head_dim = hd;
    a.pool = &pool;
    ASSERT_TRUE(ValidatePagedAttentionArgs(a).ok());
    PagedAttention(a);
    const double scale = 1.0 / std::sqrt(double(hd));
    double max_rounding = 0.0;  // how far the f16 rows are from the f32 ones
    for (int64_t i = 0; i < n_q; ++i) {
      for (int h = 0; h < heads; ++h) {
        const int kvh = h / (heads / kv_heads);
        const int64_t n_keys = start + i + 1;
        std::vector<double> sc(n_keys);
        double m = -INFINITY;
        for (int64_t p = 0; p < n_keys; ++p) {
          double d = 0;
          for (int e = 0; e < hd; ++e) {
            d += double(q[i * qrow + h * hd + e]) *
                 F16ToF32(F32ToF16(k[p * row + kvh * hd + e]));
          }
          sc[p] = d * scale;
          m = std::max(m, sc[p]);
        }
        double l = 0;
        for (double& x : sc) l += (x = std::exp(x - m));
        for (int e = 0; e < hd; ++e) {
          double want = 0;
          for (int64_t p = 0; p < n_keys; ++p) {
            const float vr = F16ToF32(F32ToF16(v[p * row + kvh * hd + e]));
            want += sc[p] * vr;
            max_rounding = std::max(max_rounding, double(std::fabs(vr - v[p * row + kvh * hd + e])));
          }
          want /= l;
          ASSERT_NEAR(out[i * qrow + h * hd + e], want, 1e-5 + 1e-5 * std::fabs(want))
              << "q " << i << " head " << h << " e " << e;
        }
      }
    }
    EXPECT_GT(max_rounding, 0.0) << "the f16 rows should differ from the f32 ones";
    // Batch invariance: the last query alone, and a mixed f16 + f32 batch.
    std::vector<float> last(qrow), mixed16(out.size()), mixed32(out.size()), alone32(out.size());
    PagedAttentionArgs a1 = a;
    a1.q = q.data() + (n_q - 1) * qrow;
    a1.out = last.data();
    a1.start_pos = ctx - 1;
    a1.n_q = 1;
    a1.pool = nullptr;
    PagedAttention(a1);
    for (int64_t e = 0; e < qrow; ++e) ASSERT_EQ(last[e], out[(n_q - 1) * qrow + e]) << e;
    PagedAttentionArgs b16 = a, b32 = a;
    b16.out = mixed16.data();
    b32.out = mixed32.data();
    b32.k_cache = kf.data();
    b32.v_cache = vf.data();
    b32.kv_dtype = KvDtype::kF32;
    const PagedAttentionArgs both[] = {b32, b16};
    PagedAttentionBatch(both, &pool);
    b32.out = alone32.data();
    PagedAttention(b32);
    for (size_t e = 0; e < out.size(); ++e) {
      ASSERT_EQ(mixed16[e], out[e]) << e;
      ASSERT_EQ(mixed32[e], alone32[e]) << e;
    }
  }
}

// The half conversion the cache uses: round to nearest even (bitwise the
// scalar F32ToF16, which the reference tests check), saturated at +-65504,
// NaN kept, on the vector path and its scalar tail alike.
TEST_P(PagedAttentionTest, F16ConversionRoundsAndSaturates) {
  std::mt19937 rng(Seed() + 8);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(1003);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = normal(rng) * std::ldexp(1.0f, static_cast<int>(i % 40) - 25);  // incl. subnormals
  }
  x[3] = 1e6f;
  x[4] = -1e6f;
  x[5] = 65519.0f;  // would round up to inf
  x[6] = std::numeric_limits<float>::quiet_NaN();
  x[1001] = -7e4f;  // in the scalar tail
  std::vector<uint16_t> h(x.size());
  ConvertToKvF16(x.data(), h.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) {
      EXPECT_TRUE(std::isnan(F16ToF32(h[i]))) << i;
      continue;
    }
    const float clamped = std::max(-65504.0f, std::min(65504.0f, x[i]));
    ASSERT_EQ(h[i], F32ToF16(clamped)) << i << " x=" << x[i];
  }
  EXPECT_EQ(F16ToF32(h[3]), 65504.0f);
  EXPECT_EQ(F16ToF32(h[4]), -65504.0f);
  EXPECT_EQ(F16ToF32(h[5]), 65504.0f);
  EXPECT_EQ(F16ToF32(h[1001]), -65504.0f);
}

TEST_P(PagedAttentionTest, ValidateRejectsShortTable) {
  float buf[64] = {};
  int32_t table[1] = {0};
  PagedAttentionArgs a;
  a.q = a.out = buf;
  a.k_cache = a.v_cache = buf;
  a.block_table = table;
  a.block_table_len = 1;
  a.block_size = 4;
  a.num_heads = 2;
  a.num_kv_heads = 1;
  a.head_dim = 4;
  a.n_q = 1;
  a.start_pos = 4;
  a.context_len = 5;  // needs 2 blocks
  EXPECT_FALSE(ValidatePagedAttentionArgs(a).ok());
  a.start_pos = 3;
  a.context_len = 4;
  EXPECT_TRUE(ValidatePagedAttentionArgs(a).ok());
  a.num_kv_heads = 3;
  EXPECT_FALSE(ValidatePagedAttentionArgs(a).ok());
}

// Several sequences of one shared cache (a decode step, plus a prefill
// chunk and an empty call) in one PagedAttentionBatch: every output is
// bitwise the one PagedAttention gives for that sequence alone.
TEST_P(PagedAttentionTest, BatchMatchesSeparateCalls) {
  std::mt19937 rng(Seed() + 1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  ThreadPool pool(2);
  const int num_heads = 9, num_kv_heads = 3, head_dim = 64, block_size = 16;
  const int64_t row = int64_t{num_kv_heads} * head_dim, qrow = int64_t{num_heads} * head_dim;
  // (start_pos, n_q) per sequence.
  const std::vector<std::pair<int64_t, int64_t>> seqs = {{0, 1}, {37, 1}, {5, 12}, {16, 0},
                                                         {63, 1}, {2, 1},  {100, 3}};
  const int64_t blocks_per_seq = 8;  // 128 positions
  const int64_t n_blocks = blocks_per_seq * seqs.size();
  std::vector<int32_t> ids(n_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  std::vector<float> kc(n_blocks * block_size * row), vc(n_blocks * block_size * row);
  for (float& x : kc) x = normal(rng);
  for (float& x : vc) x = normal(rng);
  std::vector<std::vector<float>> q(seqs.size()), batched(seqs.size()), alone(seqs.size());
  std::vector<PagedAttentionArgs> args(seqs.size());
  for (size_t s = 0; s < seqs.size(); ++s) {
    const auto [start, n_q] = seqs[s];
    q[s].resize(std::max<int64_t>(n_q, 1) * qrow);
    for (float& x : q[s]) x = normal(rng);
    batched[s].assign(q[s].size(), -7.0f);
    alone[s].assign(q[s].size(), -7.0f);
    PagedAttentionArgs& a = args[s];
    a.q = q[s].data();
    a.out = batched[s].data();
    a.k_cache = kc.data();
    a.v_cache = vc.data();
    a.block_table = ids.data() + s * blocks_per_seq;
    a.block_table_len = blocks_per_seq;
    a.block_size = block_size;
    a.start_pos = start;
    a.n_q = n_q;
    a.context_len = start + n_q;
    a.num_heads = num_heads;
    a.num_kv_heads = num_kv_heads;
    a.head_dim = head_dim;
    ASSERT_TRUE(ValidatePagedAttentionArgs(a).ok()) << ValidatePagedAttentionArgs(a);
  }
  PagedAttentionBatch(args, &pool);
  for (size_t s = 0; s < seqs.size(); ++s) {
    PagedAttentionArgs a = args[s];
    a.out = alone[s].data();
    a.pool = s % 2 ? &pool : nullptr;
    PagedAttention(a);
    for (size_t e = 0; e < alone[s].size(); ++e) {
      ASSERT_EQ(batched[s][e], alone[s][e]) << "sequence " << s << " element " << e;
    }
  }
  PagedAttentionBatch({}, &pool);  // nothing to do, no crash
}

INSTANTIATE_KERNEL_PATHS(PagedAttentionTest);

}  // namespace
}  // namespace rill::kernels::cpu
