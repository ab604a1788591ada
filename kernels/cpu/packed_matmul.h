// Weights repacked at load for the int16 VNNI path, and the MatMul over them.
//
// Numerics: each token's activations are quantized per 32-block to int16
// (scale amax / 32767, ~1.5e-5 of the block's largest value), weights keep
// their file integers (Q4_0/Q4_1 nibbles, Q8_0 bytes) and scales. A block's
// integer dot product is exact, so its value does not depend on how it was
// accumulated; the float epilogue (scale, min term, sum over blocks in
// order) is the same per (row, token) in every tile. The result is bitwise
// the same whatever the batch size, the token's place in it or the thread
// count (batch invariance), and within ~1e-5 relative of the f32 path.
//
// Layout: rows in groups of 16 (one zmm lane per row), so no horizontal
// sums are needed; the group's blocks follow one another. Same size as the
// file's blocks, so RSS does not grow once the file pages are dropped.
#ifndef RILL_KERNELS_CPU_PACKED_MATMUL_H_
#define RILL_KERNELS_CPU_PACKED_MATMUL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/cpu/aligned_buffer.h"
#include "kernels/cpu/quant_types.h"
#include "kernels/cpu/thread_pool.h"

namespace rill::kernels::cpu {

struct PackedWeights {
  enum class Format {
    k4Bit,  // Q4_0 (min = -8 d) and Q4_1
    k8Bit,  // Q8_0
    // The interleaved exact path's layout (PackWeightsInterleaved): 8 rows
    // per group, f32 activations, no int16 rounding.
    k4BitInterleaved8,  // Q4_0, Q4_1
    k8BitInterleaved8,  // Q8_0, Q5_0 (q - 16)
    // The K-quants (and Q5_1) on the same 8-row, 32-column blocks, with
    // scales that keep every weight's float exactly DequantizeRow's:
    k4BitF32ScaledInterleaved8,  // Q4_K: d = super d * scale, m = -dmin * min, as f32
    k8BitF32ScaledInterleaved8,  // Q5_K, Q5_1: int8 q, f32 d and m
    k8BitSub16Interleaved8,      // Q6_K, Q3_K: int8 q, int8 scale per 16 columns, f16 d
    // Q2_K: 2-bit q, int8 scale and minus min per 16 columns, f16 d and
    // dmin; the kernels widen each weight to its float (their d is 1).
    k2BitSub16MinInterleaved8,
  };
  Format format = Format::k4Bit;
  GgmlType source_type = GgmlType::kQ4_1;  // the file's type
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t groups = 0;       // ceil(rows / group rows); the last group is zero-padded
  size_t block_bytes = 0;   // bytes per (group, 32-column block)
  std::vector<uint8_t, Aligned64Allocator<uint8_t>> data;
};

// True when this CPU runs the packed kernels (AVX-512 BW + VNNI, and
// AVX-512 not disabled). Where false, callers keep the f32 path.
bool PackedKernelsAvailable();

// Repacks a [rows x cols] matrix of Q4_0, Q4_1 or Q8_0 rows (row_stride
// bytes apart). nullptr for other types or cols not a multiple of 32.
std::shared_ptr<const PackedWeights> PackWeights(GgmlType type, int64_t rows, int64_t cols,
                                                 const void* data, size_t row_stride);

// The 8-row interleaved layout of the exact path
// (interleaved_matmul_avx2.cc). Per (group, 32-column block):
// - 4-bit: 16 steps of 8 bytes, byte [p][r] = q[r][2p] | q[r][2p + 1] << 4,
//   then d[8] and m[8] as f16 (Q4_0: m = -8 d, exact); F32Scaled: as f32;
// - 8-bit: 32 steps of 8 int8, [j][r] = q[r][j], then d[8] as f16
//   (F32Scaled: d[8] and m[8] as f32; Sub16: s[2][8] int8, the scales of
//   columns 0-15 and 16-31, then d[8] as f16, weight = d * s * q).
// Q4_0/Q4_1/Q8_0 take the same bytes per weight as the file's blocks; the
// others 1.2x (Q6_K) to 1.8x (Q5_K) as many, for 8-bit integers and
// per-block f32 scales the kernels read without decoding.
//
// Why these scales are exact: a K-quant's sub-block scale d * sc (f16 d, a
// 6-bit sc) has at most 17 significant bits, so the f32 product is exact,
// and d * sc * q (q < 64) is exact too; Q6_K's and Q3_K's d * s * q likewise.
// The kernels' d * sum(q x) + m * sum(x) is then the reference's sum of
// (d q + m) x up to f32 rounding of the sums. Q2_K's mins are per 16
// columns, which the block sums cannot carry: its kernels compute every
// weight as DequantizeRow does, d * s (4-bit s: exact) times q (2 bits:
// exact) plus dmin * n (exact) in one rounding, and sum w x.
inline constexpr size_t kInterleaved4BitQBytes = 128;
inline constexpr size_t kInterleaved8BitQBytes = 256;
inline constexpr size_t kInterleaved2BitQBytes = 64;
// Q2_K's byte offsets in a (group, block).
inline constexpr size_t kQ2KScaleOffset = 64;    // s[2][8]
inline constexpr size_t kQ2KNegMinOffset = 80;   // n[2][8]
inline constexpr size_t kQ2KDOffset = 96;        // d[8] f16
inline constexpr size_t kQ2KDminOffset = 112;    // dmin[8] f16
inline constexpr size_t kQ2KBlockBytes = 128;

// Whether the format is one of the interleaved exact path's.
constexpr bool IsInterleavedFormat(PackedWeights::Format f) {
  return f != PackedWeights::Format::k4Bit && f != PackedWeights::Format::k8Bit;
}
// Traits of the interleaved formats (the kernels' template parameters).
// Q2_K's: the integers are 2-bit, and the widened weights carry their
// scales and mins (the kernels' d is 1, no block-sum term).
constexpr bool InterleavedTwoBit(PackedWeights::Format f) {
  return f == PackedWeights::Format::k2BitSub16MinInterleaved8;
}
constexpr bool InterleavedEightBit(PackedWeights::Format f) {
  return f != PackedWeights::Format::k4BitInterleaved8 &&
         f != PackedWeights::Format::k4BitF32ScaledInterleaved8 && !InterleavedTwoBit(f);
}
constexpr bool InterleavedF32Scales(PackedWeights::Format f) {
  return f == PackedWeights::Format::k4BitF32ScaledInterleaved8 ||
         f == PackedWeights::Format::k8BitF32ScaledInterleaved8;
}
constexpr bool InterleavedHasMin(PackedWeights::Format f) {
  return f != PackedWeights::Format::k8BitInterleaved8 &&
         f != PackedWeights::Format::k8BitSub16Interleaved8 && !InterleavedTwoBit(f);
}
constexpr bool InterleavedSub16(PackedWeights::Format f) {
  return f == PackedWeights::Format::k8BitSub16Interleaved8;
}
// Byte offsets in a (group, block): the integers, Sub16's s[2][8], d[8],
// then m[8] where the format has a min (Q2_K: the kQ2K* offsets).
constexpr size_t InterleavedQBytes(PackedWeights::Format f) {
  return InterleavedTwoBit(f)     ? kInterleaved2BitQBytes
         : InterleavedEightBit(f) ? kInterleaved8BitQBytes
                                  : kInterleaved4BitQBytes;
}
constexpr size_t InterleavedDOffset(PackedWeights::Format f) {
  return InterleavedQBytes(f) + (InterleavedSub16(f) ? 16 : 0);
}
constexpr size_t InterleavedMOffset(PackedWeights::Format f) {
  return InterleavedDOffset(f) + (InterleavedF32Scales(f) ? 32 : 16);
}
constexpr size_t InterleavedBlockBytes(PackedWeights::Format f) {
  if (InterleavedTwoBit(f)) return kQ2KBlockBytes;
  return InterleavedMOffset(f) + (InterleavedHasMin(f) ? InterleavedMOffset(f) -
                                                             InterleavedDOffset(f)
                                                       : 0);
}

// The interleaved kernels need AVX2 (AVX-512 tiles where the CPU has it);
// they are the exact path's default there (KernelPlan::interleaved): against
// the chunk kernels (dot_f32act_avx2.cc / _avx512.cc), which spend a batch-1
// step expanding blocks, decode at batch 1 is 1.35x (AVX-512 Xeon) to 1.4x
// (AVX2) as fast, batches 8-32 as fast or faster (bench/README.md).

// Repacks a [rows x cols] matrix of Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K,
// Q3_K, Q4_K, Q5_K or Q6_K rows into the interleaved layout. nullptr for
// other types or cols not a multiple of the type's block.
// Unlike the int16 layout, MatMul over it keeps the exact path's numerics
// (f32 activations; ~1e-7 relative of the chunk kernels' result, and
// bitwise batch invariant).
std::shared_ptr<const PackedWeights> PackWeightsInterleaved(GgmlType type, int64_t rows,
                                                            int64_t cols, const void* data,
                                                            size_t row_stride);

// Row `row` as floats, bitwise what DequantizeRow gives for the file's
// row (the embedding lookup of a tied head reads the packed copy, so the
// file pages can stay released).
void DequantizePackedRow(const PackedWeights& w, int64_t row, float* out);

// y[t * w.rows + r] = sum_i W[r][i] * x[t * w.cols + i] for t < n_tokens.
// Tokens with precise[t] != 0 get two passes: their activations, then what
// the int16 rounding lost (x - d q, quantized the same way), ~2^-30 of the
// block maximum in all. Models use it where an error reaches every later
// token (the first positions, which attention sinks on). Still per token,
// so batch invariant. Requires PackedKernelsAvailable() for the int16
// formats and AVX2 for the interleaved ones (which ignore precise); pool
// and precise may be null.
void PackedMatMul(const PackedWeights& w, const float* x, int64_t n_tokens, float* y,
                  ThreadPool* pool, const uint8_t* precise = nullptr);

}  // namespace rill::kernels::cpu

#endif  // RILL_KERNELS_CPU_PACKED_MATMUL_H_
