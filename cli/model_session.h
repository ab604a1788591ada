// What every model-running CLI command needs: the checkpoint, its tokenizer,
// the model, a thread pool and a KV cache, plus a simple sequential block
// allocator (the engine's block manager replaces it in the server).
#ifndef RILL_CLI_MODEL_SESSION_H_
#define RILL_CLI_MODEL_SESSION_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tokenizer/bpe_tokenizer.h"
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
  cpu::KvDtype kv_cache_dtype = cpu::KvDtype::kF32;
  worker::ModelOptions model_options;
};

class ModelSession {
 public:
  static absl::StatusOr<std::unique_ptr<ModelSession>> Open(const ModelSessionOptions& options);

  const tokenizer::BpeTokenizer& tokenizer() const { return *tokenizer_; }
  worker::CausalLm& model() { return *model_; }
  worker::PagedKvCache& cache() { return *cache_; }
  cpu::ThreadPool* pool() { return pool_.get(); }
  const ModelSessionOptions& options() const { return options_; }

  // Block table for sequence slot `slot` (< max_sequences): a fixed range
  // of blocks big enough for max_context tokens.
  std::vector<int32_t> BlockTable(int slot) const;

 private:
  ModelSessionOptions options_;
  std::shared_ptr<const loader::Checkpoint> checkpoint_;
  std::unique_ptr<tokenizer::BpeTokenizer> tokenizer_;
  std::unique_ptr<cpu::ThreadPool> pool_;
  std::unique_ptr<worker::CausalLm> model_;
  std::unique_ptr<worker::PagedKvCache> cache_;
};

}  // namespace rill::cli

#endif  // RILL_CLI_MODEL_SESSION_H_
