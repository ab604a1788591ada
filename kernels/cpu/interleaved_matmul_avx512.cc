// The interleaved exact path's tiles for AVX-512, two 8-row groups per zmm:
// - direct tiles (1-8 tokens: decode, small batches, a speculative
//   verification) widen the integers in registers, 4-bit nibbles through a
//   table lookup that keeps the conversions off the fma port: 1.3x the AVX2
//   direct tiles on Q4_1 at one token. From 3 tokens on they beat the panel:
//   the widening's shuffles (port 5) interleave with the fma (ports 0 and
//   5) instead of running as a pass of their own that leaves port 0 idle,
//   and nothing is stored and reloaded (1.46x per step at 4 tokens). The
//   4-bit nibbles come as nibble quads (NibbleQuads): two shuffles per 8
//   weights instead of four per 2;
// - panel tiles (9 tokens and more) of 2 zmm x 6 tokens over L1-sized
//   slices expanded once per call: 2 weight loads and 6 broadcasts per 12 fma.
// Every lane runs the AVX2 tiles' recipe (interleaved_matmul_avx2.cc)
// operation for operation, so a token's result does not depend on the
// tile, the vector width or the batch: the path stays bitwise batch
// invariant, and equal to the AVX2 path (tested).

// GCC 12 reports every inlined _mm512_cvtepi8_epi32 / _mm512_cvtepi32_ps /
// 256-to-512 cast as "'__Y' may be used uninitialized" (the intrinsics'
// own undefined pass-through operand in avx512fintrin.h): a thousand false
// warnings per compile of this file, which hide real ones.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/interleaved_tiles.h"

namespace rill::kernels::cpu::internal {
namespace {

constexpr int kZmmLanes = 16;
constexpr int kTileZmm = 2;
constexpr int kTileTokens = 6;
// Floats per (zmm, block): q[32][16], d[16], m[16].
constexpr int64_t kBlockFloats = 34 * kZmmLanes;
// Blocks per panel slice: 2 zmm x 6 blocks = 26 KiB of expanded weights,
// which stay in L1 while every token tile of the call runs over them (a
// whole piece's panel, 78 KiB at 576 columns, spilled to L2 and its stores
// cost more than the tiles at 3-16 tokens).
constexpr int64_t kSliceBlocks = 6;

// The 8 bytes of group a (lanes 0-7) and of group b (lanes 8-15, zero when
// b is null) at one offset, as 16 bytes.
RILL_TARGET_AVX512 inline __m128i Pair8(const uint8_t* a, const uint8_t* b) {
  const __m128i lo = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(a));
  if (b == nullptr) return lo;
  return _mm_unpacklo_epi64(lo, _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b)));
}

// The 8 f16 values of group a and of group b (zero when null) as 16 floats.
RILL_TARGET_AVX512 inline __m512 PairHalves(const uint8_t* a, const uint8_t* b) {
  const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a));
  const __m128i hi =
      b == nullptr ? _mm_setzero_si128() : _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
  return _mm512_cvtph_ps(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1));
}

// b + off, or null when b is (an absent second group).
inline const uint8_t* At(const uint8_t* b, size_t off) { return b == nullptr ? nullptr : b + off; }

// The 8 int8 of group a and of group b (zero when null) at off as 16 floats.
RILL_TARGET_AVX512 inline __m512 PairInt8s(const uint8_t* a, const uint8_t* b, size_t off) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(Pair8(a + off, At(b, off))));
}

// The scales (d or m) at offset off of block a and block b (zero when
// null): LoadScales' floats, 16 lanes.
template <Format F>
RILL_TARGET_AVX512 inline __m512 PairScales(const uint8_t* a, const uint8_t* b, size_t off) {
  if constexpr (InterleavedTwoBit(F)) {
    return _mm512_set1_ps(1.0f);  // Q2_K's widened weights carry their scales
  } else if constexpr (InterleavedF32Scales(F)) {
    const __m256d lo = _mm256_loadu_pd(reinterpret_cast<const double*>(a + off));
    const __m256d hi = b == nullptr ? _mm256_setzero_pd()
                                    : _mm256_loadu_pd(reinterpret_cast<const double*>(b + off));
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(lo), hi, 1));
  } else {
    return PairHalves(a + off, b == nullptr ? nullptr : b + off);
  }
}

