// The paged KV cache of one worker: for every layer, K and V stored in
// fixed-size blocks of `block_size` token slots. Which blocks belong to which
// sequence is the engine's business (its block manager hands out block ids);
// the cache only stores rows. Not thread-safe: the worker's step thread owns it.
#ifndef RILL_WORKER_KV_CACHE_H_
#define RILL_WORKER_KV_CACHE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/cpu/paged_attention.h"

namespace rill::worker {

struct KvCacheShape {
  int num_layers = 0;
  int num_blocks = 0;
  int block_size = 16;  // token slots per block
  int num_kv_heads = 0;
  int head_dim = 0;
  // How K/V elements are stored (f16 halves the bytes per block).
  kernels::cpu::KvDtype dtype = kernels::cpu::KvDtype::kF32;

  // Bytes one block takes over all layers (keys and values): what a KV
  // budget is divided by to size the cache.
  int64_t block_bytes() const {
    return int64_t{2} * num_layers * block_size * num_kv_heads * head_dim *
           kernels::cpu::KvDtypeBytes(dtype);
  }
};

// The engine's kv_cache_dtype names (as vLLM's --kv-cache-dtype): "auto"
// (the model's compute dtype: f32 on the CPU), "float32"/"fp32", or
// "float16"/"fp16"/"half". InvalidArgument names the accepted values.
absl::StatusOr<kernels::cpu::KvDtype> ParseKvCacheDtype(absl::string_view name);
// "float32" or "float16".
const char* KvCacheDtypeName(kernels::cpu::KvDtype dtype);

class PagedKvCache {
 public:
  // Allocates num_layers * num_blocks * block_size * num_kv_heads * head_dim
  // elements of shape.dtype for K and as many for V (zeroed lazily by the OS).
  static absl::StatusOr<PagedKvCache> Create(const KvCacheShape& shape);

  const KvCacheShape& shape() const { return shape_; }
  // Layer `layer`'s K (V) blocks: [num_blocks][block_size][num_kv_heads][head_dim]
  // elements of shape().dtype (float, or f16 bits as uint16_t).
  void* keys(int layer) { return keys_.data() + layer * layer_bytes_; }
  void* values(int layer) { return values_.data() + layer * layer_bytes_; }
  // Bytes held for K and V together.
  int64_t bytes() const { return 2 * static_cast<int64_t>(keys_.size()); }

 private:
  KvCacheShape shape_;
  int64_t layer_bytes_ = 0;
  // Bytes of K (V), 16-byte aligned so every row of either dtype starts
  // aligned when head_dim is a multiple of 8.
  struct alignas(16) Chunk16 {
    unsigned char b[16];
  };
  class Bytes {
   public:
    void resize(int64_t n) { v_.resize((n + 15) / 16); size_ = n; }
    unsigned char* data() { return v_.empty() ? nullptr : v_[0].b; }
    int64_t size() const { return size_; }

   private:
    std::vector<Chunk16> v_;
    int64_t size_ = 0;
  };
  Bytes keys_;
  Bytes values_;
};

}  // namespace rill::worker

#endif  // RILL_WORKER_KV_CACHE_H_
