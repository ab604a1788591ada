// Runs the model in tensor_parallel_size rill-worker processes (one per
// rank, see worker/worker_process.h). Each step's batch is serialized once
// and the same bytes are written to every rank's Unix control socket; the
// ranks all-reduce among themselves (gloo on the CPU; NCCL on CUDA GPUs,
// with the unique id this executor makes and sends in every rank's
// WorkerConfig) and rank 0 returns the logits. CUDA ranks size their KV
// cache in two phases (engine/kv_block_negotiation.h): each reports how many
// blocks fit its device beside its shard, all then allocate the smallest.
//
// Failure model: a worker that exits or whose socket breaks makes the
// executor dead for good: every rank is killed (the survivors would block in
// a collective), CheckHealth and Execute return UNAVAILABLE naming the rank
// and how it died. Recovery is a restart of the engine process (rill serve
// and Kubernetes do it; see the README).
#ifndef RILL_ENGINE_MULTIPROC_EXECUTOR_H_
#define RILL_ENGINE_MULTIPROC_EXECUTOR_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/model_executor.h"
#include "kernels/cpu/kernel_plan.h"
#include "rill/internal/worker.pb.h"
#include "worker/kv_cache.h"
#include "worker/loader/checkpoint.h"

namespace rill::engine {

struct MultiprocExecutorOptions {
  std::string model_path;  // resolved .gguf file or HF directory
  int tensor_parallel_size = 2;
  std::string worker_binary;  // path of rill-worker
  int num_blocks = 0;         // 0: derive from kv_cache_bytes
  // KV cache budget of each rank (each holds only its K/V heads).
  int64_t kv_cache_bytes = int64_t{512} << 20;
  int block_size = 16;
  kernels::cpu::KvDtype kv_cache_dtype = kernels::cpu::KvDtype::kF32;
  int threads = 0;  // all ranks together; 0 = all cores. At least 1 per rank.
  // Each rank chooses this plan's matmul kind (kernels::cpu::MatmulKindName) with
  // its own CPU and environment: the same as the engine's on one machine.
  kernels::cpu::KernelPlan kernel_plan = kernels::cpu::DefaultKernelPlan();
  absl::Duration start_timeout = absl::Minutes(5);
  int comm_timeout_s = 60;
  // Non-empty: do not spawn workers; listen on <dir>/control.sock for
  // tensor_parallel_size rill-worker processes started on their own (the
  // worker containers of the engine's Kubernetes pod share this directory).
  // Their death is then seen on the socket only, and they are stopped by
  // closing it rather than by a signal.
  std::string external_workers_dir;

  // "cpu" or "cuda" (the ranks run the CUDA Llama on one GPU each; the
  // engine process needs no GPU). The options below are cuda's only; the
  // CPU-only ones above (kv_cache_bytes, kv_cache_dtype, kernel_plan) are
  // then ignored.
  std::string backend = "cpu";
  // Device of each rank (index = rank); empty: spawned rank r uses device r,
  // external workers choose their own (worker/cuda_device_choice.h).
  std::vector<int> cuda_devices;
  double gpu_memory_utilization = 0.9;
  int max_batch_tokens = 2048;  // most new tokens in one step
  int64_t max_model_len = 0;    // > 0: the cache must hold one sequence this long
  // Rank 0 samples on its GPU the rows the engine sends there
  // (engine/device_sampling.h): only their token ids and logprobs come back.
  bool device_sampling = true;
};

class MultiprocExecutor : public ModelExecutor {
 public:
  // Spawns the workers and waits until every rank has loaded its shard.
  static absl::StatusOr<std::unique_ptr<MultiprocExecutor>> Create(
      const MultiprocExecutorOptions& options);
  // Shuts the workers down (kills them after a grace period).
  ~MultiprocExecutor() override;

  absl::Status Execute(const worker::ForwardBatch& batch, worker::ForwardOutput* out) override;
  int num_blocks() const override { return num_blocks_; }
  int block_size() const override { return options_.block_size; }
  const worker::loader::ModelConfig& model_config() const override { return checkpoint_->config(); }
  int tensor_parallel_size() const override { return options_.tensor_parallel_size; }
  absl::Duration last_collective_time() const override { return last_collective_; }
  int num_threads() const override { return threads_per_rank_ * options_.tensor_parallel_size; }
  int64_t kv_cache_bytes() const override;
  std::string kernel_plan() const override;
  std::string backend() const override { return options_.backend; }
  std::string kv_cache_dtype() const override { return cuda() ? "bfloat16" : ""; }
  std::string communicator() const override;
  bool samples_on_device() const override { return cuda() && options_.device_sampling; }
  absl::Status CheckHealth() override;
  // A monitor thread watches the ranks' control connections and processes
  // and reports the first death here.
  bool SetDeathCallback(DeathCallback callback) override;
  absl::Status Sleep(int level) override;
  absl::Status WakeUp() override;
  absl::StatusOr<std::vector<std::string>> CollectiveRpc(const std::string& method) override;

