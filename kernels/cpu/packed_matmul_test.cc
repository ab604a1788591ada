// The int16 VNNI path: close to the float64 reference, bitwise batch and
// thread-count invariant, row groups with tails, and the types it refuses.
#include "kernels/cpu/packed_matmul.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/random_blocks_for_test.h"
#include "kernels/cpu/quant_types.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/util/test_seed.h"

namespace rill::kernels::cpu {
namespace {

// Seed() + k seeds case k; RILL_TEST_SEED replays them (tests/util/test_seed.h).
unsigned Seed() { return static_cast<unsigned>(rill::tests::util::StreamSeed(0)); }

// A packed random matrix and gaussian activations for n_tokens tokens.
struct Problem {
  std::vector<uint8_t> data;
  WeightMatrix w;
  std::vector<float> x;
};

Problem MakeProblem(GgmlType type, int64_t rows, int64_t cols, int64_t n_tokens,
                    std::mt19937& rng) {
  Problem p;
  p.data = RandomBlockRows(type, rows, cols, rng);
  p.w = MakeWeightMatrix(type, rows, cols, p.data.data());
  p.w.float_activations = true;
  EXPECT_TRUE(PackForCpu(&p.w));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  p.x.resize(n_tokens * cols);
  for (float& v : p.x) v = normal(rng);
  return p;
}

class PackedMatMulTest : public ::testing::TestWithParam<GgmlType> {
 protected:
  void SetUp() override {
    if (!PackedKernelsAvailable()) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  }
};

TEST_P(PackedMatMulTest, MatchesReferenceAndIsBatchInvariant) {
  const GgmlType type = GetParam();
  std::mt19937 rng(Seed() + static_cast<unsigned>(type));
  ThreadPool pool(2);
  for (int64_t rows : {1, 16, 37, 64}) {
    for (int64_t cols : {32, 96, 576}) {
      SCOPED_TRACE(std::string(GgmlTypeName(type)) + " rows=" + std::to_string(rows) +
                   " cols=" + std::to_string(cols));
      const int64_t n_tokens = 21;
      Problem p = MakeProblem(type, rows, cols, n_tokens, rng);
      ASSERT_NE(p.w.packed, nullptr);
      const std::vector<uint8_t>& data = p.data;
      const WeightMatrix& w = p.w;
      std::vector<float>& x = p.x;
      x[3] = 40.0f;  // an outlier: its block's scale is coarser
      std::vector<float> y(n_tokens * rows, NAN);
      MatMul(w, x.data(), n_tokens, y.data(), &pool);
      std::vector<float> wrow(cols);
      for (int64_t r = 0; r < rows; ++r) {
        DequantizeRow(type, data.data() + r * RowBytes(type, cols), wrow.data(), cols);
        for (int64_t t = 0; t < n_tokens; ++t) {
          // The rounding bound: each activation is within half a step
          // (block amax / 32767) of its int16 value, plus f32 rounding.
          double ref = 0, bound = 0, mag = 0;
          for (int64_t b = 0; b < cols / 32; ++b) {
            double amax = 0, wsum = 0;
            for (int64_t i = 32 * b; i < 32 * b + 32; ++i) {
              ref += double(wrow[i]) * x[t * cols + i];
              mag += std::fabs(double(wrow[i]) * x[t * cols + i]);
              amax = std::max(amax, std::fabs(double(x[t * cols + i])));
              wsum += std::fabs(double(wrow[i]));
            }
            bound += 0.5 * amax / 32767.0 * wsum;
          }
          const double tol = 1.01 * bound + 1e-6 * mag + 1e-30;
          ASSERT_NEAR(y[t * rows + r], ref, tol) << "t=" << t << " r=" << r;
        }
      }
      // Every sub-batch, at any offset, with or without the pool: the same bits.
      for (int64_t n = 1; n <= n_tokens; ++n) {
        const int64_t start = (n * 7) % (n_tokens - n + 1);
        std::vector<float> sub(n * rows, NAN);
        MatMul(w, x.data() + start * cols, n, sub.data(), n % 2 ? nullptr : &pool);
        for (int64_t i = 0; i < n * rows; ++i) {
          ASSERT_EQ(sub[i], y[start * rows + i]) << "n=" << n << " start=" << start << " i=" << i;
        }
      }
    }
  }
}

// Two-pass tokens: ~2^-30 of each block's largest value, so within f32
// rounding of the reference; the others are untouched, and the result per
// token is the same in any batch.
TEST_P(PackedMatMulTest, PreciseTokensReachFloatAccuracy) {
  const GgmlType type = GetParam();
  std::mt19937 rng(Seed() + 100 + static_cast<unsigned>(type));
  ThreadPool pool(2);
  const int64_t rows = 48, cols = 576, n_tokens = 11;
  Problem p = MakeProblem(type, rows, cols, n_tokens, rng);
  ASSERT_NE(p.w.packed, nullptr);
  const std::vector<uint8_t>& data = p.data;
  const WeightMatrix& w = p.w;
  std::vector<float>& x = p.x;
  for (int64_t t = 0; t < n_tokens; ++t) x[t * cols + 5] = 300.0f;  // a massive activation
  std::vector<uint8_t> precise(n_tokens);
  for (int64_t t = 0; t < n_tokens; ++t) precise[t] = t % 3 == 0;
  std::vector<float> one(n_tokens * rows), two(n_tokens * rows);
  MatMul(w, x.data(), n_tokens, one.data(), &pool, nullptr);
  MatMul(w, x.data(), n_tokens, two.data(), &pool, precise.data());
  std::vector<float> wrow(cols);
  double worst_one = 0, worst_two = 0;
  for (int64_t r = 0; r < rows; ++r) {
    DequantizeRow(type, data.data() + r * RowBytes(type, cols), wrow.data(), cols);
    for (int64_t t = 0; t < n_tokens; ++t) {
      double ref = 0, scale = 0;
      for (int64_t i = 0; i < cols; ++i) {
        ref += double(wrow[i]) * x[t * cols + i];
        scale += std::fabs(double(wrow[i]) * x[t * cols + i]);
      }
      const double e_one = std::fabs(one[t * rows + r] - ref) / scale;
      const double e_two = std::fabs(two[t * rows + r] - ref) / scale;
      if (precise[t]) {
        ASSERT_LT(e_two, 1e-6) << "t=" << t << " r=" << r;
        worst_two = std::max(worst_two, e_two);
        worst_one = std::max(worst_one, e_one);
      } else {
        ASSERT_EQ(two[t * rows + r], one[t * rows + r]) << "t=" << t << " r=" << r;
      }
    }
  }
  EXPECT_LT(worst_two, worst_one) << "the second pass must reduce the error";
  for (int64_t t = 0; t < n_tokens; ++t) {
    std::vector<float> alone(rows);
    MatMul(w, x.data() + t * cols, 1, alone.data(), nullptr, precise.data() + t);
    for (int64_t r = 0; r < rows; ++r) ASSERT_EQ(alone[r], two[t * rows + r]) << t << " " << r;
  }
}

TEST_P(PackedMatMulTest, DequantizedRowsAreTheFileRows) {
  const GgmlType type = GetParam();
  std::mt19937 rng(Seed() + 200 + static_cast<unsigned>(type));
  const int64_t rows = 37, cols = 96;
  std::vector<uint8_t> data = RandomBlockRows(type, rows, cols, rng);
  std::shared_ptr<const PackedWeights> p =
      PackWeights(type, rows, cols, data.data(), RowBytes(type, cols));
  ASSERT_NE(p, nullptr);
  std::vector<float> want(cols), got(cols);
  for (int64_t r = 0; r < rows; ++r) {
    DequantizeRow(type, data.data() + r * RowBytes(type, cols), want.data(), cols);
    DequantizePackedRow(*p, r, got.data());
    for (int64_t i = 0; i < cols; ++i) ASSERT_EQ(got[i], want[i]) << "r=" << r << " i=" << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Types, PackedMatMulTest,
                         ::testing::Values(GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ8_0),
                         [](const auto& info) { return std::string(GgmlTypeName(info.param)); });

TEST(PackWeights, RefusesTypesWithoutPackedKernels) {
  std::vector<uint8_t> data(RowBytes(GgmlType::kQ4_K, 256) * 4);
  EXPECT_EQ(PackWeights(GgmlType::kQ4_K, 4, 256, data.data(), RowBytes(GgmlType::kQ4_K, 256)),
            nullptr);
  std::vector<float> f(4 * 64);
  EXPECT_EQ(PackWeights(GgmlType::kF32, 4, 64, f.data(), 64 * sizeof(float)), nullptr);
  WeightMatrix w = MakeWeightMatrix(GgmlType::kQ4_1, 4, 64, data.data());
  w.float_activations = false;  // the q8 path is left alone
  EXPECT_FALSE(PackForCpu(&w));
  EXPECT_EQ(w.packed, nullptr);
}

}  // namespace
}  // namespace rill::kernels::cpu
