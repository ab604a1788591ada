#include "worker/kv_cache.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace rill::worker {

absl::StatusOr<PagedKvCache> PagedKvCache::Create(const KvCacheShape& shape) {
  if (shape.num_layers <= 0 || shape.num_blocks <= 0 || shape.block_size <= 0 ||
      shape.num_kv_heads <= 0 || shape.head_dim <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV cache shape must be positive: layers=", shape.num_layers,
                     " blocks=", shape.num_blocks, " block_size=", shape.block_size,
                     " kv_heads=", shape.num_kv_heads, " head_dim=", shape.head_dim));
  }
  PagedKvCache cache;
  cache.shape_ = shape;
  cache.layer_bytes_ = static_cast<int64_t>(shape.num_blocks) * shape.block_size *
                       shape.num_kv_heads * shape.head_dim *
                       kernels::cpu::KvDtypeBytes(shape.dtype);
  cache.keys_.resize(cache.layer_bytes_ * shape.num_layers);
  cache.values_.resize(cache.layer_bytes_ * shape.num_layers);
  return cache;
}

absl::StatusOr<kernels::cpu::KvDtype> ParseKvCacheDtype(absl::string_view name) {
  if (name == "auto" || name == "float32" || name == "fp32") return kernels::cpu::KvDtype::kF32;
  if (name == "float16" || name == "fp16" || name == "half") return kernels::cpu::KvDtype::kF16;
  return absl::InvalidArgumentError(absl::StrCat(
      "kv_cache_dtype '", name, "' is not supported (expected auto, float32 or float16)"));
}

const char* KvCacheDtypeName(kernels::cpu::KvDtype dtype) {
  return dtype == kernels::cpu::KvDtype::kF16 ? "float16" : "float32";
}

}  // namespace rill::worker
