#include "worker/cuda_rank.h"

#include <cstdlib>
#include <utility>

#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/cuda/cuda_runtime_api.h"
#include "kernels/cuda/device_probe.h"
#include "worker/comm/nccl_communicator.h"
#include "worker/cuda_device_choice.h"
#include "worker/cuda_kv_sizing.h"
#include "worker/loader/checkpoint.h"
#include "worker/models/cuda/cuda_llama.h"
#include "worker/models/tp_plan.h"
#include "worker/sleeping_cuda_llama.h"

namespace rill::worker {
namespace {

std::string MiB(int64_t bytes) { return absl::StrFormat("%.1f MiB", bytes / 1048576.0); }

class CudaRank : public RankModel {
 public:
  CudaRank(int rank, const rill::internal::WorkerConfig& config) : rank_(rank), config_(config) {}

  absl::Status Init(int device_flag) {
    if (config_.block_size() < 1 || config_.max_batch_tokens() < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bad worker configuration for rank ", rank_, ": block size ", config_.block_size(),
          ", max batch tokens ", config_.max_batch_tokens()));
    }
    // The device first: without one, fail before loading anything.
    absl::StatusOr<std::vector<kernels::cuda::CudaDeviceInfo>> devices =
        kernels::cuda::ProbeCudaDevices();
    if (!devices.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the CUDA backend needs a CUDA device: ", devices.status().message()));
    }
    CudaDeviceRequest request;
    request.rank = rank_;
    request.engine_devices.assign(config_.cuda_devices().begin(), config_.cuda_devices().end());
    request.worker_flag = device_flag;
    request.visible_devices = static_cast<int>(devices->size());
    if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES"); v != nullptr) {
      request.cuda_visible_devices = v;
    }
    absl::StatusOr<int> device = ChooseCudaDevice(request);
    if (!device.ok()) return device.status();
    device_index_ = *device;
    for (const kernels::cuda::CudaDeviceInfo& d : *devices) {
      if (d.index != device_index_) continue;
      device_ = absl::StrCat("cuda:", d.index, " (", d.name, ", sm_", d.compute_major,
                             d.compute_minor, ")");
    }
    // Joining also makes the device this thread's, for everything below.
    NcclOptions n;
    n.unique_id = config_.nccl_unique_id();
    n.rank = rank_;
    n.world_size = config_.world_size();
    n.device = device_index_;
    n.timeout = std::chrono::seconds(std::max(1, config_.comm_timeout_s()));
    absl::StatusOr<std::unique_ptr<DeviceCommunicator>> comm = CreateNcclCommunicator(n);
    if (!comm.ok()) return comm.status();
    comm_ = std::move(*comm);

    absl::StatusOr<RankShard> shard = LoadRankShard(config_, rank_);
    if (!shard.ok()) return shard.status();
    checkpoint_ = std::move(shard->checkpoint);
    part_ = shard->part;

    absl::StatusOr<PlacedModelMemory> memory = model_.LoadMeasuringMemory();
    if (!memory.ok()) return memory.status();
    absl::StatusOr<CudaKvSizing> sizing =
        SizeCudaKvCache(checkpoint_->config(), part_.num_kv_heads(), config_.block_size(),
                        config_.gpu_memory_utilization(), 0, *memory);
    if (!sizing.ok()) return sizing.status();
    blocks_fit_ = sizing->num_blocks;
    LOG(INFO) << "rank " << rank_ << " on " << device_ << ": room for " << blocks_fit_
              << " KV blocks (" << MiB(sizing->plan.kv_bytes) << ") from a budget of "
              << MiB(sizing->plan.budget_bytes) << "; weights " << MiB(memory->weight_bytes)
              << ", activations " << MiB(sizing->activation_bytes) << ", in use by others "
              << MiB(memory->total - memory->free_before) << "; NCCL " << NcclVersionString();
    return absl::OkStatus();
  }

  void DescribeReady(rill::internal::WorkerReady* ready) const override {
    ready->set_num_kv_heads(part_.num_kv_heads());
    ready->set_kv_cache_bytes(0);  // Allocated in the second phase.
    ready->set_threads(1);
    ready->set_communicator(comm_->backend());
    ready->set_kv_blocks_fit(blocks_fit_);
    ready->set_device(device_);
    ready->set_nccl_version(NcclVersionString());
  }

  absl::Status AllocateKvBlocks(int num_blocks) override {
    if (num_blocks < 1 || num_blocks > blocks_fit_) {
      return absl::InvalidArgumentError(
          absl::StrCat(num_blocks, " KV blocks asked, room for ", blocks_fit_));
    }
    if (absl::Status s = model_.SetKvCacheBlocks(num_blocks); !s.ok()) return s;
    allocated_ = true;
    return absl::OkStatus();
  }

  absl::Status Forward(const ForwardBatch& batch, ForwardOutput* out) override {
    if (model_.asleep() || !allocated_) return absl::FailedPreconditionError("worker is asleep");
    return model_.model()->Forward(batch, out);
  }

  // NCCL runs on the model's stream: the host never waits in it alone.
  absl::Duration TakeCollectiveTime() override { return absl::ZeroDuration(); }
  int64_t vocab_size() const override { return checkpoint_->config().vocab_size; }

  absl::Status Sleep(int level) override { return model_.Sleep(level); }
  absl::Status WakeUp() override { return model_.WakeUp(); }

  void FillInfo(rill::internal::WorkerInfo* info) const override {
    FillPartitionInfo(part_, info);
    info->set_kv_cache_bytes(model_.kv_cache_bytes());
    info->set_threads(1);
    info->set_communicator(comm_->backend());
    info->set_backend("cuda");
    info->set_device(device_);
    info->set_nccl_version(NcclVersionString());
  }

 private:
  absl::StatusOr<std::unique_ptr<CudaLlama>> CreateModel(int num_kv_blocks) {
    CudaLlamaOptions o;
    o.num_kv_blocks = num_kv_blocks;
    o.block_size = config_.block_size();
    o.max_batch_tokens = config_.max_batch_tokens();
    o.tp_rank = rank_;
    o.tp_world_size = config_.world_size();
    o.comm = comm_.get();
    return CudaLlama::Create(checkpoint_, o);
  }

  const int rank_;
  const rill::internal::WorkerConfig config_;
  int device_index_ = 0;
  std::string device_;
  std::unique_ptr<DeviceCommunicator> comm_;
  std::shared_ptr<const loader::Checkpoint> checkpoint_;
  TpPartition part_;
  // Declared after comm_, so the model goes first.
  SleepingCudaLlama model_{[this](int blocks) { return CreateModel(blocks); }};
  int64_t blocks_fit_ = 0;
  bool allocated_ = false;  // AllocateKvBlocks ran
};

}  // namespace

absl::StatusOr<std::unique_ptr<RankModel>> CreateCudaRank(
    int rank, const rill::internal::WorkerConfig& config, int device_flag) {
  auto model = std::make_unique<CudaRank>(rank, config);
  if (absl::Status s = model->Init(device_flag); !s.ok()) return s;
  return model;
}

}  // namespace rill::worker