// Q2_K's Q2KHalfScales for group a (lanes 0-7) and group b (8-15, zero
// when null).
RILL_TARGET_AVX512 inline void Q2KHalfScales16(const uint8_t* a, const uint8_t* b, int h,
                                               __m512* ds, __m512* dm) {
  *ds = _mm512_mul_ps(PairHalves(a + kQ2KDOffset, At(b, kQ2KDOffset)),
                      PairInt8s(a, b, kQ2KScaleOffset + 8 * h));
  *dm = _mm512_mul_ps(PairHalves(a + kQ2KDminOffset, At(b, kQ2KDminOffset)),
                      PairInt8s(a, b, kQ2KNegMinOffset + 8 * h));
}

// Q2_K's WidenQ2KPair, 16 lanes.
RILL_TARGET_AVX512 inline void WidenQ2KPair16(const uint8_t* a, const uint8_t* b, int p,
                                              __m512 ds, __m512 dm, __m512* qe, __m512* qo) {
  const size_t off = 8 * (p / 2);
  __m512i v = _mm512_cvtepu8_epi32(Pair8(a + off, At(b, off)));
  if (p % 2 != 0) v = _mm512_srli_epi32(v, 4);
  const __m512i three = _mm512_set1_epi32(3);
  *qe = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_and_si512(v, three)), ds, dm);
  *qo = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(v, 2), three)), ds,
                        dm);
}

// The 16 lanes' weights j = 2p and 2p + 1 of one block of group a (lanes
// 0-7) and group b (8-15, zero when null): WidenPair's floats. 4-bit
// nibbles become floats by a 16-entry table lookup (vpermps reads only the
// low 4 bits of each index), which leaves the FMA port (p0) the conversions
// would take to the tiles' fma.
template <Format F>
RILL_TARGET_AVX512 inline void Widen16(const uint8_t* a, const uint8_t* b, int p, __m512* qe,
                                       __m512* qo) {
  if constexpr (InterleavedTwoBit(F)) {
    __m512 ds, dm;
    Q2KHalfScales16(a, b, p / 8, &ds, &dm);
    WidenQ2KPair16(a, b, p, ds, dm, qe, qo);
  } else if constexpr (InterleavedEightBit(F)) {
    const __m128i e = Pair8(a + 16 * p, b == nullptr ? nullptr : b + 16 * p);
    const __m128i o = Pair8(a + 16 * p + 8, b == nullptr ? nullptr : b + 16 * p + 8);
    *qe = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(e));
    *qo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(o));
    if constexpr (InterleavedSub16(F)) {
      const size_t so = InterleavedQBytes(F) + 8 * (p / 8);
      const __m512 s =
          _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(Pair8(a + so, b == nullptr ? nullptr : b + so)));
      *qe = _mm512_mul_ps(*qe, s);
      *qo = _mm512_mul_ps(*qo, s);
    }
  } else {
    const __m512 table =
        _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i v = _mm512_cvtepu8_epi32(Pair8(a + 8 * p, b == nullptr ? nullptr : b + 8 * p));
    *qe = _mm512_permutexvar_ps(v, table);
    *qo = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), table);
  }
}

