// Random rows of the 32-weight block formats (Q4_0, Q4_1, Q8_0) for kernel
// tests: random integers, finite f16 scales (and mins) around 0.05.
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
  const int64_t nb = cols / 32;
  std::vector<uint8_t> data(rows * nb * bb);
  std::uniform_int_distribution<int> byte(0, 255);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (uint8_t& b : data) b = static_cast<uint8_t>(byte(rng));
  for (int64_t i = 0; i < rows * nb; ++i) {
    uint8_t* blk = data.data() + i * bb;
    const uint16_t d = F32ToF16(0.05f * normal(rng));
    std::memcpy(blk, &d, 2);
    if (type == GgmlType::kQ4_1) {
      const uint16_t m = F32ToF16(0.05f * normal(rng));
      std::memcpy(blk + 2, &m, 2);
    }
  }
  return data;
}

}  // namespace rill::kernels::cpu

#endif  // RILL_KERNELS_CPU_RANDOM_BLOCKS_FOR_TEST_H_
