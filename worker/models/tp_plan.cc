#include "worker/models/tp_plan.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace rill::worker {
namespace {

// [begin, end) of part `i` when `total` units are dealt to `parts` parts as
// evenly as possible (the first total % parts parts get one more).
std::pair<int64_t, int64_t> EvenSplit(int64_t total, int parts, int i) {
  const int64_t base = total / parts, extra = total % parts;
  const int64_t begin = i * base + std::min<int64_t>(i, extra);
  return {begin, begin + base + (i < extra ? 1 : 0)};
}

// Rank `rank`'s [begin, end) of `size` intermediate features, in units of
// 256 (a K-quant super-block) or 32 (a Q8_0/Q4 block) where the size allows,
// so the row-parallel down projection slices whole blocks (zero-copy).
// `what` names the size in the error when some rank would get no feature.
absl::StatusOr<std::pair<int64_t, int64_t>> FeatureSlice(int64_t size, int world_size, int rank,
                                                         absl::string_view what) {
  int64_t unit = 1;
  for (int64_t u : {256, 32}) {
    if (size % u == 0 && size / u >= world_size) {
      unit = u;
      break;
    }
  }
  if (size / unit < world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", size, " cannot be split over ", world_size, " ranks"));
  }
  auto [begin, end] = EvenSplit(size / unit, world_size, rank);
  return std::make_pair(begin * unit, end * unit);
}

// Whether any layer runs the dense MLP of intermediate_size (a
// mixture-of-experts model may have none: then that size is not split).
bool HasDenseMlp(const worker::loader::ModelConfig& c) {
  for (int64_t l = 0; l < c.num_layers; ++l) {
    if (!c.IsMoeLayer(l)) return true;
  }
  return c.num_layers <= 0;
}

}  // namespace

absl::StatusOr<TpPartition> PartitionForRank(const worker::loader::ModelConfig& c, int rank,
                                             int world_size) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor-parallel rank ", rank, " outside a world of ", world_size));
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
  if (HasDenseMlp(c)) {
    absl::StatusOr<std::pair<int64_t, int64_t>> ffn =
        FeatureSlice(c.intermediate_size, world_size, rank, "intermediate size");
    if (!ffn.ok()) return ffn.status();
    std::tie(p.ffn_begin, p.ffn_end) = *ffn;
  }
  if (c.expert_count > 0) {
    absl::StatusOr<std::pair<int64_t, int64_t>> experts =
        FeatureSlice(c.expert_intermediate_size, world_size, rank, "expert intermediate size");
    if (!experts.ok()) return experts.status();
    std::tie(p.expert_ffn_begin, p.expert_ffn_end) = *experts;
    if (c.shared_expert_intermediate_size > 0) {
      absl::StatusOr<std::pair<int64_t, int64_t>> shared = FeatureSlice(
          c.shared_expert_intermediate_size, world_size, rank, "shared expert intermediate size");
      if (!shared.ok()) return shared.status();
      std::tie(p.shared_expert_ffn_begin, p.shared_expert_ffn_end) = *shared;
    }
  }
  return p;
}

absl::StatusOr<int> MaxKvHeadsPerRank(const worker::loader::ModelConfig& config, int world_size) {
  absl::StatusOr<TpPartition> first = PartitionForRank(config, 0, world_size);
  if (!first.ok()) return first.status();
  return first->num_kv_heads();  // The even split gives rank 0 the most.
}

}  // namespace rill::worker
