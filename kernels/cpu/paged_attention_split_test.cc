// Split-K (flash-decoding) paged attention: the pieces of a long context
// merge to the unsplit result, and the split result is bitwise the same
// alone or in a batch, as a decode or inside a prefill, on 1 or 2 threads.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/util/test_seed.h"

namespace rill::kernels::cpu {
namespace {

constexpr int kHeads = 9, kKvHeads = 3, kHeadDim = 64, kBlock = 16;  // SmolLM2-135M
constexpr int64_t kRow = int64_t{kKvHeads} * kHeadDim, kQRow = int64_t{kHeads} * kHeadDim;

// Seed() + k seeds case k; RILL_TEST_SEED replays them (tests/util/test_seed.h).
unsigned Seed() { return static_cast<unsigned>(rill::tests::util::StreamSeed(0)); }

// One shared paged cache (shuffled blocks) and the sequences living in it.
class SplitAttentionTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { SetForceScalar(GetParam()); }
  void TearDown() override { SetForceScalar(false); }

  // Adds a sequence whose chunk is n_q queries from start_pos; its whole
  // context is in the cache.
  void AddSequence(int64_t start_pos, int64_t n_q) {
    shapes_.push_back({start_pos, n_q});
  }

  // Builds the cache and the queries once every sequence is added.
  void Build() {
    std::mt19937 rng(Seed());
    std::normal_distribution<float> normal(0.0f, 1.0f);
    int64_t blocks = 0;
    for (const auto& [start, n_q] : shapes_) blocks += (start + n_q + kBlock - 1) / kBlock;
    kc_.resize(blocks * kBlock * kRow);
    vc_.resize(blocks * kBlock * kRow);
    for (float& x : kc_) x = normal(rng);
    for (float& x : vc_) x = normal(rng);
    std::vector<int32_t> ids(blocks);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    int64_t next = 0;
    for (const auto& [start, n_q] : shapes_) {
      const int64_t nb = (start + n_q + kBlock - 1) / kBlock;
      tables_.emplace_back(ids.begin() + next, ids.begin() + next + nb);
      next += nb;
      qs_.emplace_back(n_q * kQRow);
      // Sharper than unit scores, as trained heads are.
      for (float& x : qs_.back()) x = 2.0f * normal(rng);
    }
  }

  PagedAttentionArgs Args(size_t s, int64_t split_keys, float* out) const {
    PagedAttentionArgs a;
    a.q = qs_[s].data();
    a.out = out;
    a.k_cache = kc_.data();
    a.v_cache = vc_.data();
    a.block_table = tables_[s].data();
    a.block_table_len = tables_[s].size();
    a.block_size = kBlock;
    a.start_pos = shapes_[s].first;
    a.n_q = shapes_[s].second;
    a.context_len = a.start_pos + a.n_q;
    a.num_heads = kHeads;
    a.num_kv_heads = kKvHeads;
    a.head_dim = kHeadDim;
    a.split_keys = split_keys;
    return a;
  }

  // Runs every sequence in one batch call; outputs per sequence.
  std::vector<std::vector<float>> RunBatch(int64_t split_keys, ThreadPool* pool) const {
    std::vector<std::vector<float>> outs;
    for (const auto& shape : shapes_) outs.emplace_back(shape.second * kQRow, -7.0f);
    std::vector<PagedAttentionArgs> all;
    for (size_t s = 0; s < shapes_.size(); ++s) all.push_back(Args(s, split_keys, outs[s].data()));
    PagedAttentionBatch(all, pool);
    return outs;
  }

  // Per output element, sum_j p_j |v_j| / sum_j p_j in double: the scale the
  // float rounding of the weighted sum is relative to.
  std::vector<double> MagnitudeScale(size_t s) const {
    const auto [start, n_q] = shapes_[s];
    std::vector<double> scale(n_q * kQRow);
    const double sm = 1.0 / std::sqrt(double(kHeadDim));
    for (int64_t t = 0; t < n_q; ++t) {
      const int64_t n_keys = start + t + 1;
      for (int h = 0; h < kHeads; ++h) {
        const float* q = qs_[s].data() + t * kQRow + h * kHeadDim;
        const int64_t off = int64_t{h / (kHeads / kKvHeads)} * kHeadDim;
        std::vector<double> sc(n_keys);
        for (int64_t j = 0; j < n_keys; ++j) {
          const int64_t slot = int64_t{tables_[s][j / kBlock]} * kBlock + j % kBlock;
          double d = 0.0;
          for (int i = 0; i < kHeadDim; ++i) d += double(q[i]) * kc_[slot * kRow + off + i];
          sc[j] = d * sm;
        }
        const double m = *std::max_element(sc.begin(), sc.end());
        double l = 0.0;
        double* o = scale.data() + t * kQRow + h * kHeadDim;
        for (int64_t j = 0; j < n_keys; ++j) {
          const int64_t slot = int64_t{tables_[s][j / kBlock]} * kBlock + j % kBlock;
          const double p = std::exp(sc[j] - m);
          l += p;
          for (int i = 0; i < kHeadDim; ++i) o[i] += p * std::fabs(vc_[slot * kRow + off + i]);
        }
        for (int i = 0; i < kHeadDim; ++i) o[i] /= l;
      }
    }
    return scale;
  }

