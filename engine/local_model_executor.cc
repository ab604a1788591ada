#include "engine/local_model_executor.h"

#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "worker/lora/lora_adapter.h"

namespace rill::engine {

absl::StatusOr<std::unique_ptr<LocalModelExecutor>> LocalModelExecutor::Create(
    const LocalExecutorOptions& options) {
  if (options.block_size < 1) return absl::InvalidArgumentError("block_size must be >= 1");
  auto ex = std::unique_ptr<LocalModelExecutor>(new LocalModelExecutor());
  ex->block_size_ = options.block_size;
  ex->kv_dtype_ = options.kv_cache_dtype;
  ex->kernel_plan_ = options.kernel_plan;
  worker::ModelOptions model_options;
  model_options.kernel_plan = options.kernel_plan;
  absl::StatusOr<std::unique_ptr<worker::loader::Checkpoint>> ckpt =
      worker::loader::LoadCheckpoint(options.model_path);
  if (!ckpt.ok()) return ckpt.status();
  ex->checkpoint_ = std::move(*ckpt);
  ex->pool_ = std::make_unique<kernels::cpu::ThreadPool>(options.threads);
  if (worker::IsEncoderArchitecture(ex->checkpoint_->config())) {
    absl::StatusOr<std::unique_ptr<worker::Encoder>> encoder =
        worker::CreateEncoder(ex->checkpoint_, ex->pool_.get(), model_options);
    if (!encoder.ok()) return encoder.status();
    ex->encoder_ = std::move(*encoder);
    ex->num_blocks_ = 1;  // The block manager needs one; an encoder uses none.
    LOG(INFO) << "local executor: encoder " << options.model_path << ", "
              << ex->pool_->num_threads() << " threads";
    return ex;
  }
  absl::StatusOr<std::unique_ptr<worker::CausalLm>> model =
      worker::CreateCausalLm(ex->checkpoint_, ex->pool_.get(), model_options);
  if (!model.ok()) return model.status();
  ex->model_ = std::move(*model);
  int num_blocks = options.num_blocks;
  if (num_blocks <= 0) {
    const worker::KvCacheShape one =
        ex->model_->CacheShape(1, options.block_size, options.kv_cache_dtype);
    const int64_t block_bytes = one.block_bytes();
    num_blocks = static_cast<int>(options.kv_cache_bytes / block_bytes);
    if (num_blocks < 1) {
      return absl::InvalidArgumentError(absl::StrCat("kv_cache_bytes ", options.kv_cache_bytes,
                                                     " is smaller than one KV block (",
                                                     block_bytes, " bytes)"));
    }
  }
  ex->num_blocks_ = num_blocks;
  if (absl::Status s = ex->WakeUp(); !s.ok()) return s;
  LOG(INFO) << "local executor: " << options.model_path << ", " << num_blocks << " KV blocks of "
            << options.block_size << " tokens (" << (ex->cache_->bytes() >> 20) << " MiB, "
            << worker::KvCacheDtypeName(options.kv_cache_dtype) << "), "
            << ex->pool_->num_threads() << " threads";
  return ex;
}

absl::Status LocalModelExecutor::Execute(const worker::ForwardBatch& batch,
                                         worker::ForwardOutput* out) {
  if (encoder_ != nullptr) return ExecuteEncoder(batch, out);
  if (cache_ == nullptr) return absl::FailedPreconditionError("executor is asleep");
  return model_->Forward(batch, cache_.get(), out);
}

absl::StatusOr<std::shared_ptr<const worker::LoraAdapter>> LocalModelExecutor::LoadLora(
    const std::string& dir, const worker::LoraLoadOptions& options) {
  if (!supports_lora()) return ModelExecutor::LoadLora(dir, options);
  return worker::LoadLoraAdapter(dir, checkpoint_->config(), options);
}

absl::Status LocalModelExecutor::ExecuteEncoder(const worker::ForwardBatch& batch,
                                                worker::ForwardOutput* out) {
  std::vector<worker::EncoderInput> inputs;
  for (const worker::SequenceChunk& seq : batch.sequences) {
    if (!seq.return_hidden || seq.start_pos != 0) {
      return absl::InvalidArgumentError(
          "an encoder model only computes hidden states of whole sequences (return_hidden)");
    }
    inputs.push_back(worker::EncoderInput{seq.tokens, {}});
  }
  out->logits.assign(batch.sequences.size(), {});
  return encoder_->Encode(inputs, &out->hidden);
}

absl::Status LocalModelExecutor::Sleep(int level) {
  if (level >= 1) cache_.reset();  // Weights stay mapped; level 2 could drop them too.
  return absl::OkStatus();
}

absl::Status LocalModelExecutor::WakeUp() {
  if (cache_ != nullptr || encoder_ != nullptr) return absl::OkStatus();
  absl::StatusOr<worker::PagedKvCache> cache =
      worker::PagedKvCache::Create(model_->CacheShape(num_blocks_, block_size_, kv_dtype_));
  if (!cache.ok()) return cache.status();
  cache_ = std::make_unique<worker::PagedKvCache>(std::move(*cache));
  return absl::OkStatus();
}

}  // namespace rill::engine
