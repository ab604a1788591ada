// AVX2/FMA kernels for F32, F16 (F16C) and BF16 weights against float
// activations. Two accumulators per token, 16 columns per step, then 8,
// then a scalar tail; the order is the same for every tile size.
#include "kernels/cpu/avx2_util.h"

namespace rill::kernels::cpu::internal {
namespace {

struct F32W {
  RILL_TARGET_AVX2 static __m256 Load8(const uint8_t* w, int64_t i) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(w) + i);
  }
  static float One(const uint8_t* w, int64_t i) { return reinterpret_cast<const float*>(w)[i]; }
};
struct F16W {
  RILL_TARGET_AVX2 static __m256 Load8(const uint8_t* w, int64_t i) {
    return _mm256_cvtph_ps(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(reinterpret_cast<const uint16_t*>(w) + i)));
  }
  RILL_TARGET_AVX2 static float One(const uint8_t* w, int64_t i) {
    return HalfToFloat(reinterpret_cast<const uint16_t*>(w)[i]);
  }
};
struct BF16W {
  RILL_TARGET_AVX2 static __m256 Load8(const uint8_t* w, int64_t i) {
    const __m128i h =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(reinterpret_cast<const uint16_t*>(w) + i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static float One(const uint8_t* w, int64_t i) {
    return BF16ToF32(reinterpret_cast<const uint16_t*>(w)[i]);
  }
};

template <typename W, int NT>
RILL_TARGET_AVX2 void Tile(const uint8_t* w, const uint8_t* act, size_t act_stride, int64_t cols,
                           float* out, size_t out_stride) {
  const float* x[NT];
  __m256 acc0[NT], acc1[NT];
  for (int t = 0; t < NT; ++t) {
    x[t] = reinterpret_cast<const float*>(act + t * act_stride);
    acc0[t] = _mm256_setzero_ps();
    acc1[t] = _mm256_setzero_ps();
  }
  int64_t i = 0;
  for (; i + 16 <= cols; i += 16) {
    const __m256 w0 = W::Load8(w, i);
    const __m256 w1 = W::Load8(w, i + 8);
    for (int t = 0; t < NT; ++t) {
      acc0[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x[t] + i), acc0[t]);
      acc1[t] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x[t] + i + 8), acc1[t]);
    }
  }
  if (i + 8 <= cols) {
    const __m256 w0 = W::Load8(w, i);
    for (int t = 0; t < NT; ++t) acc0[t] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x[t] + i), acc0[t]);
    i += 8;
  }
  for (int t = 0; t < NT; ++t) {
    float s = HsumPs(_mm256_add_ps(acc0[t], acc1[t]));
    for (int64_t j = i; j < cols; ++j) s = __builtin_fmaf(W::One(w, j), x[t][j], s);
    out[t * out_stride] = s;
  }
}

template <typename W>
void Kernel(const uint8_t* w, const uint8_t* act, size_t act_stride, int nt, int64_t cols,
            float* out, size_t out_stride) {
  switch (nt) {
    case 4: return Tile<W, 4>(w, act, act_stride, cols, out, out_stride);
    case 3: return Tile<W, 3>(w, act, act_stride, cols, out, out_stride);
    case 2: return Tile<W, 2>(w, act, act_stride, cols, out, out_stride);
    default: return Tile<W, 1>(w, act, act_stride, cols, out, out_stride);
  }
}

}  // namespace

RowKernel Avx2KernelFloat(GgmlType type) {
  switch (type) {
    case GgmlType::kF32: return Kernel<F32W>;
    case GgmlType::kF16: return Kernel<F16W>;
    case GgmlType::kBF16: return Kernel<BF16W>;
    default: return nullptr;
  }
}

float DotF32Avx2(const float* a, const float* b, int64_t n) {
  float out;
  Tile<F32W, 1>(reinterpret_cast<const uint8_t*>(a), reinterpret_cast<const uint8_t*>(b), 0, n,
                &out, 0);
  return out;
}

}  // namespace rill::kernels::cpu::internal
