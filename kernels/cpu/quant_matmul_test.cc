#include "kernels/cpu/quant_matmul.h"

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/kernel_path_for_test.h"
#include "kernels/cpu/quant_types.h"
#include "kernels/cpu/thread_pool.h"
#include "tests/util/test_seed.h"

namespace rill::kernels::cpu {
namespace {

struct TypeCase {
  GgmlType type;
  std::vector<int> f16_offsets;  // finite random halves go here
  double tol;                    // relative to |w_row| * |x_token|
};

// Quantized weights against q8 activations: the error is w . e for the
// activation rounding e (|e| ~0.6% of |x| for gaussian data; observed
// |err| / (|w||x|) stays below ~2.5e-3 with 32-blocks, ~1.2e-3 with 256).
// Float weights (and Q2_K/Q3_K, which dequantize to float) only reorder sums.
const std::vector<TypeCase>& Cases() {
  static const auto* cases = new std::vector<TypeCase>{
      {GgmlType::kQ4_0, {0}, 6e-3},      {GgmlType::kQ4_1, {0, 2}, 6e-3},
      {GgmlType::kQ5_0, {0}, 6e-3},      {GgmlType::kQ5_1, {0, 2}, 6e-3},
      {GgmlType::kQ8_0, {0}, 6e-3},      {GgmlType::kQ2_K, {80, 82}, 1e-6},
      {GgmlType::kQ3_K, {108}, 1e-6},    {GgmlType::kQ4_K, {0, 2}, 4e-3},
      {GgmlType::kQ5_K, {0, 2}, 4e-3},   {GgmlType::kQ6_K, {208}, 4e-3},
      {GgmlType::kF32, {}, 1e-6},        {GgmlType::kF16, {}, 1e-6},
      {GgmlType::kBF16, {}, 1e-6},
  };
  return *cases;
}

std::vector<uint8_t> RandomWeights(const TypeCase& c, int64_t rows, int64_t cols, size_t stride,
                                   std::mt19937& rng) {
  std::vector<uint8_t> data(rows * stride, 0);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = data.data() + r * stride;
    if (c.type == GgmlType::kF32) {
      float* f = reinterpret_cast<float*>(row);
      for (int64_t i = 0; i < cols; ++i) f[i] = normal(rng);
      continue;
    }
    if (c.type == GgmlType::kF16 || c.type == GgmlType::kBF16) {
      uint16_t* h = reinterpret_cast<uint16_t*>(row);
      for (int64_t i = 0; i < cols; ++i) {
        h[i] = c.type == GgmlType::kF16 ? F32ToF16(normal(rng)) : F32ToBF16(normal(rng));
      }
      continue;
    }
    const size_t bb = BlockBytes(c.type);
    const int64_t nb = cols / BlockElems(c.type);
    for (size_t i = 0; i < nb * bb; ++i) row[i] = static_cast<uint8_t>(byte(rng));
    for (int64_t b = 0; b < nb; ++b) {
      for (int off : c.f16_offsets) {
        const uint16_t h = F32ToF16(0.05f * normal(rng));
        std::memcpy(row + b * bb + off, &h, 2);
      }
    }
  }
  return data;
}

struct Problem {
  WeightMatrix w;
  std::vector<uint8_t> data;
  std::vector<float> x;
  std::vector<double> ref;     // [t][rows]
  std::vector<double> wnorm;   // per row
  std::vector<double> xnorm;   // per token
};

Problem MakeProblem(const TypeCase& c, int64_t rows, int64_t cols, int64_t n_tokens,
                    size_t stride_pad, std::mt19937& rng) {
  Problem p;
  const size_t stride = RowBytes(c.type, cols) + stride_pad;
  p.data = RandomWeights(c, rows, cols, stride, rng);
  p.w = MakeWeightMatrix(c.type, rows, cols, p.data.data());
  p.w.row_stride_bytes = stride;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  p.x.resize(n_tokens * cols);
  for (float& v : p.x) v = normal(rng);
  std::vector<float> wrow(cols);
  p.ref.assign(n_tokens * rows, 0.0);
  p.wnorm.assign(rows, 0.0);
  p.xnorm.assign(n_tokens, 0.0);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t i = 0; i < cols; ++i) p.xnorm[t] += double(p.x[t * cols + i]) * p.x[t * cols + i];
    p.xnorm[t] = std::sqrt(p.xnorm[t]);
  }
  for (int64_t r = 0; r < rows; ++r) {
    DequantizeRow(c.type, p.data.data() + r * stride, wrow.data(), cols);
    for (int64_t i = 0; i < cols; ++i) p.wnorm[r] += double(wrow[i]) * wrow[i];
    p.wnorm[r] = std::sqrt(p.wnorm[r]);
    for (int64_t t = 0; t < n_tokens; ++t) {
      double s = 0.0;
      for (int64_t i = 0; i < cols; ++i) s += double(wrow[i]) * p.x[t * cols + i];
      p.ref[t * rows + r] = s;
    }
  }
  return p;
}

