// Repacking of file blocks into the row-group layout of packed_matmul.h.
#include "kernels/cpu/packed_matmul.h"

#include <cmath>
#include <cstring>

#include "kernels/cpu/sub_block_ints.h"

namespace rill::kernels::cpu {
namespace {

constexpr int kGroupRows = 16;

// 4-bit: per (group, block) four 64-byte chunks of nibbles, then d[16] and
// m[16] as f16. Chunk c, lane r (bytes 4r..4r+3) holds two 16-bit words:
// nibble s of word 0 is the row's weight 2(4c+s) of the block, nibble s of
// word 1 its weight 2(4c+s)+1. Shifting the words right by 4s and masking
// gives the int16 pairs (w[2j], w[2j+1]) of step j = 4c+s for all 16 rows.
constexpr size_t k4BitBytes = 256 + 32 + 32;
// 8-bit: per (group, block) 16 steps of 32 bytes ([j][r][2] int8), then
// d[16] f16, padded to a multiple of 64.
constexpr size_t k8BitBytes = 512 + 64;

constexpr int kInterleavedRows = 8;

// Lane `lane`'s 32 weights of one interleaved block, with the file's own
// formulas (quant_types.cc, sub_block_ints.h), so the floats are
// DequantizeRow's.
void DequantizeInterleavedBlock(const PackedWeights& w, const uint8_t* blk, int lane, float* y) {
  const PackedWeights::Format f = w.format;
  if (InterleavedTwoBit(f)) {  // Q2_K: d * s * q - dmin * min, as the kernels widen it
    uint16_t h;
    std::memcpy(&h, blk + kQ2KDOffset + 2 * lane, 2);
    const float d = F16ToF32(h);
    std::memcpy(&h, blk + kQ2KDminOffset + 2 * lane, 2);
    const float dmin = F16ToF32(h);
    for (int j = 0; j < 32; ++j) {
      const int q = (blk[8 * (j / 4) + lane] >> (2 * (j % 4))) & 3;
      const int half = 8 * (j / 16) + lane;
      const float ds = d * static_cast<int8_t>(blk[kQ2KScaleOffset + half]);
      const float dm = dmin * static_cast<int8_t>(blk[kQ2KNegMinOffset + half]);
      y[j] = std::fma(static_cast<float>(q), ds, dm);
    }
    return;
  }
  int q[32];
  for (int j = 0; j < 32; ++j) {
    q[j] = InterleavedEightBit(f) ? static_cast<int8_t>(blk[8 * j + lane])
                                  : (blk[8 * (j / 2) + lane] >> (4 * (j % 2))) & 0x0F;
  }
  float d, m = 0.0f;
  if (InterleavedF32Scales(f)) {
    std::memcpy(&d, blk + InterleavedDOffset(f) + 4 * lane, 4);
    std::memcpy(&m, blk + InterleavedMOffset(f) + 4 * lane, 4);
  } else {
    uint16_t h;
    std::memcpy(&h, blk + InterleavedDOffset(f) + 2 * lane, 2);
    d = F16ToF32(h);
    if (InterleavedHasMin(f)) {
      std::memcpy(&h, blk + InterleavedMOffset(f) + 2 * lane, 2);
      m = F16ToF32(h);
    }
  }
  for (int j = 0; j < 32; ++j) {
    if (InterleavedSub16(f)) {
      const int8_t s = static_cast<int8_t>(blk[InterleavedQBytes(f) + 8 * (j / 16) + lane]);
      y[j] = d * s * q[j];
    } else if (w.source_type == GgmlType::kQ4_0) {
      y[j] = (q[j] - 8) * d;
    } else if (InterleavedHasMin(f)) {
      y[j] = q[j] * d + m;
    } else {
      y[j] = q[j] * d;
    }
  }
}

}  // namespace

std::shared_ptr<const PackedWeights> PackWeights(GgmlType type, int64_t rows, int64_t cols,
                                                 const void* data, size_t row_stride) {
  if (type != GgmlType::kQ4_0 && type != GgmlType::kQ4_1 && type != GgmlType::kQ8_0) {
    return nullptr;
  }
  if (rows <= 0 || cols <= 0 || cols % 32 != 0 || data == nullptr) return nullptr;
  auto p = std::make_shared<PackedWeights>();
  p->format = type == GgmlType::kQ8_0 ? PackedWeights::Format::k8Bit
                                       : PackedWeights::Format::k4Bit;
  p->source_type = type;
  p->rows = rows;
  p->cols = cols;
  p->groups = (rows + kGroupRows - 1) / kGroupRows;
  p->block_bytes = p->format == PackedWeights::Format::k4Bit ? k4BitBytes : k8BitBytes;
  const int64_t nb = cols / 32;
  p->data.assign(p->groups * nb * p->block_bytes, 0);
  const uint8_t* src = static_cast<const uint8_t*>(data);
  for (int64_t g = 0; g < p->groups; ++g) {
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* out = p->data.data() + (g * nb + b) * p->block_bytes;
      for (int r = 0; r < kGroupRows; ++r) {
        const int64_t row = g * kGroupRows + r;
        if (row >= rows) break;  // padding rows stay zero (d = 0)
        internal::SubBlockInts sub;
        internal::ReadSubBlock(type, src + row * row_stride, b, &sub);
        const int8_t* q = sub.q;
        const uint16_t d = sub.d16, m = sub.m16;
        if (p->format == PackedWeights::Format::k4Bit) {
          for (int c = 0; c < 4; ++c) {
            uint16_t w0 = 0, w1 = 0;
            for (int s = 0; s < 4; ++s) {
              const int j = 4 * c + s;
              w0 |= static_cast<uint16_t>(q[2 * j]) << (4 * s);
              w1 |= static_cast<uint16_t>(q[2 * j + 1]) << (4 * s);
            }
            std::memcpy(out + 64 * c + 4 * r, &w0, 2);
            std::memcpy(out + 64 * c + 4 * r + 2, &w1, 2);
          }
          std::memcpy(out + 256 + 2 * r, &d, 2);
          std::memcpy(out + 288 + 2 * r, &m, 2);
        } else {
          for (int j = 0; j < 16; ++j) {
            out[32 * j + 2 * r] = static_cast<uint8_t>(q[2 * j]);
            out[32 * j + 2 * r + 1] = static_cast<uint8_t>(q[2 * j + 1]);
          }
          std::memcpy(out + 512 + 2 * r, &d, 2);
        }
      }
    }
  }
  return p;
}

