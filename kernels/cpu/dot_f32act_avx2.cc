// AVX2 kernels for quantized weights against f32 activations (the exact
// path, WeightMatrix::float_activations), working on a chunk of rows and all
// the tokens of a call at once, so nothing is dequantized to memory beyond an
// L1-resident panel and activations keep full precision.
//
// Every (row, token) pair is computed the same way whatever the tile: one
// 8-lane accumulator, the block's four 8-weight quarters in order, blocks in
// order, then HsumPs. A weight expands to the same float whether it is
// expanded in registers or into the panel, so small calls (decode) and large
// ones (prefill, batched decode) agree bit for bit and MatMul stays batch
// invariant.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/avx2_util.h"
#include "kernels/cpu/matmul_internal.h"

namespace rill::kernels::cpu::internal {
namespace {

// Register tiles (of 16 ymm registers). From the panel: 2 rows x 6 tokens,
// 12 accumulators, 2 weight and 1 activation register, 8 loads per 12 fma
// (two loads and two fma issue per cycle, so the fma ports are the limit).
// Expanding in registers (1 or 2 tokens): 4 rows, whose independent
// accumulator chains hide the fma latency.
constexpr int kPanelRows = 2;
constexpr int kPanelTokens = 6;
constexpr int kDirectRows = 4;
// From this many tokens on, each group of kPanelRows rows is expanded once
// per call into an f32 panel that every token tile reuses; below it, the
// weights are expanded in registers.
constexpr int64_t kPanelMinTokens = 3;

// The block's 32 weights as four vectors of 8 floats (w[k] = weights 8k..8k+7).
//
// The 4-bit formats widen 8 bytes at a time straight from memory: a byte b
// widened to 32 bits gives its low nibble as b & 15 and its high one as
// b >> 4, with no shuffles to split the register (weights j and j + 16 share
// byte j).
RILL_TARGET_AVX2 inline void WidenNibbles(const uint8_t* qs, __m256i q[4]) {
  const __m256i b0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(qs)));
  const __m256i b1 =
      _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(qs + 8)));
  const __m256i mask = _mm256_set1_epi32(0x0F);
  q[0] = _mm256_and_si256(b0, mask);
  q[1] = _mm256_and_si256(b1, mask);
  q[2] = _mm256_srli_epi32(b0, 4);
  q[3] = _mm256_srli_epi32(b1, 4);
}

struct Q4_1F {
  using Block = BlockQ4_1;
  RILL_TARGET_AVX2 static inline void Expand(const Block& b, __m256 w[4]) {
    __m256i q[4];
    WidenNibbles(b.qs, q);
    // d and m (adjacent halves) in one load and one conversion.
    uint32_t dm_bits;
    std::memcpy(&dm_bits, &b.d, sizeof(dm_bits));
    const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(dm_bits)));
    const __m256 d = _mm256_broadcastss_ps(dm);
    const __m256 m = _mm256_broadcastss_ps(_mm_movehdup_ps(dm));
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) w[k] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(q[k]), m);
  }
};

struct Q4_0F {
  using Block = BlockQ4_0;
  RILL_TARGET_AVX2 static inline void Expand(const Block& b, __m256 w[4]) {
    __m256i q[4];
    WidenNibbles(b.qs, q);
    const float df = HalfToFloat(b.d);
    const __m256 d = _mm256_set1_ps(df);
    // d * q - 8 d == d * (q - 8) exactly: -8 d is exact and q - 8 too.
    const __m256 off = _mm256_set1_ps(-8.0f * df);
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) w[k] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(q[k]), off);
  }
};

struct Q8_0F {
  using Block = BlockQ8_0;
  RILL_TARGET_AVX2 static inline void Expand(const Block& b, __m256 w[4]) {
    const __m256 d = _mm256_set1_ps(HalfToFloat(b.d));
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + 8 * k));
      w[k] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)));
    }
  }
};

float* AlignTo32(float* p) {
  return reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(p) + 31) & ~uintptr_t{31});
}

