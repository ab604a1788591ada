// The per-block online-softmax update of paged attention, for one (query,
// head) against the cnt keys of one cache block (K/V rows `row` elements
// apart, head_dim hd): scores = q.k * scale, then m, l and acc updated as
// in paged_attention.cc. AVX-512 versions (paged_attention_avx512.cc) for
// hd a multiple of 16 up to 128; the caller keeps the AVX2 one for others, so a
// model's every call runs one kernel. Internal to //kernels/cpu.
#ifndef RILL_KERNELS_CPU_PAGED_ATTENTION_BLOCK_H_
#define RILL_KERNELS_CPU_PAGED_ATTENTION_BLOCK_H_

#include <cstdint>

namespace rill::kernels::cpu::internal {

// The AVX-512 update keeps q in registers: head sizes up to this.
inline constexpr int kMaxAvx512HeadDim = 128;

// scores has room for cnt floats; needs UseAvx512(), hd % 16 == 0 and
// hd <= kMaxAvx512HeadDim.
void BlockUpdateAvx512(const float* q, const float* kb, const float* vb, int64_t row, int cnt,
                       int hd, float scale, float* scores, float* m, float* l, float* acc);
// The same over an f16 cache (IEEE half bits).
void BlockUpdateAvx512(const float* q, const uint16_t* kb, const uint16_t* vb, int64_t row,
                       int cnt, int hd, float scale, float* scores, float* m, float* l,
                       float* acc);

}  // namespace rill::kernels::cpu::internal

#endif  // RILL_KERNELS_CPU_PAGED_ATTENTION_BLOCK_H_
