// Block formats of ggml/GGUF quantized tensors, byte-exact with ggml, for
// the types of ggml_type.h. Nothing here knows about models: it is plain
// layout + scalar conversion.
#ifndef RILL_KERNELS_CPU_QUANT_TYPES_H_
#define RILL_KERNELS_CPU_QUANT_TYPES_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/cpu/ggml_type.h"

namespace rill::kernels::cpu {

inline constexpr int kQK4_0 = 32;
inline constexpr int kQK4_1 = 32;
inline constexpr int kQK5_0 = 32;
inline constexpr int kQK5_1 = 32;
inline constexpr int kQK8_0 = 32;
inline constexpr int kQK_K = 256;   // super-block size of the K-quants
inline constexpr int kKScaleBytes = 12;  // 8 packed 6-bit (scale, min) pairs

using ggml_half = uint16_t;  // IEEE binary16 bits

#pragma pack(push, 1)
struct BlockQ4_0 {
  ggml_half d;
  uint8_t qs[kQK4_0 / 2];  // low nibble: weight j, high nibble: weight j+16
};
struct BlockQ4_1 {
  ggml_half d;
  ggml_half m;
  uint8_t qs[kQK4_1 / 2];
};
struct BlockQ5_0 {
  ggml_half d;
  uint8_t qh[4];  // bit j: 5th bit of weight j
  uint8_t qs[kQK5_0 / 2];
};
struct BlockQ5_1 {
  ggml_half d;
  ggml_half m;
  uint8_t qh[4];
  uint8_t qs[kQK5_1 / 2];
};
struct BlockQ8_0 {
  ggml_half d;
  int8_t qs[kQK8_0];
};
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];  // low 4 bits scale, high 4 bits min
  uint8_t qs[kQK_K / 4];
  ggml_half d;
  ggml_half dmin;
};
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[12];
  ggml_half d;
};
struct BlockQ4_K {
  ggml_half d;
  ggml_half dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQK_K / 2];
};
struct BlockQ5_K {
  ggml_half d;
  ggml_half dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  ggml_half d;
};
// Activation format of the K-quant dot products (ggml's block_q8_K).
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];  // sum of each group of 16 qs
};
#pragma pack(pop)

static_assert(sizeof(BlockQ4_0) == 18, "ggml layout");
static_assert(sizeof(BlockQ4_1) == 20, "ggml layout");
static_assert(sizeof(BlockQ5_0) == 22, "ggml layout");
static_assert(sizeof(BlockQ5_1) == 24, "ggml layout");
static_assert(sizeof(BlockQ8_0) == 34, "ggml layout");
static_assert(sizeof(BlockQ2_K) == 84, "ggml layout");
static_assert(sizeof(BlockQ3_K) == 110, "ggml layout");
static_assert(sizeof(BlockQ4_K) == 144, "ggml layout");
static_assert(sizeof(BlockQ5_K) == 176, "ggml layout");
static_assert(sizeof(BlockQ6_K) == 210, "ggml layout");
static_assert(sizeof(BlockQ8_K) == 292, "ggml layout");

// Weights per block (1 for the float types): GgmlTypeTraitsOf's block_size.
int64_t BlockElems(GgmlType type);
// Bytes per block (element size for the float types).
size_t BlockBytes(GgmlType type);
// Bytes of a row of n elements; n must be a multiple of BlockElems.
size_t RowBytes(GgmlType type, int64_t n);

// Whether DequantizeRow supports the type, i.e. whether the kernels run it:
// the float types and the weight quantizations above (not Q8_K, an
// activation-only type, nor Q8_1 or the integer and f64 types).
bool CanDequantize(GgmlType type);

// Scalar reference dequantization of n elements (n a multiple of BlockElems).
void DequantizeRow(GgmlType type, const void* src, float* dst, int64_t n);

// IEEE half <-> float, exact for every half value; float->half rounds to
// nearest even (like ggml's GGML_FP32_TO_FP16).
float F16ToF32(uint16_t h);
uint16_t F32ToF16(float f);
inline float BF16ToF32(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// Round to nearest even; NaN stays NaN (quiet), like ggml_compute_fp32_to_bf16.
uint16_t F32ToBF16(float f);

// Unpacks Q3_K's 16 6-bit scales (stored biased by 32: subtract 32).
void Q3KScales(const uint8_t* packed, int8_t* out);

// Decodes the j-th (scale, min) pair of Q4_K/Q5_K packed 6-bit scales.
inline void GetScaleMinK4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
  }
}

}  // namespace rill::kernels::cpu

#endif  // RILL_KERNELS_CPU_QUANT_TYPES_H_
