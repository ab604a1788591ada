// The paged KV cache of one worker: for every layer, K and V stored in
// fixed-size blocks of `block_size` token slots. Which blocks belong to which
// sequence is the engine's business (its block manager hands out block ids);
// the cache only stores rows. Not thread-safe: the worker's step thread owns it.
#ifndef RILL_WORKER_KV_CACHE_H_
#define RILL_WORKER_KV_CACHE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace rill::worker {

struct KvCacheShape {
  int num_layers = 0;
  int num_blocks = 0;
  int block_size = 16;  // token slots per block
  int num_kv_heads = 0;
  int head_dim = 0;

  // Bytes one block takes over all layers (f32 keys and values): what a KV
  // budget is divided by to size the cache.
  int64_t block_bytes() const {
    return int64_t{2} * num_layers * block_size * num_kv_heads * head_dim * sizeof(float);
  }
};

class PagedKvCache {
 public:
  // Allocates num_layers * num_blocks * block_size * num_kv_heads * head_dim
  // floats for K and as many for V (zeroed lazily by the OS).
  static absl::StatusOr<PagedKvCache> Create(const KvCacheShape& shape);

  const KvCacheShape& shape() const { return shape_; }
  // Layer `layer`'s K (V) blocks: [num_blocks][block_size][num_kv_heads][head_dim].
  float* keys(int layer) { return keys_.data() + layer * layer_floats_; }
  float* values(int layer) { return values_.data() + layer * layer_floats_; }
  // Bytes held for K and V together.
  int64_t bytes() const { return 2 * static_cast<int64_t>(keys_.size()) * sizeof(float); }

 private:
  KvCacheShape shape_;
  int64_t layer_floats_ = 0;
  std::vector<float> keys_;
  std::vector<float> values_;
};

}  // namespace rill::worker

#endif  // RILL_WORKER_KV_CACHE_H_
