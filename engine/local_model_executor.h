// Runs the model in this process: checkpoint + CausalLm + PagedKvCache +
// CPU thread pool; or, for an encoder checkpoint (BERT), the Encoder and no
// KV cache (pooling only).
#ifndef RILL_ENGINE_LOCAL_MODEL_EXECUTOR_H_
#define RILL_ENGINE_LOCAL_MODEL_EXECUTOR_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/model_executor.h"
#include "kernels/cpu/kernel_plan.h"
#include "kernels/cpu/thread_pool.h"
#include "worker/kv_cache.h"
#include "worker/loader/checkpoint.h"
#include "worker/models/causal_lm.h"
#include "worker/models/encoder.h"

namespace rill::engine {

struct LocalExecutorOptions {
  std::string model_path;  // Resolved path (.gguf or HF directory).
  int num_blocks = 0;      // 0: derive from kv_cache_bytes.
  int64_t kv_cache_bytes = int64_t{512} << 20;
  int block_size = 16;
  kernels::cpu::KvDtype kv_cache_dtype = kernels::cpu::KvDtype::kF32;
  int threads = 0;  // 0 = all cores.
  kernels::cpu::KernelPlan kernel_plan = kernels::cpu::DefaultKernelPlan();
};

class LocalModelExecutor : public ModelExecutor {
 public:
  static absl::StatusOr<std::unique_ptr<LocalModelExecutor>> Create(
      const LocalExecutorOptions& options);

  absl::Status Execute(const worker::ForwardBatch& batch, worker::ForwardOutput* out) override;
  int num_blocks() const override { return num_blocks_; }
  int block_size() const override { return block_size_; }
  const worker::loader::ModelConfig& model_config() const override { return checkpoint_->config(); }
  int num_threads() const override { return pool_->num_threads(); }
  void ParallelFor(int64_t n, const std::function<void(int64_t)>& fn) override {
    pool_->ParallelFor(n, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) fn(i);
    });
  }
  int64_t kv_cache_bytes() const override { return cache_ ? cache_->bytes() : 0; }
  bool can_generate() const override { return encoder_ == nullptr; }
  bool can_pool() const override { return true; }
  bool is_encoder() const override { return encoder_ != nullptr; }
  std::string kernel_plan() const override { return kernel_plan_.Describe(); }
  absl::StatusOr<std::shared_ptr<const worker::LoraAdapter>> LoadLora(
      const std::string& dir, const worker::LoraLoadOptions& options) override;
  bool supports_lora() const override { return model_ != nullptr && model_->SupportsLora(); }
  absl::Status Sleep(int level) override;
  absl::Status WakeUp() override;

  const worker::loader::Checkpoint& checkpoint() const { return *checkpoint_; }

 private:
  LocalModelExecutor() = default;
  absl::Status ExecuteEncoder(const worker::ForwardBatch& batch, worker::ForwardOutput* out);

  int num_blocks_ = 0;
  int block_size_ = 16;
  kernels::cpu::KvDtype kv_dtype_ = kernels::cpu::KvDtype::kF32;
  kernels::cpu::KernelPlan kernel_plan_;
  std::shared_ptr<const worker::loader::Checkpoint> checkpoint_;
  std::unique_ptr<kernels::cpu::ThreadPool> pool_;
  std::unique_ptr<worker::CausalLm> model_;
  std::unique_ptr<worker::Encoder> encoder_;  // Instead of model_ for encoders.
  std::unique_ptr<worker::PagedKvCache> cache_;  // Null while asleep.
};

}  // namespace rill::engine

#endif  // RILL_ENGINE_LOCAL_MODEL_EXECUTOR_H_
