// The exact path's AVX2 MatMul over weights interleaved 8 rows per ymm
// (packed_matmul.h, Format::k4BitInterleaved8 / k8BitInterleaved8): the
// default exact path on every AVX2 CPU; where the CPU has AVX-512, every
// call runs the zmm tiles of interleaved_matmul_avx512.cc instead (direct
// and panel), with the same per-lane recipe.
//
// Why: with a row's weights across the lanes (dot_f32act_avx2.cc) every
// 32-weight block costs a d*q+m expansion, a d/m broadcast and a horizontal
// sum per row; at batch 1 those, not the memory, bound the step. With one
// lane per row, the block's integers meet broadcast activations directly and
// d and m apply once per block: d * sum(q x) + m * sum(x).
//
// Per (row, token), i.e. one lane, the value is fixed by this recipe:
//   for each block b in order:
//     se = fma chain over the even j (q_j * x_j, j ascending, from 0)
//     so = the same over the odd j
//     acc = fma(d, se + so, acc)
//     formats with a min: acc = fma(m, SX_b, acc), SX_b = BlockSum(token's block b)
// (Sub16 formats, Q6_K and Q3_K: q_j is the integer times its 16-column
// scale, an exact float; the F32Scaled formats, Q4_K, Q5_K and Q5_1, read
// d and m as f32; Q2_K: q_j is the weight's float, fma(q, d * s, dmin * n)
// per 16 columns as DequantizeRow rounds it, and d = 1.)
// acc starts at 0 and is the output (no horizontal sum). The direct tiles
// (weights widened in registers; 1 or 2 tokens, up to 8 on AVX-512) and the
// panel tiles (weights expanded once per call to f32; more tokens) both follow it, so the
// result is bitwise the same at any batch size, tile or thread count.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/avx2_util.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/interleaved_tiles.h"
#include "kernels/cpu/matmul_internal.h"
#include "kernels/cpu/packed_matmul.h"
#include "kernels/cpu/quant_matmul.h"

namespace rill::kernels::cpu::internal {
namespace {

constexpr int kLanes = kInterleavedLanes;
// Direct tiles: groups per tile (1 token: 4 groups, 8 independent fma
// chains, enough to hide the fma latency; 2 tokens: 2 groups).
constexpr int kDirectGroups = 4;
// Panel tiles: 2 groups x 3 tokens (12 chain registers, 2 weight loads and 3
// broadcasts per 6 fma: the fma ports are the limit).
constexpr int kPanelGroups = 2;
constexpr int kPanelTokens = 3;
// From this many tokens on, a piece's groups are expanded once into an f32
// panel that every token tile reuses.
constexpr int64_t kPanelMinTokens = 3;
// Floats per (group, block) in the panel: q[32][8], then d[8] and m[8].
constexpr int64_t kPanelBlockFloats = 32 * kLanes + 2 * kLanes;
// Activation bytes per token block of a long call (as ChunkMatMul: the
// block's activations stay in L2 while every piece streams past them).
constexpr int64_t kTokenBlockBytes = int64_t{256} << 10;

RILL_TARGET_AVX2 inline float BlockSum(const float* x) {
  const __m256 a = _mm256_add_ps(_mm256_loadu_ps(x), _mm256_loadu_ps(x + 8));
  const __m256 b = _mm256_add_ps(_mm256_loadu_ps(x + 16), _mm256_loadu_ps(x + 24));
  return HsumPs(_mm256_add_ps(a, b));
}

RILL_TARGET_AVX2 inline void StoreLanes(__m256 v, float* out, int valid) {
  if (valid == kLanes) {
    _mm256_storeu_ps(out, v);
    return;
  }
  alignas(32) float tmp[kLanes];
  _mm256_store_ps(tmp, v);
  std::memcpy(out, tmp, valid * sizeof(float));
}

// R groups from group g x T tokens, weights widened in registers.
template <Format F, int R, int T>
RILL_TARGET_AVX2 void DirectTile(const Operands& o, int64_t g) {
  const uint8_t* gw[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) gw[r] = o.data + (g + r) * o.group_bytes;
  // One pointer per token (indexing x + t * cols in the loop costs a
  // multiply per broadcast).
  const float* xt[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) xt[t] = o.x + t * o.cols;
  __m256 acc[R][T];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < o.nb; ++b) {
    __m256 se[R][T], so[R][T];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      // Decode streams the weights from DRAM: the same block of the next
      // tile's groups (R groups on, contiguous), every line of it.
      const char* next =
          reinterpret_cast<const char*>(gw[r] + R * o.group_bytes + b * o.block_bytes);
      for (size_t line = 0; line < o.block_bytes; line += 64) {
        _mm_prefetch(next + line, _MM_HINT_T0);
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) se[r][t] = so[r][t] = _mm256_setzero_ps();
    }
    const size_t off = b * o.block_bytes;
#pragma GCC unroll 16
    for (int p = 0; p < 16; ++p) {
      __m256 xe[T], xo[T];
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        xe[t] = _mm256_broadcast_ss(xt[t] + 32 * b + 2 * p);
        xo[t] = _mm256_broadcast_ss(xt[t] + 32 * b + 2 * p + 1);
      }
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        __m256 qe, qo;
        WidenPair<F>(gw[r] + off, p, &qe, &qo);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          se[r][t] = _mm256_fmadd_ps(qe, xe[t], se[r][t]);
          so[r][t] = _mm256_fmadd_ps(qo, xo[t], so[r][t]);
        }
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const uint8_t* blk = gw[r] + off;
      const __m256 d = LoadScales<F>(blk + InterleavedDOffset(F));
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        acc[r][t] = _mm256_fmadd_ps(d, _mm256_add_ps(se[r][t], so[r][t]), acc[r][t]);
      }
      if constexpr (InterleavedHasMin(F)) {
        const __m256 m = LoadScales<F>(blk + InterleavedMOffset(F));
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          acc[r][t] =
              _mm256_fmadd_ps(m, _mm256_broadcast_ss(o.sx + t * o.nb + b), acc[r][t]);
        }
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    const int64_t row = (g + r) * kLanes;
    const int valid = static_cast<int>(std::min<int64_t>(kLanes, o.rows - row));
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) StoreLanes(acc[r][t], o.y + t * o.rows + row, valid);
  }
}

