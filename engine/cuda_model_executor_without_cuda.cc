// CPU-only build (no CUDA toolkit, or RILL_DISABLE_CUDA=1): there is no CUDA
// executor, and the error says why.
#include "absl/status/status.h"
#include "engine/cuda_model_executor.h"

namespace rill::engine {

absl::StatusOr<std::unique_ptr<ModelExecutor>> CreateCudaModelExecutor(
    std::shared_ptr<const worker::loader::Checkpoint>, const CudaExecutorOptions&) {
  return absl::FailedPreconditionError(
      "the CUDA backend needs a CUDA device: this binary was built without CUDA");
}

}  // namespace rill::engine
