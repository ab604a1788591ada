// AVX2 kernels for quantized weights against f32 activations (the exact
// path, WeightMatrix::float_activations): each 32-weight block is expanded
// to floats in registers once and shared by the tile's tokens, so nothing is
// dequantized to memory and activations keep full precision.
#include <immintrin.h>

#include "kernels/cpu/avx2_util.h"
#include "kernels/cpu/matmul_internal.h"

namespace rill::cpu::internal {
namespace {

// The block's 32 weights as four vectors of 8 floats (w[k] = weights 8k..8k+7).
struct Q4_1F {
  using Block = BlockQ4_1;
  RILL_TARGET_AVX2 static void Expand(const Block& b, __m256 w[4]) {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
    const __m128i mask = _mm_set1_epi8(0x0F);
    const __m128i lo = _mm_and_si128(raw, mask);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(raw, 4), mask);
    const __m256 d = _mm256_set1_ps(HalfToFloat(b.d));
    const __m256 m = _mm256_set1_ps(HalfToFloat(b.m));
    w[0] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo)), m);
    w[1] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8))), m);
    w[2] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi)), m);
    w[3] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8))), m);
  }
};

struct Q4_0F {
  using Block = BlockQ4_0;
  RILL_TARGET_AVX2 static void Expand(const Block& b, __m256 w[4]) {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
    const __m128i mask = _mm_set1_epi8(0x0F);
    const __m128i lo = _mm_and_si128(raw, mask);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(raw, 4), mask);
    const float df = HalfToFloat(b.d);
    const __m256 d = _mm256_set1_ps(df);
    const __m256 off = _mm256_set1_ps(-8.0f * df);
    w[0] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo)), off);
    w[1] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8))), off);
    w[2] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi)), off);
    w[3] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8))), off);
  }
};

struct Q8_0F {
  using Block = BlockQ8_0;
  RILL_TARGET_AVX2 static void Expand(const Block& b, __m256 w[4]) {
    const __m256 d = _mm256_set1_ps(HalfToFloat(b.d));
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + 8 * k));
      w[k] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)));
    }
  }
};

// Two accumulators per token (sub-vectors 0,2 and 1,3) keep the fma chains
// short; each token's operations and their order do not depend on NT.
template <typename F, int NT>
RILL_TARGET_AVX2 void Tile(const uint8_t* w, const uint8_t* act, size_t act_stride, int64_t nb,
                           float* out, size_t out_stride) {
  const typename F::Block* wb = reinterpret_cast<const typename F::Block*>(w);
  const float* x[NT];
  __m256 acc[NT][2];
#pragma GCC unroll 4
  for (int t = 0; t < NT; ++t) {
    x[t] = reinterpret_cast<const float*>(act + t * act_stride);
    acc[t][0] = acc[t][1] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    __m256 wf[4];
    F::Expand(wb[b], wf);
    // Fully unrolled so the accumulators live in registers.
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) {
      const float* xb = x[t] + 32 * b;
      acc[t][0] = _mm256_fmadd_ps(wf[0], _mm256_loadu_ps(xb), acc[t][0]);
      acc[t][1] = _mm256_fmadd_ps(wf[1], _mm256_loadu_ps(xb + 8), acc[t][1]);
      acc[t][0] = _mm256_fmadd_ps(wf[2], _mm256_loadu_ps(xb + 16), acc[t][0]);
      acc[t][1] = _mm256_fmadd_ps(wf[3], _mm256_loadu_ps(xb + 24), acc[t][1]);
    }
  }
  for (int t = 0; t < NT; ++t) out[t * out_stride] = HsumPs(_mm256_add_ps(acc[t][0], acc[t][1]));
}

template <typename F>
void Kernel(const uint8_t* w, const uint8_t* act, size_t act_stride, int nt, int64_t cols,
            float* out, size_t out_stride) {
  const int64_t nb = cols / 32;
  switch (nt) {
    case 4: return Tile<F, 4>(w, act, act_stride, nb, out, out_stride);
    case 3: return Tile<F, 3>(w, act, act_stride, nb, out, out_stride);
    case 2: return Tile<F, 2>(w, act, act_stride, nb, out, out_stride);
    default: return Tile<F, 1>(w, act, act_stride, nb, out, out_stride);
  }
}

}  // namespace

RowKernel Avx2KernelF32Act(QuantType type) {
  switch (type) {
    case QuantType::kQ4_0: return Kernel<Q4_0F>;
    case QuantType::kQ4_1: return Kernel<Q4_1F>;
    case QuantType::kQ8_0: return Kernel<Q8_0F>;
    default: return nullptr;
  }
}

}  // namespace rill::cpu::internal