std::shared_ptr<const PackedWeights> PackWeightsInterleaved(GgmlType type, int64_t rows,
                                                            int64_t cols, const void* data,
                                                            size_t row_stride) {
  PackedWeights::Format f;
  if (!internal::InterleavedFormatFor(type, &f)) return nullptr;
  if (rows <= 0 || cols <= 0 || cols % BlockElems(type) != 0 || data == nullptr) return nullptr;
  auto p = std::make_shared<PackedWeights>();
  p->format = f;
  p->source_type = type;
  p->rows = rows;
  p->cols = cols;
  p->groups = (rows + kInterleavedRows - 1) / kInterleavedRows;
  p->block_bytes = InterleavedBlockBytes(f);
  const int64_t nb = cols / 32;
  p->data.assign(p->groups * nb * p->block_bytes, 0);
  const uint8_t* src = static_cast<const uint8_t*>(data);
  const size_t d_off = InterleavedDOffset(f), m_off = InterleavedMOffset(f);
  for (int64_t g = 0; g < p->groups; ++g) {
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* out = p->data.data() + (g * nb + b) * p->block_bytes;
      for (int r = 0; r < kInterleavedRows; ++r) {
        const int64_t row = g * kInterleavedRows + r;
        if (row >= rows) break;  // padding rows stay zero (d = m = 0)
        internal::SubBlockInts sub;
        internal::ReadSubBlock(type, src + row * row_stride, b, &sub);
        if (InterleavedTwoBit(f)) {
          for (int k = 0; k < 8; ++k) {
            const int8_t* q = sub.q + 4 * k;
            out[8 * k + r] = static_cast<uint8_t>(q[0] | q[1] << 2 | q[2] << 4 | q[3] << 6);
          }
          for (int half = 0; half < 2; ++half) {
            out[kQ2KScaleOffset + 8 * half + r] = static_cast<uint8_t>(sub.s[half]);
            out[kQ2KNegMinOffset + 8 * half + r] = static_cast<uint8_t>(sub.neg_min[half]);
          }
          std::memcpy(out + kQ2KDOffset + 2 * r, &sub.d16, 2);
          std::memcpy(out + kQ2KDminOffset + 2 * r, &sub.m16, 2);
          continue;
        }
        if (InterleavedEightBit(f)) {
          for (int j = 0; j < 32; ++j) out[8 * j + r] = static_cast<uint8_t>(sub.q[j]);
        } else {
          for (int s = 0; s < 16; ++s) {
            out[8 * s + r] = static_cast<uint8_t>(sub.q[2 * s] | (sub.q[2 * s + 1] << 4));
          }
        }
        if (InterleavedSub16(f)) {
          out[InterleavedQBytes(f) + r] = static_cast<uint8_t>(sub.s[0]);
          out[InterleavedQBytes(f) + 8 + r] = static_cast<uint8_t>(sub.s[1]);
        }
        if (InterleavedF32Scales(f)) {
          std::memcpy(out + d_off + 4 * r, &sub.d, 4);
          std::memcpy(out + m_off + 4 * r, &sub.m, 4);
        } else {
          std::memcpy(out + d_off + 2 * r, &sub.d16, 2);
          if (InterleavedHasMin(f)) std::memcpy(out + m_off + 2 * r, &sub.m16, 2);
        }
      }
    }
  }
  return p;
}

