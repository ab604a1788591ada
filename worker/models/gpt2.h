// The GPT-2 family: learned positions, LayerNorm, fused QKV with bias,
// multi-head attention, GELU (tanh) MLP, head tied to the token embedding.
#ifndef RILL_WORKER_MODELS_GPT2_H_
#define RILL_WORKER_MODELS_GPT2_H_

#include <memory>

#include "absl/status/statusor.h"
#include "worker/models/causal_lm.h"

namespace rill::worker {

absl::StatusOr<std::unique_ptr<CausalLm>> CreateGpt2(
    std::shared_ptr<const worker::loader::Checkpoint> checkpoint, kernels::cpu::ThreadPool* pool,
    const ModelOptions& options);

}  // namespace rill::worker

#endif  // RILL_WORKER_MODELS_GPT2_H_
