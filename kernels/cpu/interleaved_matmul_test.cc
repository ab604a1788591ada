// The exact path over 8-row interleaved weights (AVX2 tiles, AVX-512 panels): within f32 rounding of
// the float64 reference, bitwise batch, offset and thread-count invariant
// (direct tiles, panel tiles, their tails and token blocks), MatMulShared
// the same bits as separate calls, dequantized rows the file's, and the
// choice of CPUs it is used on.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/kernel_plan.h"
#include "kernels/cpu/packed_matmul.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/quant_types.h"
#include "kernels/cpu/random_blocks_for_test.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/util/test_seed.h"

namespace rill::kernels::cpu {
namespace {

// Seed() + k seeds case k; RILL_TEST_SEED replays them (tests/util/test_seed.h).
unsigned Seed() { return static_cast<unsigned>(rill::tests::util::StreamSeed(0)); }

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
  p.w.packed = PackWeightsInterleaved(type, rows, cols, p.data.data(), p.w.row_stride_bytes);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  p.x.resize(n_tokens * cols);
  for (float& v : p.x) v = normal(rng);
  return p;
}

// Column counts for a type's tests: a single block, a few, and the default
// model's width where the block allows it.
std::vector<int64_t> ColsFor(GgmlType type) {
  if (BlockElems(type) == 32) return {32, 96, 576};
  return {256, 768};
}

class InterleavedMatMulTest : public ::testing::TestWithParam<GgmlType> {
 protected:
  void SetUp() override {
    if (!UseAvx2()) GTEST_SKIP() << "no AVX2 on this CPU";
  }
};

TEST_P(InterleavedMatMulTest, MatchesReferenceAndIsBatchInvariant) {
  const GgmlType type = GetParam();
  std::mt19937 rng(Seed() + static_cast<unsigned>(type));
  ThreadPool pool(3);
  // The figures the test is judged by, printed per type: the largest error
  // in units of sum |w x| and the relative L2 error over all outputs.
  double worst = 0, err2 = 0, ref2 = 0;
  for (int64_t rows : {1, 8, 37, 72}) {
    for (int64_t cols : ColsFor(type)) {
      SCOPED_TRACE(std::string(GgmlTypeName(type)) + " rows=" + std::to_string(rows) +
                   " cols=" + std::to_string(cols));
      const int64_t n_tokens = 23;
      Problem p = MakeProblem(type, rows, cols, n_tokens, rng);
      ASSERT_NE(p.w.packed, nullptr);
      std::vector<float> y(n_tokens * rows, NAN);
      MatMul(p.w, p.x.data(), n_tokens, y.data(), &pool);
      std::vector<float> wrow(cols);
      for (int64_t r = 0; r < rows; ++r) {
        DequantizeRow(type, p.data.data() + r * RowBytes(type, cols), wrow.data(), cols);
        for (int64_t t = 0; t < n_tokens; ++t) {
          double ref = 0, mag = 0;
          for (int64_t i = 0; i < cols; ++i) {
            ref += double(wrow[i]) * p.x[t * cols + i];
            mag += std::fabs(double(wrow[i]) * p.x[t * cols + i]);
          }
          // f32 rounding of d * sum(q x) + m * sum(x): a few ulps of the
          // terms' magnitude (|m sum x| is at most |m| sum |x|).
          ASSERT_NEAR(y[t * rows + r], ref, 2e-6 * mag + 1e-30) << "t=" << t << " r=" << r;
          const double e = y[t * rows + r] - ref;
          worst = std::max(worst, std::fabs(e) / (mag + 1e-30));
          err2 += e * e;
          ref2 += ref * ref;
        }
      }
      // The AVX2 panel tiles give the AVX-512 ones' bits (a machine that
      // has AVX-512 can then switch paths per call size).
      if (UseAvx512()) {
        SetDisableAvx512(true);
        std::vector<float> y2(n_tokens * rows, NAN);
        MatMul(p.w, p.x.data(), n_tokens, y2.data(), &pool);
        SetDisableAvx512(false);
        for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y2[i], y[i]) << "avx2 vs avx512, i=" << i;
      }
      // Every sub-batch (direct tiles at 1-2 tokens, 1-8 on AVX-512, panel
      // tiles and their token tails from there on), at any offset, with or
      // without the pool.
      for (int64_t n = 1; n <= n_tokens; ++n) {
        const int64_t start = (n * 7) % (n_tokens - n + 1);
        std::vector<float> sub(n * rows, NAN);
        MatMul(p.w, p.x.data() + start * cols, n, sub.data(), n % 2 ? nullptr : &pool);
        for (int64_t i = 0; i < n * rows; ++i) {
          ASSERT_EQ(sub[i], y[start * rows + i]) << "n=" << n << " start=" << start << " i=" << i;
        }
      }
    }
  }
  std::printf("%s vs float64 reference: max |err| / sum|w x| = %.2e, relative L2 = %.2e\n",
              std::string(GgmlTypeName(type)).c_str(), worst, std::sqrt(err2 / ref2));
}

