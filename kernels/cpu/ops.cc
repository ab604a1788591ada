#include "kernels/cpu/ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <glog/logging.h>

#include "kernels/cpu/avx2_math.h"
#include "kernels/cpu/avx512_math.h"
#include "kernels/cpu/cpu_features.h"

namespace rill::kernels::cpu {
namespace {

using internal::ExpPs;
using internal::ExpPs16;
using internal::HmaxPs8;
using internal::HsumPs8;

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;

// ---- scalar ----

void RmsNormScalar(const float* x, const float* w, int64_t dim, float eps, float* out) {
  float ss = 0.0f;
  for (int64_t i = 0; i < dim; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss / dim + eps);
  for (int64_t i = 0; i < dim; ++i) out[i] = x[i] * inv * (w ? w[i] : 1.0f);
}

void SwiGluScalar(const float* g, const float* u, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

void GeluScalar(const float* x, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    out[i] = 0.5f * v * (1.0f + std::tanh(kGeluC * (v + kGeluA * v * v * v)));
  }
}

void SoftmaxScalar(float* x, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    s += x[i];
  }
  const float inv = 1.0f / s;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

// ---- AVX2 ----

RILL_TARGET_AVX2 void RmsNormAvx2(const float* x, const float* w, int64_t dim, float eps,
                                  float* out) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= dim; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    acc = _mm256_fmadd_ps(v, v, acc);
  }
  float ss = HsumPs8(acc);
  for (; i < dim; ++i) ss += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(ss / dim + eps);
  const __m256 vinv = _mm256_set1_ps(inv);
  i = 0;
  for (; i + 8 <= dim; i += 8) {
    __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), vinv);
    if (w) v = _mm256_mul_ps(v, _mm256_loadu_ps(w + i));
    _mm256_storeu_ps(out + i, v);
  }
  for (; i < dim; ++i) out[i] = x[i] * inv * (w ? w[i] : 1.0f);
}

RILL_TARGET_AVX2 void SwiGluAvx2(const float* g, const float* u, int64_t n, float* out) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 zero = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(g + i);
    const __m256 e = ExpPs(_mm256_sub_ps(zero, v));
    const __m256 s = _mm256_div_ps(v, _mm256_add_ps(one, e));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(s, _mm256_loadu_ps(u + i)));
  }
  SwiGluScalar(g + i, u + i, n - i, out + i);
}

RILL_TARGET_AVX2 void GeluAvx2(const float* x, int64_t n, float* out) {
  // 0.5 (1 + tanh(z)) = 1 / (1 + exp(-2z)).
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 c2 = _mm256_set1_ps(-2.0f * kGeluC);
  const __m256 a = _mm256_set1_ps(kGeluA);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 inner = _mm256_fmadd_ps(_mm256_mul_ps(a, v), _mm256_mul_ps(v, v), v);
    const __m256 e = ExpPs(_mm256_mul_ps(c2, inner));
    _mm256_storeu_ps(out + i, _mm256_div_ps(v, _mm256_add_ps(one, e)));
  }
  GeluScalar(x + i, n - i, out + i);
}

RILL_TARGET_AVX2 void SoftmaxAvx2(float* x, int64_t n) {
  __m256 vm = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) vm = _mm256_max_ps(vm, _mm256_loadu_ps(x + i));
  float m = HmaxPs8(vm);
  for (; i < n; ++i) m = std::max(m, x[i]);
  const __m256 vmax = _mm256_set1_ps(m);
  const __m256 neg_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 acc = _mm256_setzero_ps();
  i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    __m256 e = ExpPs(_mm256_sub_ps(v, vmax));
    e = _mm256_andnot_ps(_mm256_cmp_ps(v, neg_inf, _CMP_EQ_OQ), e);  // exact 0 for -inf
    _mm256_storeu_ps(x + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  float s = HsumPs8(acc);
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    s += x[i];
  }
  const float inv = 1.0f / s;
  const __m256 vinv = _mm256_set1_ps(inv);
  i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vinv));
  for (; i < n; ++i) x[i] *= inv;
}