// The 4-bit formats' nibble bytes of weights 8 P .. 8 P + 7 (bytes p = 4 P
// .. 4 P + 3) of one block of group a (lanes 0-7) and group b (8-15, zero
// when null): lane L's dword holds its row's four bytes, byte i from p =
// 4 P + i. Two shuffles (a dword permute across both groups, then a 4 x 4
// byte transpose in each 128-bit lane) serve 8 weights, where widening
// byte pairs (Widen16) takes four per 2 weights; all on port 5, which the
// panel expansion is bound by.
RILL_TARGET_AVX512 inline __m512i NibbleQuads(const uint8_t* a, const uint8_t* b, int P) {
  const size_t off = 64 * (P / 2);
  const __m512i va = _mm512_loadu_si512(a + off);
  const __m512i vb = b == nullptr ? _mm512_setzero_si512() : _mm512_loadu_si512(b + off);
  // Byte 8 p + r of a group's block is row r's byte p: dword 2 p + r / 4.
  // Output lane j takes rows 4 (j % 2) .. + 3 of group a (j < 2) or b, its
  // dword i the one of p = 4 P + i.
  const int h = 8 * (P % 2);
  const __m512i idx = _mm512_setr_epi32(h, h + 2, h + 4, h + 6, h + 1, h + 3, h + 5, h + 7,
                                        16 + h, 16 + h + 2, 16 + h + 4, 16 + h + 6, 16 + h + 1,
                                        16 + h + 3, 16 + h + 5, 16 + h + 7);
  const __m512i d = _mm512_permutex2var_epi32(va, idx, vb);
  // Dword i byte r' (row r' of the lane's four, p = 4 P + i) to dword r'
  // byte i.
  const __m512i transpose = _mm512_broadcast_i32x4(
      _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
  return _mm512_shuffle_epi8(d, transpose);
}

// Weight 8 P + m of the 16 lanes from NibbleQuads(.., P) as floats: nibble
// m of each dword (byte m / 2, low nibble for even m), by the table lookup
// Widen16 uses (vpermps reads only the low 4 bits of each index).
RILL_TARGET_AVX512 inline __m512 NibbleFloats(__m512i quads, int m) {
  const __m512 table = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  return _mm512_permutexvar_ps(m == 0 ? quads : _mm512_srli_epi32(quads, 4 * m), table);
}

// Blocks [b0, b0 + nbs) of groups [g0, g1) into slice zmm z = (g - g0) / 2,
// half (g - g0) % 2: the same floats WidenPair and LoadHalves give, 16
// lanes at a time. A missing second group leaves its half zero.
template <Format F>
RILL_TARGET_AVX512 void ExpandSlice(const Operands& o, int64_t g0, int64_t g1, int64_t b0,
                                    int64_t nbs, float* panel) {
  for (int64_t ga = g0; ga < g1; ga += 2) {
    const int z = static_cast<int>((ga - g0) / 2);
    const uint8_t* wa = o.data + ga * o.group_bytes;
    const uint8_t* wb = ga + 1 < g1 ? wa + o.group_bytes : nullptr;
    for (int64_t b = b0; b < b0 + nbs; ++b) {
      const size_t off = b * o.block_bytes;
      const uint8_t* ba = wa + off;
      const uint8_t* bb = wb == nullptr ? nullptr : wb + off;
      float* dst = panel + (z * kSliceBlocks + (b - b0)) * kBlockFloats;
      if constexpr (InterleavedTwoBit(F)) {
        // The stores may alias the blocks: Q2_K's scales are read once per half.
        for (int h = 0; h < 2; ++h) {
          __m512 ds, dm;
          Q2KHalfScales16(ba, bb, h, &ds, &dm);
#pragma GCC unroll 8
          for (int p = 8 * h; p < 8 * h + 8; ++p) {
            __m512 qe, qo;
            WidenQ2KPair16(ba, bb, p, ds, dm, &qe, &qo);
            _mm512_store_ps(dst + kZmmLanes * (2 * p), qe);
            _mm512_store_ps(dst + kZmmLanes * (2 * p + 1), qo);
          }
        }
      } else if constexpr (!InterleavedEightBit(F)) {  // 4-bit nibbles
#pragma GCC unroll 4
        for (int P = 0; P < 4; ++P) {
          const __m512i quads = NibbleQuads(ba, bb, P);
#pragma GCC unroll 8
          for (int m = 0; m < 8; ++m) {
            _mm512_store_ps(dst + kZmmLanes * (8 * P + m), NibbleFloats(quads, m));
          }
        }
      } else {
#pragma GCC unroll 16
        for (int p = 0; p < 16; ++p) {
          __m512 qe, qo;
          Widen16<F>(ba, bb, p, &qe, &qo);
          _mm512_store_ps(dst + kZmmLanes * (2 * p), qe);
          _mm512_store_ps(dst + kZmmLanes * (2 * p + 1), qo);
        }
      }
      _mm512_store_ps(dst + kZmmLanes * 32, PairScales<F>(ba, bb, InterleavedDOffset(F)));
      if constexpr (InterleavedHasMin(F)) {
        _mm512_store_ps(dst + kZmmLanes * 33, PairScales<F>(ba, bb, InterleavedMOffset(F)));
      }
    }
  }
}

RILL_TARGET_AVX512 inline __mmask16 RowMask(int valid) {
  return valid >= kZmmLanes ? static_cast<__mmask16>(0xFFFF)
                            : static_cast<__mmask16>((1u << std::max(valid, 0)) - 1);
}

// Zeroes a tile's Z x T registers (the compiler keeps them in zmm).
template <int Z, int T>
RILL_TARGET_AVX512 inline void ZeroTile(__m512 (&v)[Z][T]) {
#pragma GCC unroll 4
  for (int z = 0; z < Z; ++z) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) v[z][t] = _mm512_setzero_ps();
  }
}

