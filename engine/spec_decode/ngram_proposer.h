// Prompt-lookup drafting: the tokens that followed an earlier occurrence of
// the sequence's last n tokens (the one matching furthest back, else the
// latest) are proposed as its next ones.
// Costs no model: it pays off where the output copies from the input
// (summaries, edits, code), and proposes nothing elsewhere.
#ifndef RILL_ENGINE_SPEC_DECODE_NGRAM_PROPOSER_H_
#define RILL_ENGINE_SPEC_DECODE_NGRAM_PROPOSER_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace rill::engine::spec_decode {

// Up to `k` draft tokens continuing `tokens` (prompt + outputs so far). For n
// from max_n down to min_n, the suffix of n tokens is looked up earlier in
// `tokens`; of its occurrences, the one followed by the most tokens (up to k)
// wins, then the one whose match goes furthest back (up to 32 tokens: the
// source a copy run follows), then the latest. Empty when no suffix recurs.
// O(len * max_n) plus the backward matches.
std::vector<int32_t> ProposeNgramDraft(absl::Span<const int32_t> tokens, int min_n, int max_n,
                                       int k);

// The same draft, with how many tokens before it matched (at least the
// suffix's n, at most 32; 0 when none): a longer match predicts its
// continuation more reliably.
struct NgramDraft {
  std::vector<int32_t> tokens;
  int match_n = 0;
};
NgramDraft FindNgramDraft(absl::Span<const int32_t> tokens, int min_n, int max_n, int k);

// The draft-length rule's cut (--speculative_ngram_pricing=false, and the
// engine's rule before step times are measured): a found draft is cut to its
// first token when only the last token recurred (match_n 1) and longer
// suffixes were looked up (max_n > 1). Along the input-grounded benchmark's
// outputs most such drafts are rejected at their first token (bench/README.md,
// issue 33 n-gram policy), and each draft token verified costs a fraction of
// a step.
void CapWeakMatch(int max_n, NgramDraft* draft);

}  // namespace rill::engine::spec_decode

#endif  // RILL_ENGINE_SPEC_DECODE_NGRAM_PROPOSER_H_
