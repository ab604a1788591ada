// What the engine drives once per step: run a ragged batch over the KV cache
// the executor owns and return logits. LocalModelExecutor runs the model in
// this process; a multi-process tensor-parallel executor will sit behind the
// same interface. Execute is only called from the engine loop thread.
#ifndef RILL_ENGINE_MODEL_EXECUTOR_H_
#define RILL_ENGINE_MODEL_EXECUTOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/forward_batch.h"
#include "worker/loader/checkpoint.h"

namespace rill::worker {
struct LoraAdapter;      // worker/lora/lora_adapter.h
struct LoraLoadOptions;  // worker/lora/lora_adapter.h
}

namespace rill::engine {

class ModelExecutor {
 public:
  virtual ~ModelExecutor() = default;

  // Block tables name blocks in [0, num_blocks()).
  virtual absl::Status Execute(const worker::ForwardBatch& batch, worker::ForwardOutput* out) = 0;

  virtual int num_blocks() const = 0;

  // Calls fn(i) for every i in [0, n) and returns when all are done, on the
  // executor's compute threads where it has them (they are idle between
  // steps): the engine samples a step's rows this way. Engine loop thread
  // only; fn must be safe to run concurrently for different i.
  virtual void ParallelFor(int64_t n, const std::function<void(int64_t)>& fn) {
    for (int64_t i = 0; i < n; ++i) fn(i);
  }
  virtual int block_size() const = 0;
  // True: Execute samples the sequences that carry
  // SequenceChunk::device_sampling itself and returns ForwardOutput::sampled
  // for them instead of their logits (the engine decides per row which,
  // engine/device_sampling.h). False (the default): every row's logits come
  // back and the engine samples them on the host.
  virtual bool samples_on_device() const { return false; }
  virtual const worker::loader::ModelConfig& model_config() const = 0;
  virtual int tensor_parallel_size() const { return 1; }
  // Wall time the last Execute spent in tensor-parallel collectives: the
  // largest over the ranks (a rank's includes waiting for its peers). Zero
  // without tensor parallelism. Engine loop thread only.
  virtual absl::Duration last_collective_time() const { return absl::ZeroDuration(); }
  virtual int num_threads() const { return 1; }
  // Bytes of KV cache held (0 while asleep).
  virtual int64_t kv_cache_bytes() const { return 0; }
  // Where the model runs ("cpu", "cuda") and how its KV cache stores K/V
  // ("" for the engine's kv_cache_dtype argument as parsed for the CPU).
  virtual std::string backend() const { return "cpu"; }
  virtual std::string kv_cache_dtype() const { return ""; }
  // The CPU kernel plan the model runs (kernels::cpu::KernelPlan::Describe()); "" off
  // the CPU.
  virtual std::string kernel_plan() const { return ""; }
  // How tensor-parallel ranks all-reduce: "gloo" (CPU ranks), "nccl" (CUDA
  // ranks), "none" (one rank in this process).
  virtual std::string communicator() const { return "none"; }

  // What the model serves. Pooling: Execute fills ForwardOutput::hidden for
  // sequences with return_hidden. An encoder cannot generate and pools
  // without KV blocks (its block tables are ignored).
  virtual bool can_generate() const { return true; }
  virtual bool can_pool() const { return false; }
  virtual bool is_encoder() const { return false; }

  // Reads the PEFT adapter in `dir` for this model (sequences then name it
  // in SequenceChunk::lora). Any thread may call it: it reads the file and
  // the immutable model config only. Unimplemented when this executor cannot
  // run adapters (the default; tensor-parallel workers).
  virtual absl::StatusOr<std::shared_ptr<const worker::LoraAdapter>> LoadLora(
      const std::string& dir, const worker::LoraLoadOptions& options);
  virtual bool supports_lora() const { return false; }

  // Non-OK once the executor can no longer run steps (e.g. a dead worker).
  virtual absl::Status CheckHealth() { return absl::OkStatus(); }
  // Executors whose parts can die on their own (worker processes) call
  // `callback` once, from their own thread, with the cause, so the engine is
  // told instead of polling CheckHealth. Null clears it; the executor must
  // not call it after a clearing call returns. Returns whether the executor
  // calls it (false: it never does, and its health must be polled).
  using DeathCallback = std::function<void(const absl::Status&)>;
  virtual bool SetDeathCallback(DeathCallback callback) { return false; }

  // Level >= 1: the KV cache contents may be dropped (the engine preempts
  // everything first). WakeUp restores the ability to Execute.
  virtual absl::Status Sleep(int level) { return absl::OkStatus(); }
  virtual absl::Status WakeUp() { return absl::OkStatus(); }

  // The allow-listed worker methods behind Admin/CollectiveRpc, one JSON
  // result per rank: "ping" and "get_worker_info". Anything else is
  // PermissionDenied: there are no arbitrary calls into workers.
  virtual absl::StatusOr<std::vector<std::string>> CollectiveRpc(const std::string& method);

  // Speculative decoding with a draft model (--speculative_model): the
  // smaller model whose greedy tokens are proposed to this one, with its own
  // KV cache. It runs in the engine process whatever this executor is (with
  // tensor-parallel workers too): a draft is small enough for one process,
  // and running it beside the engine keeps its k sequential steps off the
  // per-step broadcast to the workers. Null: none. Attach before an engine
  // is built over this executor; the executor owns it from then on.
  void AttachDraftModel(std::unique_ptr<ModelExecutor> draft) { draft_model_ = std::move(draft); }
  ModelExecutor* draft_model() const { return draft_model_.get(); }

 private:
  std::unique_ptr<ModelExecutor> draft_model_;
};

// PermissionDenied naming the allow-list, for methods outside it.
absl::Status NotAllowListed(const std::string& method);

}  // namespace rill::engine

#endif  // RILL_ENGINE_MODEL_EXECUTOR_H_