  const worker::loader::Checkpoint& checkpoint() const { return *checkpoint_; }
  std::vector<pid_t> worker_pids() const;
  // Steps broadcast so far and the total time spent serializing each
  // step's command once and writing it to every rank.
  struct BroadcastStats {
    int64_t steps = 0;
    absl::Duration total;
  };
  BroadcastStats broadcast_stats() const;

 private:
  struct Rank {
    pid_t pid = -1;  // Ours to wait for and kill only when we spawned it.
    int fd = -1;
    bool exited = false;
  };

  explicit MultiprocExecutor(const MultiprocExecutorOptions& options) : options_(options) {}
  bool cuda() const { return options_.backend == "cuda"; }
  // The WorkerConfig every rank gets in answer to its hello.
  rill::internal::WorkerConfig WorkerConfigForRanks() const;
  absl::Status Start();
  // cuda: the KV cache's second phase, once every rank is ready.
  absl::Status AllocateKvBlocks(const std::vector<int64_t>& fits);
  // Returns each rank's WorkerReady.kv_blocks_fit in `fits`.
  absl::Status AcceptWorkers(int listen_fd, std::vector<int64_t>* fits);
  // Sends `cmd` to every rank and collects the replies (index = rank).
  absl::StatusOr<std::vector<rill::internal::WorkerReply>> RoundTrip(
      rill::internal::WorkerCommand cmd, std::vector<char>* rank0_payload)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(io_mu_);
  absl::Status Broadcast(const std::string& bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(io_mu_);
  // A simple command every rank must acknowledge with OK.
  absl::Status Command(rill::internal::WorkerCommand cmd);
  // Reaps exited workers; marks the executor dead if any has.
  void ReapExited() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_mu_);
  absl::Status MarkDead(const std::string& reason);
  absl::Status DeadAfterFailure(int rank, const std::string& what);
  absl::Status MarkDeadLocked(const std::string& reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_mu_);
  absl::Status Dead() const;
  // The monitor thread: waits for a rank's connection to hang up (or its
  // process to exit), marks the executor dead and reports it once.
  void Monitor();
  void StopMonitor();

  const MultiprocExecutorOptions options_;
  std::shared_ptr<const worker::loader::Checkpoint> checkpoint_;
  std::string run_dir_;  // control socket + gloo rendezvous
  std::string gloo_dir_;
  std::string nccl_unique_id_;  // cuda: made once per engine start
  bool spawned_ = true;  // false with external_workers_dir
  int num_blocks_ = 0;
  int threads_per_rank_ = 1;

  mutable absl::Mutex io_mu_;  // one command round trip at a time
  uint64_t next_seq_ ABSL_GUARDED_BY(io_mu_) = 1;
  int64_t kv_bytes_total_ ABSL_GUARDED_BY(io_mu_) = 0;
  bool asleep_ ABSL_GUARDED_BY(io_mu_) = false;
  std::vector<char> payload_ ABSL_GUARDED_BY(io_mu_);
  absl::Duration broadcast_total_ ABSL_GUARDED_BY(io_mu_);
  int64_t broadcasts_ ABSL_GUARDED_BY(io_mu_) = 0;
  // Written by Execute under io_mu_, read by the engine loop (Execute's only
  // caller) afterwards, so the reader needs no lock.
  absl::Duration last_collective_;

  std::thread monitor_;
  int monitor_wake_[2] = {-1, -1};  // A pipe: a byte stops the monitor.
  // Held while the callback runs, so clearing it waits for a running call.
  absl::Mutex callback_mu_;
  DeathCallback death_callback_ ABSL_GUARDED_BY(callback_mu_);

  mutable absl::Mutex state_mu_;
  std::vector<Rank> ranks_ ABSL_GUARDED_BY(state_mu_);
  absl::Status dead_ ABSL_GUARDED_BY(state_mu_);
};

}  // namespace rill::engine

#endif  // RILL_ENGINE_MULTIPROC_EXECUTOR_H_