// Seed() + k seeds case k; RILL_TEST_SEED replays them (tests/util/test_seed.h).
unsigned Seed() { return static_cast<unsigned>(rill::tests::util::StreamSeed(0)); }

class MatMulTest : public KernelPathTest {};

TEST_P(MatMulTest, MatchesFloatReference) {
  std::mt19937 rng(Seed());
  ThreadPool pool(2);
  for (const TypeCase& c : Cases()) {
    const int64_t be = BlockElems(c.type);
    std::vector<int64_t> col_options = {512};
    if (be == 32) col_options.push_back(96);
    if (be == 1) col_options.push_back(37);  // exercises the 8- and 1-wide tails
    for (int64_t cols : col_options) {
      for (int64_t n_tokens : {1, 3, 8, 33}) {
        const int64_t rows = 37;
        SCOPED_TRACE(std::string(GgmlTypeName(c.type)) + " cols=" + std::to_string(cols) +
                     " n_tokens=" + std::to_string(n_tokens));
        Problem p = MakeProblem(c, rows, cols, n_tokens, n_tokens == 3 ? 64 : 0, rng);
        ASSERT_TRUE(ValidateWeightMatrix(p.w).ok());
        std::vector<float> y(n_tokens * rows, -1.0f);
        MatMul(p.w, p.x.data(), n_tokens, y.data(), &pool);
        int bad = 0;
        for (int64_t t = 0; t < n_tokens && bad < 5; ++t) {
          for (int64_t r = 0; r < rows && bad < 5; ++r) {
            const double want = p.ref[t * rows + r];
            const double tol = c.tol * p.wnorm[r] * p.xnorm[t] + 1e-30;
            const double got = y[t * rows + r];
            if (!(std::fabs(got - want) <= tol)) {
              ADD_FAILURE() << "t=" << t << " r=" << r << " got " << got << " want " << want
                            << " tol " << tol;
              ++bad;
            }
          }
        }
      }
    }
  }
}

// Per-token results must not depend on the batch they were computed in.
TEST_P(MatMulTest, BatchInvariant) {
  std::mt19937 rng(Seed() + 1);
  ThreadPool pool(2);
  for (const TypeCase& c : Cases()) {
    SCOPED_TRACE(GgmlTypeName(c.type));
    const int64_t rows = 45, cols = 512, n_tokens = 11;
    Problem p = MakeProblem(c, rows, cols, n_tokens, 0, rng);
    std::vector<float> batched(n_tokens * rows);
    MatMul(p.w, p.x.data(), n_tokens, batched.data(), &pool);
    for (int64_t t = 0; t < n_tokens; ++t) {
      std::vector<float> single(rows);
      MatMul(p.w, p.x.data() + t * cols, 1, single.data(), t % 2 ? nullptr : &pool);
      for (int64_t r = 0; r < rows; ++r) {
        ASSERT_EQ(single[r], batched[t * rows + r]) << "t=" << t << " r=" << r;
      }
    }
    // A sub-batch starting mid-tile.
    std::vector<float> sub(5 * rows);
    MatMul(p.w, p.x.data() + 3 * cols, 5, sub.data(), &pool);
    for (int64_t i = 0; i < 5 * rows; ++i) ASSERT_EQ(sub[i], batched[3 * rows + i]) << i;
  }
}

