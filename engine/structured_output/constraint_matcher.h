// One sample's grammar state: which tokens may come next (as a mask over a
// logits row) and the tokens accepted so far. It follows the sample's output
// tokens, so a preempted and recomputed sample (whose outputs are kept)
// needs nothing, and fewer outputs than accepted tokens roll it back.
// Not thread-safe; one per sample, used by one thread at a time: the engine
// loop, the helper that fills masks during the forward, or an executor
// sampling thread (one row per sample).
#ifndef RILL_ENGINE_STRUCTURED_OUTPUT_CONSTRAINT_MATCHER_H_
#define RILL_ENGINE_STRUCTURED_OUTPUT_CONSTRAINT_MATCHER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
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
  // Sets logits of tokens the grammar forbids after the accepted tokens to
  // -inf (EOS stays only where the grammar may end). `vocab` is the row
  // width; ids past the grammar's vocabulary are forbidden.
  // Same as FillBitmask then ApplyBitmask.
  void Mask(float* logits, int64_t vocab);
  // Computes the allowed-token bitmask after the accepted tokens (the costly
  // half, which may overlap the model forward)...
  void FillBitmask();
  // ...and applies the last filled bitmask to a logits row.
  void ApplyBitmask(float* logits, int64_t vocab) const;
  // The allowed-token bitmask of the last fill (bit i of word i / 32).
  const std::vector<int32_t>& bitmask() const { return bitmask_; }
  bool IsTerminated() const;
  int64_t num_accepted() const { return static_cast<int64_t>(accepted_.size()); }

 private:
  CompiledConstraint grammar_;  // Kept alive for the matcher.
  std::unique_ptr<xgrammar::GrammarMatcher> matcher_;
  int vocab_size_;
  std::vector<int32_t> accepted_;
  std::vector<int32_t> bitmask_;
};

}  // namespace rill::engine::structured_output

#endif  // RILL_ENGINE_STRUCTURED_OUTPUT_CONSTRAINT_MATCHER_H_
