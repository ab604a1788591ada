// One tensor-parallel rank's model shard, KV cache and collectives, as the
// worker's protocol loop (worker_process.cc) drives them: cpu_rank.h (the
// CPU model over gloo) or cuda_rank.h (the CUDA model over NCCL). The loop
// thread is the only caller.
#ifndef RILL_WORKER_RANK_MODEL_H_
#define RILL_WORKER_RANK_MODEL_H_

#include <cstdint>

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rill/internal/worker.pb.h"
#include "worker/forward_batch.h"
#include "worker/loader/checkpoint.h"
#include "worker/models/tp_plan.h"

namespace rill::worker {

class RankModel {
 public:
  virtual ~RankModel() = default;

  // What WorkerReady reports once the shard is loaded (heads, KV bytes,
  // threads, communicator; kv_blocks_fit on cuda).
  virtual void DescribeReady(rill::internal::WorkerReady* ready) const = 0;
  // The KV cache's second phase (cuda): allocate `num_blocks` blocks, the
  // count every rank agreed on. The CPU's cache is allocated at load:
  // FailedPrecondition there.
  virtual absl::Status AllocateKvBlocks(int num_blocks) = 0;

  // One step. Logits as CausalLm::Forward returns them (every rank computes
  // the same; rank 0's go back to the engine). Unavailable when a
  // collective failed: the group is then unusable and the worker exits.
  virtual absl::Status Forward(const ForwardBatch& batch, ForwardOutput* out) = 0;
  // Host wall time spent in collectives since the last call (zero where the
  // collectives run on the device stream, unseen by the host).
  virtual absl::Duration TakeCollectiveTime() = 0;
  virtual int64_t vocab_size() const = 0;

  // Level >= 1 drops the KV cache (cuda level 2: the weights too); WakeUp
  // restores what Sleep dropped.
  virtual absl::Status Sleep(int level) = 0;
  virtual absl::Status WakeUp() = 0;

  // The shard's part of get_worker_info (partition, KV bytes, threads,
  // communicator, backend, device); the loop adds rank, pid and steps.
  virtual void FillInfo(rill::internal::WorkerInfo* info) const = 0;
};

// The checkpoint a rank loads and its share of it (worker/models/tp_plan.h).
struct RankShard {
  std::shared_ptr<const loader::Checkpoint> checkpoint;
  TpPartition part;
};
absl::StatusOr<RankShard> LoadRankShard(const rill::internal::WorkerConfig& config, int rank);

// The rank's share of the model (heads, MLP and expert features) in `info`.
void FillPartitionInfo(const TpPartition& part, rill::internal::WorkerInfo* info);

}  // namespace rill::worker

#endif  // RILL_WORKER_RANK_MODEL_H_
