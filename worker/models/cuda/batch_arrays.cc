#include "worker/models/cuda/batch_arrays.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "worker/forward_batch_validation.h"

namespace rill::worker {

absl::Status ValidateBatch(const ForwardBatch& batch, const BatchLimits& limits) {
  if (batch.sequences.empty()) return absl::InvalidArgumentError("batch has no sequences");
  int64_t total = 0;
  for (size_t s = 0; s < batch.sequences.size(); ++s) {
    if (batch.sequences[s].lora != nullptr) {
      return absl::UnimplementedError("the CUDA Llama does not run LoRA adapters");
    }
    total += static_cast<int64_t>(batch.sequences[s].tokens.size());
  }
  if (absl::Status v = ValidateSequences(
          batch, {limits.vocab_size, limits.max_context, limits.num_blocks, limits.block_size});
      !v.ok()) {
    return v;
  }
  if (total > limits.max_batch_tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch has ", total, " new tokens, more than max_batch_tokens ", limits.max_batch_tokens));
  }
  return absl::OkStatus();
}

BatchArrays BuildBatchArrays(const ForwardBatch& batch, int block_size) {
  BatchArrays a;
  a.num_seqs = static_cast<int>(batch.sequences.size());
  for (const SequenceChunk& seq : batch.sequences) {
    const int ctx = seq.start_pos + static_cast<int>(seq.tokens.size());
    a.max_context = std::max(a.max_context, ctx);
    a.max_blocks_per_seq = std::max(a.max_blocks_per_seq, (ctx + block_size - 1) / block_size);
  }
  a.query_start.push_back(0);
  a.block_tables.assign(static_cast<size_t>(a.num_seqs) * a.max_blocks_per_seq, 0);
  for (int s = 0; s < a.num_seqs; ++s) {
    const SequenceChunk& seq = batch.sequences[s];
    const int n = static_cast<int>(seq.tokens.size());
    const int ctx = seq.start_pos + n;
    const int first = static_cast<int>(a.tokens.size());
    for (int i = 0; i < n; ++i) {
      const int pos = seq.start_pos + i;
      a.tokens.push_back(seq.tokens[i]);
      a.positions.push_back(pos);
      a.slot_mapping.push_back(seq.block_table[pos / block_size] * block_size + pos % block_size);
    }
    a.query_start.push_back(first + n);
    a.context_lens.push_back(ctx);
    const int blocks = (ctx + block_size - 1) / block_size;
    std::copy(seq.block_table.begin(), seq.block_table.begin() + blocks,
              a.block_tables.begin() + static_cast<size_t>(s) * a.max_blocks_per_seq);
    if (seq.all_logits) {
      for (int i = 0; i < n; ++i) a.logit_rows.push_back(first + i);
      a.logits_per_seq.push_back(n);
    } else {
      a.logit_rows.push_back(first + n - 1);
      a.logits_per_seq.push_back(1);
    }
  }
  a.num_tokens = static_cast<int>(a.tokens.size());
  return a;
}

bool IsDecodeOnly(const ForwardBatch& batch) {
  for (const SequenceChunk& seq : batch.sequences) {
    if (seq.tokens.size() != 1 || seq.all_logits || seq.return_hidden) return false;
  }
  return !batch.sequences.empty();
}

DecodeGraphArrays PadForDecodeGraph(const BatchArrays& a, int bucket, int table_width,
                                    int scratch_block, int block_size) {
  DecodeGraphArrays p;
  p.tokens.assign(bucket, 0);
  p.positions.assign(bucket, 0);
  p.slot_mapping.assign(bucket, scratch_block * block_size);
  p.context_lens.assign(bucket, 1);
  p.block_tables.assign(static_cast<size_t>(bucket) * table_width, scratch_block);
  for (int s = 0; s < a.num_seqs; ++s) {
    p.tokens[s] = a.tokens[s];
    p.positions[s] = a.positions[s];
    p.slot_mapping[s] = a.slot_mapping[s];
    p.context_lens[s] = a.context_lens[s];
    std::copy(a.block_tables.begin() + static_cast<size_t>(s) * a.max_blocks_per_seq,
              a.block_tables.begin() + static_cast<size_t>(s + 1) * a.max_blocks_per_seq,
              p.block_tables.begin() + static_cast<size_t>(s) * table_width);
  }
  return p;
}

}  // namespace rill::worker