// Z slice zmm x T tokens over the slice's nbs blocks (from block b0); rows
// from row0 (zmm z covers 16 of them). Each lane's running sum lives in y
// between slices: read back (b0 > 0) and written after the slice, so the
// chain of fma per lane is the one an unsliced tile would run.
template <Format F, int Z, int T>
RILL_TARGET_AVX512 void Tile(const Operands& o, const float* panel, int64_t row0, int64_t b0,
                             int64_t nbs) {
  __mmask16 mask[Z];
#pragma GCC unroll 2
  for (int z = 0; z < Z; ++z) {
    mask[z] = RowMask(static_cast<int>(o.rows - (row0 + z * kZmmLanes)));
  }
  alignas(64) float acc[Z][T][kZmmLanes];
#pragma GCC unroll 2
  for (int z = 0; z < Z; ++z) {
#pragma GCC unroll 6
    for (int t = 0; t < T; ++t) {
      const __m512 a = b0 == 0 ? _mm512_setzero_ps()
                               : _mm512_maskz_loadu_ps(mask[z], o.y + t * o.rows + row0 +
                                                                    z * kZmmLanes);
      _mm512_store_ps(acc[z][t], a);
    }
  }
  const float* pz[Z];
#pragma GCC unroll 2
  for (int z = 0; z < Z; ++z) pz[z] = panel + z * kSliceBlocks * kBlockFloats;
  const float* xt[T];
#pragma GCC unroll 6
  for (int t = 0; t < T; ++t) xt[t] = o.x + t * o.cols;
  for (int64_t i = 0; i < nbs; ++i) {
    const int64_t b = b0 + i;
    __m512 se[Z][T], so[Z][T];
    ZeroTile(se);
    ZeroTile(so);
#pragma GCC unroll 16
    for (int p = 0; p < 16; ++p) {
      __m512 w[Z];
#pragma GCC unroll 2
      for (int z = 0; z < Z; ++z) {
        w[z] = _mm512_load_ps(pz[z] + i * kBlockFloats + kZmmLanes * (2 * p));
        asm("" : "+v"(w[z]));  // one load, reused by every token
      }
#pragma GCC unroll 6
      for (int t = 0; t < T; ++t) {
        const __m512 xv = _mm512_set1_ps(xt[t][32 * b + 2 * p]);
#pragma GCC unroll 2
        for (int z = 0; z < Z; ++z) se[z][t] = _mm512_fmadd_ps(w[z], xv, se[z][t]);
      }
#pragma GCC unroll 2
      for (int z = 0; z < Z; ++z) {
        w[z] = _mm512_load_ps(pz[z] + i * kBlockFloats + kZmmLanes * (2 * p + 1));
        asm("" : "+v"(w[z]));
      }
#pragma GCC unroll 6
      for (int t = 0; t < T; ++t) {
        const __m512 xv = _mm512_set1_ps(xt[t][32 * b + 2 * p + 1]);
#pragma GCC unroll 2
        for (int z = 0; z < Z; ++z) so[z][t] = _mm512_fmadd_ps(w[z], xv, so[z][t]);
      }
    }
#pragma GCC unroll 2
    for (int z = 0; z < Z; ++z) {
      const float* dm = pz[z] + i * kBlockFloats + 32 * kZmmLanes;
      const __m512 d = _mm512_load_ps(dm);
#pragma GCC unroll 6
      for (int t = 0; t < T; ++t) {
        __m512 a = _mm512_load_ps(acc[z][t]);
        a = _mm512_fmadd_ps(d, _mm512_add_ps(se[z][t], so[z][t]), a);
        if constexpr (InterleavedHasMin(F)) {
          a = _mm512_fmadd_ps(_mm512_load_ps(dm + kZmmLanes), _mm512_set1_ps(o.sx[t * o.nb + b]),
                              a);
        }
        _mm512_store_ps(acc[z][t], a);
      }
    }
  }
#pragma GCC unroll 2
  for (int z = 0; z < Z; ++z) {
#pragma GCC unroll 6
    for (int t = 0; t < T; ++t) {
      _mm512_mask_storeu_ps(o.y + t * o.rows + row0 + z * kZmmLanes, mask[z],
                            _mm512_load_ps(acc[z][t]));
    }
  }
}

