// Part of cuda_model_check: the CUDA Llama as tensor-parallel ranks over
// NCCL (worker/comm/nccl_communicator.h) against the model without tensor
// parallelism, on one fixed script of steps (a ragged prefill, decode steps
// that capture and replay CUDA graphs in two batch buckets, a decode step
// sampled on the GPU, then an eager mixed step with GPU sampling):
//  - one rank in an NCCL world of one must return bit for bit the logits,
//    sampled tokens and logprobs of the model without a communicator, eager
//    and graph steps alike (the all-reduces run, as no-op sums);
//  - with >= 2 GPUs, two ranks in two threads (GPU 0 and 1) must return
//    logits bitwise equal to each other, and within the bf16 thresholds of
//    logits_compare.h of the one-rank model (the partial sums are rounded to
//    bf16 before the all-reduce, so not bitwise); their sampled tokens must
//    be equal. With one GPU that part prints "skipped: needs 2 GPUs".
#ifndef RILL_WORKER_MODELS_CUDA_TP_CHECK_H_
#define RILL_WORKER_MODELS_CUDA_TP_CHECK_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "worker/loader/checkpoint.h"

namespace rill::worker {

// Prints one line per comparison; `devices` is the CUDA device count.
// Returns whether every part that ran passed; an error when a model could not
// be made or a step failed.
absl::StatusOr<bool> CheckTensorParallel(std::shared_ptr<const worker::loader::Checkpoint> ckpt,
                                         int devices, uint32_t seed);

}  // namespace rill::worker

#endif  // RILL_WORKER_MODELS_CUDA_TP_CHECK_H_