// A call long enough to run in several token blocks gives each token the
// bits it gets alone.
TEST_P(InterleavedMatMulTest, TokenBlocksOfALongCallAreInvariant) {
  const GgmlType type = GetParam();
  std::mt19937 rng(Seed() + 50 + static_cast<unsigned>(type));
  ThreadPool pool(2);
  const int64_t rows = 20, cols = 1536, n_tokens = 130;  // blocks of 42 tokens
  Problem p = MakeProblem(type, rows, cols, n_tokens, rng);
  std::vector<float> y(n_tokens * rows, NAN);
  MatMul(p.w, p.x.data(), n_tokens, y.data(), &pool);
  for (int64_t t : {0, 41, 42, 43, 100, 129}) {
    std::vector<float> alone(rows, NAN);
    MatMul(p.w, p.x.data() + t * cols, 1, alone.data(), nullptr);
    for (int64_t r = 0; r < rows; ++r) ASSERT_EQ(alone[r], y[t * rows + r]) << t << " " << r;
  }
}

TEST_P(InterleavedMatMulTest, SharedInputMatchesSeparateCalls) {
  const GgmlType type = GetParam();
  std::mt19937 rng(Seed() + 100 + static_cast<unsigned>(type));
  ThreadPool pool(2);
  const int64_t cols = ColsFor(type)[1];
  for (int64_t n_tokens : {1, 2, 7}) {
    Problem a = MakeProblem(type, 24, cols, n_tokens, rng);
    Problem b = MakeProblem(type, 9, cols, n_tokens, rng);
    Problem c = MakeProblem(GgmlType::kQ8_0, 40, cols, n_tokens, rng);
    std::vector<float> ya(n_tokens * 24), yb(n_tokens * 9), yc(n_tokens * 40);
    const MatMulTarget targets[] = {{&a.w, ya.data()}, {&b.w, yb.data()}, {&c.w, yc.data()}};
    MatMulShared(targets, 3, a.x.data(), n_tokens, &pool);
    for (const auto& [w, y, rows] : {std::tuple{&a.w, &ya, 24}, {&b.w, &yb, 9}, {&c.w, &yc, 40}}) {
      std::vector<float> alone(n_tokens * rows);
      MatMul(*w, a.x.data(), n_tokens, alone.data(), nullptr);
      for (size_t i = 0; i < alone.size(); ++i) {
        ASSERT_EQ((*y)[i], alone[i]) << "n_tokens=" << n_tokens << " rows=" << rows << " i=" << i;
      }
    }
  }
}

TEST_P(InterleavedMatMulTest, DequantizedRowsAreTheFileRows) {
  const GgmlType type = GetParam();
  std::mt19937 rng(Seed() + 200 + static_cast<unsigned>(type));
  const int64_t rows = 37, cols = ColsFor(type)[1];
  std::vector<uint8_t> data = RandomBlockRows(type, rows, cols, rng);
  std::shared_ptr<const PackedWeights> p =
      PackWeightsInterleaved(type, rows, cols, data.data(), RowBytes(type, cols));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->groups, 5);
  EXPECT_EQ(p->data.size(), 5 * (cols / 32) * p->block_bytes);
  std::vector<float> want(cols), got(cols);
  for (int64_t r = 0; r < rows; ++r) {
    DequantizeRow(type, data.data() + r * RowBytes(type, cols), want.data(), cols);
    DequantizePackedRow(*p, r, got.data());
    for (int64_t i = 0; i < cols; ++i) ASSERT_EQ(got[i], want[i]) << "r=" << r << " i=" << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Types, InterleavedMatMulTest,
                         ::testing::Values(GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ8_0,
                                           GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ2_K,
                                           GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K,
                                           GgmlType::kQ6_K),
                         [](const auto& info) { return std::string(GgmlTypeName(info.param)); });

