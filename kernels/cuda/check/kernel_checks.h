// Checks of each CUDA kernel against its float reference on fresh random
// inputs, outputs poisoned with NaN before every run.
#ifndef RILL_KERNELS_CUDA_CHECK_KERNEL_CHECKS_H_
#define RILL_KERNELS_CUDA_CHECK_KERNEL_CHECKS_H_

#include <random>
#include <vector>

#include "kernels/cuda/check/check_util.h"

namespace rill::kernels::cuda::check {

std::vector<Row> CheckElementwise(std::mt19937& rng);  // norm, rope, act, embed, kv write
std::vector<Row> CheckAttention(std::mt19937& rng);    // decode (split-K) and prefill
std::vector<Row> CheckGemm(std::mt19937& rng);
std::vector<Row> CheckSampling(std::mt19937& rng);  // sampling and logprobs

}  // namespace rill::kernels::cuda::check

#endif  // RILL_KERNELS_CUDA_CHECK_KERNEL_CHECKS_H_
