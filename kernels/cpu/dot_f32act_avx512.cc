// AVX-512 kernels for quantized weights against f32 activations (the exact
// path, WeightMatrix::float_activations), working on a chunk of rows and all
// the tokens of a call at once.
//
// Every (row, token) pair is computed the same way whatever the tile: one
// 16-lane accumulator for weights 0..15 of each 32-block and one for 16..31,
// blocks in order, then Reduce(lo + hi). A weight expands to the same float
// whether it is expanded in registers or into the f32 panel, so small calls
// (decode) and large ones (prefill, batched decode) agree bit for bit and
// MatMul stays batch invariant.
// GCC 12 reports its own _mm512_undefined_ps() placeholders as uninitialized
// (a false positive in the intrinsic headers); silence it for this file.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/matmul_internal.h"

namespace rill::kernels::cpu::internal {
namespace {

// Register tiles (of 32 zmm registers). Expanding in registers: 4 rows x
// up to 2 tokens. From the panel: 4 rows x 3 tokens, 24 accumulators, 4
// weight and 1 activation register, 14 loads per 24 fma.
constexpr int kRows = 4;
constexpr int kPanelRows = 4;
constexpr int kPanelTokens = 3;
// From this many tokens on, each group of kPanelRows rows is expanded once
// per call into an f32 panel that every token tile reuses; below it, the
// weights are expanded in registers.
constexpr int64_t kPanelMinTokens = 3;

float* AlignTo64(float* p) {
  return reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(p) + 63) & ~uintptr_t{63});
}

RILL_TARGET_AVX512 inline __m512 HalfToVec(uint16_t h) {
  return _mm512_set1_ps(_mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h))));
}

RILL_TARGET_AVX512 inline float Reduce(__m512 lo, __m512 hi) {
  const __m512 s = _mm512_add_ps(lo, hi);
  __m256 v = _mm256_add_ps(_mm512_castps512_ps256(s), _mm512_extractf32x8_ps(s, 1));
  __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  q = _mm_add_ps(q, _mm_movehl_ps(q, q));
  q = _mm_add_ss(q, _mm_movehdup_ps(q));
  return _mm_cvtss_f32(q);
}

// Reduce() of four (lo + hi) sums at once, lane r of the result for s[r]:
// the same additions of the same lanes in the same tree (lane i + i+8, then
// i + i+4, i + i+2, i + i+1), done across the four vectors with shuffles,
// so each result is bitwise Reduce()'s. s[k] for k >= n are ignored.
RILL_TARGET_AVX512 inline __m128 Reduce4(const __m512 s[4]) {
  const __m512 a01 = _mm512_shuffle_f32x4(s[0], s[1], _MM_SHUFFLE(1, 0, 1, 0));
  const __m512 b01 = _mm512_shuffle_f32x4(s[0], s[1], _MM_SHUFFLE(3, 2, 3, 2));
  const __m512 a23 = _mm512_shuffle_f32x4(s[2], s[3], _MM_SHUFFLE(1, 0, 1, 0));
  const __m512 b23 = _mm512_shuffle_f32x4(s[2], s[3], _MM_SHUFFLE(3, 2, 3, 2));
  // Blocks of 4 lanes: [s0 v0-3, s0 v4-7, s1 v0-3, s1 v4-7] with v = lane i + i+8.
  const __m512 u01 = _mm512_add_ps(a01, b01);
  const __m512 u23 = _mm512_add_ps(a23, b23);
  // Block r: s[r]'s lane i+4 added to lane i.
  const __m512 q = _mm512_add_ps(_mm512_shuffle_f32x4(u01, u23, _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_f32x4(u01, u23, _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512 e = _mm512_add_ps(q, _mm512_permute_ps(q, _MM_SHUFFLE(1, 0, 3, 2)));
  const __m512 f = _mm512_add_ps(e, _mm512_permute_ps(e, _MM_SHUFFLE(2, 3, 0, 1)));
  const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_castps512_ps128(_mm512_permutexvar_ps(idx, f));
}

// out[t * out_stride + r] = Reduce(acc[r][t][0], acc[r][t][1]) for an R x T
// tile (R <= 4): one 4-lane reduction and store per token.
template <int R, int T>
RILL_TARGET_AVX512 inline void ReduceTile(__m512 (&acc)[R][T][2], float* out, size_t out_stride) {
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    __m512 s[4];
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      s[r] = r < R ? _mm512_add_ps(acc[r][t][0], acc[r][t][1]) : _mm512_setzero_ps();
    }
    const __m128 v = Reduce4(s);
    if (R == 4) {
      _mm_storeu_ps(out + t * out_stride, v);
    } else {
      _mm_mask_storeu_ps(out + t * out_stride, static_cast<__mmask8>((1u << R) - 1), v);
    }
  }
}

// Expand(block, lo, hi): weights 0..15 and 16..31 of one block.
struct Q4_1X {
  using Block = BlockQ4_1;
  RILL_TARGET_AVX512 static inline void Expand(const Block& b, __m512* lo, __m512* hi) {
    // d and m (adjacent halves) in one conversion.
    uint32_t dm_bits;
    std::memcpy(&dm_bits, &b.d, sizeof(dm_bits));
    const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(dm_bits)));
    const __m512 d = _mm512_broadcastss_ps(dm);
    const __m512 m = _mm512_broadcastss_ps(_mm_movehdup_ps(dm));
    // The block's 16 possible weights d * q + m (the same fma, so the same
    // floats, as expanding each weight), looked up by nibble: vpermps reads
    // only the low 4 bits of each index, so neither nibble needs masking.
    const __m512 table = _mm512_fmadd_ps(
        d, _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), m);
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
    *lo = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(raw), table);
    *hi = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_srli_epi16(raw, 4)), table);
  }
};

