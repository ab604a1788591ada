#include "engine/engine_factory.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/cuda_model_executor.h"
#include "engine/grammar_vocabulary.h"
#include "engine/local_model_executor.h"
#include "engine/multiproc_executor.h"
#include "engine/spec_decode/draft_model_loader.h"
#include "engine/model_path.h"
#include "engine/tokenizer_loader.h"
#include "glog/logging.h"
#include "kernels/cuda/plan/kv_memory_plan.h"
#include "kernels/backend/backend.h"
#include "kernels/cpu/kernel_plan.h"
#include "worker/kv_cache.h"

namespace rill::engine {

namespace {

// rill-worker next to this binary (an image or install directory), else
// where Bazel puts it relative to bazel-bin/{engine/service,cli,...}.
std::string DefaultWorkerBinary() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "rill-worker";
  const std::filesystem::path dir = exe.parent_path();
  for (const std::filesystem::path& p :
       {dir / "rill-worker", dir / "../worker/rill-worker", dir / "../../worker/rill-worker"}) {
    if (access(p.c_str(), X_OK) == 0) return p.lexically_normal().string();
  }
  return (dir / "rill-worker").string();
}

// An executor built from EngineArgs, with what the engine needs beside it.
struct BuiltExecutor {
  std::unique_ptr<ModelExecutor> executor;  // Null: "auto" fell back (CreateOnCuda only).
  EngineArgs resolved;                      // model (and worker_binary) resolved.
  // The checkpoint's metadata, for the tokenizer (owned by the executor or here).
  const worker::loader::Checkpoint* checkpoint = nullptr;
  std::shared_ptr<const worker::loader::Checkpoint> owned_checkpoint;
};

// The options the CPU executors (in process and multi-process) share, from
// EngineArgs: the options structs differ only beyond these.
template <typename Options>
Options CpuExecutorOptions(const EngineArgs& args, kernels::cpu::KvDtype kv_dtype,
                           const kernels::cpu::KernelPlan& kernel_plan) {
  Options options;
  options.model_path = ResolveModelPath(args.model);
  options.num_blocks = args.num_kv_blocks;
  options.kv_cache_bytes = args.kv_cache_mb << 20;
  options.block_size = args.block_size;
  options.kv_cache_dtype = kv_dtype;
  options.threads = args.threads;
  options.kernel_plan = kernel_plan;
  return options;
}

// `executor` (Local- or MultiprocExecutor, both expose their checkpoint)
// with `args` resolved to the model path it loaded.
template <typename Executor>
BuiltExecutor BuiltFrom(std::unique_ptr<Executor> executor, const EngineArgs& args,
                        const std::string& model_path) {
  BuiltExecutor built;
  built.checkpoint = &executor->checkpoint();
  built.executor = std::move(executor);
  built.resolved = args;
  built.resolved.model = model_path;
  return built;
}

// The ranks of `options` (backend and its options set) in rill-worker
// processes, with the placement options every backend shares from `args`.
absl::StatusOr<BuiltExecutor> StartWorkerProcesses(MultiprocExecutorOptions options,
                                                   const EngineArgs& args) {
  options.tensor_parallel_size = args.tensor_parallel_size;
  options.worker_binary = args.worker_binary.empty() ? DefaultWorkerBinary() : args.worker_binary;
  options.external_workers_dir = args.external_workers_dir;
  absl::StatusOr<std::unique_ptr<MultiprocExecutor>> executor =
      MultiprocExecutor::Create(options);
  if (!executor.ok()) return executor.status();
  BuiltExecutor built = BuiltFrom(std::move(*executor), args, options.model_path);
  built.resolved.worker_binary = options.worker_binary;
  return built;
}

absl::StatusOr<BuiltExecutor> CreateMultiprocess(const EngineArgs& args,
                                                 kernels::cpu::KvDtype kv_dtype,
                                                 const kernels::cpu::KernelPlan& kernel_plan) {
  return StartWorkerProcesses(
      CpuExecutorOptions<MultiprocExecutorOptions>(args, kv_dtype, kernel_plan), args);
}

// Whether the model runs in rill-worker processes (one per rank) rather
// than in the engine process.
bool UsesWorkerProcesses(const EngineArgs& args) {
  if (args.distributed_executor_backend == "mp") return true;
  return args.tensor_parallel_size > 1 || !args.external_workers_dir.empty();
}

// The options the CUDA backend refuses, wherever its ranks run.
absl::Status CheckCudaArgs(const EngineArgs& args) {
  if (args.kv_cache_dtype != "auto" && args.kv_cache_dtype != "bfloat16") {
    return absl::InvalidArgumentError(
        absl::StrCat("kv_cache_dtype '", args.kv_cache_dtype,
                     "' is not available on backend cuda, whose KV cache is bfloat16 (use auto)"));
  }
  if (args.matmul != "auto") {
    return absl::InvalidArgumentError(absl::StrCat(
        "matmul '", args.matmul, "' chooses CPU kernels; backend cuda runs bf16 (use auto)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int>> ParseCudaDevices(const std::string& list) {
  std::vector<int> devices;
  if (list.empty()) return devices;
  for (absl::string_view part : absl::StrSplit(list, ',')) {
    int d = -1;
    if (!absl::SimpleAtoi(part, &d) || d < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--cuda_devices '", list, "': expected device numbers separated by commas, e.g. 0,1"));
    }
    devices.push_back(d);
  }
  return devices;
}

// CUDA tensor-parallel ranks in rill-worker processes over NCCL. The engine
// process touches no GPU, so it is built before (and without) any device
// probe here: each rank reports its own device's problems, by rank.
absl::StatusOr<BuiltExecutor> CreateCudaRanks(const EngineArgs& args) {
  if (absl::Status s = CheckCudaArgs(args); !s.ok()) return s;
  absl::StatusOr<std::vector<int>> devices = ParseCudaDevices(args.cuda_devices);
  if (!devices.ok()) return devices.status();
  MultiprocExecutorOptions options;
  options.model_path = ResolveModelPath(args.model);
  options.num_blocks = args.num_kv_blocks;
  options.block_size = args.block_size;
  options.threads = args.threads;
  options.backend = "cuda";
  options.cuda_devices = *std::move(devices);
  options.gpu_memory_utilization = args.gpu_memory_utilization;
  options.max_batch_tokens = std::max(args.max_num_batched_tokens, args.max_num_seqs);
  options.max_model_len = args.max_model_len;
  options.device_sampling = args.device_sampling;
  return StartWorkerProcesses(std::move(options), args);
}

// The model on one GPU in this process. A null executor (and no error) when
// `backend` is "auto" and the model does not run on the CUDA backend: the
// caller falls back to the CPU.
absl::StatusOr<BuiltExecutor> CreateOnCuda(const EngineArgs& args) {
  if (absl::Status s = CheckCudaArgs(args); !s.ok()) return s;
  const std::string path = ResolveModelPath(args.model);
  absl::StatusOr<std::unique_ptr<worker::loader::Checkpoint>> loaded =
      worker::loader::LoadCheckpoint(path);
  if (!loaded.ok()) return loaded.status();
  std::shared_ptr<const worker::loader::Checkpoint> checkpoint = std::move(*loaded);
  CudaExecutorOptions options;
  options.num_blocks = args.num_kv_blocks;
  options.block_size = args.block_size;
  options.gpu_memory_utilization = args.gpu_memory_utilization;
  options.device_sampling = args.device_sampling;
  options.max_batch_tokens = std::max(args.max_num_batched_tokens, args.max_num_seqs);
  options.max_model_len = args.max_model_len;
  options.host_threads = args.threads;
  absl::StatusOr<std::unique_ptr<ModelExecutor>> executor =
      CreateCudaModelExecutor(checkpoint, options);
  BuiltExecutor built;
  if (!executor.ok()) {
    if (args.backend == "auto" && absl::IsUnimplemented(executor.status())) {
      LOG(WARNING) << executor.status().message() << "; falling back to the CPU backend";
      return built;
    }
    return executor.status();
  }
  built.executor = std::move(*executor);
  built.resolved = args;
  built.resolved.model = path;
  built.checkpoint = checkpoint.get();
  built.owned_checkpoint = std::move(checkpoint);
  return built;
}

absl::StatusOr<BuiltExecutor> CreateTargetExecutor(const EngineArgs& args) {
  if (absl::Status s = ValidateEngineArgs(args); !s.ok()) return s;
  if (args.distributed_executor_backend == "uni" &&
      (args.tensor_parallel_size > 1 || !args.external_workers_dir.empty())) {
    return absl::InvalidArgumentError(
        "--distributed_executor_backend=uni runs one rank in the engine process: it cannot "
        "serve --tensor_parallel_size > 1 or --external_workers_dir (use mp or auto)");
  }
  // The ranks hold the GPUs, not the engine (a Kubernetes engine container
  // has none): no device probe here.
  if (args.backend == "cuda" && UsesWorkerProcesses(args)) return CreateCudaRanks(args);
  absl::StatusOr<kernels::backend::BackendChoice> backend =
      kernels::backend::ChooseBackend(args.backend);
  if (!backend.ok()) {
    return absl::Status(backend.status().code(),
                        absl::StrCat("backend: ", backend.status().message()));
  }
  if (backend->kind == kernels::backend::BackendKind::kCuda) {
    if (UsesWorkerProcesses(args)) return CreateCudaRanks(args);
    absl::StatusOr<BuiltExecutor> built = CreateOnCuda(args);
    if (!built.ok() || built->executor != nullptr) return built;
  }
  absl::StatusOr<kernels::cpu::KvDtype> kv_dtype = worker::ParseKvCacheDtype(args.kv_cache_dtype);
  if (!kv_dtype.ok()) return kv_dtype.status();
  absl::StatusOr<kernels::cpu::KernelPlan> kernel_plan = kernels::cpu::SetUpKernelPlan(args.matmul);
  if (!kernel_plan.ok()) return kernel_plan.status();
  if (UsesWorkerProcesses(args)) return CreateMultiprocess(args, *kv_dtype, *kernel_plan);
  const auto options = CpuExecutorOptions<LocalExecutorOptions>(args, *kv_dtype, *kernel_plan);
  absl::StatusOr<std::unique_ptr<LocalModelExecutor>> executor =
      LocalModelExecutor::Create(options);
  if (!executor.ok()) return executor.status();
  return BuiltFrom(std::move(*executor), args, options.model_path);
}

// The model's executor, with --speculative_model's draft model attached.
absl::StatusOr<BuiltExecutor> CreateExecutor(const EngineArgs& args) {
  absl::StatusOr<BuiltExecutor> built = CreateTargetExecutor(args);
  if (!built.ok() || args.speculative_model.empty()) return built;
  if (absl::Status s =
          spec_decode::AttachDraftModel(args, *built->checkpoint, built->executor.get());
      !s.ok()) {
    return s;
  }
  return built;
}

// Structured outputs over the tokenizer's vocabulary. Without it the engine
// still serves; constrained requests are then refused.
void EnableStructuredOutputs(const tokenizer::BpeTokenizer& tokenizer, AsyncEngine* engine) {
  const absl::Status s = engine->EnableStructuredOutputs(GrammarVocabularyOf(
      tokenizer, engine->GetModelConfig().vocab_size,
      engine->GetEngineConfig().decoding.eos_token_ids));
  if (!s.ok()) LOG(WARNING) << "structured outputs are off: " << s;
}

}  // namespace

absl::StatusOr<std::unique_ptr<AsyncEngine>> CreateAsyncEngine(const EngineArgs& args) {
  absl::StatusOr<BuiltExecutor> built = CreateExecutor(args);
  if (!built.ok()) return built.status();
  const bool encoder = built->executor->is_encoder();
  absl::StatusOr<std::unique_ptr<AsyncEngine>> engine =
      AsyncEngine::Create(built->resolved, std::move(built->executor));
  if (!engine.ok() || encoder) return engine;
  absl::StatusOr<std::unique_ptr<tokenizer::BpeTokenizer>> tokenizer =
      LoadTokenizer(*built->checkpoint);
  if (tokenizer.ok()) {
    EnableStructuredOutputs(**tokenizer, engine->get());
  } else {
    LOG(WARNING) << "structured outputs are off: " << tokenizer.status();
  }
  return engine;
}

absl::StatusOr<std::unique_ptr<AsyncLLMEngine>> CreateAsyncLLMEngine(
    const EngineArgs& args, std::shared_ptr<const tokenizer::BpeTokenizer> tokenizer) {
  absl::StatusOr<BuiltExecutor> built = CreateExecutor(args);
  if (!built.ok()) return built.status();
  if (built->executor->is_encoder()) {
    // Encoders (BERT) come with a WordPiece tokenizer (tokenizer.json or
    // GGUF), used by Encode; there is no BPE tokenizer and nothing to generate.
    absl::StatusOr<std::unique_ptr<tokenizer::WordPieceTokenizer>> wordpiece =
        LoadWordPieceTokenizer(*built->checkpoint);
    if (!wordpiece.ok()) return wordpiece.status();
    absl::StatusOr<std::unique_ptr<AsyncLLMEngine>> engine =
        AsyncLLMEngine::Create(built->resolved, std::move(built->executor), nullptr);
    if (engine.ok()) (*engine)->SetEncoderTokenizer(std::move(*wordpiece));
    return engine;
  }
  if (tokenizer == nullptr) {
    absl::StatusOr<std::unique_ptr<tokenizer::BpeTokenizer>> loaded =
        LoadTokenizer(*built->checkpoint);
    if (!loaded.ok()) return loaded.status();
    tokenizer = std::move(*loaded);
  }
  // The vocabulary is read from the tokenizer before the engine shares it.
  structured_output::GrammarVocabulary vocab =
      GrammarVocabularyOf(*tokenizer, built->executor->model_config().vocab_size, {});
  absl::StatusOr<std::unique_ptr<AsyncLLMEngine>> engine =
      AsyncLLMEngine::Create(built->resolved, std::move(built->executor), std::move(tokenizer));
  if (!engine.ok()) return engine;
  vocab.stop_token_ids = (*engine)->GetEngineConfig().decoding.eos_token_ids;
  if (absl::Status s = (*engine)->EnableStructuredOutputs(vocab); !s.ok()) {
    LOG(WARNING) << "structured outputs are off: " << s;
  }
  return engine;
}

}  // namespace rill::engine