void DequantizePackedRow(const PackedWeights& w, int64_t row, float* out) {
  const int64_t nb = w.cols / 32;
  const bool interleaved = IsInterleavedFormat(w.format);
  const int group_rows = interleaved ? kInterleavedRows : kGroupRows;
  const int64_t g = row / group_rows;
  const int lane = static_cast<int>(row % group_rows);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = w.data.data() + (g * nb + b) * w.block_bytes;
    float* y = out + 32 * b;
    if (interleaved) {
      DequantizeInterleavedBlock(w, blk, lane, y);
      continue;
    }
    if (w.format == PackedWeights::Format::k8Bit) {
      uint16_t dh;
      std::memcpy(&dh, blk + 512 + 2 * lane, 2);
      const float d = F16ToF32(dh);
      for (int k = 0; k < 32; ++k) {
        y[k] = static_cast<int8_t>(blk[32 * (k / 2) + 2 * lane + k % 2]) * d;
      }
      continue;
    }
    uint16_t dh, mh;
    std::memcpy(&dh, blk + 256 + 2 * lane, 2);
    std::memcpy(&mh, blk + 288 + 2 * lane, 2);
    const float d = F16ToF32(dh), m = F16ToF32(mh);
    for (int k = 0; k < 32; ++k) {
      const int j = k / 2, c = j / 4, s = j % 4;
      uint16_t word;
      std::memcpy(&word, blk + 64 * c + 4 * lane + 2 * (k % 2), 2);
      const int q = (word >> (4 * s)) & 0x0F;
      // The file's own formulas (quant_types.cc), for the same floats.
      y[k] = w.source_type == GgmlType::kQ4_0 ? (q - 8) * d : q * d + m;
    }
  }
}

}  // namespace rill::kernels::cpu
