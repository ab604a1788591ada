#include "engine/kv_block_negotiation.h"

#include <algorithm>
#include <climits>

#include "absl/strings/str_cat.h"

namespace rill::engine {

absl::StatusOr<int> NegotiateKvBlocks(const std::vector<int64_t>& fits, int fixed_num_blocks,
                                      int block_size, int64_t max_model_len) {
  if (fits.empty()) return absl::InvalidArgumentError("no ranks reported their KV room");
  if (block_size < 1) return absl::InvalidArgumentError("block_size must be >= 1");
  const auto least = std::min_element(fits.begin(), fits.end());
  const int rank = static_cast<int>(least - fits.begin());
  if (*least < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("worker rank ", rank, " reported room for ", *least, " KV blocks"));
  }
  const std::string where = absl::StrCat("worker rank ", rank, "'s device holds ", *least,
                                         " KV blocks of ", block_size, " tokens");
  int64_t blocks = std::min<int64_t>(*least, INT_MAX);
  if (fixed_num_blocks > 0) {
    if (fixed_num_blocks > *least) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "--num_kv_blocks ", fixed_num_blocks, " does not fit: ", where,
          "; lower --num_kv_blocks or raise --gpu_memory_utilization"));
    }
    blocks = fixed_num_blocks;
  }
  if (max_model_len > 0 && blocks * block_size < max_model_len) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the KV cache holds only ", blocks * block_size,
                     " tokens, fewer than max model length ", max_model_len, " (", where,
                     "); raise --gpu_memory_utilization or lower --max_model_len"));
  }
  return static_cast<int>(blocks);
}

}  // namespace rill::engine
