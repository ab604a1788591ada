// The CUDA model's sleep levels, shared by the in-process CUDA executor and a
// CUDA tensor-parallel rank: level 1 frees the KV cache (cudaFree) and keeps
// the weights; level 2 frees the whole model, which WakeUp creates again
// from the checkpoint (still mapped in host memory) with the same KV blocks.
// One thread (the caller's step thread).
#ifndef RILL_WORKER_SLEEPING_CUDA_LLAMA_H_
#define RILL_WORKER_SLEEPING_CUDA_LLAMA_H_

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "worker/cuda_kv_sizing.h"
#include "worker/models/cuda/cuda_llama.h"

namespace rill::worker {

class SleepingCudaLlama {
 public:
  // Creates the model with a cache of `num_kv_blocks` blocks.
  using Factory = std::function<absl::StatusOr<std::unique_ptr<CudaLlama>>(int num_kv_blocks)>;
  explicit SleepingCudaLlama(Factory factory) : factory_(std::move(factory)) {}

  // Creates the model (awake) with `num_kv_blocks` blocks.
  absl::Status Load(int num_kv_blocks);
  // Load(1), reading the device's free memory before and after: what
  // SizeCudaKvCache needs to size the real cache. Internal when the free
  // memory cannot be read.
  absl::StatusOr<PlacedModelMemory> LoadMeasuringMemory();
  // Resizes the cache of the loaded, awake model; WakeUp restores this count.
  absl::Status SetKvCacheBlocks(int num_blocks);

  // Null after Sleep(2) (and before Load).
  CudaLlama* model() const { return model_.get(); }
  bool asleep() const { return asleep_; }
  int num_kv_blocks() const { return num_kv_blocks_; }
  int64_t kv_cache_bytes() const { return model_ != nullptr ? model_->kv_cache_bytes() : 0; }

  absl::Status Sleep(int level);
  absl::Status WakeUp();

 private:
  Factory factory_;
  std::unique_ptr<CudaLlama> model_;
  int num_kv_blocks_ = 0;
  bool asleep_ = false;
};

}  // namespace rill::worker

#endif  // RILL_WORKER_SLEEPING_CUDA_LLAMA_H_
