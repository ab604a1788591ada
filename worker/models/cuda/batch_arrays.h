// Host side of one CUDA forward step: validation of a ragged ForwardBatch and
// the flat int32 arrays the kernels read (cuda_kernels.h). No CUDA here, so it
// is unit-tested on any machine.
#ifndef RILL_WORKER_MODELS_CUDA_BATCH_ARRAYS_H_
#define RILL_WORKER_MODELS_CUDA_BATCH_ARRAYS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "worker/forward_batch.h"

namespace rill::worker {

struct BatchLimits {
  int64_t vocab_size = 0;
  int64_t max_context = 0;  // positions must stay below this (the model's context length)
  int num_blocks = 0;       // KV-cache blocks; block ids lie in [0, num_blocks)
  int block_size = 16;
  int max_batch_tokens = 0;  // new tokens per step (activation buffers are this big)
};

// InvalidArgument naming the sequence when a batch cannot run: no sequences,
// an empty chunk, a negative start_pos, a position past max_context, a token
// id outside the vocabulary, a block table too short or naming a block past
// the cache, or more than max_batch_tokens new tokens. Unimplemented for LoRA.
absl::Status ValidateBatch(const ForwardBatch& batch, const BatchLimits& limits);

// The arrays of one step, in batch order (T tokens, S sequences).
struct BatchArrays {
  int num_tokens = 0;
  int num_seqs = 0;
  int max_blocks_per_seq = 1;         // row stride of block_tables (>= 1)
  int max_context = 0;                // largest context_lens entry
  std::vector<int32_t> tokens;        // [T]
  std::vector<int32_t> positions;     // [T] start_pos + i
  std::vector<int32_t> slot_mapping;  // [T] block * block_size + offset
  std::vector<int32_t> query_start;   // [S + 1] first token of each sequence
  std::vector<int32_t> context_lens;  // [S] start_pos + chunk length
  // [S][max_blocks_per_seq]: each sequence's first ceil(context/block_size)
  // blocks, padded with block 0, which attention never reads (keys stop at
  // the context length).
  std::vector<int32_t> block_tables;
  // Token rows whose logits are returned, in output order, and how many per
  // sequence (1, or the chunk length with all_logits).
  std::vector<int32_t> logit_rows;
  std::vector<int32_t> logits_per_seq;  // [S]
};

// Call after ValidateBatch succeeded.
BatchArrays BuildBatchArrays(const ForwardBatch& batch, int block_size);

// True when a CUDA graph can replay the step: every sequence brings one new
// token and wants only its last logits row (no all_logits, no hidden states).
bool IsDecodeOnly(const ForwardBatch& batch);

// A decode step padded to a graph's fixed shape: `bucket` rows (>= the step's
// sequences) and block tables `table_width` entries wide (>= the step's
// max_blocks_per_seq). Padding rows decode token 0 at position 0 with a
// context of 1 and write their K/V into `scratch_block`, a block the engine
// never hands out, so they touch no sequence's cache; their logits are
// dropped. Call with a decode-only batch's arrays.
struct DecodeGraphArrays {
  std::vector<int32_t> tokens;        // [bucket]
  std::vector<int32_t> positions;     // [bucket]
  std::vector<int32_t> slot_mapping;  // [bucket]
  std::vector<int32_t> context_lens;  // [bucket]
  std::vector<int32_t> block_tables;  // [bucket][table_width]
};
DecodeGraphArrays PadForDecodeGraph(const BatchArrays& a, int bucket, int table_width,
                                    int scratch_block, int block_size);

}  // namespace rill::worker

#endif  // RILL_WORKER_MODELS_CUDA_BATCH_ARRAYS_H_
