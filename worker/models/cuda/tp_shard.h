// A tensor-parallel rank's piece of the CUDA Llama's host weights, cut from
// the fused device layouts of weights_bf16.h along the CPU path's plan
// (worker/models/tp_plan.h, Megatron style): the q rows of the rank's query
// heads, then the k and v rows of its K/V heads, of the fused qkv matrix and
// its bias; the gate rows, then the up rows, of its intermediate features of
// gate_up; the O columns of its query heads and the down columns of its
// features. Norms, the embedding and the LM head are not cut (replicated).
// Pure host code, no CUDA: unit-tested on any machine.
#ifndef RILL_WORKER_MODELS_CUDA_TP_SHARD_H_
#define RILL_WORKER_MODELS_CUDA_TP_SHARD_H_

#include <cstdint>
#include <vector>

#include "worker/loader/checkpoint.h"
#include "worker/models/cuda/weights_bf16.h"
#include "worker/models/tp_plan.h"

namespace rill::worker {

// [begin, end) of rows (or columns).
struct IndexRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

// The rows of the fused [q_dim + 2 * kv_dim] qkv matrix (and of its bias)
// rank `p` holds, in the order its piece stacks them: q, k, v.
std::vector<IndexRange> QkvRowsOfRank(const worker::loader::ModelConfig& c, const TpPartition& p);
// The rows of the fused [2 * ffn] gate_up matrix: gate, then up.
std::vector<IndexRange> GateUpRowsOfRank(const worker::loader::ModelConfig& c,
                                         const TpPartition& p);
// The columns of O ([hidden][q_dim]) and of down ([hidden][ffn]).
IndexRange OColsOfRank(const worker::loader::ModelConfig& c, const TpPartition& p);
IndexRange DownColsOfRank(const TpPartition& p);

// Rows `rows` of the row-major matrix `m` of `cols` columns, stacked in order.
std::vector<uint16_t> TakeRows(const std::vector<uint16_t>& m, int64_t cols,
                               const std::vector<IndexRange>& rows);
// Columns `cols` of the row-major matrix `m` of `width` columns.
std::vector<uint16_t> TakeCols(const std::vector<uint16_t>& m, int64_t width, IndexRange cols);

// Rank p.rank's piece of one decoder layer `full` (BuildLayerBf16's output
// for config `c`): what the CUDA Llama uploads for that rank. The norms are
// copied whole; an empty qkv_bias stays empty.
LayerBf16 ShardLayerBf16(const LayerBf16& full, const worker::loader::ModelConfig& c,
                         const TpPartition& p);

}  // namespace rill::worker

#endif  // RILL_WORKER_MODELS_CUDA_TP_SHARD_H_