INSTANTIATE_KERNEL_PATHS(MatMulTest);

// MatMulShared gives each matrix exactly what its own MatMul gives, whether
// the chunk kernels run the matrices in one parallel region (exact path,
// same cols), or it falls back to one MatMul each (q8 activations, a type
// without a chunk kernel, the scalar path).
TEST_P(MatMulTest, SharedInputMatchesSeparateCalls) {
  std::mt19937 rng(Seed() + 6);
  ThreadPool pool(2);
  auto find = [](GgmlType type) {
    for (const TypeCase& tc : Cases()) {
      if (tc.type == type) return &tc;
    }
    return static_cast<const TypeCase*>(nullptr);
  };
  const std::vector<std::vector<GgmlType>> groups = {
      {GgmlType::kQ4_1, GgmlType::kQ4_1, GgmlType::kQ4_1},
      {GgmlType::kQ4_0, GgmlType::kQ8_0},
      {GgmlType::kQ4_1, GgmlType::kQ6_K, GgmlType::kF32, GgmlType::kQ8_0},
  };
  const int64_t cols = 256;
  for (bool exact : {true, false}) {
    for (const auto& types : groups) {
      for (int64_t n_tokens : {1, 2, 7, 40}) {
        SCOPED_TRACE("exact=" + std::to_string(exact) + " types=" + std::to_string(types.size()) +
                     " n=" + std::to_string(n_tokens));
        std::vector<Problem> problems;
        const int64_t rows_of[] = {37, 16, 5, 64};
        for (size_t i = 0; i < types.size(); ++i) {
          problems.push_back(MakeProblem(*find(types[i]), rows_of[i], cols, 1, 0, rng));
          problems.back().w.float_activations = exact;
        }
        std::vector<float> x(n_tokens * cols);
        std::normal_distribution<float> normal(0.0f, 1.0f);
        for (float& v : x) v = normal(rng);
        std::vector<std::vector<float>> shared(types.size()), alone(types.size());
        std::vector<MatMulTarget> targets;
        for (size_t i = 0; i < types.size(); ++i) {
          shared[i].assign(n_tokens * problems[i].w.rows, -1.0f);
          alone[i].assign(n_tokens * problems[i].w.rows, -2.0f);
          targets.push_back({&problems[i].w, shared[i].data()});
          MatMul(problems[i].w, x.data(), n_tokens, alone[i].data(), &pool);
        }
        MatMulShared(targets.data(), static_cast<int>(targets.size()), x.data(), n_tokens, &pool);
        for (size_t i = 0; i < types.size(); ++i) {
          for (size_t j = 0; j < alone[i].size(); ++j) {
            ASSERT_EQ(shared[i][j], alone[i][j]) << "matrix " << i << " element " << j;
          }
        }
      }
    }
  }
}

