// Part of cuda_model_check: CudaLlama's sampling on the GPU (Forward with
// SequenceChunk::device_sampling) against the CUDA sampler's CPU reference
// on the logits the same batch returns without it. Needs a device.
#ifndef RILL_WORKER_MODELS_CUDA_DEVICE_SAMPLING_CHECK_H_
#define RILL_WORKER_MODELS_CUDA_DEVICE_SAMPLING_CHECK_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "worker/models/cuda/cuda_llama.h"

namespace rill::worker {

// Runs a prefill batch (the eager path) and then a decode batch (a CUDA
// graph) twice each, over cache blocks [first_block, first_block + 12): once
// returning logits, once sampling most rows on the GPU (greedy, logit edits,
// temperature, top_k's descending draw, min_p, penalties) with one row left
// to the host. Passes when greedy rows equal the argmax of the edited
// logits, sampled rows equal the reference's draw for the same uniform (one
// rounding miss allowed), logprobs agree and the host row's logits are the
// first run's, bit for bit, and top logprobs (two rows) are the reference's
// ids in its order. Prints one line per batch.
absl::StatusOr<bool> CheckDeviceSampling(CudaLlama* gpu, int first_block, uint32_t seed);

}  // namespace rill::worker

#endif  // RILL_WORKER_MODELS_CUDA_DEVICE_SAMPLING_CHECK_H_