  void ExpectCloseToUnsplit(const std::vector<std::vector<float>>& split) const {
    ThreadPool pool(2);
    const std::vector<std::vector<float>> unsplit = RunBatch(-1, &pool);
    for (size_t s = 0; s < shapes_.size(); ++s) {
      const std::vector<double> scale = MagnitudeScale(s);
      for (size_t e = 0; e < split[s].size(); ++e) {
        ASSERT_LE(std::fabs(split[s][e] - unsplit[s][e]), 1e-5 * scale[e])
            << "seq " << s << " query " << e / kQRow << " elem " << e % kQRow << ": "
            << split[s][e] << " vs " << unsplit[s][e];
      }
    }
  }

  // Bitwise: split batch on 2 threads == each sequence alone on 1 and 2
  // threads == each query alone (as a decode step computes it).
  void ExpectInvariant(int64_t split_keys, const std::vector<std::vector<float>>& batched) const {
    ThreadPool pool(2);
    for (size_t s = 0; s < shapes_.size(); ++s) {
      for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
        std::vector<float> alone(batched[s].size(), -9.0f);
        PagedAttentionArgs a = Args(s, split_keys, alone.data());
        a.pool = p;
        PagedAttention(a);
        ASSERT_EQ(alone, batched[s]) << "seq " << s << (p ? " on 2 threads" : " on 1 thread");
      }
      const int64_t n_q = shapes_[s].second;
      for (int64_t t = 0; t < n_q; t += std::max<int64_t>(1, n_q / 17)) {
        std::vector<float> one(kQRow, -9.0f);
        PagedAttentionArgs a = Args(s, split_keys, one.data());
        a.q += t * kQRow;
        a.start_pos += t;
        a.n_q = 1;
        a.context_len = a.start_pos + 1;
        a.pool = &pool;
        PagedAttention(a);
        ASSERT_EQ(one, std::vector<float>(batched[s].begin() + t * kQRow,
                                          batched[s].begin() + (t + 1) * kQRow))
            << "seq " << s << " query " << t << " as a decode";
      }
    }
  }

  std::vector<std::pair<int64_t, int64_t>> shapes_;  // (start_pos, n_q)
  std::vector<float> kc_, vc_;
  std::vector<std::vector<int32_t>> tables_;
  std::vector<std::vector<float>> qs_;
};

TEST_P(SplitAttentionTest, DefaultSplitOfLongDecodesMatchesUnsplit) {
  // Decodes at 2k context, at and around one piece, and short ones (unsplit).
  for (int64_t ctx : {2048, 2000, 256, 257, 513, 40, 1}) AddSequence(ctx - 1, 1);
  // A prefill chunk whose queries cross piece boundaries.
  AddSequence(200, 90);
  Build();
  ThreadPool pool(2);
  const std::vector<std::vector<float>> split = RunBatch(0, &pool);
  ExpectCloseToUnsplit(split);
  ExpectInvariant(0, split);
  // The 2k decode really took the split path (its rounding differs).
  EXPECT_NE(split[0], RunBatch(-1, &pool)[0]);
}

TEST_P(SplitAttentionTest, ManySmallPiecesAndSeveralWaves) {
  // 16-key pieces: a 700-token prefill needs far more partial state than one
  // wave holds, and a piece length that is not a block multiple rounds up.
  AddSequence(0, 700);
  AddSequence(333, 1);
  Build();
  ThreadPool pool(2);
  const std::vector<std::vector<float>> split = RunBatch(kBlock, &pool);
  ExpectCloseToUnsplit(split);
  ExpectInvariant(kBlock, split);
  EXPECT_EQ(RunBatch(kBlock + 5, &pool), RunBatch(2 * kBlock, &pool));
}

TEST_P(SplitAttentionTest, ShortContextsAreNotSplit) {
  // At or below one piece the split and unsplit paths are the same code.
  for (int64_t ctx : {1, 17, 255, 256}) AddSequence(ctx - 1, 1);
  AddSequence(0, 256);
  Build();
  ThreadPool pool(2);
  EXPECT_EQ(RunBatch(0, &pool), RunBatch(-1, &pool));
}

INSTANTIATE_TEST_SUITE_P(Paths, SplitAttentionTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Scalar" : "Simd";
                         });

}  // namespace
}  // namespace rill::kernels::cpu
