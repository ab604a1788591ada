// The parallel element-wise helpers of layers.h give bitwise the results of
// the serial kernels, on 1 or 2 threads, for row counts and lengths on both
// sides of the parallel threshold and lengths that are not a block multiple;
// ProjectLogits gives the same rows with a pool as without.
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/thread_pool.h"
#include "worker/models/layers.h"

namespace rill::worker {
namespace {

std::vector<float> Random(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

TEST(LayersParallelTest, AddRmsNormMatchesSerialOps) {
  kernels::cpu::ThreadPool two(2);
  for (int64_t dim : {576, 13}) {
    for (int64_t rows : {1, 3, 32, 700}) {
      SCOPED_TRACE(testing::Message() << rows << " rows of " << dim);
      const std::vector<float> x0 = Random(rows * dim, 1), delta = Random(rows * dim, 2),
                               w = Random(dim, 3);
      std::vector<float> x_ref = x0, n_ref(rows * dim);
      kernels::cpu::Add(x_ref.data(), delta.data(), rows * dim, x_ref.data());
      kernels::cpu::RmsNorm(x_ref.data(), w.data(), rows, dim, 1e-5f, n_ref.data());
      for (kernels::cpu::ThreadPool* pool :
           {static_cast<kernels::cpu::ThreadPool*>(nullptr), &two}) {
        std::vector<float> x = x0, normed(rows * dim, -1.0f);
        AddRmsNorm(x.data(), delta.data(), w.data(), rows, dim, 1e-5f, normed.data(), pool);
        EXPECT_EQ(x, x_ref);
        EXPECT_EQ(normed, n_ref);
        // No delta: the norm alone; no weight: the add alone.
        std::vector<float> only_norm(rows * dim);
        AddRmsNorm(x.data(), nullptr, w.data(), rows, dim, 1e-5f, only_norm.data(), pool);
        EXPECT_EQ(only_norm, n_ref);
        std::vector<float> y = x0, untouched(rows * dim, -1.0f);
        AddRmsNorm(y.data(), delta.data(), nullptr, rows, dim, 1e-5f, untouched.data(), pool);
        EXPECT_EQ(y, x_ref);
        EXPECT_EQ(untouched, std::vector<float>(rows * dim, -1.0f));
      }
    }
  }
}

TEST(LayersParallelTest, SwiGluMatchesSerialKernel) {
  kernels::cpu::ThreadPool two(2);
  for (int64_t n : {1, 63, 1536, 32 * 1536, 100003}) {
    SCOPED_TRACE(n);
    const std::vector<float> g = Random(n, 4), u = Random(n, 5);
    std::vector<float> ref(n);
    kernels::cpu::SwiGlu(g.data(), u.data(), n, ref.data());
    for (kernels::cpu::ThreadPool* pool : {static_cast<kernels::cpu::ThreadPool*>(nullptr), &two}) {
      std::vector<float> out(n, -1.0f);
      SwiGluParallel(g.data(), u.data(), n, out.data(), pool);
      EXPECT_EQ(out, ref);
      std::vector<float> in_place = g;
      SwiGluParallel(in_place.data(), u.data(), n, in_place.data(), pool);
      EXPECT_EQ(in_place, ref);
    }
  }
}

// 37 sequences, one with every token's logits (were the row copies put on
// the pool, its threads must read the caller's thread_local buffer, not
// their own).
TEST(LayersParallelTest, ProjectLogitsRowsMatchSerialCall) {
  kernels::cpu::ThreadPool two(2);
  const int64_t vocab = 300, width = 64;
  const std::vector<float> table = Random(vocab * width, 8);
  const kernels::cpu::WeightMatrix head =
      kernels::cpu::MakeWeightMatrix(kernels::cpu::GgmlType::kF32, vocab, width, table.data());
  ForwardBatch batch;
  batch.sequences.resize(37);
  for (SequenceChunk& seq : batch.sequences) seq.tokens = {1};
  batch.sequences[5].tokens = {1, 2, 3};
  batch.sequences[5].all_logits = true;
  const std::vector<float> rows = Random(39 * width, 9);
  ForwardOutput serial, parallel;
  ProjectLogits(batch, rows, head, &serial, nullptr);
  ProjectLogits(batch, rows, head, &parallel, &two);
  ASSERT_EQ(serial.logits.size(), 37u);
  EXPECT_EQ(serial.logits[5].size(), 3u * vocab);
  EXPECT_EQ(parallel.logits, serial.logits);
}

}  // namespace
}  // namespace rill::worker