// Groups [g0, g1) x T tokens in tiles of kDirectGroups, then smaller ones.
template <Format F, int T>
RILL_TARGET_AVX2 void DirectGroups(const Operands& o, int64_t g0, int64_t g1) {
  constexpr int R = T == 1 ? kDirectGroups : kDirectGroups / 2;
  int64_t g = g0;
  for (; g + R <= g1; g += R) DirectTile<F, R, T>(o, g);
  for (; g + 2 <= g1; g += 2) DirectTile<F, 2, T>(o, g);
  for (; g < g1; ++g) DirectTile<F, 1, T>(o, g);
}

// Expands groups [g0, g0 + n) to the panel layout: per (group, block)
// float(q) [32][8], d[8], m[8] (m = 0 for 8-bit).
template <Format F>
RILL_TARGET_AVX2 void ExpandPanel(const Operands& o, int64_t g0, int n, float* panel) {
  for (int i = 0; i < n; ++i) {
    const uint8_t* gw = o.data + (g0 + i) * o.group_bytes;
    for (int64_t b = 0; b < o.nb; ++b) {
      const uint8_t* blk = gw + b * o.block_bytes;
      float* dst = panel + (i * o.nb + b) * kPanelBlockFloats;
      if constexpr (InterleavedTwoBit(F)) {
        // The stores may alias the block: Q2_K's scales are read once per half.
        for (int h = 0; h < 2; ++h) {
          __m256 ds, dm;
          Q2KHalfScales(blk, h, &ds, &dm);
          for (int p = 8 * h; p < 8 * h + 8; ++p) {
            __m256 qe, qo;
            WidenQ2KPair(blk, p, ds, dm, &qe, &qo);
            _mm256_store_ps(dst + kLanes * (2 * p), qe);
            _mm256_store_ps(dst + kLanes * (2 * p + 1), qo);
          }
        }
      } else {
        for (int p = 0; p < 16; ++p) {
          __m256 qe, qo;
          WidenPair<F>(blk, p, &qe, &qo);
          _mm256_store_ps(dst + kLanes * (2 * p), qe);
          _mm256_store_ps(dst + kLanes * (2 * p + 1), qo);
        }
      }
      _mm256_store_ps(dst + 32 * kLanes, LoadScales<F>(blk + InterleavedDOffset(F)));
      if constexpr (InterleavedHasMin(F)) {
        _mm256_store_ps(dst + 33 * kLanes, LoadScales<F>(blk + InterleavedMOffset(F)));
      } else {
        _mm256_store_ps(dst + 33 * kLanes, _mm256_setzero_ps());
      }
    }
  }
}

