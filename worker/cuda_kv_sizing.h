// How many KV blocks the CUDA model (worker/models/cuda/cuda_llama.h) may be
// given once its weights and activation buffers are placed with a one-block
// cache: kernels/cuda/plan/kv_memory_plan.h over the device's free memory
// measured before and after placing, less the block the model keeps for its
// decode graphs' padding rows. Shared by the in-process CUDA executor and a
// CUDA tensor-parallel rank (which passes its own share of the K/V heads).
#ifndef RILL_WORKER_CUDA_KV_SIZING_H_
#define RILL_WORKER_CUDA_KV_SIZING_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "kernels/cuda/plan/kv_memory_plan.h"
#include "worker/loader/checkpoint.h"

namespace rill::worker {

struct PlacedModelMemory {
  int64_t free_before = 0;  // device bytes free before the model was created
  int64_t free_after = 0;   // ... and after (weights, buffers, one block)
  int64_t total = 0;
  int64_t weight_bytes = 0;
};

struct CudaKvSizing {
  int num_blocks = 0;  // to hand to CudaLlama::SetKvCacheBlocks
  kernels::cuda::KvMemoryPlan plan;
  int64_t activation_bytes = 0;  // what was placed beyond the weights
};

// `kv_heads`: the K/V heads this process holds (all of them without tensor
// parallelism). max_model_len > 0: at least one sequence that long must fit
// (ResourceExhausted otherwise, as PlanKvCache says).
absl::StatusOr<CudaKvSizing> SizeCudaKvCache(const loader::ModelConfig& config, int kv_heads,
                                             int block_size, double gpu_memory_utilization,
                                             int64_t max_model_len,
                                             const PlacedModelMemory& memory);

}  // namespace rill::worker

#endif  // RILL_WORKER_CUDA_KV_SIZING_H_
