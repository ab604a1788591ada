// AVX2 kernels for the 32-weight formats against Q8A activations. One
// weight block is unpacked once and dotted with up to kMaxTile tokens.
#include "kernels/cpu/avx2_util.h"

namespace rill::kernels::cpu::internal {
namespace {

// Unpack policy per format: Weights() yields 32 int8 lanes in token order;
// kSigned says whether they are signed (use DotS8S8) or unsigned.
struct Q4_0 {
  using Block = BlockQ4_0;
  static constexpr bool kSigned = true;
  static constexpr bool kHasMin = false;
  RILL_TARGET_AVX2 static __m256i Weights(const Block& b) {
    return _mm256_sub_epi8(UnpackNibbles16(b.qs), _mm256_set1_epi8(8));
  }
  static uint16_t Min(const Block&) { return 0; }
};
struct Q4_1 {
  using Block = BlockQ4_1;
  static constexpr bool kSigned = false;
  static constexpr bool kHasMin = true;
  RILL_TARGET_AVX2 static __m256i Weights(const Block& b) { return UnpackNibbles16(b.qs); }
  static uint16_t Min(const Block& b) { return b.m; }
};
struct Q5_0 {
  using Block = BlockQ5_0;
  static constexpr bool kSigned = true;
  static constexpr bool kHasMin = false;
  RILL_TARGET_AVX2 static __m256i Weights(const Block& b) {
    // nibble | 0xF0 where the 5th bit is clear == nibble + 16*bit - 16 as int8.
    const __m256i hi = _mm256_andnot_si256(BitsToBytes32(b.qh), _mm256_set1_epi8(-16));
    return _mm256_or_si256(UnpackNibbles16(b.qs), hi);
  }
  static uint16_t Min(const Block&) { return 0; }
};
struct Q5_1 {
  using Block = BlockQ5_1;
  static constexpr bool kSigned = false;
  static constexpr bool kHasMin = true;
  RILL_TARGET_AVX2 static __m256i Weights(const Block& b) {
    const __m256i hi = _mm256_and_si256(BitsToBytes32(b.qh), _mm256_set1_epi8(0x10));
    return _mm256_or_si256(UnpackNibbles16(b.qs), hi);
  }
  static uint16_t Min(const Block& b) { return b.m; }
};
struct Q8_0 {
  using Block = BlockQ8_0;
  static constexpr bool kSigned = true;
  static constexpr bool kHasMin = false;
  RILL_TARGET_AVX2 static __m256i Weights(const Block& b) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
  }
  static uint16_t Min(const Block&) { return 0; }
};

// Two accumulator sets (even / odd blocks) break the fma latency chain for
// the single-token case; every tile size uses them identically.
template <typename F, int NT>
RILL_TARGET_AVX2 void Tile(const uint8_t* w, const uint8_t* act, size_t act_stride, int64_t nb,
                           float* out, size_t out_stride) {
  const typename F::Block* wb = reinterpret_cast<const typename F::Block*>(w);
  const BlockQ8A* a[NT];
  __m256 acc[2][NT];
  float accm[2][NT];
  for (int t = 0; t < NT; ++t) {
    a[t] = reinterpret_cast<const BlockQ8A*>(act + t * act_stride);
    acc[0][t] = acc[1][t] = _mm256_setzero_ps();
    accm[0][t] = accm[1][t] = 0.0f;
  }
  auto step = [&](int64_t b, int k) RILL_TARGET_AVX2 {
    const __m256i q = F::Weights(wb[b]);
    const float dw = HalfToFloat(wb[b].d);
    // For signed formats the sign of q is moved onto the activations once
    // per token; |q| is shared.
    const __m256i qa = F::kSigned ? _mm256_sign_epi8(q, q) : q;
    float mw = 0.0f;
    if (F::kHasMin) mw = HalfToFloat(F::Min(wb[b]));
    for (int t = 0; t < NT; ++t) {
      __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t][b].qs));
      if (F::kSigned) x = _mm256_sign_epi8(x, q);
      const __m256i p = DotU8S8(qa, x);
      acc[k][t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * a[t][b].d), _mm256_cvtepi32_ps(p), acc[k][t]);
      if (F::kHasMin) accm[k][t] = __builtin_fmaf(mw, a[t][b].s, accm[k][t]);
    }
  };
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    step(b, 0);
    step(b + 1, 1);
  }
  if (b < nb) step(b, 0);
  for (int t = 0; t < NT; ++t) {
    out[t * out_stride] = HsumPs(_mm256_add_ps(acc[0][t], acc[1][t])) + (accm[0][t] + accm[1][t]);
  }
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

RowKernel Avx2KernelLegacy(GgmlType type) {
  static_assert(kMaxTile == 4, "Kernel<> dispatches tiles up to 4");
  switch (type) {
    case GgmlType::kQ4_0: return Kernel<Q4_0>;
    case GgmlType::kQ4_1: return Kernel<Q4_1>;
    case GgmlType::kQ5_0: return Kernel<Q5_0>;
    case GgmlType::kQ5_1: return Kernel<Q5_1>;
    case GgmlType::kQ8_0: return Kernel<Q8_0>;
    default: return nullptr;
  }
}

}  // namespace rill::kernels::cpu::internal
