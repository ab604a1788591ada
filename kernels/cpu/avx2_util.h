// Small AVX2 helpers shared by the kernel files. Every function carries the
// target attribute because the build does not pass -mavx2.
#ifndef RILL_KERNELS_CPU_AVX2_UTIL_H_
#define RILL_KERNELS_CPU_AVX2_UTIL_H_

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/matmul_internal.h"

namespace rill::kernels::cpu::internal {

RILL_TARGET_AVX2 static inline float HsumPs(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

RILL_TARGET_AVX2 static inline float HalfToFloat(uint16_t h) {
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

// 32 nibbles of 16 bytes: bytes 0..15 low nibbles, 16..31 high nibbles
// (ggml's order: weight j in the low nibble of byte j, j+16 in the high).
RILL_TARGET_AVX2 static inline __m256i UnpackNibbles16(const uint8_t* p) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(raw, 4), raw);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// 0xFF in byte j where bit j of the 32-bit little-endian word at p is set.
RILL_TARGET_AVX2 static inline __m256i BitsToBytes32(const uint8_t* p) {
  uint32_t x;
  std::memcpy(&x, p, 4);
  const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                         0x0101010101010101, 0x0000000000000000);
  __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(x)), shuf);
  bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
  return _mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1));
}

// Eight int32 sums of u8 x s8 products (a unsigned 0..127 safe, b signed).
RILL_TARGET_AVX2 static inline __m256i DotU8S8(__m256i a, __m256i b) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), _mm256_set1_epi16(1));
}

// Same for two signed operands (neither may be -128).
RILL_TARGET_AVX2 static inline __m256i DotS8S8(__m256i a, __m256i b) {
  return DotU8S8(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
}

}  // namespace rill::kernels::cpu::internal

#endif  // RILL_KERNELS_CPU_AVX2_UTIL_H_
