// y = x W^T for weights kept in their file (GGUF) block format.
#ifndef RILL_KERNELS_CPU_QUANT_MATMUL_H_
#define RILL_KERNELS_CPU_QUANT_MATMUL_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "kernels/cpu/kernel_plan.h"
#include "kernels/cpu/packed_matmul.h"
#include "kernels/cpu/quant_types.h"
#include "kernels/cpu/thread_pool.h"

namespace rill::kernels::cpu {

// A [rows x cols] weight matrix whose rows are quantized rows as stored in
// the file (e.g. an mmapped GGUF tensor: ggml's ne[0] = cols).
struct WeightMatrix {
  GgmlType type = GgmlType::kF32;
  int64_t rows = 0;  // output features
  int64_t cols = 0;  // input features = row length
  const void* data = nullptr;
  size_t row_stride_bytes = 0;  // >= RowBytes(type, cols)
  // false: quantized weights meet 8-bit quantized activations in integer dot
  // products (fast; llama.cpp's numerics, ~1e-2 relative logit error on a
  // 30-layer model). true: rows are dequantized to f32 and meet the f32
  // activations (exact up to f32 rounding; slower).
  bool float_activations = false;
  // Set by PackForCpu: the rows repacked for the int16 VNNI kernels
  // (packed_matmul.h), which MatMul then uses instead of data. Views that
  // change rows or columns (tensor-parallel slices) must drop it.
  std::shared_ptr<const PackedWeights> packed;
};

// Builds a matrix with densely packed rows.
WeightMatrix MakeWeightMatrix(GgmlType type, int64_t rows, int64_t cols, const void* data);

// Repacks w for the int16 VNNI kernels when it uses the exact path
// (float_activations), its type has packed kernels (Q4_0, Q4_1, Q8_0) and
// the CPU runs them; otherwise leaves it as it is. Returns whether it packed.
bool PackForCpu(WeightMatrix* w);

// Repacks w into the 8-row interleaved layout (packed_matmul.h) when it
// uses the exact path, its type has one (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and
// the K-quants Q2_K to Q6_K) and the CPU runs AVX2; otherwise leaves it as
// it is. Returns whether it packed. The results keep the exact path's
// numerics.
bool PackForInterleavedKernels(WeightMatrix* w);

// Repacks w as `plan` says (PackForCpu for int16, PackForInterleavedKernels
// for exact with interleaved weights, nothing otherwise). Returns whether it
// packed. Every model family binds its weights through this, so all of them
// run the plan's kernels. On int16, the types without int16 kernels (all
// but Q4_0, Q4_1, Q8_0) are packed for the interleaved exact kernels
// instead, logged once per type (KernelPlan::Describe says so too).
bool PackForKernelPlan(const KernelPlan& plan, WeightMatrix* w);

// OK when MatMul can run the matrix (cols a multiple of the block size,
// stride large enough, data set, a supported type).
absl::Status ValidateWeightMatrix(const WeightMatrix& w);

// y[t * w.rows + o] = sum_i W[o][i] * x[t * w.cols + i] for t < n_tokens.
// Quantized weights use q8 activations (quantized once per call, per token)
// and integer dot products. Each token's output depends only on that
// token's input: the result is bitwise the same whatever n_tokens, the
// thread count or the token's position in the batch (batch invariance).
// pool may be null (single-threaded). The caller validated w.
void MatMul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool* pool);
// As above; for packed weights, tokens t with precise[t] != 0 get the
// two-pass activations (packed_matmul.h). precise may be null.
void MatMul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool* pool,
            const uint8_t* precise);

// One matrix of a MatMulShared call and where its output goes
// ([n_tokens x w->rows]).
struct MatMulTarget {
  const WeightMatrix* w;
  float* y;
};
inline constexpr int kMaxSharedTargets = 4;

// MatMul(*t.w, x, n_tokens, t.y, pool, precise) for each of `count` (at most
// kMaxSharedTargets) targets over the same input, bitwise the same results,
// but where the exact path's chunk kernels run them all (same cols), in one
// parallel region: a layer's q/k/v or gate/up then wait on the pool once
// instead of once per matrix (at batch 1 those barriers are ~10% of a step).
void MatMulShared(const MatMulTarget* targets, int count, const float* x, int64_t n_tokens,
                  ThreadPool* pool, const uint8_t* precise = nullptr);

}  // namespace rill::kernels::cpu

#endif  // RILL_KERNELS_CPU_QUANT_MATMUL_H_
