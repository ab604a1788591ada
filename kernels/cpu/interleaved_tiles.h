// Pieces the AVX2 and AVX-512 files of the interleaved exact path share
// (interleaved_matmul_avx2.cc states the per-lane recipe both follow).
// Internal to //kernels/cpu.
#ifndef RILL_KERNELS_CPU_INTERLEAVED_TILES_H_
#define RILL_KERNELS_CPU_INTERLEAVED_TILES_H_

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/packed_matmul.h"

namespace rill::kernels::cpu::internal {

inline constexpr int kInterleavedLanes = 8;  // rows per group

// What a matrix and a call's activations look like to the tiles.
struct Operands {
  const uint8_t* data;  // group 0's first block
  size_t block_bytes;
  size_t group_bytes;  // nb * block_bytes
  int64_t nb;
  int64_t rows;
  const float* x;   // token 0 of the tile
  int64_t cols;     // x stride
  const float* sx;  // block sums of token 0: [t * nb + b]
  float* y;         // token 0's outputs (row 0 of the matrix)
};

RILL_TARGET_AVX2 inline __m256 LoadHalves(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

using Format = PackedWeights::Format;

// Q2_K's d * s and dmin * n of the 8 lanes for columns 16 h .. 16 h + 15
// (exact products: an f16 times a 4-bit integer).
RILL_TARGET_AVX2 inline __m256 LoadInt8s(const uint8_t* p) {
  return _mm256_cvtepi32_ps(
      _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
RILL_TARGET_AVX2 inline void Q2KHalfScales(const uint8_t* blk, int h, __m256* ds, __m256* dm) {
  *ds = _mm256_mul_ps(LoadHalves(blk + kQ2KDOffset), LoadInt8s(blk + kQ2KScaleOffset + 8 * h));
  *dm =
      _mm256_mul_ps(LoadHalves(blk + kQ2KDminOffset), LoadInt8s(blk + kQ2KNegMinOffset + 8 * h));
}

// Q2_K's weights j = 2p and 2p + 1 given their half's scales (the panel
// expansions compute those once per half: their stores may alias the block).
RILL_TARGET_AVX2 inline void WidenQ2KPair(const uint8_t* blk, int p, __m256 ds, __m256 dm,
                                          __m256* qe, __m256* qo) {
  __m256i b =
      _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + 8 * (p / 2))));
  if (p % 2 != 0) b = _mm256_srli_epi32(b, 4);
  const __m256i three = _mm256_set1_epi32(3);
  *qe = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(b, three)), ds, dm);
  *qo = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srli_epi32(b, 2), three)), ds,
                        dm);
}

// The 8 lanes' weights j = 2p and 2p + 1 of a block, as floats (Sub16: the
// integers times their 16-column scale, an exact product; Q2_K: the
// weights' floats, fma(q, d * s, dmin * n), DequantizeRow's bits).
template <Format F>
RILL_TARGET_AVX2 inline void WidenPair(const uint8_t* blk, int p, __m256* qe, __m256* qo) {
  if constexpr (InterleavedTwoBit(F)) {
    __m256 ds, dm;
    Q2KHalfScales(blk, p / 8, &ds, &dm);
    WidenQ2KPair(blk, p, ds, dm, qe, qo);
  } else if constexpr (InterleavedEightBit(F)) {
    const __m128i e = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + 16 * p));
    const __m128i o = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + 16 * p + 8));
    *qe = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(e));
    *qo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(o));
    if constexpr (InterleavedSub16(F)) {
      const __m128i sv = _mm_loadl_epi64(
          reinterpret_cast<const __m128i*>(blk + InterleavedQBytes(F) + 8 * (p / 8)));
      const __m256 s = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sv));
      *qe = _mm256_mul_ps(*qe, s);
      *qo = _mm256_mul_ps(*qo, s);
    }
  } else {
    const __m256i b =
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk + 8 * p)));
    *qe = _mm256_cvtepi32_ps(_mm256_and_si256(b, _mm256_set1_epi32(0x0F)));
    *qo = _mm256_cvtepi32_ps(_mm256_srli_epi32(b, 4));
  }
}

// The 8 lanes' d (or m) at p: f16 or f32 as the format stores them (1 for
// Q2_K, whose widened weights carry their scales).
template <Format F>
RILL_TARGET_AVX2 inline __m256 LoadScales(const uint8_t* p) {
  if constexpr (InterleavedTwoBit(F)) {
    return _mm256_set1_ps(1.0f);
  } else if constexpr (InterleavedF32Scales(F)) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  } else {
    return LoadHalves(p);
  }
}

// Groups per AVX-512 panel piece (two zmm of 16 rows).
inline constexpr int64_t kAvx512PanelGroups = 4;

// nt > kAvx512DirectMaxTokens tokens of o against groups [g0, g1)
// (g1 - g0 <= kAvx512PanelGroups)
// through a 16-lane panel, with the same per-lane operations as the AVX2
// tiles. Needs UseAvx512().
void InterleavedPanelPieceAvx512(Format format, const Operands& o, int64_t g0, int64_t g1,
                                 int64_t nt);

// Calls of up to this many tokens run the AVX-512 direct tiles (the AVX2
// path's from 3 tokens on run its panel tiles). With the 4-bit nibble quads
// the panel beats the direct tiles at 6-8 tokens in isolation (matmul_bench,
// weights in cache: 1.1x at 8), but not in the model, whose weights stream
// from memory (bench-model --threads=1 at batch 8: 0.93x), so 8 stays.
inline constexpr int64_t kAvx512DirectMaxTokens = 8;

// nt = 1 to kAvx512DirectMaxTokens tokens of o against groups [g0, g1)
// (g0 even; any count),
// weights widened in registers 16 rows per zmm, the AVX2 direct tiles'
// per-lane operations. Needs UseAvx512().
void InterleavedDirectPieceAvx512(Format format, const Operands& o, int64_t g0, int64_t g1,
                                  int64_t nt);

}  // namespace rill::kernels::cpu::internal

#endif  // RILL_KERNELS_CPU_INTERLEAVED_TILES_H_