// R panel groups (the i-th at panel + i * nb blocks) x T tokens.
template <Format F, int R, int T>
RILL_TARGET_AVX2 void PanelTile(const Operands& o, const float* panel, int64_t g) {
  alignas(32) float acc[R][T][kLanes] = {};
  const float* pg[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) pg[r] = panel + r * o.nb * kPanelBlockFloats;
  const float* xt[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) xt[t] = o.x + t * o.cols;
  for (int64_t b = 0; b < o.nb; ++b) {
    __m256 se[R][T], so[R][T];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) se[r][t] = so[r][t] = _mm256_setzero_ps();
    }
#pragma GCC unroll 16
    for (int p = 0; p < 16; ++p) {
      __m256 w[R];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        w[r] = _mm256_load_ps(pg[r] + b * kPanelBlockFloats + kLanes * (2 * p));
        asm("" : "+x"(w[r]));  // one load, reused by every token
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m256 xv = _mm256_broadcast_ss(xt[t] + 32 * b + 2 * p);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) se[r][t] = _mm256_fmadd_ps(w[r], xv, se[r][t]);
      }
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        w[r] = _mm256_load_ps(pg[r] + b * kPanelBlockFloats + kLanes * (2 * p + 1));
        asm("" : "+x"(w[r]));
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const __m256 xv = _mm256_broadcast_ss(xt[t] + 32 * b + 2 * p + 1);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) so[r][t] = _mm256_fmadd_ps(w[r], xv, so[r][t]);
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const float* dm = pg[r] + b * kPanelBlockFloats + 32 * kLanes;
      const __m256 d = _mm256_load_ps(dm);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        __m256 a = _mm256_load_ps(acc[r][t]);
        a = _mm256_fmadd_ps(d, _mm256_add_ps(se[r][t], so[r][t]), a);
        if constexpr (InterleavedHasMin(F)) {
          a = _mm256_fmadd_ps(_mm256_load_ps(dm + kLanes), _mm256_broadcast_ss(o.sx + t * o.nb + b),
                              a);
        }
        _mm256_store_ps(acc[r][t], a);
      }
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
    const int64_t row = (g + r) * kLanes;
    const int valid = static_cast<int>(std::min<int64_t>(kLanes, o.rows - row));
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      StoreLanes(_mm256_load_ps(acc[r][t]), o.y + t * o.rows + row, valid);
    }
  }
}

// T tokens of o against the n expanded groups from g0.
template <Format F, int T>
RILL_TARGET_AVX2 void PanelGroups(const Operands& o, const float* panel, int64_t g0, int n) {
  int i = 0;
  for (; i + kPanelGroups <= n; i += kPanelGroups) {
    PanelTile<F, kPanelGroups, T>(o, panel + i * o.nb * kPanelBlockFloats, g0 + i);
  }
  for (; i < n; ++i) PanelTile<F, 1, T>(o, panel + i * o.nb * kPanelBlockFloats, g0 + i);
}

// nt tokens of o (any count) against groups [g0, g0 + n) through a panel.
template <Format F>
RILL_TARGET_AVX2 void PanelPiece(Operands o, int64_t g0, int n, int64_t nt) {
  thread_local std::vector<float, Aligned64Allocator<float>> panel_buf;
  panel_buf.resize(n * o.nb * kPanelBlockFloats);
  float* panel = panel_buf.data();
  ExpandPanel<F>(o, g0, n, panel);
  int64_t t = 0;
  for (; t + kPanelTokens <= nt; t += kPanelTokens) {
    PanelGroups<F, kPanelTokens>(o, panel, g0, n);
    o.x += kPanelTokens * o.cols;
    o.sx += kPanelTokens * o.nb;
    o.y += kPanelTokens * o.rows;
  }
  switch (nt - t) {
    case 2: return PanelGroups<F, 2>(o, panel, g0, n);
    case 1: return PanelGroups<F, 1>(o, panel, g0, n);
    default: return;
  }
}

