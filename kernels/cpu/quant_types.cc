#include "kernels/cpu/quant_types.h"

#include <glog/logging.h>

#include "absl/strings/str_cat.h"

namespace rill::kernels::cpu {
namespace {

void DequantQ4_0(const BlockQ4_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(x[i].d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      y[j] = ((x[i].qs[j] & 0x0F) - 8) * d;
      y[j + 16] = ((x[i].qs[j] >> 4) - 8) * d;
    }
    y += kQK4_0;
  }
}

void DequantQ4_1(const BlockQ4_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(x[i].d);
    const float m = F16ToF32(x[i].m);
    for (int j = 0; j < kQK4_1 / 2; ++j) {
      y[j] = (x[i].qs[j] & 0x0F) * d + m;
      y[j + 16] = (x[i].qs[j] >> 4) * d + m;
    }
    y += kQK4_1;
  }
}

void DequantQ5_0(const BlockQ5_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(x[i].d);
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, 4);
    for (int j = 0; j < kQK5_0 / 2; ++j) {
      const int xh0 = ((qh >> j) << 4) & 0x10;
      const int xh1 = (qh >> (j + 12)) & 0x10;
      y[j] = (((x[i].qs[j] & 0x0F) | xh0) - 16) * d;
      y[j + 16] = (((x[i].qs[j] >> 4) | xh1) - 16) * d;
    }
    y += kQK5_0;
  }
}

void DequantQ5_1(const BlockQ5_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(x[i].d);
    const float m = F16ToF32(x[i].m);
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, 4);
    for (int j = 0; j < kQK5_1 / 2; ++j) {
      const int xh0 = ((qh >> j) << 4) & 0x10;
      const int xh1 = (qh >> (j + 12)) & 0x10;
      y[j] = ((x[i].qs[j] & 0x0F) | xh0) * d + m;
      y[j + 16] = ((x[i].qs[j] >> 4) | xh1) * d + m;
    }
    y += kQK5_1;
  }
}

void DequantQ8_0(const BlockQ8_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(x[i].d);
    for (int j = 0; j < kQK8_0; ++j) y[j] = x[i].qs[j] * d;
    y += kQK8_0;
  }
}

void DequantQ2_K(const BlockQ2_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(x[i].d);
    const float dmin = F16ToF32(x[i].dmin);
    const uint8_t* q = x[i].qs;
    int is = 0;
    for (int n = 0; n < kQK_K; n += 128) {
      int shift = 0;
      for (int j = 0; j < 4; ++j) {
        uint8_t sc = x[i].scales[is++];
        float dl = d * (sc & 0xF), ml = dmin * (sc >> 4);
        for (int l = 0; l < 16; ++l) *y++ = dl * ((q[l] >> shift) & 3) - ml;
        sc = x[i].scales[is++];
        dl = d * (sc & 0xF);
        ml = dmin * (sc >> 4);
        for (int l = 0; l < 16; ++l) *y++ = dl * ((q[l + 16] >> shift) & 3) - ml;
        shift += 2;
      }
      q += 32;
    }
  }
}

}  // namespace

void Q3KScales(const uint8_t* packed, int8_t* out) {
  constexpr uint32_t kmask1 = 0x03030303;
  constexpr uint32_t kmask2 = 0x0f0f0f0f;
  uint32_t aux[4];
  std::memcpy(aux, packed, 12);
  const uint32_t tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
  aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
  aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
  aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
  std::memcpy(out, aux, 16);
}

