// Random rows of the block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and the
// K-quants) for kernel tests: random integers and sub-block scales, finite
// f16 scales (and mins) around 0.05.
#ifndef RILL_KERNELS_CPU_RANDOM_BLOCKS_FOR_TEST_H_
#define RILL_KERNELS_CPU_RANDOM_BLOCKS_FOR_TEST_H_

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/quant_types.h"

namespace rill::kernels::cpu {

inline std::vector<uint8_t> RandomBlockRows(GgmlType type, int64_t rows, int64_t cols,
                                            std::mt19937& rng) {
  const size_t bb = BlockBytes(type);
  const int64_t nb = cols / BlockElems(type);
  std::vector<uint8_t> data(rows * nb * bb);
  std::uniform_int_distribution<int> byte(0, 255);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (uint8_t& b : data) b = static_cast<uint8_t>(byte(rng));
  // Where each block's f16 values are (the rest are integers or packed
  // scales, any bytes valid). K-quant scales multiply d by up to 63 (127
  // for Q6_K), so their d is smaller.
  std::vector<int> halves = {0};
  float scale = 0.05f;
  switch (type) {
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_1: halves = {0, 2}; break;
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K: halves = {0, 2}; scale = 0.002f; break;
    case GgmlType::kQ2_K: halves = {80, 82}; scale = 0.01f; break;
    case GgmlType::kQ3_K: halves = {108}; scale = 0.002f; break;
    case GgmlType::kQ6_K: halves = {208}; scale = 0.001f; break;
    default: break;
  }
  for (int64_t i = 0; i < rows * nb; ++i) {
    uint8_t* blk = data.data() + i * bb;
    for (int off : halves) {
      const uint16_t h = F32ToF16(scale * normal(rng));
      std::memcpy(blk + off, &h, 2);
    }
  }
  return data;
}

}  // namespace rill::kernels::cpu

#endif  // RILL_KERNELS_CPU_RANDOM_BLOCKS_FOR_TEST_H_
