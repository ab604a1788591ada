// The checks every backend's forward pass makes on a ForwardBatch before it
// touches memory: one set of rules and messages for the CPU models
// (CausalLm::Forward) and the CUDA Llama (ValidateBatch), so a bad batch
// gets the same InvalidArgument whichever device runs it.
#ifndef RILL_WORKER_FORWARD_BATCH_VALIDATION_H_
#define RILL_WORKER_FORWARD_BATCH_VALIDATION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "worker/forward_batch.h"

namespace rill::worker {

struct SequenceLimits {
  int64_t vocab_size = 0;   // token ids lie in [0, vocab_size)
  int64_t max_context = 0;  // start_pos + chunk length must not exceed this
  int64_t num_blocks = 0;   // KV-cache block ids lie in [0, num_blocks)
  int64_t block_size = 16;  // positions per block (> 0)
};

// InvalidArgument naming the sequence for the first problem found: an empty
// chunk, a negative start_pos, positions past max_context, a block table
// shorter than the positions need or naming a block outside the cache, a
// token id outside the vocabulary. OK for an empty batch.
absl::Status ValidateSequences(const ForwardBatch& batch, const SequenceLimits& limits);

}  // namespace rill::worker

#endif  // RILL_WORKER_FORWARD_BATCH_VALIDATION_H_