// Sums of 8 floats per step into double lanes, 16 floats per iteration in
// two independent pairs of chains (a single chain waits on the add latency
// for every 8 values). Fixed order: the result depends only on the input.
struct DoubleLanes {
  __m256d a0, a1, b0, b1;
};

RILL_TARGET_AVX2 inline void ZeroLanes(DoubleLanes* l) {
  l->a0 = l->a1 = l->b0 = l->b1 = _mm256_setzero_pd();
}

RILL_TARGET_AVX2 inline void AddLanes(__m256 v, __m256d* lo, __m256d* hi) {
  *lo = _mm256_add_pd(*lo, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
  *hi = _mm256_add_pd(*hi, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

RILL_TARGET_AVX2 inline double SumLanes(const DoubleLanes& l) {
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, _mm256_add_pd(_mm256_add_pd(l.a0, l.a1), _mm256_add_pd(l.b0, l.b1)));
  return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
}

RILL_TARGET_AVX2 double SumExpShiftedAvx2(const float* x, int64_t n, float m) {
  const __m256 vmax = _mm256_set1_ps(m);
  DoubleLanes acc;
  ZeroLanes(&acc);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    AddLanes(ExpPs(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmax)), &acc.a0, &acc.a1);
    AddLanes(ExpPs(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vmax)), &acc.b0, &acc.b1);
  }
  for (; i + 8 <= n; i += 8) {
    AddLanes(ExpPs(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmax)), &acc.a0, &acc.a1);
  }
  double s = SumLanes(acc);
  for (; i < n; ++i) s += std::exp(static_cast<double>(x[i] - m));
  return s;
}

RILL_TARGET_AVX2 inline __m256 ExpShiftedScaled8(__m256 v, __m256 vs, __m256 vk) {
  const __m256 ninf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  const __m256 e = ExpPs(_mm256_mul_ps(_mm256_sub_ps(v, vs), vk));
  // ExpPs floors at ~1e-38; a -inf logit must give exactly 0.
  return _mm256_andnot_ps(_mm256_cmp_ps(v, ninf, _CMP_EQ_OQ), e);
}

RILL_TARGET_AVX2 double ExpShiftedScaledAvx2(const float* x, int64_t n, float shift, float scale,
                                             float* out) {
  const __m256 vs = _mm256_set1_ps(shift), vk = _mm256_set1_ps(scale);
  DoubleLanes acc;
  ZeroLanes(&acc);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 e0 = ExpShiftedScaled8(_mm256_loadu_ps(x + i), vs, vk);
    const __m256 e1 = ExpShiftedScaled8(_mm256_loadu_ps(x + i + 8), vs, vk);
    _mm256_storeu_ps(out + i, e0);
    _mm256_storeu_ps(out + i + 8, e1);
    AddLanes(e0, &acc.a0, &acc.a1);
    AddLanes(e1, &acc.b0, &acc.b1);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 e = ExpShiftedScaled8(_mm256_loadu_ps(x + i), vs, vk);
    _mm256_storeu_ps(out + i, e);
    AddLanes(e, &acc.a0, &acc.a1);
  }
  double s = SumLanes(acc);
  for (; i < n; ++i) {
    out[i] = std::exp((x[i] - shift) * scale);
    s += out[i];
  }
  return s;
}

RILL_TARGET_AVX2 float MaxAvx2(const float* x, int64_t n) {
  const __m256 ninf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  // Four chains, so the scan is not bound by the max latency. max_ps returns
  // its second operand when either is NaN: NaNs are skipped, and the result
  // is the same whatever the split.
  __m256 m0 = ninf, m1 = ninf, m2 = ninf, m3 = ninf;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    m0 = _mm256_max_ps(_mm256_loadu_ps(x + i), m0);
    m1 = _mm256_max_ps(_mm256_loadu_ps(x + i + 8), m1);
    m2 = _mm256_max_ps(_mm256_loadu_ps(x + i + 16), m2);
    m3 = _mm256_max_ps(_mm256_loadu_ps(x + i + 24), m3);
  }
  for (; i + 8 <= n; i += 8) m0 = _mm256_max_ps(_mm256_loadu_ps(x + i), m0);
  float m = HmaxPs8(_mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3)));
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

