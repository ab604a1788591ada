#include "kernels/cpu/sub_block_ints.h"

#include <cstring>

namespace rill::kernels::cpu::internal {
namespace {

// Q4_0's weights d (q - 8) as d q + m: m = -8 d, exact in f16 (a power of
// two) for every d short of the f16 range's top.
uint16_t MinusEightTimes(uint16_t d) { return F32ToF16(-8.0f * F16ToF32(d)); }

// The 32 weights of a 32-block whose low nibbles hold weights 0-15 and high
// nibbles 16-31, plus a 5th bit from qh (bit k: weight k) when qh is set.
void Nibbles32(const uint8_t* qs, const uint8_t* qh, int bias, int8_t* q) {
  uint32_t h = 0;
  if (qh != nullptr) std::memcpy(&h, qh, 4);
  for (int k = 0; k < 16; ++k) {
    q[k] = static_cast<int8_t>(((qs[k] & 0x0F) | (((h >> k) & 1) << 4)) - bias);
    q[k + 16] = static_cast<int8_t>(((qs[k] >> 4) | (((h >> (k + 16)) & 1) << 4)) - bias);
  }
}

// Q4_K / Q5_K sub-block j of super-block x: integers, d * sc and -dmin * min.
template <typename Block>
void ScaledK(const Block& x, int j, const uint8_t* qh, SubBlockInts* out) {
  const uint8_t* qs = x.qs + 32 * (j / 2);
  const int shift = 4 * (j % 2);
  for (int l = 0; l < 32; ++l) {
    int v = (qs[l] >> shift) & 0x0F;
    if (qh != nullptr) v |= ((qh[l] >> j) & 1) << 4;
    out->q[l] = static_cast<int8_t>(v);
  }
  uint8_t sc, mn;
  GetScaleMinK4(j, x.scales, &sc, &mn);
  out->d = F16ToF32(x.d) * sc;
  out->m = -(F16ToF32(x.dmin) * mn);
}

void SubBlockQ6K(const BlockQ6_K& x, int j, SubBlockInts* out) {
  const int h = j / 4, k = j % 4;  // 128-half, and which of its 4 quarters
  const uint8_t* ql = x.ql + 64 * h + 32 * (k % 2);
  const uint8_t* qh = x.qh + 32 * h;
  for (int l = 0; l < 32; ++l) {
    const int v = ((ql[l] >> (4 * (k / 2))) & 0x0F) | (((qh[l] >> (2 * k)) & 3) << 4);
    out->q[l] = static_cast<int8_t>(v - 32);
  }
  out->s[0] = x.scales[8 * h + 2 * k];
  out->s[1] = x.scales[8 * h + 2 * k + 1];
  out->d16 = x.d;
}

void SubBlockQ3K(const BlockQ3_K& x, int j, SubBlockInts* out) {
  const int h = j / 4, k = j % 4;  // 128-half, and its 2-bit plane
  const uint8_t* qs = x.qs + 32 * h;
  const uint8_t hbit = static_cast<uint8_t>(1u << (4 * h + k));
  for (int l = 0; l < 32; ++l) {
    const int v = ((qs[l] >> (2 * k)) & 3) - ((x.hmask[l] & hbit) ? 0 : 4);
    out->q[l] = static_cast<int8_t>(v);
  }
  int8_t scales[16];
  Q3KScales(x.scales, scales);
  out->s[0] = static_cast<int8_t>(scales[8 * h + 2 * k] - 32);
  out->s[1] = static_cast<int8_t>(scales[8 * h + 2 * k + 1] - 32);
  out->d16 = x.d;
}

// Q2_K sub-block j: its 128-half's 2-bit plane, and the 4-bit scale and
// min of each 16 columns (DequantizeRow's order: scales[8 h + 2 k] for
// columns 0-15, the next for 16-31).
void SubBlockQ2K(const BlockQ2_K& x, int j, SubBlockInts* out) {
  const int h = j / 4, k = j % 4;
  const uint8_t* qs = x.qs + 32 * h;
  for (int l = 0; l < 32; ++l) out->q[l] = static_cast<int8_t>((qs[l] >> (2 * k)) & 3);
  for (int half = 0; half < 2; ++half) {
    const uint8_t sc = x.scales[8 * h + 2 * k + half];
    out->s[half] = static_cast<int8_t>(sc & 0x0F);
    out->neg_min[half] = static_cast<int8_t>(-(sc >> 4));
  }
  out->d16 = x.d;
  out->m16 = x.dmin;
}

}  // namespace

bool InterleavedFormatFor(GgmlType type, PackedWeights::Format* format) {
  using F = PackedWeights::Format;
  switch (type) {
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1: *format = F::k4BitInterleaved8; return true;
    case GgmlType::kQ8_0:
    case GgmlType::kQ5_0: *format = F::k8BitInterleaved8; return true;
    case GgmlType::kQ4_K: *format = F::k4BitF32ScaledInterleaved8; return true;
    case GgmlType::kQ5_K:
    case GgmlType::kQ5_1: *format = F::k8BitF32ScaledInterleaved8; return true;
    case GgmlType::kQ6_K:
    case GgmlType::kQ3_K: *format = F::k8BitSub16Interleaved8; return true;
    case GgmlType::kQ2_K: *format = F::k2BitSub16MinInterleaved8; return true;
    default: return false;
  }
}

void ReadSubBlock(GgmlType type, const uint8_t* row, int64_t b, SubBlockInts* out) {
  const int64_t sb = b / 8;  // K-quant super-block
  const int j = static_cast<int>(b % 8);
  switch (type) {
    case GgmlType::kQ4_0: {
      const BlockQ4_0& x = reinterpret_cast<const BlockQ4_0*>(row)[b];
      Nibbles32(x.qs, nullptr, 0, out->q);
      out->d16 = x.d;
      out->m16 = MinusEightTimes(x.d);
      return;
    }
    case GgmlType::kQ4_1: {
      const BlockQ4_1& x = reinterpret_cast<const BlockQ4_1*>(row)[b];
      Nibbles32(x.qs, nullptr, 0, out->q);
      out->d16 = x.d;
      out->m16 = x.m;
      return;
    }
    case GgmlType::kQ5_0: {
      const BlockQ5_0& x = reinterpret_cast<const BlockQ5_0*>(row)[b];
      Nibbles32(x.qs, x.qh, 16, out->q);
      out->d16 = x.d;
      return;
    }
    case GgmlType::kQ5_1: {
      const BlockQ5_1& x = reinterpret_cast<const BlockQ5_1*>(row)[b];
      Nibbles32(x.qs, x.qh, 0, out->q);
      out->d = F16ToF32(x.d);
      out->m = F16ToF32(x.m);
      return;
    }
    case GgmlType::kQ8_0: {
      const BlockQ8_0& x = reinterpret_cast<const BlockQ8_0*>(row)[b];
      std::memcpy(out->q, x.qs, 32);
      out->d16 = x.d;
      return;
    }
    case GgmlType::kQ4_K: {
      const BlockQ4_K& x = reinterpret_cast<const BlockQ4_K*>(row)[sb];
      ScaledK(x, j, nullptr, out);
      return;
    }
    case GgmlType::kQ5_K: {
      const BlockQ5_K& x = reinterpret_cast<const BlockQ5_K*>(row)[sb];
      ScaledK(x, j, x.qh, out);
      return;
    }
    case GgmlType::kQ6_K:
      SubBlockQ6K(reinterpret_cast<const BlockQ6_K*>(row)[sb], j, out);
      return;
    case GgmlType::kQ3_K:
      SubBlockQ3K(reinterpret_cast<const BlockQ3_K*>(row)[sb], j, out);
      return;
    case GgmlType::kQ2_K:
      SubBlockQ2K(reinterpret_cast<const BlockQ2_K*>(row)[sb], j, out);
      return;
    default: return;
  }
}

}  // namespace rill::kernels::cpu::internal
