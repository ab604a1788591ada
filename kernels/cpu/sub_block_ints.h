// A quantized row's 32-column sub-blocks as integers and scales, the unit
// the repacked layouts (packed_matmul.h) store, for every file type they
// take. Internal to //kernels/cpu.
#ifndef RILL_KERNELS_CPU_SUB_BLOCK_INTS_H_
#define RILL_KERNELS_CPU_SUB_BLOCK_INTS_H_

#include <cstdint>

#include "kernels/cpu/packed_matmul.h"
#include "kernels/cpu/quant_types.h"

namespace rill::kernels::cpu::internal {

// Columns 32b..32b+31 of a row. The weight j is, bitwise as DequantizeRow
// computes it:
// - Q4_0: (q - 8) * d16, with m16 = -8 d16 so that d q + m is the same value;
// - Q4_1, Q8_0, Q5_0 (q already minus 16): q * d16 (+ m16);
// - Q4_K, Q5_K, Q5_1: q * d + m with f32 d and m (d = super d * scale, m =
//   -dmin * min: exact products);
// - Q6_K, Q3_K: (d16 * s[j / 16]) * q (q and s signed);
// - Q2_K: (d16 * s[j / 16]) * q + m16 * neg_min[j / 16] (m16 = dmin; the
//   4-bit scales and mins, q in 0..3).
struct SubBlockInts {
  int8_t q[32];
  uint16_t d16 = 0, m16 = 0;
  float d = 0.0f, m = 0.0f;
  int8_t s[2] = {0, 0};
  int8_t neg_min[2] = {0, 0};
};

// The interleaved layout that holds `type` (false for none: floats).
bool InterleavedFormatFor(GgmlType type, PackedWeights::Format* format);

// Sub-block b of `row` (a row of `type`, one InterleavedFormatFor takes).
void ReadSubBlock(GgmlType type, const uint8_t* row, int64_t b, SubBlockInts* out);

}  // namespace rill::kernels::cpu::internal

#endif  // RILL_KERNELS_CPU_SUB_BLOCK_INTS_H_
