#include "worker/sleeping_cuda_llama.h"

namespace rill::worker {

absl::Status SleepingCudaLlama::Load(int num_kv_blocks) {
  absl::StatusOr<std::unique_ptr<CudaLlama>> model = factory_(num_kv_blocks);
  if (!model.ok()) return model.status();
  model_ = std::move(*model);
  num_kv_blocks_ = num_kv_blocks;
  asleep_ = false;
  return absl::OkStatus();
}

absl::Status SleepingCudaLlama::SetKvCacheBlocks(int num_blocks) {
  if (model_ == nullptr || asleep_) return absl::FailedPreconditionError("the model is asleep");
  if (absl::Status s = model_->SetKvCacheBlocks(num_blocks); !s.ok()) return s;
  num_kv_blocks_ = num_blocks;
  return absl::OkStatus();
}

absl::Status SleepingCudaLlama::Sleep(int level) {
  if (level < 1) return absl::OkStatus();
  asleep_ = true;
  if (level >= 2) {
    model_.reset();
    return absl::OkStatus();
  }
  if (model_ != nullptr) return model_->SetKvCacheBlocks(0);
  return absl::OkStatus();
}

absl::Status SleepingCudaLlama::WakeUp() {
  if (!asleep_) return absl::OkStatus();
  if (model_ == nullptr) {
    absl::StatusOr<std::unique_ptr<CudaLlama>> model = factory_(num_kv_blocks_);
    if (!model.ok()) return model.status();
    model_ = std::move(*model);
  } else if (model_->num_kv_blocks() == 0) {
    if (absl::Status s = model_->SetKvCacheBlocks(num_kv_blocks_); !s.ok()) return s;
  }
  asleep_ = false;
  return absl::OkStatus();
}

}  // namespace rill::worker
