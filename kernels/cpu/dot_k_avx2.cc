// AVX2 kernels for Q4_K, Q5_K and Q6_K against Q8_K activations. Integer
// parts are exact and equal to the scalar kernels'; the min / offset terms
// go through the activation group sums.
#include "kernels/cpu/avx2_util.h"

namespace rill::kernels::cpu::internal {
namespace {

template <int NT>
struct Acts {
  const BlockQ8_K* a[NT];
  __m256 acc[NT];
  float accm[NT];
  RILL_TARGET_AVX2 Acts(const uint8_t* act, size_t stride) {
    for (int t = 0; t < NT; ++t) {
      a[t] = reinterpret_cast<const BlockQ8_K*>(act + t * stride);
      acc[t] = _mm256_setzero_ps();
      accm[t] = 0.0f;
    }
  }
  RILL_TARGET_AVX2 void Store(float* out, size_t stride) const {
    for (int t = 0; t < NT; ++t) out[t * stride] = HsumPs(acc[t]) + accm[t];
  }
};

RILL_TARGET_AVX2 static inline __m256i LoadQ8(const int8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// Q4_K and Q5_K share everything but the 5th bit.
template <bool kFive, int NT>
RILL_TARGET_AVX2 void TileQ45K(const uint8_t* w, const uint8_t* act, size_t act_stride,
                               int64_t nb, float* out, size_t out_stride) {
  Acts<NT> s(act, act_stride);
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i one8 = _mm256_set1_epi8(1);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* scales;
    const uint8_t* qs;
    const uint8_t* qh = nullptr;
    uint16_t d16, dmin16;
    if constexpr (kFive) {
      const BlockQ5_K& x = reinterpret_cast<const BlockQ5_K*>(w)[b];
      scales = x.scales;
      qs = x.qs;
      qh = x.qh;
      d16 = x.d;
      dmin16 = x.dmin;
    } else {
      const BlockQ4_K& x = reinterpret_cast<const BlockQ4_K*>(w)[b];
      scales = x.scales;
      qs = x.qs;
      d16 = x.d;
      dmin16 = x.dmin;
    }
    uint8_t sc[8], mn[8];
    for (int j = 0; j < 8; ++j) GetScaleMinK4(j, scales, &sc[j], &mn[j]);
    __m256i isum[NT];
    for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
    const __m256i hbits =
        kFive ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh)) : _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * c));
      __m256i lo = _mm256_and_si256(raw, m4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4);
      if constexpr (kFive) {
        const __m256i hl = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * c), one8);
        const __m256i hh = _mm256_and_si256(_mm256_srli_epi16(hbits, 2 * c + 1), one8);
        lo = _mm256_or_si256(lo, _mm256_slli_epi16(hl, 4));
        hi = _mm256_or_si256(hi, _mm256_slli_epi16(hh, 4));
      }
      const __m256i sc_lo = _mm256_set1_epi16(sc[2 * c]);
      const __m256i sc_hi = _mm256_set1_epi16(sc[2 * c + 1]);
      for (int t = 0; t < NT; ++t) {
        const int8_t* q8 = s.a[t][b].qs + 64 * c;
        const __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, LoadQ8(q8)), sc_lo);
        const __m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, LoadQ8(q8 + 32)), sc_hi);
        isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(p_lo, p_hi));
      }
    }
    const float d = HalfToFloat(d16);
    const float dmin = HalfToFloat(dmin16);
    for (int t = 0; t < NT; ++t) {
      const BlockQ8_K& y = s.a[t][b];
      int msum = 0;
      for (int j = 0; j < 8; ++j) msum += mn[j] * (y.bsums[2 * j] + y.bsums[2 * j + 1]);
      s.acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * y.d), _mm256_cvtepi32_ps(isum[t]), s.acc[t]);
      s.accm[t] = __builtin_fmaf(-dmin * y.d, static_cast<float>(msum), s.accm[t]);
    }
  }
  s.Store(out, out_stride);
}

template <int NT>
RILL_TARGET_AVX2 void TileQ6K(const uint8_t* w, const uint8_t* act, size_t act_stride, int64_t nb,
                              float* out, size_t out_stride) {
  Acts<NT> s(act, act_stride);
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i m3 = _mm256_set1_epi8(0x03);
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ6_K& x = reinterpret_cast<const BlockQ6_K*>(w)[b];
    __m256i isum[NT];
    for (int t = 0; t < NT; ++t) isum[t] = _mm256_setzero_si256();
    for (int n = 0; n < 2; ++n) {
      const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.ql + 64 * n));
      const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.ql + 64 * n + 32));
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qh + 32 * n));
      __m256i q[4];
      q[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4),
                             _mm256_slli_epi16(_mm256_and_si256(qh, m3), 4));
      q[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m3), 4));
      q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m3), 4));
      q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m3), 4));
      const int8_t* sc = x.scales + 8 * n;
      for (int k = 0; k < 4; ++k) {
        // Lower 16 weights use sc[2k], upper 16 sc[2k+1].
        const __m256i scv = _mm256_set_m128i(_mm_set1_epi16(sc[2 * k + 1]), _mm_set1_epi16(sc[2 * k]));
        for (int t = 0; t < NT; ++t) {
          const int8_t* q8 = s.a[t][b].qs + 128 * n + 32 * k;
          const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(q[k], LoadQ8(q8)), scv);
          isum[t] = _mm256_add_epi32(isum[t], p);
        }
      }
    }
    const float d = HalfToFloat(x.d);
    for (int t = 0; t < NT; ++t) {
      const BlockQ8_K& y = s.a[t][b];
      int osum = 0;
      for (int g = 0; g < 16; ++g) osum += x.scales[g] * y.bsums[g];
      const float dd = d * y.d;
      s.acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dd), _mm256_cvtepi32_ps(isum[t]), s.acc[t]);
      s.accm[t] = __builtin_fmaf(-32.0f * dd, static_cast<float>(osum), s.accm[t]);
    }
  }
  s.Store(out, out_stride);
}

template <template <int> class TileT>
void Dispatch(const uint8_t* w, const uint8_t* act, size_t act_stride, int nt, int64_t cols,
              float* out, size_t out_stride) {
  const int64_t nb = cols / kQK_K;
  switch (nt) {
    case 4: return TileT<4>::Run(w, act, act_stride, nb, out, out_stride);
    case 3: return TileT<3>::Run(w, act, act_stride, nb, out, out_stride);
    case 2: return TileT<2>::Run(w, act, act_stride, nb, out, out_stride);
    default: return TileT<1>::Run(w, act, act_stride, nb, out, out_stride);
  }
}

template <int NT>
struct Q4K {
  static void Run(const uint8_t* w, const uint8_t* a, size_t st, int64_t nb, float* o, size_t os) {
    TileQ45K<false, NT>(w, a, st, nb, o, os);
  }
};
template <int NT>
struct Q5K {
  static void Run(const uint8_t* w, const uint8_t* a, size_t st, int64_t nb, float* o, size_t os) {
    TileQ45K<true, NT>(w, a, st, nb, o, os);
  }
};
template <int NT>
struct Q6K {
  static void Run(const uint8_t* w, const uint8_t* a, size_t st, int64_t nb, float* o, size_t os) {
    TileQ6K<NT>(w, a, st, nb, o, os);
  }
};

}  // namespace

RowKernel Avx2KernelK(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_K: return Dispatch<Q4K>;
    case GgmlType::kQ5_K: return Dispatch<Q5K>;
    case GgmlType::kQ6_K: return Dispatch<Q6K>;
    default: return nullptr;
  }
}

}  // namespace rill::kernels::cpu::internal
