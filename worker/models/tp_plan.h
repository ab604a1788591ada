// How a Llama-family model is split across tensor-parallel ranks
// (Megatron-style): each rank owns whole K/V heads and the query heads of
// their groups (column-parallel Q/K/V, row-parallel O), and a slice of the
// MLP's intermediate features (column-parallel gate/up, row-parallel down).
// A mixture-of-experts layer is split the same way inside every expert (and
// the shared expert): each rank holds the same feature slice of all of them,
// runs the replicated router, and one all-reduce sums the partial outputs.
// Uneven splits are allowed (SmolLM2 has 3 K/V heads: 2 ranks hold 2 and 1),
// so any tensor_parallel_size up to the number of K/V heads works. The
// engine uses this to size each rank's KV cache; the model to bind its share.
#ifndef RILL_WORKER_MODELS_TP_PLAN_H_
#define RILL_WORKER_MODELS_TP_PLAN_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "worker/loader/checkpoint.h"

namespace rill::worker {

struct TpPartition {
  int rank = 0;
  int world_size = 1;
  int kv_head_begin = 0, kv_head_end = 0;  // [begin, end)
  int q_head_begin = 0, q_head_end = 0;
  // Intermediate features, [begin, end): of the dense MLP (none when every
  // layer is a mixture of experts), of every expert, of the shared expert
  // (Qwen2-MoE); the expert ranges are empty for dense models.
  int64_t ffn_begin = 0, ffn_end = 0;
  int64_t expert_ffn_begin = 0, expert_ffn_end = 0;
  int64_t shared_expert_ffn_begin = 0, shared_expert_ffn_end = 0;

  int num_kv_heads() const { return kv_head_end - kv_head_begin; }
  int num_heads() const { return q_head_end - q_head_begin; }
  int64_t ffn_size() const { return ffn_end - ffn_begin; }
};

// Rank `rank`'s share. InvalidArgument when world_size exceeds the model's
// K/V heads (K/V heads are never replicated) or an intermediate size (dense,
// expert or shared expert) has fewer features than ranks.
absl::StatusOr<TpPartition> PartitionForRank(const worker::loader::ModelConfig& config, int rank,
                                             int world_size);

// The most K/V heads any rank holds: what each rank's KV cache is sized for.
absl::StatusOr<int> MaxKvHeadsPerRank(const worker::loader::ModelConfig& config, int world_size);

}  // namespace rill::worker

#endif  // RILL_WORKER_MODELS_TP_PLAN_H_