// Weights k = 8 P .. 8 P + 7 of one block of the 4-bit formats for
// DirectTile, from nibble quads: even k into se and odd k into so, in k
// order (the chains Widen16's pairs give).
template <int Z, int T>
RILL_TARGET_AVX512 inline void NibbleQuadStep(const uint8_t* const (&ga)[Z],
                                              const uint8_t* const (&gb)[Z], size_t off,
                                              const float* const (&xt)[T], int64_t b, int P,
                                              __m512 (&se)[Z][T], __m512 (&so)[Z][T]) {
  __m512i quads[Z];
#pragma GCC unroll 8
  for (int z = 0; z < Z; ++z) {
    quads[z] = NibbleQuads(ga[z] + off, gb[z] == nullptr ? nullptr : gb[z] + off, P);
  }
#pragma GCC unroll 8
  for (int m = 0; m < 8; ++m) {
    const int k = 8 * P + m;
#pragma GCC unroll 8
    for (int z = 0; z < Z; ++z) {
      const __m512 q = NibbleFloats(quads[z], m);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m512 xv = _mm512_set1_ps(xt[t][32 * b + k]);
        if (m % 2 == 0) {
          se[z][t] = _mm512_fmadd_ps(q, xv, se[z][t]);
        } else {
          so[z][t] = _mm512_fmadd_ps(q, xv, so[z][t]);
        }
      }
    }
  }
}

// One block of the 4-bit formats: its four quads in order. From 5 tokens the
// 15+ accumulators leave no room for a second quad's widened weights, and
// an unrolled loop spilled them (one thread, 5 tokens: ~5% faster rolled);
// fewer tokens keep the unrolled loop, which is faster there.
template <int Z, int T>
RILL_TARGET_AVX512 inline void NibbleBlock(const uint8_t* const (&ga)[Z],
                                           const uint8_t* const (&gb)[Z], size_t off,
                                           const float* const (&xt)[T], int64_t b,
                                           __m512 (&se)[Z][T], __m512 (&so)[Z][T]) {
  if constexpr (T >= 5) {
#pragma GCC unroll 1
    for (int P = 0; P < 4; ++P) NibbleQuadStep<Z, T>(ga, gb, off, xt, b, P, se, so);
  } else {
#pragma GCC unroll 4
    for (int P = 0; P < 4; ++P) NibbleQuadStep<Z, T>(ga, gb, off, xt, b, P, se, so);
  }
}

// Z zmm (groups g, g + 1, ... from g0; a second group past g1 is absent)
// x T tokens (1 to 8), weights widened in registers: the AVX2 DirectTile's
// per-lane operations, 16 rows per vector.
template <Format F, int Z, int T>
RILL_TARGET_AVX512 void DirectTile(const Operands& o, int64_t g0, int64_t g1) {
  const uint8_t* ga[Z];
  const uint8_t* gb[Z];
  __mmask16 mask[Z];
#pragma GCC unroll 8
  for (int z = 0; z < Z; ++z) {
    const int64_t g = g0 + 2 * z;
    ga[z] = o.data + g * o.group_bytes;
    gb[z] = g + 1 < g1 ? ga[z] + o.group_bytes : nullptr;
    mask[z] = RowMask(static_cast<int>(o.rows - g * kInterleavedLanes));
    if (gb[z] == nullptr) mask[z] &= 0x00FF;  // the absent group's rows are not ours
  }
  const float* xt[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) xt[t] = o.x + t * o.cols;
  __m512 acc[Z][T];
  ZeroTile(acc);
  // The next tile's groups (2 Z on, contiguous), every line of their block:
  // decode streams the weights from DRAM.
  const char* next = reinterpret_cast<const char*>(o.data + (g0 + 2 * Z) * o.group_bytes);
  const char* end = reinterpret_cast<const char*>(o.data + (o.rows + kInterleavedLanes - 1) /
                                                                kInterleavedLanes * o.group_bytes);
  for (int64_t b = 0; b < o.nb; ++b) {
    const size_t off = b * o.block_bytes;
    for (int g = 0; g < 2 * Z; ++g) {
      const char* blk = next + g * o.group_bytes + off;
      if (blk >= end) break;
      for (size_t line = 0; line < o.block_bytes; line += 64) _mm_prefetch(blk + line, _MM_HINT_T0);
    }
    __m512 se[Z][T], so[Z][T];
    ZeroTile(se);
    ZeroTile(so);
    if constexpr (!InterleavedEightBit(F) && !InterleavedTwoBit(F)) {
      NibbleBlock<Z, T>(ga, gb, off, xt, b, se, so);
    } else {
#pragma GCC unroll 16
      for (int p = 0; p < 16; ++p) {
        __m512 xe[T], xo[T];
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          xe[t] = _mm512_set1_ps(xt[t][32 * b + 2 * p]);
          xo[t] = _mm512_set1_ps(xt[t][32 * b + 2 * p + 1]);
        }
#pragma GCC unroll 8
        for (int z = 0; z < Z; ++z) {
          __m512 qe, qo;
          Widen16<F>(ga[z] + off, gb[z] == nullptr ? nullptr : gb[z] + off, p, &qe, &qo);
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) {
            se[z][t] = _mm512_fmadd_ps(qe, xe[t], se[z][t]);
            so[z][t] = _mm512_fmadd_ps(qo, xo[t], so[z][t]);
          }
        }
      }
    }
