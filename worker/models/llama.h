// The Llama family: RMSNorm, RoPE (with scaling variants), GQA attention
// (optional q/k/v bias, as Qwen2 has), SwiGLU MLP, tied or untied head.
// Covers SmolLM2, TinyLlama, Llama-2/3 and Qwen2.
#ifndef RILL_WORKER_MODELS_LLAMA_H_
#define RILL_WORKER_MODELS_LLAMA_H_

#include <memory>

#include "absl/status/statusor.h"
#include "worker/models/causal_lm.h"

namespace rill::worker {

absl::StatusOr<std::unique_ptr<CausalLm>> CreateLlama(
    std::shared_ptr<const worker::loader::Checkpoint> checkpoint, kernels::cpu::ThreadPool* pool,
    const ModelOptions& options);

}  // namespace rill::worker

#endif  // RILL_WORKER_MODELS_LLAMA_H_
