// The BERT encoder: word + position + token-type embeddings, post-LN
// transformer layers with bidirectional attention and an erf-GELU MLP
// (bert-base, MiniLM, all-MiniLM-L6-v2).
#ifndef RILL_WORKER_MODELS_BERT_H_
#define RILL_WORKER_MODELS_BERT_H_

#include <memory>

#include "absl/status/statusor.h"
#include "worker/models/encoder.h"

namespace rill::worker {

absl::StatusOr<std::unique_ptr<Encoder>> CreateBert(
    std::shared_ptr<const worker::loader::Checkpoint> checkpoint, kernels::cpu::ThreadPool* pool,
    const ModelOptions& options);

}  // namespace rill::worker

#endif  // RILL_WORKER_MODELS_BERT_H_