// R rows x T tokens, weights expanded in registers block by block.
template <typename F, int R, int T>
RILL_TARGET_AVX2 void DirectTile(const uint8_t* w, size_t w_stride, const float* x,
                                 size_t x_stride, int64_t nb, float* out, size_t out_stride) {
  using Block = typename F::Block;
  const Block* wb[R];
  for (int r = 0; r < R; ++r) wb[r] = reinterpret_cast<const Block*>(w + r * w_stride);
  __m256 acc[R][T];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      // The next tile's rows, which the hardware prefetcher misses when it
      // sees R interleaved short streams (decode reads weights from DRAM).
      _mm_prefetch(reinterpret_cast<const char*>(wb[r] + b) + 2 * R * w_stride, _MM_HINT_T0);
      __m256 wv[4];
      F::Expand(wb[r][b], wv);
#pragma GCC unroll 2
      for (int t = 0; t < T; ++t) {
        const float* xb = x + t * x_stride + 32 * b;
#pragma GCC unroll 4
        for (int k = 0; k < 4; ++k) {
          acc[r][t] = _mm256_fmadd_ps(wv[k], _mm256_loadu_ps(xb + 8 * k), acc[r][t]);
        }
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) out[t * out_stride + r] = HsumPs(acc[r][t]);
  }
}

// Rows in tiles of R, then R/2, ... 1 (the same per-row operations in any).
template <typename F, int R, int T>
RILL_TARGET_AVX2 void DirectRows(const uint8_t* w, size_t w_stride, int64_t nr, const float* x,
                                 size_t x_stride, int64_t nb, float* out, size_t out_stride) {
  int64_t r = 0;
  for (; r + R <= nr; r += R) {
    DirectTile<F, R, T>(w + r * w_stride, w_stride, x, x_stride, nb, out + r, out_stride);
  }
  if constexpr (R > 1) {
    DirectRows<F, R / 2, T>(w + r * w_stride, w_stride, nr - r, x, x_stride, nb, out + r,
                            out_stride);
  }
}

// R rows x T tokens from a row group of the f32 panel: block b holds the R
// rows' 32 weights each, [b][r][32], so the tile reads one sequential stream
// of weights (L1 resident: the group is re-read by every token tile) and T
// token streams.
template <int R, int T>
RILL_TARGET_AVX2 void PanelTile(const float* p, const float* x, size_t x_stride, int64_t nb,
                                float* out, size_t out_stride) {
  // One pointer per token stream, advanced a block at a time: indexing them
  // as x + t * x_stride lets GCC hoist a register per (token, quarter)
  // offset, and the spills then cost more than the fma.
  const float* xt[T];
#pragma GCC unroll 6
  for (int t = 0; t < T; ++t) xt[t] = x + t * x_stride;
  __m256 acc[R][T];
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 6
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b, p += R * 32) {
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      // One quarter (8 weights) of every row against every token.
      __m256 wv[R];
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r) {
        wv[r] = _mm256_load_ps(p + r * 32 + 8 * k);
        // Keep the weights in registers: folded into each fma as memory
        // operands they would be loaded T times, and loads would be the limit.
        asm("" : "+x"(wv[r]));
      }
#pragma GCC unroll 6
      for (int t = 0; t < T; ++t) {
        __m256 xv = _mm256_loadu_ps(xt[t] + 8 * k);
        asm("" : "+x"(xv));  // one load, used by every row
#pragma GCC unroll 2
        for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], xv, acc[r][t]);
      }
    }
#pragma GCC unroll 6
    for (int t = 0; t < T; ++t) xt[t] += 32;
  }
  for (int t = 0; t < T; ++t) {
    for (int r = 0; r < R; ++r) out[t * out_stride + r] = HsumPs(acc[r][t]);
  }
}

// A token tile of T tokens against every row group of the expanded chunk
// (groups of kPanelRows rows, gsize floats apart; a last, smaller group).
template <int T>
RILL_TARGET_AVX2 void TokenTile(const float* panel, size_t gsize, int64_t nr, const float* x,
                                size_t x_stride, int64_t nb, float* out, size_t out_stride) {
  int64_t r = 0;
  for (; r + kPanelRows <= nr; r += kPanelRows) {
    PanelTile<kPanelRows, T>(panel + (r / kPanelRows) * gsize, x, x_stride, nb, out + r,
                             out_stride);
  }
  const float* pg = panel + (r / kPanelRows) * gsize;
  switch (nr - r) {
    case 3: return PanelTile<3, T>(pg, x, x_stride, nb, out + r, out_stride);
    case 2: return PanelTile<2, T>(pg, x, x_stride, nb, out + r, out_stride);
    case 1: return PanelTile<1, T>(pg, x, x_stride, nb, out + r, out_stride);
    default: return;
  }
}