// Sum of p[i, i + 32) in double, in DoubleLanes order.
RILL_TARGET_AVX2 inline double Sum32(const float* p) {
  DoubleLanes acc;
  ZeroLanes(&acc);
  AddLanes(_mm256_loadu_ps(p), &acc.a0, &acc.a1);
  AddLanes(_mm256_loadu_ps(p + 8), &acc.b0, &acc.b1);
  AddLanes(_mm256_loadu_ps(p + 16), &acc.a0, &acc.a1);
  AddLanes(_mm256_loadu_ps(p + 24), &acc.b0, &acc.b1);
  return SumLanes(acc);
}

RILL_TARGET_AVX2 int64_t CumulativeSearchAvx2(const float* p, int64_t n, double r) {
  // Whole 32-wide chunks are skipped while their sum leaves r >= 0; the
  // chunk where it turns negative is walked value by value.
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const double s = Sum32(p + i);
    if (r - s < 0.0) break;
    r -= s;
  }
  for (; i < n; ++i) {
    r -= p[i];
    if (r < 0.0 && p[i] > 0.0f) return i;
  }
  return -1;
}

RILL_TARGET_AVX2 int64_t FirstAboveAvx2(const float* x, int64_t n, float threshold) {
  const __m256 t = _mm256_set1_ps(threshold);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256 a = _mm256_cmp_ps(_mm256_loadu_ps(x + i), t, _CMP_GT_OQ);
    const __m256 b = _mm256_cmp_ps(_mm256_loadu_ps(x + i + 8), t, _CMP_GT_OQ);
    const __m256 c = _mm256_cmp_ps(_mm256_loadu_ps(x + i + 16), t, _CMP_GT_OQ);
    const __m256 d = _mm256_cmp_ps(_mm256_loadu_ps(x + i + 24), t, _CMP_GT_OQ);
    if (_mm256_movemask_ps(_mm256_or_ps(_mm256_or_ps(a, b), _mm256_or_ps(c, d))) != 0) break;
  }
  for (; i + 8 <= n; i += 8) {
    const int mask = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), t, _CMP_GT_OQ));
    if (mask != 0) return i + __builtin_ctz(mask);
  }
  for (; i < n; ++i) {
    if (x[i] > threshold) return i;
  }
  return n;
}

// For each 8-bit mask, the positions of its set bits packed to the front
// (one byte each): a left-pack of the lanes a compare kept.
struct LeftPackTable {
  uint64_t lanes[256];
  constexpr LeftPackTable() : lanes() {
    for (int m = 0; m < 256; ++m) {
      uint64_t packed = 0;
      int k = 0;
      for (int b = 0; b < 8; ++b) {
        if (m & (1 << b)) packed |= static_cast<uint64_t>(b) << (8 * k++);
      }
      lanes[m] = packed;
    }
  }
};
constexpr LeftPackTable kLeftPack;

// Ids with lo <= p < hi: each 8-lane compare's kept ids are left-packed
// with one permute and stored whole (the next store overwrites the tail),
// so there is no branch per id.
RILL_TARGET_AVX2 int64_t IdsInRangeAvx2(const float* p, int64_t n, float lo, float hi,
                                        int32_t* out) {
  int32_t* const begin = out;
  const bool bounded = hi != std::numeric_limits<float>::infinity();
  const __m256 vlo = _mm256_set1_ps(lo);
  // No upper bound: compare against NaN with NOT-LESS-unordered, always true.
  const __m256 vhi = _mm256_set1_ps(bounded ? hi : std::numeric_limits<float>::quiet_NaN());
  const __m256i eight = _mm256_set1_epi32(8);
  __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  int64_t i = 0;
  // Whole 8-int stores stay inside the n ints of room while i + 8 <= n.
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(p + i);
    const __m256 upper = bounded ? _mm256_cmp_ps(v, vhi, _CMP_LT_OQ)
                                 : _mm256_cmp_ps(v, vhi, _CMP_NLT_UQ);
    const unsigned mask = static_cast<unsigned>(
        _mm256_movemask_ps(_mm256_and_ps(_mm256_cmp_ps(v, vlo, _CMP_GE_OQ), upper)));
    const __m256i perm =
        _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(kLeftPack.lanes[mask])));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_permutevar8x32_epi32(idx, perm));
    out += __builtin_popcount(mask);
    idx = _mm256_add_epi32(idx, eight);
  }
  for (; i < n; ++i) {
    if (p[i] >= lo && (!bounded || p[i] < hi)) *out++ = static_cast<int32_t>(i);
  }
  return out - begin;
}

