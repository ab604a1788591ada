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
#include "kernels/cpu/paged_attention_block.h"

#define RILL_TARGET_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))

namespace rill::cpu::internal {
namespace {

constexpr int kLanes = 16;

RILL_TARGET_AVX512 inline __m512 Load16(const float* p) { return _mm512_loadu_ps(p); }
RILL_TARGET_AVX512 inline __m512 Load16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// exp(x) 16 wide: ExpPs (avx2_math.h) on each half, so a score's weight is
// bitwise what the 8-wide kernel computes (the exponentials are a small
// part of a block: one call per 16 keys).
RILL_TARGET_AVX512 inline __m512 Exp16(__m512 x) {
  const __m256 lo = ExpPs(_mm512_castps512_ps256(x));
  const __m256 hi = ExpPs(_mm512_extractf32x8_ps(x, 1));
  return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
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

// Scores of keys [j0, j0 + n) (n <= 16) in lanes 0..n-1; lanes past n are
// -inf. Each key: two fma chains over 16-dim pieces, then SumEach16.
template <typename T>
RILL_TARGET_AVX512 __m512 Scores16(const float* q, const T* kb, int64_t row, int j0, int n,
                                   int hd, float scale) {
  __m512 s[kLanes];
#pragma GCC unroll 16
  for (int j = 0; j < kLanes; ++j) {
    if (j >= n) {
      s[j] = _mm512_setzero_ps();
      continue;
    }
    const T* k = kb + (j0 + j) * row;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    int d = 0;
    for (; d + 32 <= hd; d += 32) {
      a0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + d), Load16(k + d), a0);
      a1 = _mm512_fmadd_ps(_mm512_loadu_ps(q + d + 16), Load16(k + d + 16), a1);
    }
    if (d < hd) a0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + d), Load16(k + d), a0);
    s[j] = _mm512_add_ps(a0, a1);
  }
  const __m512 sc = _mm512_mul_ps(SumEach16(s), _mm512_set1_ps(scale));
  const __mmask16 valid = static_cast<__mmask16>((1u << n) - 1);
  return _mm512_mask_blend_ps(valid, _mm512_set1_ps(-std::numeric_limits<float>::infinity()), sc);
}

template <typename T>
RILL_TARGET_AVX512 void BlockUpdate(const float* q, const T* kb, const T* vb, int64_t row,
                                    int cnt, int hd, float scale, float* scores, float* m,
                                    float* l, float* acc) {
  // Scores into scores[0, cnt), 16 keys at a time, and their max.
  __m512 vmax = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int j0 = 0; j0 < cnt; j0 += kLanes) {
    const int n = cnt - j0 < kLanes ? cnt - j0 : kLanes;
    const __m512 sc = Scores16(q, kb, row, j0, n, hd, scale);
    vmax = _mm512_max_ps(vmax, sc);
    _mm512_mask_storeu_ps(scores + j0, static_cast<__mmask16>((1u << n) - 1), sc);
  }
  const float bm = _mm512_reduce_max_ps(vmax);
  const float m_new = *m > bm ? *m : bm;
  const float c = __builtin_expf(*m - m_new);  // 0 on the first block (m = -inf)
  const __m512 vm = _mm512_set1_ps(m_new);
  __m512 vsum = _mm512_setzero_ps();
  for (int j0 = 0; j0 < cnt; j0 += kLanes) {
    const int n = cnt - j0 < kLanes ? cnt - j0 : kLanes;
    const __mmask16 valid = static_cast<__mmask16>((1u << n) - 1);
    const __m512 p =
        _mm512_maskz_mov_ps(valid, Exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(valid, scores + j0), vm)));
    _mm512_mask_storeu_ps(scores + j0, valid, p);
    vsum = _mm512_add_ps(vsum, p);
  }
  *l = *l * c + _mm512_reduce_add_ps(vsum);
  *m = m_new;
  // acc = c * acc + sum_j p_j V_j, 16 dims at a time with even and odd keys
  // in separate chains.
  const __m512 vc = _mm512_set1_ps(c);
  for (int d = 0; d < hd; d += kLanes) {
    __m512 even = _mm512_mul_ps(_mm512_loadu_ps(acc + d), vc);
    __m512 odd = _mm512_setzero_ps();
    int j = 0;
    for (; j + 2 <= cnt; j += 2) {
      even = _mm512_fmadd_ps(_mm512_set1_ps(scores[j]), Load16(vb + j * row + d), even);
      odd = _mm512_fmadd_ps(_mm512_set1_ps(scores[j + 1]), Load16(vb + (j + 1) * row + d), odd);
    }
    if (j < cnt) even = _mm512_fmadd_ps(_mm512_set1_ps(scores[j]), Load16(vb + j * row + d), even);
    _mm512_storeu_ps(acc + d, _mm512_add_ps(even, odd));
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

}  // namespace rill::cpu::internal
