// One sample's grammar state: which tokens may come next (as a mask over a
// logits row) and the tokens accepted so far. It follows the sample's output
// tokens, so a preempted and recomputed sample (whose outputs are kept)
// needs nothing, and fewer outputs than accepted tokens roll it back.
// Speculative decoding verifies a draft against it: the draft is cut at the
// first token the grammar rejects (AcceptablePrefix), one bitmask per
// verified position is filled by advancing through the draft (FillBitmasks),
// and the Sync after verification rolls the rejected draft tokens back.
// Not thread-safe; one per sample, used by one thread at a time: the engine
// loop, the helper that fills masks during the forward, or an executor
// sampling thread (one row per sample).
#ifndef RILL_ENGINE_STRUCTURED_OUTPUT_CONSTRAINT_MATCHER_H_
#define RILL_ENGINE_STRUCTURED_OUTPUT_CONSTRAINT_MATCHER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "engine/structured_output/grammar_compiler.h"

namespace xgrammar {
class GrammarMatcher;
}

namespace rill::engine::structured_output {

class ConstraintMatcher {
 public:
  explicit ConstraintMatcher(const CompiledConstraint& grammar);
  ~ConstraintMatcher();

  // Brings the matcher to exactly `outputs` (accepting new tokens, rolling
  // back removed ones). Internal error if a token breaks the grammar.
  absl::Status Sync(const std::vector<int32_t>& outputs);
  // How many leading tokens of `draft` the grammar accepts after the
  // accepted tokens: up to the first one it rejects, and through at most
  // one that ends the grammar (a stop token). Leaves the matcher as it was.
  int AcceptablePrefix(absl::Span<const int32_t> draft);
  // Sets logits of tokens the grammar forbids after the accepted tokens to
  // -inf (EOS stays only where the grammar may end). `vocab` is the row
  // width; ids past the grammar's vocabulary are forbidden.
  // Same as FillBitmask then ApplyBitmask.
  void Mask(float* logits, int64_t vocab);
  // Computes the allowed-token bitmask after the accepted tokens (the costly
  // half, which may overlap the model forward)...
  void FillBitmask() { FillBitmasks({}); }
  // ...or, to verify a draft, draft.size() + 1 of them: row j is the mask
  // after the accepted tokens and draft[0, j). The matcher advances through
  // the draft as it goes and stays there until the next Sync, so each draft
  // token is accepted right after its position's mask was filled, as when
  // decoding one token at a time. Rows past a draft token the grammar
  // rejects allow nothing; they are never used, since the row before
  // forbids that token and verification stops there.
  void FillBitmasks(absl::Span<const int32_t> draft);
  // Applies row `row` of the last fill to a logits row.
  void ApplyBitmask(float* logits, int64_t vocab, int row = 0) const;
  bool IsTerminated() const;
  int64_t num_accepted() const { return static_cast<int64_t>(accepted_.size()); }

 private:
  // Accepts `token` into the xgrammar matcher (not into accepted_); false if
  // the grammar rejects it or has ended.
  bool TryAccept(int32_t token);
  // Fills one bitmask row (words_ words) for the matcher's current state.
  void FillRow(int32_t* row);

  CompiledConstraint grammar_;  // Kept alive for the matcher.
  std::unique_ptr<xgrammar::GrammarMatcher> matcher_;
  int vocab_size_;
  int64_t words_;  // Bitmask words per row: bit i of word i / 32.
  std::vector<int32_t> accepted_;
  std::vector<int32_t> bitmasks_;  // The last fill's rows, words_ each.
};

}  // namespace rill::engine::structured_output

#endif  // RILL_ENGINE_STRUCTURED_OUTPUT_CONSTRAINT_MATCHER_H_
