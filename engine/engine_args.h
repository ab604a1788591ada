// How to build an AsyncLLMEngine (EngineArgs) and what it ended up with
// (EngineConfig, sectioned like vLLM's: model / cache / parallel / scheduler
// / decoding).
#ifndef RILL_ENGINE_ENGINE_ARGS_H_
#define RILL_ENGINE_ENGINE_ARGS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "engine/scheduler.h"
#include "worker/loader/checkpoint.h"

namespace rill::engine {

struct EngineArgs {
  std::string model = "default";  // See ResolveModelPath.
  int num_kv_blocks = 0;          // 0: as many as fit in kv_cache_bytes.
  int64_t kv_cache_bytes = int64_t{512} << 20;
  int block_size = 16;
  // How the KV cache stores K/V: "auto" (f32 on the CPU), "float32" or
  // "float16" (half the memory per token, and long contexts read half the
  // bytes; logits move by ~1e-3 relative). See worker::ParseKvCacheDtype.
  std::string kv_cache_dtype = "auto";
  int max_num_seqs = 64;
  int max_num_batched_tokens = 2048;
  int64_t max_model_len = 0;  // 0: the model's context length.
  SchedulingPolicy scheduling_policy = SchedulingPolicy::kFcfs;
  int threads = 0;  // 0 = all cores. cpu: kernel threads; cuda: host sampling threads.
  // Where the model runs: "cpu"; "cuda" (the Llama family on GPU 0, bf16
  // weights and KV cache; FailedPrecondition without a usable device); or
  // "auto" (CUDA when a device is usable and the model runs there, else the
  // CPU with a logged reason).
  std::string device = "cpu";
  // The CPU matmul kernels: "auto" (= exact), "exact", "int16" or "q8"; see
  // cpu::kMatmulHelp. Chosen into the kernel plan once at load.
  std::string matmul = "auto";
  // CUDA: the share of the device's memory the engine may use (weights,
  // activations and the KV cache it sizes from what is left), as vLLM's
  // --gpu-memory-utilization. num_kv_blocks > 0 overrides the sizing.
  double gpu_memory_utilization = 0.9;
  bool enable_prefix_caching = true;
  // Tensor parallelism: > 1 runs the model in that many rill-worker processes.
  int tensor_parallel_size = 1;
  std::string worker_binary;  // Path of rill-worker; "" = next to the running binary.
  // Non-empty: the workers are started by someone else (containers of the
  // engine's pod) and connect to <dir>/control.sock; see MultiprocExecutor.
  std::string external_worker_dir;
  // Log stats (DoLogStats) from the loop this often; zero disables.
  absl::Duration log_stats_interval = absl::ZeroDuration();
  // LoRA adapters (PEFT directories) loaded at start-up, {name, path}. These
  // come from the operator's command line, so any path is accepted.
  std::vector<std::pair<std::string, std::string>> loras;
  int max_loras = 4;        // Distinct adapters among the running requests (one batch).
  int max_lora_rank = 64;   // Adapters of a higher rank are refused.
  int max_cpu_loras = 16;   // Adapters kept in memory (LRU); others reload on use.
  // AddLora paths must lie under this directory; empty: AddLora is refused
  // (PermissionDenied) and only start-up adapters exist.
  std::string lora_root;
  // Non-empty: the adapters AddLora registered are listed in this file
  // (lora_registry_file.h), rewritten on every AddLora/RemoveLora, and
  // registered again (through AddLora's checks) when an engine starts.
  std::string lora_registry_file;
};

struct EngineConfig {
  struct Model {
    std::string path;
    loader::ModelConfig config;
    int64_t max_model_len = 0;
  } model;
  struct Cache {
    int block_size = 0;
    int num_blocks = 0;
    int64_t kv_cache_bytes = 0;
    std::string kv_cache_dtype = "float32";  // as stored: "float32", "float16" or "bfloat16"
    bool enable_prefix_caching = true;
  } cache;
  struct Parallel {
    int tensor_parallel_size = 1;
    int threads = 1;
    std::string backend = "cpu";  // "cpu" or "cuda"
    std::string kernel_plan;      // CPU: cpu::KernelPlan::Describe(); "" on cuda
  } parallel;
  SchedulerConfig scheduler;
  struct Decoding {
    std::vector<int32_t> eos_token_ids;
    std::string detokenizer = "incremental";
  } decoding;
  struct Lora {
    bool enabled = false;  // The executor runs adapters.
    int max_loras = 0;
    int max_lora_rank = 0;
    int max_cpu_loras = 0;
    std::string root;
  } lora;
};

}  // namespace rill::engine

#endif  // RILL_ENGINE_ENGINE_ARGS_H_
