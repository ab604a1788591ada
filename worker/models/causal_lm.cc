#include "worker/models/causal_lm.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "worker/forward_batch_validation.h"
#include "worker/lora/lora_apply.h"
#include "worker/models/gpt2.h"
#include "worker/models/llama.h"

namespace rill::worker {

KvCacheShape CausalLm::CacheShape(int num_blocks, int block_size,
                                  kernels::cpu::KvDtype dtype) const {
  KvCacheShape shape;
  shape.dtype = dtype;
  shape.num_layers = config().num_layers;
  shape.num_blocks = num_blocks;
  shape.block_size = block_size;
  shape.num_kv_heads = cache_kv_heads_;
  shape.head_dim = config().head_dim;
  return shape;
}

absl::Status CausalLm::Forward(const ForwardBatch& batch, PagedKvCache* cache,
                               ForwardOutput* out) {
  const worker::loader::ModelConfig& cfg = config();
  const KvCacheShape& shape = cache->shape();
  if (shape.num_layers != cfg.num_layers || shape.num_kv_heads != cache_kv_heads_ ||
      shape.head_dim != cfg.head_dim) {
    return absl::InvalidArgumentError("KV cache shape does not match the model");
  }
  if (absl::Status v = ValidateSequences(
          batch, {cfg.vocab_size, cfg.max_position_embeddings, shape.num_blocks, shape.block_size});
      !v.ok()) {
    return v;
  }
  bool any_lora = false;
  for (const SequenceChunk& seq : batch.sequences) any_lora = any_lora || seq.lora != nullptr;
  if (any_lora) {
    if (!SupportsLora()) {
      return absl::UnimplementedError(absl::StrCat(
          "this model (", cfg.architecture,
          ") does not run LoRA adapters: the Llama family at tensor_parallel_size 1 does"));
    }
    if (absl::Status s = CheckLoraAdapters(batch, cfg.hidden_size, cfg.num_layers); !s.ok()) {
      return s;
    }
  }
  return ForwardValidated(batch, cache, out);
}

absl::StatusOr<std::unique_ptr<CausalLm>> CreateCausalLm(
    std::shared_ptr<const worker::loader::Checkpoint> checkpoint, kernels::cpu::ThreadPool* pool,
    const ModelOptions& options) {
  const std::string& arch = checkpoint->config().architecture;
  if (arch == "llama") return CreateLlama(std::move(checkpoint), pool, options);
  if (arch == "gpt2") return CreateGpt2(std::move(checkpoint), pool, options);
  return absl::UnimplementedError(absl::StrCat("unsupported model architecture '", arch,
                                               "' (supported: llama family, gpt2)"));
}

}  // namespace rill::worker
