#include "worker/forward_batch_validation.h"

#include "absl/strings/str_cat.h"

namespace rill::worker {

absl::Status ValidateSequences(const ForwardBatch& batch, const SequenceLimits& limits) {
  if (limits.block_size <= 0) return absl::InvalidArgumentError("block_size must be positive");
  for (size_t s = 0; s < batch.sequences.size(); ++s) {
    const SequenceChunk& seq = batch.sequences[s];
    if (seq.tokens.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s, " has no new tokens"));
    }
    if (seq.start_pos < 0) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s, ": negative start_pos"));
    }
    const int64_t end = static_cast<int64_t>(seq.start_pos) + seq.tokens.size();
    if (end > limits.max_context) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sequence ", s, ": ", end, " tokens exceed the context length ", limits.max_context));
    }
    const int64_t blocks_needed = (end + limits.block_size - 1) / limits.block_size;
    if (static_cast<int64_t>(seq.block_table.size()) < blocks_needed) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s, ": block table has ",
                                                     seq.block_table.size(), " blocks, ",
                                                     blocks_needed, " needed"));
    }
    for (int64_t b = 0; b < blocks_needed; ++b) {
      if (seq.block_table[b] < 0 || seq.block_table[b] >= limits.num_blocks) {
        return absl::InvalidArgumentError(absl::StrCat("sequence ", s, ": block id ",
                                                       seq.block_table[b], " outside the cache of ",
                                                       limits.num_blocks, " blocks"));
      }
    }
    for (int32_t t : seq.tokens) {
      if (t < 0 || t >= limits.vocab_size) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sequence ", s, ": token id ", t, " outside the vocabulary of ", limits.vocab_size));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace rill::worker
