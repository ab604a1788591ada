// The KV cache size of CUDA tensor-parallel ranks, agreed in two phases:
// each rank places its shard and reports how many KV blocks its device
// holds beside it (WorkerReady.kv_blocks_fit); the engine takes the
// smallest, since one block table addresses the same blocks on every rank,
// and tells every rank to allocate that many.
#ifndef RILL_ENGINE_KV_BLOCK_NEGOTIATION_H_
#define RILL_ENGINE_KV_BLOCK_NEGOTIATION_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace rill::engine {

// `fits`: each rank's kv_blocks_fit (index = rank). fixed_num_blocks > 0
// (--num_kv_blocks) is used as given when every rank fits it. max_model_len
// > 0: one sequence that long must fit. ResourceExhausted naming the rank
// with the least room when the fixed count or max_model_len does not fit;
// InvalidArgument when there are no ranks or a rank reported no room.
absl::StatusOr<int> NegotiateKvBlocks(const std::vector<int64_t>& fits, int fixed_num_blocks,
                                      int block_size, int64_t max_model_len);

}  // namespace rill::engine

#endif  // RILL_ENGINE_KV_BLOCK_NEGOTIATION_H_
