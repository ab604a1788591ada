#include "worker/models/tp_plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace rill::worker {
namespace {

// [begin, end) of part `i` when `total` units are dealt to `parts` parts as
// evenly as possible (the first total % parts parts get one more).
std::pair<int64_t, int64_t> EvenSplit(int64_t total, int parts, int i) {
  const int64_t base = total / parts, extra = total % parts;
  const int64_t begin = i * base + std::min<int64_t>(i, extra);
  return {begin, begin + base + (i < extra ? 1 : 0)};
}

}  // namespace

absl::StatusOr<TpPartition> PartitionForRank(const worker::loader::ModelConfig& c, int rank,
                                             int world_size) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor-parallel rank ", rank, " outside a world of ", world_size));
  }
  if (c.expert_count > 0 && world_size > 1) {
    return absl::UnimplementedError(absl::StrCat(
        "mixture-of-experts models (", c.expert_count,
        " experts) run with tensor_parallel_size 1 only: their experts are not sharded"));
  }
  if (c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("cannot shard ", c.num_heads, " heads over ",
                                                   c.num_kv_heads, " K/V heads"));
  }
  if (world_size > c.num_kv_heads) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor_parallel_size ", world_size, " exceeds the model's ", c.num_kv_heads,
        " K/V heads (each rank must hold at least one K/V head)"));
  }
  TpPartition p;
  p.rank = rank;
  p.world_size = world_size;
  const int group = c.num_heads / c.num_kv_heads;
  auto [kv0, kv1] = EvenSplit(c.num_kv_heads, world_size, rank);
  p.kv_head_begin = static_cast<int>(kv0);
  p.kv_head_end = static_cast<int>(kv1);
  p.q_head_begin = p.kv_head_begin * group;
  p.q_head_end = p.kv_head_end * group;
  // MLP features in units of 256 (a K-quant super-block) where the size
  // allows, so the row-parallel down projection slices whole blocks.
  int64_t unit = 1;
  for (int64_t u : {256, 32}) {
    if (c.intermediate_size % u == 0 && c.intermediate_size / u >= world_size) {
      unit = u;
      break;
    }
  }
  if (c.intermediate_size / unit < world_size) {
    return absl::InvalidArgumentError(absl::StrCat("intermediate size ", c.intermediate_size,
                                                   " cannot be split over ", world_size,
                                                   " ranks"));
  }
  auto [f0, f1] = EvenSplit(c.intermediate_size / unit, world_size, rank);
  p.ffn_begin = f0 * unit;
  p.ffn_end = f1 * unit;
  return p;
}

absl::StatusOr<int> MaxKvHeadsPerRank(const worker::loader::ModelConfig& config, int world_size) {
  absl::StatusOr<TpPartition> first = PartitionForRank(config, 0, world_size);
  if (!first.ok()) return first.status();
  return first->num_kv_heads();  // The even split gives rank 0 the most.
}

}  // namespace rill::worker
