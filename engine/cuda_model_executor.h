// Runs a Llama-family model on one CUDA GPU in this process
// (worker/models/cuda/cuda_llama.h): bf16 weights and KV cache; rows sampled
// on the GPU (device_sampling) return token ids, the others float logits
// for the engine's host sampler. The KV cache is sized from
// the device's memory after the weights and activation buffers are placed:
// gpu_memory_utilization of the device, minus what other processes hold,
// the model, and a reserve (kernels/cuda/plan/kv_memory_plan.h), unless
// num_blocks fixes it.
//
// Built only with the CUDA toolkit; without it (or without a usable device)
// Create says so with FailedPrecondition.
#ifndef RILL_ENGINE_CUDA_MODEL_EXECUTOR_H_
#define RILL_ENGINE_CUDA_MODEL_EXECUTOR_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "engine/model_executor.h"
#include "worker/loader/checkpoint.h"

namespace rill::engine {

struct CudaExecutorOptions {
  int num_blocks = 0;  // 0: as many as gpu_memory_utilization allows.
  int block_size = 16;
  double gpu_memory_utilization = 0.9;  // of the device's total memory, in (0, 1]
  // Most new tokens in one step (the scheduler's max_num_batched_tokens and
  // max_num_seqs): sizes the activation buffers.
  int max_batch_tokens = 2048;
  // > 0: the cache must hold at least one sequence this long.
  int64_t max_model_len = 0;
  // Host threads that sample a step's rows (0 = all cores).
  int host_threads = 0;
  // Sample on the GPU the rows the engine sends there (engine/device_sampling.h):
  // only their token ids and logprobs come back. false: every row's logits do.
  bool device_sampling = true;
};

// InvalidArgument for bad options; FailedPrecondition when this build has no
// CUDA or no device is usable; Unimplemented for an architecture the CUDA
// model does not run (GPT-2, encoders); ResourceExhausted when the model or a
// max_model_len sequence does not fit the memory budget.
absl::StatusOr<std::unique_ptr<ModelExecutor>> CreateCudaModelExecutor(
    std::shared_ptr<const worker::loader::Checkpoint> checkpoint,
    const CudaExecutorOptions& options);

}  // namespace rill::engine

#endif  // RILL_ENGINE_CUDA_MODEL_EXECUTOR_H_
