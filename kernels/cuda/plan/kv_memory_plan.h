// Sizes the paged KV cache from the device's memory, vLLM style: the engine
// may use gpu_memory_utilization * total bytes; what other processes already
// hold, the weights, the profiled activation peak and a fixed reserve come
// off that budget, and the rest becomes whole KV blocks.
#ifndef RILL_KERNELS_CUDA_PLAN_KV_MEMORY_PLAN_H_
#define RILL_KERNELS_CUDA_PLAN_KV_MEMORY_PLAN_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace rill::kernels::cuda {

struct KvCacheShape {
  int num_layers = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int block_size = 16;  // tokens per block
  int dtype_bytes = 2;  // bf16
};

struct MemoryPlanInput {
  int64_t free_bytes = 0;  // cudaMemGetInfo before weights are loaded
  int64_t total_bytes = 0;
  int64_t weight_bytes = 0;
  int64_t activation_bytes = 0;         // profiled peak of one max-size forward
  int64_t reserve_bytes = 256ll << 20;  // CUDA graphs, cuBLAS workspace, fragmentation
  double gpu_memory_utilization = 0.9;  // --gpu-memory-utilization
  int64_t max_model_len = 0;            // > 0: at least one sequence this long must fit
};

struct KvMemoryPlan {
  int64_t bytes_per_block = 0;  // K and V, all layers
  int64_t num_blocks = 0;
  int64_t kv_bytes = 0;  // num_blocks * bytes_per_block
  int64_t max_cached_tokens = 0;
  int64_t budget_bytes = 0;  // utilization * total
};

// InvalidArgument unless 0 < utilization <= 1 (the engine checks its
// argument with it before any device is touched).
absl::Status ValidateGpuMemoryUtilization(double utilization);

// Bytes of one block (K and V for every layer).
int64_t KvBytesPerBlock(const KvCacheShape& shape);

// InvalidArgument for bad inputs (utilization outside (0, 1], free > total,
// bad shape); ResourceExhausted, with the numbers in MiB, when the weights
// and activations do not fit or no block (or no max_model_len sequence) fits.
absl::StatusOr<KvMemoryPlan> PlanKvCache(const KvCacheShape& shape, const MemoryPlanInput& in);

}  // namespace rill::kernels::cuda

#endif  // RILL_KERNELS_CUDA_PLAN_KV_MEMORY_PLAN_H_
