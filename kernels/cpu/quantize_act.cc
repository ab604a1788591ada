// Activation quantization for the integer dot products. The scalar and AVX2
// versions produce bit-identical blocks (same amax, same 1/d, round to
// nearest even), so the two kernel paths see the same integers.
#include <immintrin.h>

#include <cmath>

#include <glog/logging.h>

#include "kernels/cpu/matmul_internal.h"

namespace rill::kernels::cpu::internal {

ActKind ActKindFor(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_0:
    case GgmlType::kQ5_1:
    case GgmlType::kQ8_0:
      return ActKind::kQ8A;
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K:
      return ActKind::kQ8K;
    default:
      return ActKind::kF32;
  }
}

size_t ActRowBytes(ActKind kind, int64_t n) {
  switch (kind) {
    case ActKind::kF32: return n * sizeof(float);
    case ActKind::kQ8A: return (n / 32) * sizeof(BlockQ8A);
    case ActKind::kQ8K: return (n / kQK_K) * sizeof(BlockQ8_K);
  }
  return 0;
}

void QuantizeActRow(ActKind kind, const float* x, uint8_t* out, int64_t n, bool avx2) {
  switch (kind) {
    case ActKind::kF32:
      std::memcpy(out, x, n * sizeof(float));
      return;
    case ActKind::kQ8A:
      if (avx2) {
        QuantizeQ8ARowAvx2(x, reinterpret_cast<BlockQ8A*>(out), n);
      } else {
        QuantizeQ8ARowScalar(x, reinterpret_cast<BlockQ8A*>(out), n);
      }
      return;
    case ActKind::kQ8K:
      QuantizeQ8KRow(x, reinterpret_cast<BlockQ8_K*>(out), n);
      return;
  }
}

void QuantizeQ8ARowScalar(const float* x, BlockQ8A* out, int64_t n) {
  CHECK_EQ(n % 32, 0);
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x + b * 32;
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      const int q = static_cast<int>(std::nearbyint(xb[j] * id));
      out[b].qs[j] = static_cast<int8_t>(q);
      sum += q;
    }
    out[b].d = d;
    out[b].s = d * static_cast<float>(sum);
  }
}

RILL_TARGET_AVX2 void QuantizeQ8ARowAvx2(const float* x, BlockQ8A* out, int64_t n) {
  CHECK_EQ(n % 32, 0);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x + b * 32;
    __m256 v0 = _mm256_loadu_ps(xb);
    __m256 v1 = _mm256_loadu_ps(xb + 8);
    __m256 v2 = _mm256_loadu_ps(xb + 16);
    __m256 v3 = _mm256_loadu_ps(xb + 24);
    __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                             _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m256 vid = _mm256_set1_ps(id);
    constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    __m256i i0 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v0, vid), kRound));
    __m256i i1 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v1, vid), kRound));
    __m256i i2 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v2, vid), kRound));
    __m256i i3 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v3, vid), kRound));
    __m256i isum = _mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(isum), _mm256_extracti128_si256(isum, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
    const int sum = _mm_cvtsi128_si32(s4);
    // Pack int32 -> int16 -> int8; packs interleave 128-bit lanes, undo it.
    __m256i p01 = _mm256_packs_epi32(i0, i1);
    __m256i p23 = _mm256_packs_epi32(i2, i3);
    __m256i p = _mm256_packs_epi16(p01, p23);
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].qs), p);
    out[b].d = d;
    out[b].s = d * static_cast<float>(sum);
  }
}

void QuantizeQ8KRow(const float* x, BlockQ8_K* out, int64_t n) {
  CHECK_EQ(n % kQK_K, 0);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float* xb = x + b * kQK_K;
    float amax = 0.0f;
    for (int j = 0; j < kQK_K; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int j = 0; j < kQK_K; ++j) {
      out[b].qs[j] = static_cast<int8_t>(static_cast<int>(std::nearbyint(xb[j] * id)));
    }
    for (int g = 0; g < kQK_K / 16; ++g) {
      int s = 0;
      for (int j = 0; j < 16; ++j) s += out[b].qs[g * 16 + j];
      out[b].bsums[g] = static_cast<int16_t>(s);
    }
    out[b].d = d;
  }
}

}  // namespace rill::kernels::cpu::internal
