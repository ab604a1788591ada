// The AVX-512 block update of paged attention (see paged_attention_block.h).
//
// Why a kernel of its own: in a decode step of 32 sequences at 128-256
// tokens of context, attention took a fifth of the time with the AVX2 block
// update, mostly in reducing each key's dot product to a scalar (a
// horizontal sum per key). Here the scores of 16 keys are reduced together
// (a transposing tree of 45 shuffles and adds instead of 16 horizontal
// sums), the exponentials run 16 at a time and the V sum uses two chains
// per 16 dims, so its fma latency is hidden.
#include <immintrin.h>

#include <cstdint>
#include <limits>

#include "kernels/cpu/avx2_math.h"
#include "kernels/cpu/avx512_math.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/paged_attention_block.h"

namespace rill::kernels::cpu::internal {
namespace {

constexpr int kLanes = 16;

RILL_TARGET_AVX512 inline __m512 Load16(const float* p) { return _mm512_loadu_ps(p); }
RILL_TARGET_AVX512 inline __m512 Load16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// Lane j of the result = the sum of v[j]'s 16 lanes, for 16 vectors at once.
RILL_TARGET_AVX512 inline __m512 SumEach16(const __m512 (&v)[kLanes]) {
  // Pairs: within each 128-bit lane, positions 0 and 2 hold v[2i]'s partial
  // sums, 1 and 3 v[2i + 1]'s.
  __m512 w[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    w[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]),
                         _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  }
  // Quads: 128-bit lane k holds [v[4i] .. v[4i + 3]]'s sums over lane k.
  __m512 x[4];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    x[i] = _mm512_add_ps(_mm512_shuffle_ps(w[2 * i], w[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(w[2 * i], w[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // Across 128-bit lanes: [lanes 0+1, lanes 2+3] of two quads, then all four.
  __m512 y[2];
#pragma GCC unroll 2
  for (int i = 0; i < 2; ++i) {
    y[i] = _mm512_add_ps(_mm512_shuffle_f32x4(x[2 * i], x[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(x[2 * i], x[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  }
  return _mm512_add_ps(_mm512_shuffle_f32x4(y[0], y[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(y[0], y[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// The head's q (D 16-dim pieces, D <= kMaxPieces) kept in registers for a
// whole block: a key then costs one load per fma, not two.
constexpr int kMaxPieces = 8;  // head_dim 128

// Scores of keys [j0, j0 + n) (n <= 16) in lanes 0..n-1; lanes past n are
// -inf. Each key's dot product: even 16-dim pieces in one fma chain, odd
// ones in another, then their sum; the 16 sums reduced by SumEach16.
template <typename T, int D>
RILL_TARGET_AVX512 __m512 Scores16(const __m512 (&qv)[kMaxPieces], const T* kb, int64_t row,
                                   int j0, int n, float scale) {
  __m512 s[kLanes];
#pragma GCC unroll 16
  for (int j = 0; j < kLanes; ++j) {
    if (j >= n) {
      s[j] = _mm512_setzero_ps();
      continue;
    }
    const T* k = kb + (j0 + j) * row;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int i = 0; i + 1 < D; i += 2) {
      a0 = _mm512_fmadd_ps(qv[i], Load16(k + 16 * i), a0);
      a1 = _mm512_fmadd_ps(qv[i + 1], Load16(k + 16 * i + 16), a1);
    }
    if constexpr (D % 2 == 1) a0 = _mm512_fmadd_ps(qv[D - 1], Load16(k + 16 * (D - 1)), a0);
    s[j] = _mm512_add_ps(a0, a1);
  }
  const __m512 sc = _mm512_mul_ps(SumEach16(s), _mm512_set1_ps(scale));
  const __mmask16 valid = static_cast<__mmask16>((1u << n) - 1);
  return _mm512_mask_blend_ps(valid, _mm512_set1_ps(-std::numeric_limits<float>::infinity()), sc);
}

// acc[0, 16 D) = c acc + sum_j p_j V_j[0, 16 D): per 16 dims, even keys in
// one chain (from c acc), odd keys in another (from 0), then their sum.
// Keys outer, so each weight is broadcast once for all D pieces.
template <typename T, int D>
RILL_TARGET_AVX512 void WeightedV(const float* p, const T* vb, int64_t row, int cnt, float c,
                                  float* acc) {
  const __m512 vc = _mm512_set1_ps(c);
  __m512 even[D], odd[D];
#pragma GCC unroll 8
  for (int i = 0; i < D; ++i) {
    even[i] = _mm512_mul_ps(_mm512_loadu_ps(acc + 16 * i), vc);
    odd[i] = _mm512_setzero_ps();
  }
  int j = 0;
  for (; j + 2 <= cnt; j += 2) {
    const __m512 pe = _mm512_set1_ps(p[j]), po = _mm512_set1_ps(p[j + 1]);
    const T* ve = vb + j * row;
    const T* vo = ve + row;
#pragma GCC unroll 8
    for (int i = 0; i < D; ++i) {
      even[i] = _mm512_fmadd_ps(pe, Load16(ve + 16 * i), even[i]);
      odd[i] = _mm512_fmadd_ps(po, Load16(vo + 16 * i), odd[i]);
    }
  }
  if (j < cnt) {
    const __m512 pe = _mm512_set1_ps(p[j]);
#pragma GCC unroll 8
    for (int i = 0; i < D; ++i) even[i] = _mm512_fmadd_ps(pe, Load16(vb + j * row + 16 * i), even[i]);
  }
#pragma GCC unroll 8
  for (int i = 0; i < D; ++i) _mm512_storeu_ps(acc + 16 * i, _mm512_add_ps(even[i], odd[i]));
}

template <typename T, int D>
RILL_TARGET_AVX512 void BlockUpdateD(const float* q, const T* kb, const T* vb, int64_t row,
                                     int cnt, float scale, float* scores, float* m, float* l,
                                     float* acc) {
  __m512 qv[kMaxPieces];
#pragma GCC unroll 8
  for (int i = 0; i < D; ++i) qv[i] = _mm512_loadu_ps(q + 16 * i);
  // Scores into scores[0, cnt), 16 keys at a time, and their max.
  __m512 vmax = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int j0 = 0; j0 < cnt; j0 += kLanes) {
    const int n = cnt - j0 < kLanes ? cnt - j0 : kLanes;
    const __m512 sc = Scores16<T, D>(qv, kb, row, j0, n, scale);
    vmax = _mm512_max_ps(vmax, sc);
    _mm512_mask_storeu_ps(scores + j0, static_cast<__mmask16>((1u << n) - 1), sc);
  }
  const float bm = _mm512_reduce_max_ps(vmax);
  const float m_new = *m > bm ? *m : bm;
  // 0 on the first block (m = -inf); exactly 1 (exp(0)) when the max holds,
  // which most blocks of a long context see: no scalar exp then.
  const float c = *m == m_new ? 1.0f : __builtin_expf(*m - m_new);
  const __m512 vm = _mm512_set1_ps(m_new);
  __m512 vsum = _mm512_setzero_ps();
  for (int j0 = 0; j0 < cnt; j0 += kLanes) {
    const int n = cnt - j0 < kLanes ? cnt - j0 : kLanes;
    const __mmask16 valid = static_cast<__mmask16>((1u << n) - 1);
    const __m512 p = _mm512_maskz_mov_ps(
        valid, ExpPs16(_mm512_sub_ps(_mm512_maskz_loadu_ps(valid, scores + j0), vm)));
    _mm512_mask_storeu_ps(scores + j0, valid, p);
    vsum = _mm512_add_ps(vsum, p);
  }
  *l = *l * c + _mm512_reduce_add_ps(vsum);
  *m = m_new;
  WeightedV<T, D>(scores, vb, row, cnt, c, acc);
}

template <typename T>
void BlockUpdate(const float* q, const T* kb, const T* vb, int64_t row, int cnt, int hd,
                 float scale, float* scores, float* m, float* l, float* acc) {
  switch (hd / 16) {
    case 1: return BlockUpdateD<T, 1>(q, kb, vb, row, cnt, scale, scores, m, l, acc);
    case 2: return BlockUpdateD<T, 2>(q, kb, vb, row, cnt, scale, scores, m, l, acc);
    case 3: return BlockUpdateD<T, 3>(q, kb, vb, row, cnt, scale, scores, m, l, acc);
    case 4: return BlockUpdateD<T, 4>(q, kb, vb, row, cnt, scale, scores, m, l, acc);
    case 5: return BlockUpdateD<T, 5>(q, kb, vb, row, cnt, scale, scores, m, l, acc);
    case 6: return BlockUpdateD<T, 6>(q, kb, vb, row, cnt, scale, scores, m, l, acc);
    case 7: return BlockUpdateD<T, 7>(q, kb, vb, row, cnt, scale, scores, m, l, acc);
    case 8: return BlockUpdateD<T, 8>(q, kb, vb, row, cnt, scale, scores, m, l, acc);
    default: break;
  }
}

}  // namespace

void BlockUpdateAvx512(const float* q, const float* kb, const float* vb, int64_t row, int cnt,
                       int hd, float scale, float* scores, float* m, float* l, float* acc) {
  BlockUpdate<float>(q, kb, vb, row, cnt, hd, scale, scores, m, l, acc);
}

void BlockUpdateAvx512(const float* q, const uint16_t* kb, const uint16_t* vb, int64_t row,
                       int cnt, int hd, float scale, float* scores, float* m, float* l,
                       float* acc) {
  BlockUpdate<uint16_t>(q, kb, vb, row, cnt, hd, scale, scores, m, l, acc);
}

}  // namespace rill::kernels::cpu::internal
