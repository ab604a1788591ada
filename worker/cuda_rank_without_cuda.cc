// CPU-only build (no CUDA toolkit, or RILL_DISABLE_CUDA=1): no CUDA rank,
// and the error says why.
#include "worker/cuda_rank.h"

namespace rill::worker {

absl::StatusOr<std::unique_ptr<RankModel>> CreateCudaRank(
    int, const rill::internal::WorkerConfig&, int) {
  return absl::FailedPreconditionError(
      "the CUDA backend needs a CUDA device: rill-worker was built without CUDA");
}

}  // namespace rill::worker
