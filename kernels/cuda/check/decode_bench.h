// Decode-step micro-benchmark: a synthetic SmolLM2-135M-shaped BF16 model
// with random weights, one CUDA graph per batch bucket, tokens/s per batch.
#ifndef RILL_KERNELS_CUDA_CHECK_DECODE_BENCH_H_
#define RILL_KERNELS_CUDA_CHECK_DECODE_BENCH_H_

#include <vector>

#include "kernels/cuda/check/check_util.h"

namespace rill::kernels::cuda::check {

struct BenchConfig {
  int layers = 30, hidden = 576, q_heads = 9, kv_heads = 3, head_dim = 64, ffn = 1536;
  int vocab = 49152;
  int context = 256;  // cached tokens per sequence during the measured steps
  int iterations = 50;
  std::vector<int> batches = {1, 16, 64, 256};
  double hbm_bytes_per_s = 4.8e12;  // H200
};

// One row per batch (ms/step, tokens/s; batch 1 also the fraction of the
// weights-bytes / HBM-bandwidth floor).
std::vector<Row> RunDecodeBench(const BenchConfig& config);

}  // namespace rill::kernels::cuda::check

#endif  // RILL_KERNELS_CUDA_CHECK_DECODE_BENCH_H_
