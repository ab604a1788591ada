// The interleaved exact path's panel tiles for AVX-512: two 8-row groups per
// zmm, so a tile of 2 zmm x 6 tokens issues 2 weight loads and 6 broadcasts
// per 12 fma. Every lane runs the AVX2 tiles' recipe
// (interleaved_matmul_avx2.cc) operation for operation, so a token's result
// does not depend on whether it ran in a decode step (AVX2 direct tiles)
// or a batch (these): the path stays bitwise batch invariant.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/aligned_buffer.h"
#include "kernels/cpu/interleaved_tiles.h"

#define RILL_TARGET_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))

namespace rill::cpu::internal {
namespace {

constexpr int kZmmLanes = 16;
constexpr int kTileZmm = 2;
constexpr int kTileTokens = 6;
// Floats per (zmm, block): q[32][16], d[16], m[16].
constexpr int64_t kBlockFloats = 34 * kZmmLanes;

// Groups [g0, g1) into panel zmm z = (g - g0) / 2, half (g - g0) % 2; a
// missing half of the last zmm is zero (its lanes are never stored).
template <bool kEight>
RILL_TARGET_AVX512 void Expand(const Operands& o, int64_t g0, int64_t g1, int zmm, float* panel) {
  std::memset(panel, 0, zmm * o.nb * kBlockFloats * sizeof(float));
  for (int64_t g = g0; g < g1; ++g) {
    const int z = static_cast<int>((g - g0) / 2), half = static_cast<int>((g - g0) % 2);
    const uint8_t* gw = o.data + g * o.group_bytes;
    for (int64_t b = 0; b < o.nb; ++b) {
      const uint8_t* blk = gw + b * o.block_bytes;
      float* dst = panel + (z * o.nb + b) * kBlockFloats + kInterleavedLanes * half;
      for (int p = 0; p < 16; ++p) {
        __m256 qe, qo;
        WidenPair<kEight>(blk, p, &qe, &qo);
        _mm256_store_ps(dst + kZmmLanes * (2 * p), qe);
        _mm256_store_ps(dst + kZmmLanes * (2 * p + 1), qo);
      }
      _mm256_store_ps(dst + kZmmLanes * 32, LoadHalves(blk + kDOffset<kEight>));
      if constexpr (!kEight) {
        _mm256_store_ps(dst + kZmmLanes * 33, LoadHalves(blk + kDOffset<kEight> + 16));
      }
    }
  }
}

RILL_TARGET_AVX512 inline void StoreRows(__m512 v, float* out, int valid) {
  if (valid >= kZmmLanes) {
    _mm512_storeu_ps(out, v);
  } else if (valid > 0) {
    _mm512_mask_storeu_ps(out, static_cast<__mmask16>((1u << valid) - 1), v);
  }
}

// Z panel zmm x T tokens; rows from row0 (zmm z covers 16 of them).
template <bool kEight, int Z, int T>
RILL_TARGET_AVX512 void Tile(const Operands& o, const float* panel, int64_t row0) {
  alignas(64) float acc[Z][T][kZmmLanes] = {};
  const float* pz[Z];
#pragma GCC unroll 2
  for (int z = 0; z < Z; ++z) pz[z] = panel + z * o.nb * kBlockFloats;
  const float* xt[T];
#pragma GCC unroll 6
  for (int t = 0; t < T; ++t) xt[t] = o.x + t * o.cols;
  for (int64_t b = 0; b < o.nb; ++b) {
    __m512 se[Z][T], so[Z][T];
#pragma GCC unroll 2
    for (int z = 0; z < Z; ++z) {
#pragma GCC unroll 6
      for (int t = 0; t < T; ++t) se[z][t] = so[z][t] = _mm512_setzero_ps();
    }
#pragma GCC unroll 16
    for (int p = 0; p < 16; ++p) {
      __m512 w[Z];
#pragma GCC unroll 2
      for (int z = 0; z < Z; ++z) {
        w[z] = _mm512_load_ps(pz[z] + b * kBlockFloats + kZmmLanes * (2 * p));
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
        w[z] = _mm512_load_ps(pz[z] + b * kBlockFloats + kZmmLanes * (2 * p + 1));
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
      const float* dm = pz[z] + b * kBlockFloats + 32 * kZmmLanes;
      const __m512 d = _mm512_load_ps(dm);
#pragma GCC unroll 6
      for (int t = 0; t < T; ++t) {
        __m512 a = _mm512_load_ps(acc[z][t]);
        a = _mm512_fmadd_ps(d, _mm512_add_ps(se[z][t], so[z][t]), a);
        if constexpr (!kEight) {
          a = _mm512_fmadd_ps(_mm512_load_ps(dm + kZmmLanes), _mm512_set1_ps(o.sx[t * o.nb + b]),
                              a);
        }
        _mm512_store_ps(acc[z][t], a);
      }
    }
  }
  for (int z = 0; z < Z; ++z) {
    const int64_t row = row0 + z * kZmmLanes;
    const int valid = static_cast<int>(std::min<int64_t>(kZmmLanes, o.rows - row));
    for (int t = 0; t < T; ++t) StoreRows(_mm512_load_ps(acc[z][t]), o.y + t * o.rows + row, valid);
  }
}

template <bool kEight, int T>
RILL_TARGET_AVX512 void Tokens(const Operands& o, const float* panel, int zmm, int64_t row0) {
  if (zmm == 2) return Tile<kEight, 2, T>(o, panel, row0);
  return Tile<kEight, 1, T>(o, panel, row0);
}

template <bool kEight>
RILL_TARGET_AVX512 void Piece(Operands o, int64_t g0, int64_t g1, int64_t nt) {
  const int zmm = static_cast<int>((g1 - g0 + 1) / 2);
  thread_local std::vector<float, Aligned64Allocator<float>> panel_buf;
  panel_buf.resize(kTileZmm * o.nb * kBlockFloats);
  float* panel = panel_buf.data();
  Expand<kEight>(o, g0, g1, zmm, panel);
  const int64_t row0 = g0 * kInterleavedLanes;
  int64_t t = 0;
  for (; t + kTileTokens <= nt; t += kTileTokens) {
    Tokens<kEight, kTileTokens>(o, panel, zmm, row0);
    o.x += kTileTokens * o.cols;
    o.sx += kTileTokens * o.nb;
    o.y += kTileTokens * o.rows;
  }
  switch (nt - t) {
    case 5: return Tokens<kEight, 5>(o, panel, zmm, row0);
    case 4: return Tokens<kEight, 4>(o, panel, zmm, row0);
    case 3: return Tokens<kEight, 3>(o, panel, zmm, row0);
    case 2: return Tokens<kEight, 2>(o, panel, zmm, row0);
    case 1: return Tokens<kEight, 1>(o, panel, zmm, row0);
    default: return;
  }
}

}  // namespace

void InterleavedPanelPieceAvx512(bool eight, const Operands& o, int64_t g0, int64_t g1,
                                 int64_t nt) {
  if (eight) return Piece<true>(o, g0, g1, nt);
  return Piece<false>(o, g0, g1, nt);
}

}  // namespace rill::cpu::internal
