// Portable kernels: integer block dots with float accumulation, mirroring
// the AVX2 decomposition (same integers, different float summation order).
#include <cmath>

#include "kernels/cpu/matmul_internal.h"

namespace rill::kernels::cpu::internal {
namespace {

template <typename Block, typename BlockDot>
void ForTokens(const uint8_t* w, const uint8_t* act, size_t act_stride, int nt, int64_t cols,
               float* out, size_t out_stride, int64_t block_elems, BlockDot dot) {
  const Block* wb = reinterpret_cast<const Block*>(w);
  const int64_t nb = cols / block_elems;
  for (int t = 0; t < nt; ++t) {
    const uint8_t* a = act + t * act_stride;
    float sum = 0.0f;
    for (int64_t b = 0; b < nb; ++b) sum += dot(wb[b], a, b);
    out[t * out_stride] = sum;
  }
}

const BlockQ8A& A8(const uint8_t* a, int64_t b) { return reinterpret_cast<const BlockQ8A*>(a)[b]; }
const BlockQ8_K& A8K(const uint8_t* a, int64_t b) {
  return reinterpret_cast<const BlockQ8_K*>(a)[b];
}

void KernelQ4_0(const uint8_t* w, const uint8_t* act, size_t st, int nt, int64_t cols, float* out,
                size_t os) {
  ForTokens<BlockQ4_0>(w, act, st, nt, cols, out, os, 32,
                       [](const BlockQ4_0& x, const uint8_t* a, int64_t b) {
                         const BlockQ8A& y = A8(a, b);
                         int s = 0;
                         for (int j = 0; j < 16; ++j) {
                           s += ((x.qs[j] & 0xF) - 8) * y.qs[j];
                           s += ((x.qs[j] >> 4) - 8) * y.qs[j + 16];
                         }
                         return F16ToF32(x.d) * y.d * s;
                       });
}

void KernelQ4_1(const uint8_t* w, const uint8_t* act, size_t st, int nt, int64_t cols, float* out,
                size_t os) {
  ForTokens<BlockQ4_1>(w, act, st, nt, cols, out, os, 32,
                       [](const BlockQ4_1& x, const uint8_t* a, int64_t b) {
                         const BlockQ8A& y = A8(a, b);
                         int s = 0;
                         for (int j = 0; j < 16; ++j) {
                           s += (x.qs[j] & 0xF) * y.qs[j];
                           s += (x.qs[j] >> 4) * y.qs[j + 16];
                         }
                         return F16ToF32(x.d) * y.d * s + F16ToF32(x.m) * y.s;
                       });
}

void KernelQ5_0(const uint8_t* w, const uint8_t* act, size_t st, int nt, int64_t cols, float* out,
                size_t os) {
  ForTokens<BlockQ5_0>(w, act, st, nt, cols, out, os, 32,
                       [](const BlockQ5_0& x, const uint8_t* a, int64_t b) {
                         const BlockQ8A& y = A8(a, b);
                         uint32_t qh;
                         std::memcpy(&qh, x.qh, 4);
                         int s = 0;
                         for (int j = 0; j < 16; ++j) {
                           const int q0 = ((x.qs[j] & 0xF) | (((qh >> j) << 4) & 0x10)) - 16;
                           const int q1 = ((x.qs[j] >> 4) | ((qh >> (j + 12)) & 0x10)) - 16;
                           s += q0 * y.qs[j] + q1 * y.qs[j + 16];
                         }
                         return F16ToF32(x.d) * y.d * s;
                       });
}

void KernelQ5_1(const uint8_t* w, const uint8_t* act, size_t st, int nt, int64_t cols, float* out,
                size_t os) {
  ForTokens<BlockQ5_1>(w, act, st, nt, cols, out, os, 32,
                       [](const BlockQ5_1& x, const uint8_t* a, int64_t b) {
                         const BlockQ8A& y = A8(a, b);
                         uint32_t qh;
                         std::memcpy(&qh, x.qh, 4);
                         int s = 0;
                         for (int j = 0; j < 16; ++j) {
                           const int q0 = (x.qs[j] & 0xF) | (((qh >> j) << 4) & 0x10);
                           const int q1 = (x.qs[j] >> 4) | ((qh >> (j + 12)) & 0x10);
                           s += q0 * y.qs[j] + q1 * y.qs[j + 16];
                         }
                         return F16ToF32(x.d) * y.d * s + F16ToF32(x.m) * y.s;
                       });
}

void KernelQ8_0(const uint8_t* w, const uint8_t* act, size_t st, int nt, int64_t cols, float* out,
                size_t os) {
  ForTokens<BlockQ8_0>(w, act, st, nt, cols, out, os, 32,
                       [](const BlockQ8_0& x, const uint8_t* a, int64_t b) {
                         const BlockQ8A& y = A8(a, b);
                         int s = 0;
                         for (int j = 0; j < 32; ++j) s += x.qs[j] * y.qs[j];
                         return F16ToF32(x.d) * y.d * s;
                       });
}

// K-quants: sum over sub-blocks of scale * int dot, minus the min term via
// the activation group sums.
void KernelQ4_K(const uint8_t* w, const uint8_t* act, size_t st, int nt, int64_t cols, float* out,
                size_t os) {
  ForTokens<BlockQ4_K>(w, act, st, nt, cols, out, os, kQK_K,
                       [](const BlockQ4_K& x, const uint8_t* a, int64_t b) {
                         const BlockQ8_K& y = A8K(a, b);
                         int isum = 0, msum = 0;
                         for (int j = 0; j < 8; ++j) {
                           uint8_t sc, m;
                           GetScaleMinK4(j, x.scales, &sc, &m);
                           const uint8_t* q = x.qs + (j / 2) * 32;
                           const int shift = (j & 1) * 4;
                           int s = 0;
                           for (int l = 0; l < 32; ++l) s += ((q[l] >> shift) & 0xF) * y.qs[j * 32 + l];
                           isum += sc * s;
                           msum += m * (y.bsums[2 * j] + y.bsums[2 * j + 1]);
                         }
                         return F16ToF32(x.d) * y.d * isum - F16ToF32(x.dmin) * y.d * msum;
                       });
}

void KernelQ5_K(const uint8_t* w, const uint8_t* act, size_t st, int nt, int64_t cols, float* out,
                size_t os) {
  ForTokens<BlockQ5_K>(w, act, st, nt, cols, out, os, kQK_K,
                       [](const BlockQ5_K& x, const uint8_t* a, int64_t b) {
                         const BlockQ8_K& y = A8K(a, b);
                         int isum = 0, msum = 0;
                         for (int j = 0; j < 8; ++j) {
                           uint8_t sc, m;
                           GetScaleMinK4(j, x.scales, &sc, &m);
                           const uint8_t* q = x.qs + (j / 2) * 32;
                           const int shift = (j & 1) * 4;
                           int s = 0;
                           for (int l = 0; l < 32; ++l) {
                             const int v = ((q[l] >> shift) & 0xF) | (((x.qh[l] >> j) & 1) << 4);
                             s += v * y.qs[j * 32 + l];
                           }
                           isum += sc * s;
                           msum += m * (y.bsums[2 * j] + y.bsums[2 * j + 1]);
                         }
                         return F16ToF32(x.d) * y.d * isum - F16ToF32(x.dmin) * y.d * msum;
                       });
}

void KernelQ6_K(const uint8_t* w, const uint8_t* act, size_t st, int nt, int64_t cols, float* out,
                size_t os) {
  ForTokens<BlockQ6_K>(w, act, st, nt, cols, out, os, kQK_K,
                       [](const BlockQ6_K& x, const uint8_t* a, int64_t b) {
                         const BlockQ8_K& y = A8K(a, b);
                         // Unsigned 6-bit values, offset 32 folded in via bsums.
                         int isum = 0, osum = 0;
                         for (int n = 0; n < 2; ++n) {
                           const uint8_t* ql = x.ql + 64 * n;
                           const uint8_t* qh = x.qh + 32 * n;
                           const int8_t* sc = x.scales + 8 * n;
                           const int8_t* q8 = y.qs + 128 * n;
                           for (int l = 0; l < 32; ++l) {
                             const int is = l / 16;
                             const int q1 = (ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4);
                             const int q2 = (ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4);
                             const int q3 = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
                             const int q4 = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
                             isum += sc[is + 0] * q1 * q8[l] + sc[is + 2] * q2 * q8[l + 32] +
                                     sc[is + 4] * q3 * q8[l + 64] + sc[is + 6] * q4 * q8[l + 96];
                           }
                         }
                         for (int g = 0; g < 16; ++g) osum += x.scales[g] * y.bsums[g];
                         const float dd = F16ToF32(x.d) * y.d;
                         return dd * isum - 32.0f * dd * osum;
                       });
}

float DotF32(const float* a, const float* b, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

void KernelF32(const uint8_t* w, const uint8_t* act, size_t st, int nt, int64_t cols, float* out,
               size_t os) {
  const float* wf = reinterpret_cast<const float*>(w);
  for (int t = 0; t < nt; ++t) {
    out[t * os] = DotF32(wf, reinterpret_cast<const float*>(act + t * st), cols);
  }
}

template <float (*Cvt)(uint16_t)>
void KernelHalf(const uint8_t* w, const uint8_t* act, size_t st, int nt, int64_t cols, float* out,
                size_t os) {
  const uint16_t* wh = reinterpret_cast<const uint16_t*>(w);
  for (int t = 0; t < nt; ++t) {
    const float* x = reinterpret_cast<const float*>(act + t * st);
    float s = 0.0f;
    for (int64_t i = 0; i < cols; ++i) s += Cvt(wh[i]) * x[i];
    out[t * os] = s;
  }
}

}  // namespace

RowKernel ScalarKernel(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0: return KernelQ4_0;
    case GgmlType::kQ4_1: return KernelQ4_1;
    case GgmlType::kQ5_0: return KernelQ5_0;
    case GgmlType::kQ5_1: return KernelQ5_1;
    case GgmlType::kQ8_0: return KernelQ8_0;
    case GgmlType::kQ4_K: return KernelQ4_K;
    case GgmlType::kQ5_K: return KernelQ5_K;
    case GgmlType::kQ6_K: return KernelQ6_K;
    case GgmlType::kF32: return KernelF32;
    case GgmlType::kF16: return KernelHalf<F16ToF32>;
    case GgmlType::kBF16: return KernelHalf<BF16ToF32>;
    default: return nullptr;
  }
}

RowKernel Avx2Kernel(GgmlType type) {
  if (RowKernel k = Avx2KernelLegacy(type)) return k;
  if (RowKernel k = Avx2KernelK(type)) return k;
  return Avx2KernelFloat(type);
}

}  // namespace rill::kernels::cpu::internal
