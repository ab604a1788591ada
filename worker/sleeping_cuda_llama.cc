#include "worker/sleeping_cuda_llama.h"

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_runtime_api.h"

namespace rill::worker {
namespace {

absl::Status DeviceMemory(int64_t* free_bytes, int64_t* total_bytes) {
  size_t f = 0, t = 0;
  if (const int err = kernels::cuda::MemInfo(&f, &t); err != 0) {
    return absl::InternalError(absl::StrCat("CUDA: reading the device's free memory: ",
                                            kernels::cuda::ErrorString(err), " (code ", err, ")"));
  }
  *free_bytes = static_cast<int64_t>(f);
  *total_bytes = static_cast<int64_t>(t);
  return absl::OkStatus();
}

}  // namespace

absl::Status SleepingCudaLlama::Load(int num_kv_blocks) {
  absl::StatusOr<std::unique_ptr<CudaLlama>> model = factory_(num_kv_blocks);
  if (!model.ok()) return model.status();
  model_ = std::move(*model);
  num_kv_blocks_ = num_kv_blocks;
  asleep_ = false;
  return absl::OkStatus();
}

absl::StatusOr<PlacedModelMemory> SleepingCudaLlama::LoadMeasuringMemory() {
  PlacedModelMemory memory;
  if (absl::Status s = DeviceMemory(&memory.free_before, &memory.total); !s.ok()) return s;
  if (absl::Status s = Load(1); !s.ok()) return s;
  if (absl::Status s = DeviceMemory(&memory.free_after, &memory.total); !s.ok()) return s;
  memory.weight_bytes = model_->weight_bytes();
  return memory;
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
