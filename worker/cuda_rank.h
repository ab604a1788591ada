// A tensor-parallel rank on a CUDA GPU: joins the ranks' NCCL communicator
// with the engine's unique id on its device (cuda_device_choice.h), loads
// its shard of the CUDA Llama (bf16, all-reduce after O and down over NCCL,
// decode CUDA graphs of its own) with a one-block cache, and reports how
// many KV blocks its device holds beside it (cuda_kv_sizing.h); the cache
// itself is allocated when the engine sends the count every rank agreed on.
// Sleep level 1 frees the KV cache, level 2 the model too (WakeUp uploads it
// again), as the in-process CUDA executor does; the communicator stays.
//
// In a build without CUDA, or on a machine without a usable device (or
// without the chosen one), Create fails with FailedPrecondition saying why;
// the engine names the rank.
#ifndef RILL_WORKER_CUDA_RANK_H_
#define RILL_WORKER_CUDA_RANK_H_

#include <memory>

#include "absl/status/statusor.h"
#include "rill/internal/worker.pb.h"
#include "worker/rank_model.h"

namespace rill::worker {

// `device_flag`: rill-worker --cuda_device (-1: not given).
absl::StatusOr<std::unique_ptr<RankModel>> CreateCudaRank(
    int rank, const rill::internal::WorkerConfig& config, int device_flag);

}  // namespace rill::worker

#endif  // RILL_WORKER_CUDA_RANK_H_