TEST(MatMulPaths, Avx2AgreesWithScalar) {
  UseKernelPath(KernelPath::kAvx2);
  if (!UseAvx2()) GTEST_SKIP() << "no AVX2/FMA/F16C on this CPU";
  std::mt19937 rng(Seed() + 2);
  for (const TypeCase& c : Cases()) {
    SCOPED_TRACE(GgmlTypeName(c.type));
    const int64_t rows = 21, cols = 768, n_tokens = 6;
    Problem p = MakeProblem(c, rows, cols, n_tokens, 0, rng);
    std::vector<float> fast(n_tokens * rows), slow(n_tokens * rows);
    MatMul(p.w, p.x.data(), n_tokens, fast.data(), nullptr);
    SetForceScalar(true);
    MatMul(p.w, p.x.data(), n_tokens, slow.data(), nullptr);
    UseKernelPath(KernelPath::kAvx2);
    for (int64_t t = 0; t < n_tokens; ++t) {
      for (int64_t r = 0; r < rows; ++r) {
        // Same integers on both paths: only float summation order differs.
        const double tol = 2e-6 * p.wnorm[r] * p.xnorm[t];
        ASSERT_NEAR(fast[t * rows + r], slow[t * rows + r], tol) << "t=" << t << " r=" << r;
      }
    }
  }
  UseKernelPath(KernelPath::kWidest);
}

TEST(MatMulValidate, RejectsBadShapes) {
  uint8_t buf[64] = {};
  WeightMatrix w = MakeWeightMatrix(GgmlType::kQ4_1, 1, 32, buf);
  EXPECT_TRUE(ValidateWeightMatrix(w).ok());
  w.cols = 48;
  EXPECT_FALSE(ValidateWeightMatrix(w).ok());
  w.cols = 64;
  EXPECT_FALSE(ValidateWeightMatrix(w).ok());  // stride still one block
  w = MakeWeightMatrix(GgmlType::kQ8_K, 1, 256, buf);
  EXPECT_FALSE(ValidateWeightMatrix(w).ok());
}

}  // namespace
}  // namespace rill::kernels::cpu

namespace rill::kernels::cpu {
namespace {

// The exact path (float_activations): every quantized type matches the
// float64 reference to f32 rounding, on both paths, and stays batch invariant.
TEST_P(MatMulTest, FloatActivationsAreExact) {
  std::mt19937 rng(Seed() + 3);
  ThreadPool pool(2);
  for (const TypeCase& c : Cases()) {
    SCOPED_TRACE(GgmlTypeName(c.type));
    const int64_t rows = 37, cols = 512, n_tokens = 9;
    Problem p = MakeProblem(c, rows, cols, n_tokens, 0, rng);
    p.w.float_activations = true;
    std::vector<float> y(n_tokens * rows);
    MatMul(p.w, p.x.data(), n_tokens, y.data(), &pool);
    for (int64_t t = 0; t < n_tokens; ++t) {
      std::vector<float> single(rows);
      MatMul(p.w, p.x.data() + t * cols, 1, single.data(), nullptr);
      for (int64_t r = 0; r < rows; ++r) {
        const double tol = 2e-6 * p.wnorm[r] * p.xnorm[t] + 1e-30;
        ASSERT_NEAR(y[t * rows + r], p.ref[t * rows + r], tol) << "t=" << t << " r=" << r;
        ASSERT_EQ(single[r], y[t * rows + r]) << "batch invariance t=" << t << " r=" << r;
      }
    }
  }
}

}  // namespace
}  // namespace rill::kernels::cpu