RILL_TARGET_AVX2 void SumsAtLeastAvx2(const float* p, int64_t n, const float (&t)[4],
                                      double (&sums)[4]) {
  __m256 vt[4];
  __m256d lo[4], hi[4];
  for (int k = 0; k < 4; ++k) {
    vt[k] = _mm256_set1_ps(t[k]);
    lo[k] = hi[k] = _mm256_setzero_pd();
  }
  int64_t i = 0;
  while (i + 8 <= n) {
    // A run of up to 256 values summed in float, then added in double.
    __m256 f[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
    const int64_t end = std::min(n, i + 256);
    for (; i + 8 <= end; i += 8) {
      const __m256 v = _mm256_loadu_ps(p + i);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        f[k] = _mm256_add_ps(f[k], _mm256_and_ps(v, _mm256_cmp_ps(v, vt[k], _CMP_GE_OQ)));
      }
    }
    for (int k = 0; k < 4; ++k) AddLanes(f[k], &lo[k], &hi[k]);
  }
  for (int k = 0; k < 4; ++k) {
    alignas(32) double lanes[4];
    _mm256_store_pd(lanes, _mm256_add_pd(lo[k], hi[k]));
    sums[k] = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
    for (int64_t j = i; j < n; ++j) sums[k] += p[j] >= t[k] ? p[j] : 0.0;
  }
}

RILL_TARGET_AVX2 int64_t FirstEqualAvx2(const float* x, int64_t n, float v) {
  const __m256 vv = _mm256_set1_ps(v);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const int mask = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), vv, _CMP_EQ_OQ));
    if (mask != 0) return i + __builtin_ctz(mask);
  }
  for (; i < n; ++i) {
    if (x[i] == v) return i;
  }
  return 0;
}

RILL_TARGET_AVX2 void AddAvx2(const float* a, const float* b, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  }
  for (; i < n; ++i) out[i] = a[i] + b[i];
}

// ---- AVX-512: the vocabulary-row passes of sampling, 16 lanes ----

// Double-lane sums as DoubleLanes, 8 doubles per register.
struct DoubleLanes512 {
  __m512d a0, a1, b0, b1;
};

RILL_TARGET_AVX512 inline void ZeroLanes16(DoubleLanes512* l) {
  l->a0 = l->a1 = l->b0 = l->b1 = _mm512_setzero_pd();
}

RILL_TARGET_AVX512 inline void AddLanes16(__m512 v, __m512d* lo, __m512d* hi) {
  *lo = _mm512_add_pd(*lo, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
  *hi = _mm512_add_pd(*hi, _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)));
}

RILL_TARGET_AVX512 inline double SumLanes16(const DoubleLanes512& l) {
  return _mm512_reduce_add_pd(_mm512_add_pd(_mm512_add_pd(l.a0, l.a1), _mm512_add_pd(l.b0, l.b1)));
}

RILL_TARGET_AVX512 double SumExpShiftedAvx512(const float* x, int64_t n, float m) {
  const __m512 vmax = _mm512_set1_ps(m);
  DoubleLanes512 acc;
  ZeroLanes16(&acc);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    AddLanes16(ExpPs16(_mm512_sub_ps(_mm512_loadu_ps(x + i), vmax)), &acc.a0, &acc.a1);
    AddLanes16(ExpPs16(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), vmax)), &acc.b0, &acc.b1);
  }
  for (; i + 16 <= n; i += 16) {
    AddLanes16(ExpPs16(_mm512_sub_ps(_mm512_loadu_ps(x + i), vmax)), &acc.a0, &acc.a1);
  }
  double s = SumLanes16(acc);
  for (; i < n; ++i) s += std::exp(static_cast<double>(x[i] - m));
  return s;
}