struct Q4_0X {
  using Block = BlockQ4_0;
  RILL_TARGET_AVX512 static inline void Expand(const Block& b, __m512* lo, __m512* hi) {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
    const __m128i mask = _mm_set1_epi8(0x0F);
    const __m512 d = HalfToVec(b.d);
    // d * q - 8 d == d * (q - 8) exactly: -8 d is exact and q - 8 too.
    const __m512 off = _mm512_mul_ps(d, _mm512_set1_ps(-8.0f));
    const __m512i ql = _mm512_cvtepu8_epi32(_mm_and_si128(raw, mask));
    const __m512i qh = _mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(raw, 4), mask));
    *lo = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(ql), off);
    *hi = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(qh), off);
  }
};

struct Q8_0X {
  using Block = BlockQ8_0;
  RILL_TARGET_AVX512 static inline void Expand(const Block& b, __m512* lo, __m512* hi) {
    const __m512 d = HalfToVec(b.d);
    const __m128i q0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
    const __m128i q1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + 16));
    *lo = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q0)));
    *hi = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q1)));
  }
};

// R rows x T tokens, weights expanded in registers block by block.
template <typename F, int R, int T>
RILL_TARGET_AVX512 void DirectTile(const uint8_t* w, size_t w_stride, const float* x,
                                   size_t x_stride, int64_t nb, float* out, size_t out_stride) {
  using Block = typename F::Block;
  const Block* wb[R];
  for (int r = 0; r < R; ++r) wb[r] = reinterpret_cast<const Block*>(w + r * w_stride);
  __m512 acc[R][T][2];
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) acc[r][t][0] = acc[r][t][1] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      // The next tile's rows, which the hardware prefetcher misses when it
      // sees R interleaved short streams (decode reads weights from DRAM).
      _mm_prefetch(reinterpret_cast<const char*>(wb[r] + b) + 2 * R * w_stride, _MM_HINT_T0);
      __m512 lo, hi;
      F::Expand(wb[r][b], &lo, &hi);
#pragma GCC unroll 2
      for (int t = 0; t < T; ++t) {
        const float* xb = x + t * x_stride + 32 * b;
        acc[r][t][0] = _mm512_fmadd_ps(lo, _mm512_loadu_ps(xb), acc[r][t][0]);
        acc[r][t][1] = _mm512_fmadd_ps(hi, _mm512_loadu_ps(xb + 16), acc[r][t][1]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) out[t * out_stride + r] = Reduce(acc[r][t][0], acc[r][t][1]);
  }
}

// R rows x T tokens from a row group of the f32 panel: block b of the group
// holds the R rows' 32 weights each, [b][r][32], so the tile reads one
// sequential stream of weights (L1 resident: the group is re-read by every
// token tile) and T token streams.
template <int R, int T>
RILL_TARGET_AVX512 void PanelTile(const float* p, const float* x, size_t x_stride, int64_t nb,
                                  float* out, size_t out_stride) {
  __m512 acc[R][T][2];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[r][t][0] = acc[r][t][1] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    const float* pb = p + b * R * 32;
    const float* xb = x + 32 * b;
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      // One half-block (16 weights) of every row against every token: R
      // weight and one activation register live besides the accumulators.
      __m512 wv[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        wv[r] = _mm512_load_ps(pb + r * 32 + 16 * h);
        // Keep the weights in registers: folded into each fma as memory
        // operands they would be loaded T times, and loads are the limit.
        asm("" : "+v"(wv[r]));
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        __m512 xv = _mm512_loadu_ps(xb + t * x_stride + 16 * h);
        asm("" : "+v"(xv));
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) acc[r][t][h] = _mm512_fmadd_ps(wv[r], xv, acc[r][t][h]);
      }
    }
  }
  ReduceTile<R, T>(acc, out, out_stride);
}

