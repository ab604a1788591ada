#include "kernels/cuda/plan/kv_memory_plan.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace rill::kernels::cuda {
namespace {

std::string MiB(int64_t bytes) { return absl::StrFormat("%.1f MiB", bytes / 1048576.0); }

}  // namespace

absl::Status ValidateGpuMemoryUtilization(double utilization) {
  if (utilization > 0.0 && utilization <= 1.0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("gpu_memory_utilization must be in (0, 1], got ", utilization));
}

int64_t KvBytesPerBlock(const KvCacheShape& s) {
  return 2ll * s.num_layers * s.block_size * s.num_kv_heads * s.head_dim * s.dtype_bytes;
}

absl::StatusOr<KvMemoryPlan> PlanKvCache(const KvCacheShape& shape, const MemoryPlanInput& in) {
  if (absl::Status s = ValidateGpuMemoryUtilization(in.gpu_memory_utilization); !s.ok()) return s;
  if (in.total_bytes <= 0 || in.free_bytes < 0 || in.free_bytes > in.total_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("bad device memory info: free ", in.free_bytes,
                                                   " of total ", in.total_bytes, " bytes"));
  }
  if (shape.num_layers <= 0 || shape.num_kv_heads <= 0 || shape.head_dim <= 0 ||
      shape.block_size <= 0 || shape.dtype_bytes <= 0) {
    return absl::InvalidArgumentError(
        "KV cache shape needs positive layers, heads, head dim, "
        "block size and dtype bytes");
  }
  if (in.weight_bytes < 0 || in.activation_bytes < 0 || in.reserve_bytes < 0) {
    return absl::InvalidArgumentError("weight, activation and reserve bytes must be >= 0");
  }
  KvMemoryPlan plan;
  plan.budget_bytes = static_cast<int64_t>(in.gpu_memory_utilization * in.total_bytes);
  const int64_t used_by_others = in.total_bytes - in.free_bytes;
  const int64_t fixed = used_by_others + in.weight_bytes + in.activation_bytes + in.reserve_bytes;
  const std::string context = absl::StrCat(
      "budget ", MiB(plan.budget_bytes), " (--gpu-memory-utilization=", in.gpu_memory_utilization,
      " of ", MiB(in.total_bytes), "), already in use ", MiB(used_by_others), ", weights ",
      MiB(in.weight_bytes), ", activations ", MiB(in.activation_bytes), ", reserve ",
      MiB(in.reserve_bytes));
  if (fixed >= plan.budget_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the model does not fit on the GPU: ", context,
                     "; raise --gpu-memory-utilization or use a smaller model"));
  }
  plan.bytes_per_block = KvBytesPerBlock(shape);
  plan.num_blocks = (plan.budget_bytes - fixed) / plan.bytes_per_block;
  if (plan.num_blocks <= 0) {
    return absl::ResourceExhaustedError(absl::StrCat("no room for a single KV cache block of ",
                                                     MiB(plan.bytes_per_block), ": ", context));
  }
  plan.kv_bytes = plan.num_blocks * plan.bytes_per_block;
  plan.max_cached_tokens = plan.num_blocks * shape.block_size;
  if (in.max_model_len > 0 && plan.max_cached_tokens < in.max_model_len) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the KV cache holds only ", plan.max_cached_tokens,
                     " tokens, fewer than max model length ", in.max_model_len, ": ", context,
                     "; raise --gpu-memory-utilization or lower the max model length"));
  }
  return plan;
}

}  // namespace rill::kernels::cuda
