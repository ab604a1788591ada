// Multiply-adds one token costs in a forward pass, from the checkpoint's
// tensor shapes: the benchmarks turn tokens/s into GFLOP/s with it and set it
// against the machine's measured FMA peak (kernels/cpu/peak_rate.h).
#ifndef RILL_WORKER_MODELS_FLOP_COUNT_H_
#define RILL_WORKER_MODELS_FLOP_COUNT_H_

#include <cstdint>
#include <vector>

#include "worker/loader/checkpoint.h"

namespace rill::worker {

// The matrices one token multiplies: every 2-D tensor of the layers plus the
// LM head ("output", or the tied embedding).
std::vector<const worker::loader::TensorRef*> MatMulWeights(
    const worker::loader::Checkpoint& checkpoint);

// Weight multiply-adds per token over MatMulWeights (the embedding lookup is
// free), counting only the experts a token runs in mixture-of-experts layers.
int64_t MatMulMacsPerToken(const worker::loader::Checkpoint& checkpoint);

// Attention multiply-adds (q.k and p.v) for one token that sees `context`
// keys, over all layers and query heads.
int64_t AttentionMacsPerToken(const worker::loader::ModelConfig& config, int64_t context);

}  // namespace rill::worker

#endif  // RILL_WORKER_MODELS_FLOP_COUNT_H_