#pragma GCC unroll 8
    for (int z = 0; z < Z; ++z) {
      const uint8_t* ba = ga[z] + off;
      const uint8_t* bb = gb[z] == nullptr ? nullptr : gb[z] + off;
      const __m512 d = PairScales<F>(ba, bb, InterleavedDOffset(F));
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        acc[z][t] = _mm512_fmadd_ps(d, _mm512_add_ps(se[z][t], so[z][t]), acc[z][t]);
      }
      if constexpr (InterleavedHasMin(F)) {
        const __m512 m = PairScales<F>(ba, bb, InterleavedMOffset(F));
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          acc[z][t] = _mm512_fmadd_ps(m, _mm512_set1_ps(o.sx[t * o.nb + b]), acc[z][t]);
        }
      }
    }
  }
#pragma GCC unroll 8
  for (int z = 0; z < Z; ++z) {
    const int64_t row = (g0 + 2 * z) * kInterleavedLanes;
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(o.y + t * o.rows + row, mask[z], acc[z][t]);
  }
}

template <Format F, int T>
RILL_TARGET_AVX512 void DirectTokens(const Operands& o, int64_t g0, int64_t g1) {
  int64_t g = g0;
  for (; g + 4 <= g1; g += 4) DirectTile<F, 2, T>(o, g, g1);
  if (g < g1) DirectTile<F, 1, T>(o, g, g1);
  if (g + 2 < g1) DirectTile<F, 1, T>(o, g + 2, g1);
}

// 5-8 tokens: one zmm per tile (8 tokens x even/odd chains and the
// accumulators take 24 registers).
template <Format F, int T>
RILL_TARGET_AVX512 void DirectTokensOneZmm(const Operands& o, int64_t g0, int64_t g1) {
  for (int64_t g = g0; g < g1; g += 2) DirectTile<F, 1, T>(o, g, g1);
}

template <Format F>
RILL_TARGET_AVX512 void Direct(const Operands& o, int64_t g0, int64_t g1, int64_t nt) {
  static_assert(kAvx512DirectMaxTokens == 8);
  switch (nt) {
    case 8: return DirectTokensOneZmm<F, 8>(o, g0, g1);
    case 7: return DirectTokensOneZmm<F, 7>(o, g0, g1);
    case 6: return DirectTokensOneZmm<F, 6>(o, g0, g1);
    case 5: return DirectTokensOneZmm<F, 5>(o, g0, g1);
    case 4: return DirectTokens<F, 4>(o, g0, g1);
    case 3: return DirectTokens<F, 3>(o, g0, g1);
    case 2: return DirectTokens<F, 2>(o, g0, g1);
    default: return DirectTokens<F, 1>(o, g0, g1);
  }
}

template <Format F, int T>
RILL_TARGET_AVX512 void Tokens(const Operands& o, const float* panel, int zmm, int64_t row0,
                               int64_t b0, int64_t nbs) {
  if (zmm == 2) return Tile<F, 2, T>(o, panel, row0, b0, nbs);
  return Tile<F, 1, T>(o, panel, row0, b0, nbs);
}

