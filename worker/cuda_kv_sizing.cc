#include "worker/cuda_kv_sizing.h"

#include <algorithm>
#include <climits>

namespace rill::worker {

absl::StatusOr<CudaKvSizing> SizeCudaKvCache(const loader::ModelConfig& c, int kv_heads,
                                             int block_size, double gpu_memory_utilization,
                                             int64_t max_model_len,
                                             const PlacedModelMemory& memory) {
  kernels::cuda::KvCacheShape shape;
  shape.num_layers = static_cast<int>(c.num_layers);
  shape.num_kv_heads = kv_heads;
  shape.head_dim = static_cast<int>(c.head_dim);
  shape.block_size = block_size;
  shape.dtype_bytes = 2;  // bf16
  // Everything the model placed beyond its weights (activation buffers,
  // cuBLAS workspace, the one-block cache) counts as activations.
  const int64_t placed = std::max<int64_t>(0, memory.free_before - memory.free_after);
  kernels::cuda::MemoryPlanInput in;
  in.free_bytes = memory.free_before;
  in.total_bytes = memory.total;
  in.weight_bytes = memory.weight_bytes;
  in.activation_bytes = std::max<int64_t>(0, placed - memory.weight_bytes);
  in.gpu_memory_utilization = gpu_memory_utilization;
  in.max_model_len = max_model_len;
  absl::StatusOr<kernels::cuda::KvMemoryPlan> plan = kernels::cuda::PlanKvCache(shape, in);
  if (!plan.ok()) return plan.status();
  CudaKvSizing sizing;
  sizing.plan = *plan;
  sizing.activation_bytes = in.activation_bytes;
  // The model keeps one block more than it hands out (the decode graphs'
  // padding rows write there), and slots are int32.
  sizing.num_blocks = static_cast<int>(std::min<int64_t>(
      std::max<int64_t>(plan->num_blocks - 1, 1), INT_MAX / std::max(1, block_size) - 1));
  return sizing;
}

}  // namespace rill::worker
