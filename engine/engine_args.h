// How to build an AsyncLLMEngine (EngineArgs) and what it ended up with
// (EngineConfig, sectioned like vLLM's: model / cache / parallel / scheduler
// / decoding).
#ifndef RILL_ENGINE_ENGINE_ARGS_H_
#define RILL_ENGINE_ENGINE_ARGS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "engine/engine_options.h"
#include "engine/scheduler.h"
#include "worker/loader/checkpoint.h"

namespace rill::engine {

// The user-set options are declared in engine_options.h (one line each,
// with their flag, default, check and help); the rest are for code and tests.
struct EngineArgs {
#define RILL_ENGINE_ARGS_FIELD(type, name, default_value, check, help) type name = default_value;
  RILL_ENGINE_OPTIONS(RILL_ENGINE_ARGS_FIELD)
#undef RILL_ENGINE_ARGS_FIELD

  int num_kv_blocks = 0;  // 0: as many as fit in kv_cache_mb.
  int block_size = 16;
  SchedulingPolicy scheduling_policy = SchedulingPolicy::kFcfs;
  // Times a supervisor (rill serve, through rill-engine --engine_restarts)
  // restarted a dead engine before this one: rill:engine_restarts_total.
  int64_t engine_restarts = 0;
};

// OK, or InvalidArgument naming the first option (as its --flag) whose value
// its declared check refuses.
absl::Status ValidateEngineArgs(const EngineArgs& args);

// {name, value} of every declared option, values spelled as their flags take
// them; what the config RPC reports as the engine's options.
std::vector<std::pair<std::string, std::string>> EngineOptionValues(const EngineArgs& args);

struct EngineConfig {
  struct Model {
    std::string path;
    worker::loader::ModelConfig config;
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
    std::string kernel_plan;      // CPU: kernels::cpu::KernelPlan::Describe(); "" on cuda
    std::string communicator = "none";  // "none", "gloo" or "nccl" (ModelExecutor::communicator)
  } parallel;
  SchedulerConfig scheduler;
  struct Decoding {
    std::vector<int32_t> eos_token_ids;  // (The frontend detokenizes: it reports how.)
  } decoding;
  struct Lora {
    bool enabled = false;  // The executor runs adapters.
    int max_loras = 0;
    int max_lora_rank = 0;
    int max_cpu_loras = 0;
    std::string root;
  } lora;
  // Every declared option as the engine was given it (EngineOptionValues).
  std::vector<std::pair<std::string, std::string>> options;
};

}  // namespace rill::engine

#endif  // RILL_ENGINE_ENGINE_ARGS_H_
