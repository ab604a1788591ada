// What speculative decoding does, from the engine options (speculative_*),
// and what it has done so far (the spec_decode_* metrics).
#ifndef RILL_ENGINE_SPEC_DECODE_SPEC_DECODE_CONFIG_H_
#define RILL_ENGINE_SPEC_DECODE_SPEC_DECODE_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace rill::engine::spec_decode {

struct SpecDecodeConfig {
  // Most draft tokens per sequence and step; 0 turns speculation off.
  int ngram_k = 0;
  // The n-gram sizes looked up, longest first.
  int ngram_min_n = 1;
  int ngram_max_n = 3;
  // No drafts in a step while this many requests or more run: a large batch
  // is compute-bound, so verifying drafts costs more than it saves.
  int disable_batch_size = 8;
  // N-gram draft lengths chosen from the measured step times and acceptance
  // estimates (draft_length_choice.h); false: the per-sequence draft-length
  // rule alone (draft_length.h), whatever the steps cost (tests whose drafts
  // must not depend on timing).
  bool price_ngram_drafts = true;
  // Draft-model drafting (instead of n-grams): the draft model's path
  // (--speculative_model; the engine factory attaches it to the executor,
  // ModelExecutor::draft_model) and its tokens per sequence and step.
  std::string draft_model;
  int num_draft_tokens = 0;

  bool enabled() const { return ngram_k > 0 || num_draft_tokens > 0; }
  // The longest draft of either method.
  int max_draft_tokens() const { return num_draft_tokens > 0 ? num_draft_tokens : ngram_k; }
};

// InvalidArgument naming the option when a value is out of range.
absl::Status ValidateSpecDecodeConfig(const SpecDecodeConfig& config);

// Running totals (vLLM's spec_decode_* counters). A draft is one sequence's
// proposal verified in one step.
struct SpecDecodeStats {
  int64_t num_drafts = 0;
  int64_t num_draft_tokens = 0;
  int64_t num_accepted_tokens = 0;
  // [i]: drafts whose token at position i (0-based) was accepted.
  std::vector<int64_t> accepted_per_position;

  // Counts one verified draft of `proposed` tokens of which the first
  // `accepted` were accepted.
  void Record(int proposed, int accepted);
};

}  // namespace rill::engine::spec_decode

#endif  // RILL_ENGINE_SPEC_DECODE_SPEC_DECODE_CONFIG_H_
