// A decoder-only language model that runs one ragged batch per call over a
// paged KV cache. Implementations: Llama family (llama.cc) and GPT-2 family
// (gpt2.cc). Thread: one step thread per model (Forward is not reentrant; it
// uses the model's scratch buffers and the shared thread pool).
#ifndef RILL_WORKER_MODELS_CAUSAL_LM_H_
#define RILL_WORKER_MODELS_CAUSAL_LM_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cpu/kernel_plan.h"
#include "kernels/cpu/thread_pool.h"
#include "worker/comm/communicator.h"
#include "worker/forward_batch.h"
#include "worker/kv_cache.h"
#include "worker/loader/checkpoint.h"

namespace rill::worker {

// How the model runs its matrix products.
struct ModelOptions {
  // The CPU kernel family (kernels/cpu/kernel_plan.h), chosen once per
  // process at load: exact (f32 activations; the default), int16 (VNNI-packed
  // weights) or q8 (8-bit activations), and whether exact weights are
  // interleaved. Every model family packs its weights for it.
  kernels::cpu::KernelPlan kernel_plan = kernels::cpu::DefaultKernelPlan();
  // Tensor parallelism: this process runs rank comm->rank() of
  // comm->world_size() (see tp_plan.h) and all-reduces through it. Null: the
  // whole model. Must outlive the model.
  Communicator* comm = nullptr;
};

class CausalLm {
 public:
  virtual ~CausalLm() = default;

  const worker::loader::ModelConfig& config() const { return checkpoint_->config(); }
  const worker::loader::Checkpoint& checkpoint() const { return *checkpoint_; }

  // The KV cache layout this model needs for `num_blocks` blocks (this
  // rank's K/V heads under tensor parallelism).
  // `dtype` is how the cache stores K/V (f16 halves its memory).
  KvCacheShape CacheShape(int num_blocks, int block_size,
                          kernels::cpu::KvDtype dtype = kernels::cpu::KvDtype::kF32) const;

  // Computes the batch's logits and writes the new tokens' K/V into `cache`.
  // InvalidArgument (and no cache writes) when a token id is out of range, a
  // block table is too short or names a block past the cache, or a position
  // exceeds the context length.
  // Sequences may carry a LoRA adapter each (SequenceChunk::lora):
  // Unimplemented when this model cannot run adapters, InvalidArgument when
  // one was loaded for another model's dimensions.
  absl::Status Forward(const ForwardBatch& batch, PagedKvCache* cache, ForwardOutput* out);

  // Whether Forward accepts sequences with a LoRA adapter (the Llama family
  // without tensor parallelism).
  virtual bool SupportsLora() const { return false; }

 protected:
  CausalLm(std::shared_ptr<const worker::loader::Checkpoint> checkpoint,
           kernels::cpu::ThreadPool* pool, const ModelOptions& options)
      : checkpoint_(std::move(checkpoint)),
        pool_(pool),
        options_(options),
        cache_kv_heads_(checkpoint_->config().num_kv_heads) {}

  // Forward after validation. `positions`/`seq_of_token` are per batch token.
  virtual absl::Status ForwardValidated(const ForwardBatch& batch, PagedKvCache* cache,
                                        ForwardOutput* out) = 0;

  std::shared_ptr<const worker::loader::Checkpoint> checkpoint_;
  kernels::cpu::ThreadPool* pool_;
  ModelOptions options_;
  // K/V heads held in this process's cache (fewer than the model's on a
  // tensor-parallel rank).
  int cache_kv_heads_;
};

// Builds the model for the checkpoint's architecture ("llama" family or "gpt2").
// `pool` must outlive the model.
absl::StatusOr<std::unique_ptr<CausalLm>> CreateCausalLm(
    std::shared_ptr<const worker::loader::Checkpoint> checkpoint, kernels::cpu::ThreadPool* pool,
    const ModelOptions& options = {});

}  // namespace rill::worker

#endif  // RILL_WORKER_MODELS_CAUSAL_LM_H_