template <typename F, int T>
RILL_TARGET_AVX512 void DirectRows(const uint8_t* w, size_t w_stride, int64_t nr, const float* x, size_t x_stride,
                int64_t nb, float* out, size_t out_stride) {
  int64_t r = 0;
  for (; r + kRows <= nr; r += kRows) {
    DirectTile<F, kRows, T>(w + r * w_stride, w_stride, x, x_stride, nb, out + r, out_stride);
  }
  const uint8_t* wr = w + r * w_stride;
  switch (nr - r) {
    case 3: return DirectTile<F, 3, T>(wr, w_stride, x, x_stride, nb, out + r, out_stride);
    case 2: return DirectTile<F, 2, T>(wr, w_stride, x, x_stride, nb, out + r, out_stride);
    case 1: return DirectTile<F, 1, T>(wr, w_stride, x, x_stride, nb, out + r, out_stride);
    default: return;
  }
}

// Every token of the call against one row group of R rows: tokens in tiles
// of kPanelTokens, then a 2- or 1-token tail.
template <int R>
RILL_TARGET_AVX512 void PanelGroup(const float* p, const float* x, size_t x_stride, int64_t nt,
                                   int64_t nb, float* out, size_t out_stride) {
  int64_t t = 0;
  for (; t + kPanelTokens <= nt; t += kPanelTokens) {
    PanelTile<R, kPanelTokens>(p, x + t * x_stride, x_stride, nb, out + t * out_stride,
                               out_stride);
  }
  if (nt - t == 2) {
    PanelTile<R, 2>(p, x + t * x_stride, x_stride, nb, out + t * out_stride, out_stride);
  } else if (nt - t == 1) {
    PanelTile<R, 1>(p, x + t * x_stride, x_stride, nb, out + t * out_stride, out_stride);
  }
}

// Expands g rows into the group layout PanelTile reads ([b][r][32]).
template <typename F>
RILL_TARGET_AVX512 void ExpandGroup(const uint8_t* w, size_t w_stride, int g, int64_t nb,
                                    float* p) {
  using Block = typename F::Block;
  for (int r = 0; r < g; ++r) {
    const Block* wb = reinterpret_cast<const Block*>(w + r * w_stride);
    for (int64_t b = 0; b < nb; ++b) {
      // The same row two groups on, which the hardware prefetcher misses
      // (short rows, read one group at a time; from DRAM in a forward pass).
      _mm_prefetch(reinterpret_cast<const char*>(wb + b) + 2 * kPanelRows * w_stride,
                   _MM_HINT_T0);
      __m512 lo, hi;
      F::Expand(wb[b], &lo, &hi);
      _mm512_store_ps(p + (b * g + r) * 32, lo);
      _mm512_store_ps(p + (b * g + r) * 32 + 16, hi);
    }
  }
}

template <typename F>
RILL_TARGET_AVX512 void Chunk(const uint8_t* w, size_t w_stride, int64_t nr, const float* x,
                              int64_t nt, int64_t cols, float* out, size_t out_stride) {
  const int64_t nb = cols / 32;
  const size_t x_stride = cols;
  if (nt < kPanelMinTokens) {
    if (nt == 2) return DirectRows<F, 2>(w, w_stride, nr, x, x_stride, nb, out, out_stride);
    return DirectRows<F, 1>(w, w_stride, nr, x, x_stride, nb, out, out_stride);
  }
  // One row group at a time: its expanded weights (kPanelRows rows, 9 KiB
  // at 576 columns) stay in L1 while every token tile of the call streams
  // past them. 64-byte aligned: a zmm load that straddles two lines costs two.
  thread_local std::vector<float> panel_buf;
  panel_buf.resize(kPanelRows * cols + 16);
  float* panel = AlignTo64(panel_buf.data());
  for (int64_t r = 0; r < nr; r += kPanelRows) {
    const int g = static_cast<int>(std::min<int64_t>(kPanelRows, nr - r));
    const uint8_t* wr = w + r * w_stride;
    ExpandGroup<F>(wr, w_stride, g, nb, panel);
    float* o = out + r;
    switch (g) {
      case 4: PanelGroup<4>(panel, x, x_stride, nt, nb, o, out_stride); break;
      case 3: PanelGroup<3>(panel, x, x_stride, nt, nb, o, out_stride); break;
      case 2: PanelGroup<2>(panel, x, x_stride, nt, nb, o, out_stride); break;
      default: PanelGroup<1>(panel, x, x_stride, nt, nb, o, out_stride); break;
    }
  }
}

}  // namespace

ChunkKernel Avx512ChunkF32Act(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0: return Chunk<Q4_0X>;
    case GgmlType::kQ4_1: return Chunk<Q4_1X>;
    case GgmlType::kQ8_0: return Chunk<Q8_0X>;
    default: return nullptr;
  }
}

}  // namespace rill::kernels::cpu::internal