RILL_TARGET_AVX512 inline __m512 ExpShiftedScaled16(__m512 v, __m512 vs, __m512 vk) {
  const __m512 e = ExpPs16(_mm512_mul_ps(_mm512_sub_ps(v, vs), vk));
  // ExpPs16 floors at ~1e-38; a -inf logit must give exactly 0.
  const __mmask16 masked =
      _mm512_cmp_ps_mask(v, _mm512_set1_ps(-std::numeric_limits<float>::infinity()), _CMP_EQ_OQ);
  return _mm512_maskz_mov_ps(static_cast<__mmask16>(~masked), e);
}

RILL_TARGET_AVX512 double ExpShiftedScaledAvx512(const float* x, int64_t n, float shift,
                                                 float scale, float* out) {
  const __m512 vs = _mm512_set1_ps(shift), vk = _mm512_set1_ps(scale);
  DoubleLanes512 acc;
  ZeroLanes16(&acc);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 e0 = ExpShiftedScaled16(_mm512_loadu_ps(x + i), vs, vk);
    const __m512 e1 = ExpShiftedScaled16(_mm512_loadu_ps(x + i + 16), vs, vk);
    _mm512_storeu_ps(out + i, e0);
    _mm512_storeu_ps(out + i + 16, e1);
    AddLanes16(e0, &acc.a0, &acc.a1);
    AddLanes16(e1, &acc.b0, &acc.b1);
  }
  for (; i + 16 <= n; i += 16) {
    const __m512 e = ExpShiftedScaled16(_mm512_loadu_ps(x + i), vs, vk);
    _mm512_storeu_ps(out + i, e);
    AddLanes16(e, &acc.a0, &acc.a1);
  }
  double s = SumLanes16(acc);
  for (; i < n; ++i) {
    out[i] = std::exp((x[i] - shift) * scale);
    s += out[i];
  }
  return s;
}

RILL_TARGET_AVX512 void SumsAtLeastAvx512(const float* p, int64_t n, const float (&t)[4],
                                        double (&sums)[4]) {
  __m512 vt[4];
  __m512d lo[4], hi[4];
  for (int k = 0; k < 4; ++k) {
    vt[k] = _mm512_set1_ps(t[k]);
    lo[k] = hi[k] = _mm512_setzero_pd();
  }
  int64_t i = 0;
  while (i + 16 <= n) {
    // A run of up to 256 values summed in float, then added in double.
    __m512 f[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                   _mm512_setzero_ps()};
    const int64_t end = std::min(n, i + 256);
    for (; i + 16 <= end; i += 16) {
      const __m512 v = _mm512_loadu_ps(p + i);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        f[k] = _mm512_mask_add_ps(f[k], _mm512_cmp_ps_mask(v, vt[k], _CMP_GE_OQ), f[k], v);
      }
    }
    for (int k = 0; k < 4; ++k) AddLanes16(f[k], &lo[k], &hi[k]);
  }
  for (int k = 0; k < 4; ++k) {
    sums[k] = _mm512_reduce_add_pd(_mm512_add_pd(lo[k], hi[k]));
    for (int64_t j = i; j < n; ++j) sums[k] += p[j] >= t[k] ? p[j] : 0.0;
  }
}

// Ids with lo <= p < hi (no upper bound where hi is +inf), compress-stored
// in order.
RILL_TARGET_AVX512 int64_t IdsInRangeAvx512(const float* p, int64_t n, float lo, float hi,
                                            int32_t* out) {
  int32_t* const begin = out;
  const bool bounded = hi != std::numeric_limits<float>::infinity();
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  __m512i idx = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i step = _mm512_set1_epi32(16);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(p + i);
    __mmask16 keep = _mm512_cmp_ps_mask(v, vlo, _CMP_GE_OQ);
    if (bounded) keep &= _mm512_cmp_ps_mask(v, vhi, _CMP_LT_OQ);
    _mm512_mask_compressstoreu_epi32(out, keep, idx);
    out += __builtin_popcount(keep);
    idx = _mm512_add_epi32(idx, step);
  }
  for (; i < n; ++i) {
    if (p[i] >= lo && (!bounded || p[i] < hi)) *out++ = static_cast<int32_t>(i);
  }
  return out - begin;
}

}  // namespace

