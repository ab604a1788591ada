#include "worker/cpu_rank.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/kernel_plan.h"
#include "kernels/cpu/thread_pool.h"
#include "worker/comm/gloo_communicator.h"
#include "worker/comm/timed_communicator.h"
#include "worker/kv_cache.h"
#include "worker/loader/checkpoint.h"
#include "worker/models/causal_lm.h"
#include "worker/models/tp_plan.h"

namespace rill::worker {
namespace {

class CpuRank : public RankModel {
 public:
  CpuRank(int rank, const rill::internal::WorkerConfig& config) : rank_(rank), config_(config) {}

  absl::Status Init() {
    if (config_.num_blocks() < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad worker configuration for rank ", rank_, ": no KV blocks"));
    }
    if (config_.world_size() > 1) {
      GlooOptions g;
      g.rank = rank_;
      g.world_size = config_.world_size();
      g.rendezvous_dir = config_.rendezvous_dir();
      g.timeout = std::chrono::seconds(std::max(1, config_.comm_timeout_s()));
      absl::StatusOr<std::unique_ptr<GlooCommunicator>> comm = GlooCommunicator::Create(g);
      if (!comm.ok()) return comm.status();
      comm_ = std::make_unique<TimedCommunicator>(std::move(*comm));
    } else {
      comm_ = std::make_unique<TimedCommunicator>(std::make_unique<SingleRankCommunicator>());
    }
    absl::StatusOr<RankShard> shard = LoadRankShard(config_, rank_);
    if (!shard.ok()) return shard.status();
    checkpoint_ = std::move(shard->checkpoint);
    part_ = shard->part;
    pool_ = std::make_unique<kernels::cpu::ThreadPool>(std::max(1, config_.threads()));
    absl::StatusOr<kernels::cpu::KernelPlan> plan = kernels::cpu::SetUpKernelPlan(config_.matmul());
    if (!plan.ok()) return plan.status();
    ModelOptions mo;
    mo.kernel_plan = *plan;
    mo.comm = comm_.get();
    absl::StatusOr<std::unique_ptr<CausalLm>> model = CreateCausalLm(checkpoint_, pool_.get(), mo);
    if (!model.ok()) return model.status();
    model_ = std::move(*model);
    return AllocateCache();
  }

  void DescribeReady(rill::internal::WorkerReady* ready) const override {
    ready->set_num_kv_heads(part_.num_kv_heads());
    ready->set_kv_cache_bytes(cache_->bytes());
    ready->set_threads(pool_->num_threads());
    ready->set_communicator(comm_->backend());
  }

  absl::Status AllocateKvBlocks(int) override {
    return absl::FailedPreconditionError("a CPU rank allocates its KV cache when it loads");
  }

  absl::Status Forward(const ForwardBatch& batch, ForwardOutput* out) override {
    if (cache_ == nullptr) return absl::FailedPreconditionError("worker is asleep");
    return model_->Forward(batch, cache_.get(), out);
  }

  absl::Duration TakeCollectiveTime() override { return comm_->TakeElapsed(); }
  int64_t vocab_size() const override { return model_->config().vocab_size; }

  absl::Status Sleep(int level) override {
    if (level >= 1) cache_.reset();
    return absl::OkStatus();
  }
  absl::Status WakeUp() override { return AllocateCache(); }

  void FillInfo(rill::internal::WorkerInfo* info) const override {
    FillPartitionInfo(part_, info);
    info->set_kv_cache_bytes(cache_ ? cache_->bytes() : 0);
    info->set_threads(pool_->num_threads());
    info->set_communicator(comm_->backend());
    info->set_backend("cpu");
  }

 private:
  absl::Status AllocateCache() {
    if (cache_ != nullptr) return absl::OkStatus();
    absl::StatusOr<PagedKvCache> cache = PagedKvCache::Create(model_->CacheShape(
        config_.num_blocks(), config_.block_size(),
        config_.kv_cache_f16() ? kernels::cpu::KvDtype::kF16 : kernels::cpu::KvDtype::kF32));
    if (!cache.ok()) return cache.status();
    cache_ = std::make_unique<PagedKvCache>(std::move(*cache));
    return absl::OkStatus();
  }

  const int rank_;
  const rill::internal::WorkerConfig config_;
  std::unique_ptr<TimedCommunicator> comm_;
  std::shared_ptr<const loader::Checkpoint> checkpoint_;
  TpPartition part_;
  std::unique_ptr<kernels::cpu::ThreadPool> pool_;
  std::unique_ptr<CausalLm> model_;
  std::unique_ptr<PagedKvCache> cache_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RankModel>> CreateCpuRank(
    int rank, const rill::internal::WorkerConfig& config) {
  auto model = std::make_unique<CpuRank>(rank, config);
  if (absl::Status s = model->Init(); !s.ok()) return s;
  return model;
}

}  // namespace rill::worker