TEST(PackWeightsInterleaved, RefusesWhatItCannotRun) {
  // Q8_1 (an activation format) has no interleaved layout; a K-quant row
  // must hold whole super-blocks.
  std::vector<uint8_t> data(RowBytes(GgmlType::kQ2_K, 256) * 4);
  EXPECT_EQ(PackWeightsInterleaved(GgmlType::kQ8_1, 4, 64, data.data(),
                                   RowBytes(GgmlType::kQ8_1, 64)),
            nullptr);
  EXPECT_EQ(PackWeightsInterleaved(GgmlType::kQ2_K, 4, 128, data.data(),
                                   RowBytes(GgmlType::kQ2_K, 256)),
            nullptr);
  std::vector<float> f(4 * 64);
  EXPECT_EQ(PackWeightsInterleaved(GgmlType::kF32, 4, 64, f.data(), 64 * sizeof(float)),
            nullptr);
  WeightMatrix w = MakeWeightMatrix(GgmlType::kQ4_1, 4, 64, data.data());
  w.float_activations = false;  // the q8 path is left alone
  EXPECT_FALSE(PackForInterleavedKernels(&w));
  EXPECT_EQ(w.packed, nullptr);
}

// Chosen on AVX2 CPUs, with or without AVX-512, unless the plan's override
// turns it off.
TEST(PackWeightsInterleaved, ChosenOnEveryAvx2Cpu) {
  if (!UseAvx2()) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(Seed() + 300);
  std::vector<uint8_t> data = RandomBlockRows(GgmlType::kQ4_1, 8, 64, rng);
  const bool had_avx512 = UseAvx512();
  SetDisableAvx512(true);
  WeightMatrix w = MakeWeightMatrix(GgmlType::kQ4_1, 8, 64, data.data());
  w.float_activations = true;
  EXPECT_TRUE(DefaultKernelPlan().interleaved);
  EXPECT_TRUE(PackForKernelPlan(DefaultKernelPlan(), &w));
  ASSERT_NE(w.packed, nullptr);
  EXPECT_EQ(w.packed->format, PackedWeights::Format::k4BitInterleaved8);
  SetDisableAvx512(false);
  EXPECT_TRUE(DefaultKernelPlan().interleaved) << "had AVX-512: " << had_avx512;
  KernelPlanOptions off;
  off.interleaved = false;
  absl::StatusOr<KernelPlan> plan = ChooseKernelPlan(off);
  ASSERT_TRUE(plan.ok()) << plan.status();
  WeightMatrix row_major = MakeWeightMatrix(GgmlType::kQ4_1, 8, 64, data.data());
  row_major.float_activations = true;
  EXPECT_FALSE(PackForKernelPlan(*plan, &row_major));
  EXPECT_EQ(row_major.packed, nullptr);
}

// matmul=int16 has kernels for Q4_0, Q4_1 and Q8_0 only: the other types
// run the exact interleaved kernels (the same bits as on the exact plan),
// never the int16 rounding nor the slow fallback.
TEST(PackWeightsInterleaved, Int16PlanRunsOtherTypesOnTheExactKernels) {
  if (!PackedKernelsAvailable()) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
  KernelPlanOptions options;
  options.matmul = "int16";
  absl::StatusOr<KernelPlan> int16 = ChooseKernelPlan(options);
  ASSERT_TRUE(int16.ok()) << int16.status();
  std::mt19937 rng(Seed() + 400);
  const int64_t rows = 24, cols = 512, n_tokens = 5;
  for (GgmlType type : {GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K,
                        GgmlType::kQ6_K, GgmlType::kQ5_0, GgmlType::kQ5_1}) {
    SCOPED_TRACE(std::string(GgmlTypeName(type)));
    Problem p = MakeProblem(type, rows, cols, n_tokens, rng);  // packed as exact packs it
    WeightMatrix w = MakeWeightMatrix(type, rows, cols, p.data.data());
    w.float_activations = int16->float_activations();
    EXPECT_TRUE(PackForKernelPlan(*int16, &w));
    ASSERT_NE(w.packed, nullptr);
    EXPECT_TRUE(IsInterleavedFormat(w.packed->format));
    std::vector<float> got(n_tokens * rows, NAN), want(n_tokens * rows, NAN);
    MatMul(w, p.x.data(), n_tokens, got.data(), nullptr);
    MatMul(p.w, p.x.data(), n_tokens, want.data(), nullptr);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "i=" << i;
  }
  std::vector<uint8_t> data = RandomBlockRows(GgmlType::kQ4_1, rows, cols, rng);
  WeightMatrix q4_1 = MakeWeightMatrix(GgmlType::kQ4_1, rows, cols, data.data());
  q4_1.float_activations = true;
  EXPECT_TRUE(PackForKernelPlan(*int16, &q4_1));
  ASSERT_NE(q4_1.packed, nullptr);
  EXPECT_EQ(q4_1.packed->format, PackedWeights::Format::k4Bit);
}

}  // namespace
}  // namespace rill::kernels::cpu
