// Shared pieces of the MatMul implementation: the activation formats and the
// per-row kernels. Internal to //kernels/cpu.
#ifndef RILL_KERNELS_CPU_MATMUL_INTERNAL_H_
#define RILL_KERNELS_CPU_MATMUL_INTERNAL_H_

#include <cstddef>
#include <cstdint>

#include <functional>

#include "kernels/cpu/quant_types.h"
#include "kernels/cpu/thread_pool.h"

#define RILL_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace rill::kernels::cpu {
struct PackedWeights;
}

namespace rill::kernels::cpu::internal {

// Activations for the 32-weight formats: q8 with a float scale, plus
// s = d * sum(qs) for the formats with a min (Q4_1, Q5_1). Not a file
// format, so a float d (more precise than ggml's f16) is fine.
struct BlockQ8A {
  float d;
  float s;
  int8_t qs[32];
};
static_assert(sizeof(BlockQ8A) == 40, "packed");

enum class ActKind { kF32, kQ8A, kQ8K };

// The activation format a weight type's kernel consumes.
ActKind ActKindFor(GgmlType type);
// Bytes of one token's activations of n elements in that format.
size_t ActRowBytes(ActKind kind, int64_t n);
// Converts one token's n floats into the format (n a multiple of the block).
void QuantizeActRow(ActKind kind, const float* x, uint8_t* out, int64_t n, bool avx2);

// Kernel tile: tokens sharing one read of a weight row.
inline constexpr int kMaxTile = 4;

// out[t * out_stride] = dot(weight row w, token t's activations at
// act + t * act_stride), for t < nt <= kMaxTile. Each token's result is
// computed with the same operations in the same order whatever nt is: this
// is what makes MatMul batch invariant.
using RowKernel = void (*)(const uint8_t* w, const uint8_t* act, size_t act_stride, int nt,
                           int64_t cols, float* out, size_t out_stride);

// nullptr where the type has no dedicated kernel.
RowKernel ScalarKernel(GgmlType type);
RowKernel Avx2Kernel(GgmlType type);

// Per-file AVX2 kernel tables (nullptr for types they do not handle).
RowKernel Avx2KernelLegacy(GgmlType type);  // Q4_0 Q4_1 Q5_0 Q5_1 Q8_0
RowKernel Avx2KernelK(GgmlType type);       // Q4_K Q5_K Q6_K
RowKernel Avx2KernelFloat(GgmlType type);   // F32 F16 BF16

// y[t * out_stride + r] = dot(weight row r, token t) for r < nr rows (at w +
// r * w_stride) and t < nt tokens (f32, dense rows of cols). Used for the
// exact path (quantized weights x f32 activations); same batch-invariance
// contract as RowKernel.
using ChunkKernel = void (*)(const uint8_t* w, size_t w_stride, int64_t nr, const float* x,
                             int64_t nt, int64_t cols, float* out, size_t out_stride);
// Q4_0 Q4_1 Q8_0 x f32 activations; nullptr for other types.
ChunkKernel Avx512ChunkF32Act(GgmlType type);
ChunkKernel Avx2ChunkF32Act(GgmlType type);

// ys[i][t * ws[i]->rows + r] = row r of ws[i] . token t, for count <=
// kMaxSharedTargets interleaved matrices (packed_matmul.h) of the same cols,
// in one parallel region. Needs AVX2.
void InterleavedMatMul(const PackedWeights* const* ws, float* const* ys, int count,
                       const float* x, int64_t n_tokens, ThreadPool* pool);

void QuantizeQ8ARowScalar(const float* x, BlockQ8A* out, int64_t n);
void QuantizeQ8ARowAvx2(const float* x, BlockQ8A* out, int64_t n);
void QuantizeQ8KRow(const float* x, BlockQ8_K* out, int64_t n);

// Float dot with the AVX2 float kernel's summation order (used by the
// dequantize-then-dot fallback).
float DotF32Avx2(const float* a, const float* b, int64_t n);

// Runs fn over n row pieces. With a batch of tokens each piece is tens of
// microseconds of work, so pieces go out one at a time (no thread idles
// waiting on a last coarse chunk: 5-10% faster at 32 tokens); at one or two
// tokens a piece is under a microsecond and the default coarse chunks avoid
// two contended atomics per piece.
inline void ForRowPieces(ThreadPool* pool, int64_t n, int64_t n_tokens,
                         const std::function<void(int64_t, int64_t)>& fn) {
  if (n_tokens >= 8) {
    ParallelForChunks(pool, n, 1, fn);
  } else {
    ParallelFor(pool, n, 1, fn);
  }
}

}  // namespace rill::kernels::cpu::internal

#endif  // RILL_KERNELS_CPU_MATMUL_INTERNAL_H_