template <Format F>
RILL_TARGET_AVX2 void Piece(const Operands& o, int64_t g0, int64_t g1, int64_t nt, bool avx512,
                            bool panel) {
  if (panel) {
    if (avx512) return InterleavedPanelPieceAvx512(F, o, g0, g1, nt);
    return PanelPiece<F>(o, g0, static_cast<int>(g1 - g0), nt);
  }
  if (avx512) return InterleavedDirectPieceAvx512(F, o, g0, g1, nt);
  if (nt == 2) return DirectGroups<F, 2>(o, g0, g1);
  return DirectGroups<F, 1>(o, g0, g1);
}

}  // namespace

RILL_TARGET_AVX2 void InterleavedMatMul(const PackedWeights* const* ws, float* const* ys,
                                        int count, const float* x, int64_t n_tokens,
                                        ThreadPool* pool) {
  if (n_tokens <= 0 || count <= 0) return;
  const int64_t cols = ws[0]->cols;
  const int64_t nb = cols / 32;
  // Block sums of every token (only the formats with a min read them), computed
  // once for all the matrices.
  thread_local std::vector<float> sx_buf;
  sx_buf.resize(n_tokens * nb);
  float* sx = sx_buf.data();
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t b = 0; b < nb; ++b) sx[t * nb + b] = BlockSum(x + t * cols + 32 * b);
  }
  // Pieces of every matrix, numbered one after another: decode pieces are
  // direct tiles' worth of groups, batch pieces are one panel's.
  const bool avx512 = UseAvx512();
  const bool panel = n_tokens >= (avx512 ? kAvx512DirectMaxTokens + 1 : kPanelMinTokens);
  const int64_t piece_groups =
      !panel ? kDirectGroups : (avx512 ? kAvx512PanelGroups : kPanelGroups);
  int64_t first_piece[kMaxSharedTargets + 1];
  first_piece[0] = 0;
  for (int i = 0; i < count; ++i) {
    first_piece[i + 1] = first_piece[i] + (ws[i]->groups + piece_groups - 1) / piece_groups;
  }
  const int64_t block =
      panel ? std::max<int64_t>(24, kTokenBlockBytes / (cols * 4) / kPanelTokens * kPanelTokens)
            : n_tokens;
  for (int64_t t0 = 0; t0 < n_tokens; t0 += block) {
    const int64_t nt = std::min(block, n_tokens - t0);
    ForRowPieces(pool, first_piece[count], nt, [&](int64_t cb, int64_t ce) {
      int i = 0;
      for (int64_t c = cb; c < ce; ++c) {
        while (c >= first_piece[i + 1]) ++i;
        const PackedWeights& w = *ws[i];
        const Operands o{w.data.data(), w.block_bytes, nb * w.block_bytes, nb, w.rows,
                         x + t0 * cols, cols, sx + t0 * nb, ys[i] + t0 * w.rows};
        const int64_t g0 = (c - first_piece[i]) * piece_groups;
        const int64_t g1 = std::min(w.groups, g0 + piece_groups);
        switch (w.format) {
          case Format::k4BitInterleaved8:
            Piece<Format::k4BitInterleaved8>(o, g0, g1, nt, avx512, panel);
            break;
          case Format::k8BitInterleaved8:
            Piece<Format::k8BitInterleaved8>(o, g0, g1, nt, avx512, panel);
            break;
          case Format::k4BitF32ScaledInterleaved8:
            Piece<Format::k4BitF32ScaledInterleaved8>(o, g0, g1, nt, avx512, panel);
            break;
          case Format::k8BitF32ScaledInterleaved8:
            Piece<Format::k8BitF32ScaledInterleaved8>(o, g0, g1, nt, avx512, panel);
            break;
          case Format::k8BitSub16Interleaved8:
            Piece<Format::k8BitSub16Interleaved8>(o, g0, g1, nt, avx512, panel);
            break;
          case Format::k2BitSub16MinInterleaved8:
            Piece<Format::k2BitSub16MinInterleaved8>(o, g0, g1, nt, avx512, panel);
            break;
          default: break;  // not an interleaved format (MatMul never sends one)
        }
      }
    });
  }
}

}  // namespace rill::kernels::cpu::internal
