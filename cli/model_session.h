// What `rill bench-model` needs to time the raw model runtime: the
// checkpoint's model, a thread pool and a KV cache, with one block table per
// benchmark sequence from the engine's BlockManager.
#ifndef RILL_CLI_MODEL_SESSION_H_
#define RILL_CLI_MODEL_SESSION_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/block_manager.h"
#include "kernels/cpu/thread_pool.h"
#include "worker/kv_cache.h"
#include "worker/loader/checkpoint.h"
#include "worker/models/causal_lm.h"

namespace rill::cli {

struct ModelSessionOptions {
  // "default" or a path; see engine::ResolveModelPath.
  std::string model = "default";
  int threads = 0;           // 0 = all cores
  int max_context = 2048;    // tokens per sequence the cache is sized for
  int max_sequences = 1;     // sequences that may be live at once
  int block_size = 16;
  kernels::cpu::KvDtype kv_cache_dtype = kernels::cpu::KvDtype::kF32;
  worker::ModelOptions model_options;
};

// Not thread-safe; one benchmark thread drives it.
class ModelSession {
 public:
  static absl::StatusOr<std::unique_ptr<ModelSession>> Open(const ModelSessionOptions& options);

  worker::CausalLm& model() { return *model_; }
  worker::PagedKvCache& cache() { return *cache_; }
  kernels::cpu::ThreadPool* pool() { return pool_.get(); }

  // Block table of sequence `slot` (< max_sequences), covering max_context
  // tokens (capped at the model's context length) for the session's life.
  const std::vector<int32_t>& BlockTable(int slot) const { return blocks_->BlockTable(slot); }

 private:
  std::shared_ptr<const worker::loader::Checkpoint> checkpoint_;
  std::unique_ptr<kernels::cpu::ThreadPool> pool_;
  std::unique_ptr<worker::CausalLm> model_;
  std::unique_ptr<worker::PagedKvCache> cache_;
  std::unique_ptr<engine::BlockManager> blocks_;
};

}  // namespace rill::cli

#endif  // RILL_CLI_MODEL_SESSION_H_