namespace {

void DequantQ3_K(const BlockQ3_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d_all = F16ToF32(x[i].d);
    int8_t scales[16];
    Q3KScales(x[i].scales, scales);
    const uint8_t* q = x[i].qs;
    const uint8_t* hm = x[i].hmask;
    uint8_t m = 1;
    int is = 0;
    for (int n = 0; n < kQK_K; n += 128) {
      int shift = 0;
      for (int j = 0; j < 4; ++j) {
        float dl = d_all * (scales[is++] - 32);
        for (int l = 0; l < 16; ++l) {
          *y++ = dl * (static_cast<int8_t>((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
        }
        dl = d_all * (scales[is++] - 32);
        for (int l = 0; l < 16; ++l) {
          *y++ = dl * (static_cast<int8_t>((q[l + 16] >> shift) & 3) -
                       ((hm[l + 16] & m) ? 0 : 4));
        }
        shift += 2;
        m <<= 1;
      }
      q += 32;
    }
  }
}

void DequantQ4_K(const BlockQ4_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(x[i].d);
    const float dmin = F16ToF32(x[i].dmin);
    const uint8_t* q = x[i].qs;
    int is = 0;
    for (int j = 0; j < kQK_K; j += 64) {
      uint8_t sc, m;
      GetScaleMinK4(is + 0, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      GetScaleMinK4(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
      q += 32;
      is += 2;
    }
  }
}

void DequantQ5_K(const BlockQ5_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(x[i].d);
    const float dmin = F16ToF32(x[i].dmin);
    const uint8_t* ql = x[i].qs;
    const uint8_t* qh = x[i].qh;
    int is = 0;
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0; j < kQK_K; j += 64) {
      uint8_t sc, m;
      GetScaleMinK4(is + 0, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      GetScaleMinK4(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
      ql += 32;
      is += 2;
      u1 <<= 2;
      u2 <<= 2;
    }
  }
}

void DequantQ6_K(const BlockQ6_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = F16ToF32(x[i].d);
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* sc = x[i].scales;
    for (int n = 0; n < kQK_K; n += 128) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = static_cast<int8_t>((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = static_cast<int8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = static_cast<int8_t>((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = static_cast<int8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l + 0] = d * sc[is + 0] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
      y += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  }
}

}  // namespace

int64_t BlockElems(GgmlType type) { return GgmlTypeTraitsOf(type).block_size; }
size_t BlockBytes(GgmlType type) { return GgmlTypeTraitsOf(type).bytes_per_block; }

size_t RowBytes(GgmlType type, int64_t n) {
  const GgmlTypeTraits t = GgmlTypeTraitsOf(type);
  CHECK_EQ(n % t.block_size, 0) << t.name << " row of " << n;
  return static_cast<size_t>(n / t.block_size) * t.bytes_per_block;
}

bool CanDequantize(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_0:
    case GgmlType::kQ5_1:
    case GgmlType::kQ8_0:
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K:
      return true;
    default:
      return false;
  }
}

void DequantizeRow(GgmlType type, const void* src, float* dst, int64_t n) {
  const int64_t nb = n / BlockElems(type);
  CHECK_EQ(nb * BlockElems(type), n);
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case GgmlType::kF16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = F16ToF32(s[i]);
      return;
    }
    case GgmlType::kBF16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = BF16ToF32(s[i]);
      return;
    }
    case GgmlType::kQ4_0: return DequantQ4_0(static_cast<const BlockQ4_0*>(src), dst, nb);
    case GgmlType::kQ4_1: return DequantQ4_1(static_cast<const BlockQ4_1*>(src), dst, nb);
    case GgmlType::kQ5_0: return DequantQ5_0(static_cast<const BlockQ5_0*>(src), dst, nb);
    case GgmlType::kQ5_1: return DequantQ5_1(static_cast<const BlockQ5_1*>(src), dst, nb);
    case GgmlType::kQ8_0: return DequantQ8_0(static_cast<const BlockQ8_0*>(src), dst, nb);
    case GgmlType::kQ2_K: return DequantQ2_K(static_cast<const BlockQ2_K*>(src), dst, nb);
    case GgmlType::kQ3_K: return DequantQ3_K(static_cast<const BlockQ3_K*>(src), dst, nb);
    case GgmlType::kQ4_K: return DequantQ4_K(static_cast<const BlockQ4_K*>(src), dst, nb);
    case GgmlType::kQ5_K: return DequantQ5_K(static_cast<const BlockQ5_K*>(src), dst, nb);
    case GgmlType::kQ6_K: return DequantQ6_K(static_cast<const BlockQ6_K*>(src), dst, nb);
    case GgmlType::kQ8_K: {
      const BlockQ8_K* x = static_cast<const BlockQ8_K*>(src);
      for (int64_t i = 0; i < nb; ++i) {
        for (int j = 0; j < kQK_K; ++j) dst[i * kQK_K + j] = x[i].d * x[i].qs[j];
      }
      return;
    }
  }
  LOG(FATAL) << "unhandled type";
}

float F16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F;
  uint32_t mant = h & 0x3FF;
  uint32_t bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {
    // Subnormal half: normalise into a float.
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400) == 0);
    bits = sign | ((112 - e) << 23) | ((mant & 0x3FF) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t F32ToF16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = (x >> 16) & 0x8000;
  const uint32_t absx = x & 0x7FFFFFFF;
  if (absx >= 0x7F800000u) {  // inf or NaN
    return sign | 0x7C00 | (absx > 0x7F800000u ? 0x200 : 0);
  }
  if (absx >= 0x477FF000u) return sign | 0x7C00;  // rounds to >= 65520: inf
  if (absx < 0x38800000u) {                        // below 2^-14: subnormal or 0
    if (absx < 0x33000000u) return sign;           // < 2^-25 rounds to 0
    const uint32_t e = absx >> 23;
    const uint32_t m = (absx & 0x7FFFFF) | 0x800000;
    const int shift = 126 - e;  // m * 2^(e-150) / 2^-24 = m >> (126 - e)
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) ++r;
    return sign | static_cast<uint16_t>(r);
  }
  uint32_t r = absx - 0x38000000u;  // rebias exponent 127 -> 15 (in place)
  const uint32_t rem = r & 0x1FFF;
  r >>= 13;
  if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) ++r;
  return sign | static_cast<uint16_t>(r);
}

uint16_t F32ToBF16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7FFFFFFF) > 0x7F800000u) return (u >> 16) | 64;  // quiet NaN
  return static_cast<uint16_t>((u + (0x7FFF + ((u >> 16) & 1))) >> 16);
}

}  // namespace rill::kernels::cpu
