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
  cache.layer_floats_ = static_cast<int64_t>(shape.num_blocks) * shape.block_size *
                        shape.num_kv_heads * shape.head_dim;
  cache.keys_.resize(cache.layer_floats_ * shape.num_layers);
  cache.values_.resize(cache.layer_floats_ * shape.num_layers);
  return cache;
}

}  // namespace rill::worker
