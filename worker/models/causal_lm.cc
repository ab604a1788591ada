#include "worker/models/causal_lm.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "worker/lora/lora_apply.h"
#include "worker/models/gpt2.h"
#include "worker/models/llama.h"

namespace rill::worker {

KvCacheShape CausalLm::CacheShape(int num_blocks, int block_size, cpu::KvDtype dtype) const {
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
  const loader::ModelConfig& cfg = config();
  const KvCacheShape& shape = cache->shape();
  if (shape.num_layers != cfg.num_layers || shape.num_kv_heads != cache_kv_heads_ ||
      shape.head_dim != cfg.head_dim) {
    return absl::InvalidArgumentError("KV cache shape does not match the model");
  }
  for (size_t s = 0; s < batch.sequences.size(); ++s) {
    const SequenceChunk& seq = batch.sequences[s];
    if (seq.tokens.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s, " has no new tokens"));
    }
    if (seq.start_pos < 0) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s, ": negative start_pos"));
    }
    const int64_t end = static_cast<int64_t>(seq.start_pos) + seq.tokens.size();
    if (end > cfg.max_position_embeddings) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s, ": ", end,
                                                     " tokens exceed the context length ",
                                                     cfg.max_position_embeddings));
    }
    const int64_t blocks_needed = (end + shape.block_size - 1) / shape.block_size;
    if (static_cast<int64_t>(seq.block_table.size()) < blocks_needed) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s, ": block table has ",
                                                     seq.block_table.size(), " blocks, ",
                                                     blocks_needed, " needed"));
    }
    for (int64_t b = 0; b < blocks_needed; ++b) {
      if (seq.block_table[b] < 0 || seq.block_table[b] >= shape.num_blocks) {
        return absl::InvalidArgumentError(absl::StrCat("sequence ", s, ": block id ",
                                                       seq.block_table[b], " outside the cache of ",
                                                       shape.num_blocks, " blocks"));
      }
    }
    for (int32_t t : seq.tokens) {
      if (t < 0 || t >= cfg.vocab_size) {
        return absl::InvalidArgumentError(absl::StrCat("sequence ", s, ": token id ", t,
                                                       " outside the vocabulary of ",
                                                       cfg.vocab_size));
      }
    }
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
    std::shared_ptr<const loader::Checkpoint> checkpoint, cpu::ThreadPool* pool,
    const ModelOptions& options) {
  const std::string& arch = checkpoint->config().architecture;
  if (arch == "llama") return CreateLlama(std::move(checkpoint), pool, options);
  if (arch == "gpt2") return CreateGpt2(std::move(checkpoint), pool, options);
  return absl::UnimplementedError(absl::StrCat("unsupported model architecture '", arch,
                                               "' (supported: llama family, gpt2)"));
}

}  // namespace rill::worker
