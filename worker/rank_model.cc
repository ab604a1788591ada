#include "worker/rank_model.h"

namespace rill::worker {

absl::StatusOr<RankShard> LoadRankShard(const rill::internal::WorkerConfig& config, int rank) {
  absl::StatusOr<std::unique_ptr<loader::Checkpoint>> ckpt =
      loader::LoadCheckpoint(config.model_path());
  if (!ckpt.ok()) return ckpt.status();
  RankShard shard;
  shard.checkpoint = std::move(*ckpt);
  absl::StatusOr<TpPartition> part =
      PartitionForRank(shard.checkpoint->config(), rank, config.world_size());
  if (!part.ok()) return part.status();
  shard.part = *part;
  return shard;
}

void FillPartitionInfo(const TpPartition& part, rill::internal::WorkerInfo* info) {
  info->set_num_kv_heads(part.num_kv_heads());
  info->set_q_head_begin(part.q_head_begin);
  info->set_q_head_end(part.q_head_end);
  info->set_ffn_begin(part.ffn_begin);
  info->set_ffn_end(part.ffn_end);
  info->set_expert_ffn_begin(part.expert_ffn_begin);
  info->set_expert_ffn_end(part.expert_ffn_end);
}

}  // namespace rill::worker