// Expands g rows into the group layout PanelTile reads ([b][r][32]).
template <typename F>
RILL_TARGET_AVX2 void ExpandGroup(const uint8_t* w, size_t w_stride, int g, int64_t nb, float* p) {
  using Block = typename F::Block;
  for (int r = 0; r < g; ++r) {
    const Block* wb = reinterpret_cast<const Block*>(w + r * w_stride);
    for (int64_t b = 0; b < nb; ++b) {
      // The same row two groups on (short rows read one group at a time; from
      // DRAM in a forward pass).
      _mm_prefetch(reinterpret_cast<const char*>(wb + b) + 2 * kPanelRows * w_stride,
                   _MM_HINT_T0);
      __m256 wv[4];
      F::Expand(wb[b], wv);
      float* dst = p + (b * g + r) * 32;
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) _mm256_store_ps(dst + 8 * k, wv[k]);
    }
  }
}

template <typename F>
RILL_TARGET_AVX2 void Chunk(const uint8_t* w, size_t w_stride, int64_t nr, const float* x,
                            int64_t nt, int64_t cols, float* out, size_t out_stride) {
  const int64_t nb = cols / 32;
  const size_t x_stride = cols;
  if (nt < kPanelMinTokens) {
    if (nt == 2) {
      return DirectRows<F, kDirectRows, 2>(w, w_stride, nr, x, x_stride, nb, out, out_stride);
    }
    return DirectRows<F, kDirectRows, 1>(w, w_stride, nr, x, x_stride, nb, out, out_stride);
  }
  // The chunk's rows are expanded once into the panel (row groups of
  // kPanelRows, 37 KiB at 16 rows x 576 columns: L2 resident); then each
  // token tile meets every group, so its activations (14 KiB for 6 tokens at
  // 576 columns) stay in L1 and only the weights, read once per 12 fma,
  // come from L2. The other order re-reads all tokens from L2 for every
  // group, at one load per two fma, which L2 cannot feed.
  thread_local std::vector<float> panel_buf;
  const size_t gsize = kPanelRows * cols;
  const int64_t groups = (nr + kPanelRows - 1) / kPanelRows;
  panel_buf.resize(groups * gsize + 8);
  float* panel = AlignTo32(panel_buf.data());
  for (int64_t r = 0; r < nr; r += kPanelRows) {
    const int g = static_cast<int>(std::min<int64_t>(kPanelRows, nr - r));
    ExpandGroup<F>(w + r * w_stride, w_stride, g, nb, panel + (r / kPanelRows) * gsize);
  }
  int64_t t = 0;
  for (; t + kPanelTokens <= nt; t += kPanelTokens) {
    TokenTile<kPanelTokens>(panel, gsize, nr, x + t * x_stride, x_stride, nb,
                            out + t * out_stride, out_stride);
  }
  const float* xt = x + t * x_stride;
  float* ot = out + t * out_stride;
  switch (nt - t) {
    case 5: return TokenTile<5>(panel, gsize, nr, xt, x_stride, nb, ot, out_stride);
    case 4: return TokenTile<4>(panel, gsize, nr, xt, x_stride, nb, ot, out_stride);
    case 3: return TokenTile<3>(panel, gsize, nr, xt, x_stride, nb, ot, out_stride);
    case 2: return TokenTile<2>(panel, gsize, nr, xt, x_stride, nb, ot, out_stride);
    case 1: return TokenTile<1>(panel, gsize, nr, xt, x_stride, nb, ot, out_stride);
    default: return;
  }
}

}  // namespace

ChunkKernel Avx2ChunkF32Act(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0: return Chunk<Q4_0F>;
    case GgmlType::kQ4_1: return Chunk<Q4_1F>;
    case GgmlType::kQ8_0: return Chunk<Q8_0F>;
    default: return nullptr;
  }
}

}  // namespace rill::kernels::cpu::internal
