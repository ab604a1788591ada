#include "engine/spec_decode/spec_decode_config.h"

#include "absl/strings/str_cat.h"

namespace rill::engine::spec_decode {

absl::Status ValidateSpecDecodeConfig(const SpecDecodeConfig& c) {
  if (c.ngram_k < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("speculative_ngram_k must be >= 0, got ", c.ngram_k));
  }
  if (c.ngram_min_n < 1 || c.ngram_max_n < c.ngram_min_n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "need 1 <= speculative_ngram_min_n <= speculative_ngram_max_n, got ", c.ngram_min_n,
        " and ", c.ngram_max_n));
  }
  if (c.disable_batch_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "speculative_disable_batch_size must be >= 1, got ", c.disable_batch_size));
  }
  if (c.num_draft_tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("speculative_num_draft_tokens must be >= 0, got ", c.num_draft_tokens));
  }
  if (c.draft_model.empty() != (c.num_draft_tokens == 0)) {
    return absl::InvalidArgumentError(
        "speculative_model and speculative_num_draft_tokens (>= 1) go together: set both or "
        "neither");
  }
  if (!c.draft_model.empty() && c.ngram_k > 0) {
    return absl::InvalidArgumentError(
        "speculative_model and speculative_ngram_k are two drafting methods: set one");
  }
  return absl::OkStatus();
}

void SpecDecodeStats::Record(int proposed, int accepted) {
  ++num_drafts;
  num_draft_tokens += proposed;
  num_accepted_tokens += accepted;
  if (static_cast<int>(accepted_per_position.size()) < proposed) {
    accepted_per_position.resize(proposed, 0);
  }
  for (int i = 0; i < accepted; ++i) ++accepted_per_position[i];
}

}  // namespace rill::engine::spec_decode
