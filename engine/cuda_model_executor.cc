#include "engine/cuda_model_executor.h"

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <utility>

#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cuda/cuda_runtime_api.h"
#include "kernels/cuda/device_probe.h"
#include "kernels/cuda/plan/kv_memory_plan.h"
#include "worker/cuda_kv_sizing.h"
#include "worker/sleeping_cuda_llama.h"
#include "worker/models/cuda/cuda_llama.h"

namespace rill::engine {
namespace {

// The CUDA model's own grid limit on tokens per forward.
constexpr int kMaxForwardTokens = 65535;

std::string MiB(int64_t bytes) { return absl::StrFormat("%.1f MiB", bytes / 1048576.0); }

class CudaModelExecutor : public ModelExecutor {
 public:
  CudaModelExecutor(std::shared_ptr<const worker::loader::Checkpoint> checkpoint,
                    const CudaExecutorOptions& options, std::string device)
      : checkpoint_(std::move(checkpoint)), options_(options), device_(std::move(device)) {}

  // Places the model with a one-block cache, then sizes the real cache from
  // what the device has left.
  absl::Status Init() {
    absl::StatusOr<worker::PlacedModelMemory> memory = model_.LoadMeasuringMemory();
    if (!memory.ok()) return memory.status();
    num_blocks_ = options_.num_blocks;
    if (num_blocks_ <= 0) {
      const worker::loader::ModelConfig& c = checkpoint_->config();
      absl::StatusOr<worker::CudaKvSizing> sizing = worker::SizeCudaKvCache(
          c, static_cast<int>(c.num_kv_heads), options_.block_size,
          options_.gpu_memory_utilization, options_.max_model_len, *memory);
      if (!sizing.ok()) return sizing.status();
      num_blocks_ = sizing->num_blocks;
      LOG(INFO) << "cuda executor: KV cache of " << num_blocks_ << " blocks ("
                << MiB(sizing->plan.kv_bytes) << ") from a budget of "
                << MiB(sizing->plan.budget_bytes) << "; weights " << MiB(memory->weight_bytes)
                << ", activations " << MiB(sizing->activation_bytes) << ", in use by others "
                << MiB(memory->total - memory->free_before);
    }
    if (absl::Status s = model_.SetKvCacheBlocks(num_blocks_); !s.ok()) return s;
    LOG(INFO) << "cuda executor: " << checkpoint_->path() << " on " << device_ << ", "
              << num_blocks_ << " KV blocks of " << options_.block_size << " tokens ("
              << MiB(model_.kv_cache_bytes()) << " bf16), sampling "
              << (options_.device_sampling ? "on the GPU where the engine allows it"
                                           : "on the host (--device_sampling=false)");
    return absl::OkStatus();
  }

  absl::Status Execute(const worker::ForwardBatch& batch, worker::ForwardOutput* out) override {
    if (model_.asleep()) return absl::FailedPreconditionError("executor is asleep");
    return model_.model()->Forward(batch, out);
  }

  int num_blocks() const override { return num_blocks_; }
  int block_size() const override { return options_.block_size; }
  bool samples_on_device() const override { return options_.device_sampling; }
  // The rows the engine samples on the host: at GPU batch sizes (hundreds
  // of rows of a 49,152-token vocabulary) one thread would take longer than
  // the GPU step, so the rows go to a pool of host threads.
  void ParallelFor(int64_t n, const std::function<void(int64_t)>& fn) override {
    pool_.ParallelFor(n, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) fn(i);
    });
  }
  int num_threads() const override { return pool_.num_threads(); }
  const worker::loader::ModelConfig& model_config() const override { return checkpoint_->config(); }
  int64_t kv_cache_bytes() const override { return model_.kv_cache_bytes(); }
  bool can_pool() const override { return true; }  // hidden states of decoder models
  std::string backend() const override { return "cuda"; }
  std::string kv_cache_dtype() const override { return "bfloat16"; }

  // Level 1 frees the KV cache (cudaFree) and keeps the weights; level 2
  // frees the whole model, which WakeUp uploads again from the checkpoint
  // (still mapped in host memory): worker/sleeping_cuda_llama.h.
  absl::Status Sleep(int level) override { return model_.Sleep(level); }
  absl::Status WakeUp() override { return model_.WakeUp(); }

  absl::StatusOr<std::vector<std::string>> CollectiveRpc(const std::string& method) override {
    if (method != "get_worker_info") return ModelExecutor::CollectiveRpc(method);
    return std::vector<std::string>{absl::StrCat(
        "{\"rank\":0,\"world_size\":1,\"pid\":", getpid(), ",\"device\":\"", device_,
        "\",\"kv_cache_bytes\":", kv_cache_bytes(),
        ",\"communicator\":\"none\",\"process\":\"engine\"}")};
  }

 private:
  absl::StatusOr<std::unique_ptr<worker::CudaLlama>> CreateModel(int num_kv_blocks) {
    worker::CudaLlamaOptions o;
    o.num_kv_blocks = num_kv_blocks;
    o.block_size = options_.block_size;
    o.max_batch_tokens = options_.max_batch_tokens;
    return worker::CudaLlama::Create(checkpoint_, o);
  }

  std::shared_ptr<const worker::loader::Checkpoint> checkpoint_;
  CudaExecutorOptions options_;
  std::string device_;
  kernels::cpu::ThreadPool pool_{options_.host_threads};
  worker::SleepingCudaLlama model_{[this](int blocks) { return CreateModel(blocks); }};
  int num_blocks_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ModelExecutor>> CreateCudaModelExecutor(
    std::shared_ptr<const worker::loader::Checkpoint> checkpoint,
    const CudaExecutorOptions& options) {
  if (checkpoint == nullptr) return absl::InvalidArgumentError("CUDA executor: null checkpoint");
  if (absl::Status s = kernels::cuda::ValidateGpuMemoryUtilization(options.gpu_memory_utilization);
      !s.ok()) {
    return s;
  }
  if (options.block_size < 1) return absl::InvalidArgumentError("block_size must be >= 1");
  if (options.num_blocks < 0) return absl::InvalidArgumentError("num_blocks must be >= 0");
  if (options.max_batch_tokens < 1 || options.max_batch_tokens > kMaxForwardTokens) {
    return absl::InvalidArgumentError(absl::StrCat("the CUDA backend runs at most ",
                                                   kMaxForwardTokens, " tokens per step, got ",
                                                   options.max_batch_tokens));
  }
  absl::StatusOr<std::vector<kernels::cuda::CudaDeviceInfo>> devices =
      kernels::cuda::ProbeCudaDevices();
  if (!devices.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the CUDA backend needs a CUDA device: ", devices.status().message()));
  }
  const kernels::cuda::CudaDeviceInfo& d = devices->front();
  const std::string device = absl::StrCat("cuda:", d.index, " (", d.name, ", sm_",
                                          d.compute_major, d.compute_minor, ")");
  auto ex = std::make_unique<CudaModelExecutor>(std::move(checkpoint), options, device);
  if (absl::Status s = ex->Init(); !s.ok()) return s;
  return ex;
}

}  // namespace rill::engine