void RmsNorm(const float* x, const float* weight, int64_t n_rows, int64_t dim, float eps,
             float* out) {
  const bool avx2 = UseAvx2();
  for (int64_t r = 0; r < n_rows; ++r) {
    if (avx2) {
      RmsNormAvx2(x + r * dim, weight, dim, eps, out + r * dim);
    } else {
      RmsNormScalar(x + r * dim, weight, dim, eps, out + r * dim);
    }
  }
}

void LayerNorm(const float* x, const float* weight, const float* bias, int64_t n_rows,
               int64_t dim, float eps, float* out) {
  // Cheap relative to the matmuls around it; double sums keep the variance
  // exact enough for large-mean rows.
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * dim;
    float* o = out + r * dim;
    double mean = 0.0;
    for (int64_t i = 0; i < dim; ++i) mean += xr[i];
    mean /= dim;
    double var = 0.0;
    for (int64_t i = 0; i < dim; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    var /= dim;
    const float inv = static_cast<float>(1.0 / std::sqrt(var + eps));
    const float mf = static_cast<float>(mean);
    for (int64_t i = 0; i < dim; ++i) {
      o[i] = (xr[i] - mf) * inv * (weight ? weight[i] : 1.0f) + (bias ? bias[i] : 0.0f);
    }
  }
}

void SwiGlu(const float* gate, const float* up, int64_t n, float* out) {
  UseAvx2() ? SwiGluAvx2(gate, up, n, out) : SwiGluScalar(gate, up, n, out);
}

void Gelu(const float* x, int64_t n, float* out) {
  UseAvx2() ? GeluAvx2(x, n, out) : GeluScalar(x, n, out);
}

void Softmax(float* x, int64_t n) {
  DCHECK_GE(n, 1);
  UseAvx2() ? SoftmaxAvx2(x, n) : SoftmaxScalar(x, n);
}

int64_t ArgMax(const float* x, int64_t n) {
  DCHECK_GE(n, 1);
  if (UseAvx2()) return FirstEqualAvx2(x, n, MaxAvx2(x, n));
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (x[i] > x[best] || (x[best] != x[best] && x[i] == x[i])) best = i;
  }
  return best;
}

double ExpShiftedScaled(const float* x, int64_t n, float shift, float scale, float* out) {
  if (UseAvx512()) return ExpShiftedScaledAvx512(x, n, shift, scale, out);
  if (UseAvx2()) return ExpShiftedScaledAvx2(x, n, shift, scale, out);
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    out[i] = std::exp((x[i] - shift) * scale);
    s += out[i];
  }
  return s;
}

int64_t CumulativeSearch(const float* p, int64_t n, double r) {
  int64_t i = -1;
  if (UseAvx2()) {
    i = CumulativeSearchAvx2(p, n, r);
  } else {
    for (int64_t j = 0; j < n && i < 0; ++j) {
      r -= p[j];
      if (r < 0.0 && p[j] > 0.0f) i = j;
    }
  }
  if (i >= 0) return i;
  for (int64_t j = n - 1; j >= 0; --j) {
    if (p[j] > 0.0f) return j;
  }
  return -1;
}

int64_t FirstAbove(const float* x, int64_t n, float threshold) {
  if (UseAvx2()) return FirstAboveAvx2(x, n, threshold);
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] > threshold) return i;
  }
  return n;
}

void SumsAtLeast(const float* p, int64_t n, const float (&thresholds)[4], double (&sums)[4]) {
  if (UseAvx512()) return SumsAtLeastAvx512(p, n, thresholds, sums);
  if (UseAvx2()) return SumsAtLeastAvx2(p, n, thresholds, sums);
  for (int k = 0; k < 4; ++k) {
    sums[k] = 0.0;
    for (int64_t i = 0; i < n; ++i) sums[k] += p[i] >= thresholds[k] ? p[i] : 0.0;
  }
}

int64_t IdsInRange(const float* p, int64_t n, float lo, float hi, int32_t* out) {
  if (UseAvx512()) return IdsInRangeAvx512(p, n, lo, hi, out);
  if (UseAvx2()) return IdsInRangeAvx2(p, n, lo, hi, out);
  const bool bounded = hi != std::numeric_limits<float>::infinity();
  int64_t c = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (p[i] >= lo && (!bounded || p[i] < hi)) out[c++] = static_cast<int32_t>(i);
  }
  return c;
}