namespace rill::kernels::cpu {
namespace {

// A call long enough to run in several token blocks (kTokenBlockBytes of
// activations each: 30 tokens at 2048 columns) gives every token the bits it
// gets alone.
// The exact path's chunk kernels: AVX-512 where the CPU has it, AVX2 always
// (with AVX-512 turned off).
class ChunkPathTest : public KernelPathTest {
 protected:
  void SetUp() override {
    KernelPathTest::SetUp();
    if (GetParam() == KernelPath::kWidest && !UseAvx512()) {
      GTEST_SKIP() << "no AVX-512 on this CPU";
    }
    if (!UseAvx2()) GTEST_SKIP() << "no AVX2/FMA/F16C on this CPU";
  }
};

TEST_P(ChunkPathTest, TokenBlocksAreBatchInvariant) {
  std::mt19937 rng(Seed() + 5);
  ThreadPool pool(2);
  const TypeCase* c = nullptr;
  for (const TypeCase& tc : Cases()) {
    if (tc.type == GgmlType::kQ4_1) c = &tc;
  }
  ASSERT_NE(c, nullptr);
  const int64_t rows = 37, cols = 2048, n_tokens = 100;
  Problem p = MakeProblem(*c, rows, cols, n_tokens, 0, rng);
  p.w.float_activations = true;
  std::vector<float> all(n_tokens * rows);
  MatMul(p.w, p.x.data(), n_tokens, all.data(), &pool);
  for (int64_t t = 0; t < n_tokens; t += 7) {
    std::vector<float> one(rows);
    MatMul(p.w, p.x.data() + t * cols, 1, one.data(), &pool);
    for (int64_t r = 0; r < rows; ++r) ASSERT_EQ(one[r], all[t * rows + r]) << "t=" << t << " r=" << r;
  }
}

// The chunk kernel (register expansion below 3 tokens, an f32 panel from 3
// on; register tiles with row and token tails) against the float64
// reference and the scalar path, and batch invariant for every batch size
// across both regimes (13 tokens: two full 6-token AVX2 tiles and a tail).
TEST_P(ChunkPathTest, FloatActivationsAgreeAndAreBatchInvariant) {
  const KernelPath path = GetParam();
  std::mt19937 rng(Seed() + 4);
  ThreadPool pool(2);
  const GgmlType types[] = {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ8_0};
  for (GgmlType type : types) {
    const TypeCase* c = nullptr;
    for (const TypeCase& tc : Cases()) {
      if (tc.type == type) c = &tc;
    }
    ASSERT_NE(c, nullptr);
    for (int64_t rows : {1, 3, 16, 37}) {
      for (int64_t cols : {32, 96, 576}) {
        SCOPED_TRACE(std::string(GgmlTypeName(type)) + " rows=" + std::to_string(rows) +
                     " cols=" + std::to_string(cols));
        const int64_t n_tokens = 13;
        Problem p = MakeProblem(*c, rows, cols, n_tokens, rows == 3 ? 20 : 0, rng);
        p.w.float_activations = true;
        std::vector<float> got(n_tokens * rows), scalar(n_tokens * rows);
        MatMul(p.w, p.x.data(), n_tokens, got.data(), &pool);
        UseKernelPath(KernelPath::kScalar);
        MatMul(p.w, p.x.data(), n_tokens, scalar.data(), &pool);
        UseKernelPath(path);
        for (int64_t i = 0; i < n_tokens * rows; ++i) {
          const int64_t t = i / rows, r = i % rows;
          const double tol = 2e-6 * p.wnorm[r] * p.xnorm[t] + 1e-30;
          ASSERT_NEAR(got[i], p.ref[i], tol) << "t=" << t << " r=" << r;
          ASSERT_NEAR(got[i], scalar[i], tol) << "t=" << t << " r=" << r;
        }
        // Every sub-batch [start, start + n) gives the same bits as the full
        // batch: 1 and 2 tokens use register expansion, 3+ the panel, odd
        // sizes the 1-token tile tail.
        for (int64_t n = 1; n <= n_tokens; ++n) {
          const int64_t start = (n * 5) % (n_tokens - n + 1);
          std::vector<float> sub(n * rows);
          MatMul(p.w, p.x.data() + start * cols, n, sub.data(), n % 2 ? nullptr : &pool);
          for (int64_t i = 0; i < n * rows; ++i) {
            ASSERT_EQ(sub[i], got[start * rows + i]) << "n=" << n << " start=" << start
                                                      << " i=" << i;
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, ChunkPathTest,
                         ::testing::Values(KernelPath::kWidest, KernelPath::kAvx2),
                         [](const ::testing::TestParamInfo<KernelPath>& i) {
                           return i.param == KernelPath::kWidest ? "Avx512" : "Avx2";
                         });

}  // namespace
}  // namespace rill::kernels::cpu