template <Format F>
RILL_TARGET_AVX512 void Piece(const Operands& o, int64_t g0, int64_t g1, int64_t nt) {
  const int zmm = static_cast<int>((g1 - g0 + 1) / 2);
  alignas(64) static thread_local float panel[kTileZmm * kSliceBlocks * kBlockFloats];
  const int64_t row0 = g0 * kInterleavedLanes;
  for (int64_t b0 = 0; b0 < o.nb; b0 += kSliceBlocks) {
    const int64_t nbs = std::min(kSliceBlocks, o.nb - b0);
    ExpandSlice<F>(o, g0, g1, b0, nbs, panel);
    Operands ot = o;
    // A tail of 1 or 2 tokens after full tiles goes with the last one as 4
    // + 3 or 4 + 4 (32 tokens: 4 x 6 + 2 x 4): a 2-token tile runs 4 fma per
    // 2 weight loads and 2 broadcasts, a 4-token one 8.
    const int64_t full = nt % kTileTokens <= 2 && nt > kTileTokens ? nt / kTileTokens - 1
                                                                   : nt / kTileTokens;
    int64_t t = 0;
    for (; t < full * kTileTokens; t += kTileTokens) {
      Tokens<F, kTileTokens>(ot, panel, zmm, row0, b0, nbs);
      ot.x += kTileTokens * ot.cols;
      ot.sx += kTileTokens * ot.nb;
      ot.y += kTileTokens * ot.rows;
    }
    if (nt - t > kTileTokens) {  // 7 or 8
      Tokens<F, 4>(ot, panel, zmm, row0, b0, nbs);
      ot.x += 4 * ot.cols;
      ot.sx += 4 * ot.nb;
      ot.y += 4 * ot.rows;
      t += 4;
    }
    switch (nt - t) {
      case 6: Tokens<F, 6>(ot, panel, zmm, row0, b0, nbs); break;
      case 5: Tokens<F, 5>(ot, panel, zmm, row0, b0, nbs); break;
      case 4: Tokens<F, 4>(ot, panel, zmm, row0, b0, nbs); break;
      case 3: Tokens<F, 3>(ot, panel, zmm, row0, b0, nbs); break;
      case 2: Tokens<F, 2>(ot, panel, zmm, row0, b0, nbs); break;
      case 1: Tokens<F, 1>(ot, panel, zmm, row0, b0, nbs); break;
      default: break;
    }
  }
}

}  // namespace

void InterleavedDirectPieceAvx512(Format format, const Operands& o, int64_t g0, int64_t g1,
                                  int64_t nt) {
  switch (format) {
    case Format::k4BitInterleaved8: return Direct<Format::k4BitInterleaved8>(o, g0, g1, nt);
    case Format::k8BitInterleaved8: return Direct<Format::k8BitInterleaved8>(o, g0, g1, nt);
    case Format::k4BitF32ScaledInterleaved8:
      return Direct<Format::k4BitF32ScaledInterleaved8>(o, g0, g1, nt);
    case Format::k8BitF32ScaledInterleaved8:
      return Direct<Format::k8BitF32ScaledInterleaved8>(o, g0, g1, nt);
    case Format::k8BitSub16Interleaved8:
      return Direct<Format::k8BitSub16Interleaved8>(o, g0, g1, nt);
    case Format::k2BitSub16MinInterleaved8:
      return Direct<Format::k2BitSub16MinInterleaved8>(o, g0, g1, nt);
    default: return;  // not an interleaved format
  }
}

void InterleavedPanelPieceAvx512(Format format, const Operands& o, int64_t g0, int64_t g1,
                                 int64_t nt) {
  switch (format) {
    case Format::k4BitInterleaved8: return Piece<Format::k4BitInterleaved8>(o, g0, g1, nt);
    case Format::k8BitInterleaved8: return Piece<Format::k8BitInterleaved8>(o, g0, g1, nt);
    case Format::k4BitF32ScaledInterleaved8:
      return Piece<Format::k4BitF32ScaledInterleaved8>(o, g0, g1, nt);
    case Format::k8BitF32ScaledInterleaved8:
      return Piece<Format::k8BitF32ScaledInterleaved8>(o, g0, g1, nt);
    case Format::k8BitSub16Interleaved8:
      return Piece<Format::k8BitSub16Interleaved8>(o, g0, g1, nt);
    case Format::k2BitSub16MinInterleaved8:
      return Piece<Format::k2BitSub16MinInterleaved8>(o, g0, g1, nt);
    default: return;  // not an interleaved format
  }
}

}  // namespace rill::kernels::cpu::internal