int64_t IdsAtLeast(const float* p, int64_t n, float threshold, int32_t* out) {
  return IdsInRange(p, n, threshold, std::numeric_limits<float>::infinity(), out);
}

float LogSumExp(const float* x, int64_t n) {
  DCHECK_GE(n, 1);
  // Vectorised max where it can (the scalar scan was most of a greedy
  // sample's cost); NaNs are skipped either way.
  const float m = UseAvx2() ? MaxAvx2(x, n) : *std::max_element(x, x + n);
  return LogSumExpGivenMax(x, n, m);
}

float LogSumExpGivenMax(const float* x, int64_t n, float m) {
  if (m == -std::numeric_limits<float>::infinity()) return m;
  double s = 0.0;
  if (UseAvx512()) {
    s = SumExpShiftedAvx512(x, n, m);
  } else if (UseAvx2()) {
    s = SumExpShiftedAvx2(x, n, m);
  } else {
    for (int64_t i = 0; i < n; ++i) s += std::exp(static_cast<double>(x[i] - m));
  }
  return m + static_cast<float>(std::log(s));
}

void Add(const float* a, const float* b, int64_t n, float* out) {
  if (UseAvx2()) return AddAvx2(a, b, n, out);
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void Scale(const float* a, float s, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] * s;
}

void Rope(float* x, int64_t n_tokens, int64_t token_stride, int64_t n_heads, int64_t head_dim,
          int64_t rot_dim, const int32_t* positions, const float* inv_freq, RopeLayout layout,
          float mscale) {
  CHECK_EQ(rot_dim % 2, 0);
  CHECK_LE(rot_dim, head_dim);
  const int64_t half = rot_dim / 2;
  // cos/sin per (token, pair), kept for the next call: every layer (and q
  // and k) of a forward pass rotates the same positions with the same
  // frequencies, and the sin/cos cost more than the rotation.
  struct Table {
    std::vector<int32_t> positions;
    std::vector<float> inv_freq;
    float mscale = 0.0f;
    std::vector<float> cs;  // [token][cos half, sin half]
  };
  thread_local Table table;
  if (table.mscale != mscale || table.inv_freq.size() != static_cast<size_t>(half) ||
      table.positions.size() != static_cast<size_t>(n_tokens) ||
      !std::equal(inv_freq, inv_freq + half, table.inv_freq.begin()) ||
      !std::equal(positions, positions + n_tokens, table.positions.begin())) {
    table.positions.assign(positions, positions + n_tokens);
    table.inv_freq.assign(inv_freq, inv_freq + half);
    table.mscale = mscale;
    table.cs.resize(n_tokens * 2 * half);
    for (int64_t t = 0; t < n_tokens; ++t) {
      float* c = table.cs.data() + t * 2 * half;
      // Angles in double: positions reach 1e5+ where float products lose bits.
      for (int64_t i = 0; i < half; ++i) {
        const double a = static_cast<double>(positions[t]) * inv_freq[i];
        c[i] = static_cast<float>(std::cos(a)) * mscale;
        c[half + i] = static_cast<float>(std::sin(a)) * mscale;
      }
    }
  }
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* cos_t = table.cs.data() + t * 2 * half;
    const float* sin_t = cos_t + half;
    for (int64_t h = 0; h < n_heads; ++h) {
      float* v = x + t * token_stride + h * head_dim;
      if (layout == RopeLayout::kInterleaved) {
        for (int64_t i = 0; i < half; ++i) {
          const float x0 = v[2 * i], x1 = v[2 * i + 1];
          v[2 * i] = x0 * cos_t[i] - x1 * sin_t[i];
          v[2 * i + 1] = x0 * sin_t[i] + x1 * cos_t[i];
        }
      } else {
        for (int64_t i = 0; i < half; ++i) {
          const float x0 = v[i], x1 = v[i + half];
          v[i] = x0 * cos_t[i] - x1 * sin_t[i];
          v[i + half] = x0 * sin_t[i] + x1 * cos_t[i];
        }
      }
    }
  }
}

}  // namespace rill::kernels::cpu
