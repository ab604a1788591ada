// Draft-model drafting: a smaller model with the target's vocabulary runs k
// greedy steps per sequence and proposes its tokens. It keeps its own paged
// KV cache (its own BlockManager over the draft executor's blocks), one
// sequence per target sequence (same id), and remembers which tokens each
// sequence's draft cache holds. A later proposal keeps the longest prefix
// of them that the sequence still has (the accepted draft tokens), truncates
// the rest and computes what is missing (the prompt on the first draft, the
// target's own token after a rejection, tokens of steps that did not
// speculate) in the same forward that proposes the first draft token. That
// forward computes at most a step's token budget: a long prompt is caught
// up in chunks over several steps, which draft nothing for it meanwhile.
//
// The proposals are greedy (argmax of the draft's logits), so the proposal
// distribution q is one-hot: the target's verification by its own sampler
// (EngineCore::VerifyDraft) is then exact rejection sampling at any
// temperature, and greedy outputs equal non-speculative ones. A want with a
// temperature instead gets tokens sampled from q = softmax(logits / T), and
// q's rows with them, for the target's min(1, p/q) test and residual draw.
//
// Not thread-safe: the engine loop owns it.
#ifndef RILL_ENGINE_SPEC_DECODE_DRAFT_MODEL_PROPOSER_H_
#define RILL_ENGINE_SPEC_DECODE_DRAFT_MODEL_PROPOSER_H_

#include <cstdint>
#include <random>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "engine/block_manager.h"
#include "engine/model_executor.h"
#include "worker/forward_batch.h"

namespace rill::engine::spec_decode {

class DraftModelProposer {
 public:
  // `draft` (a generating model) must outlive the proposer.
  explicit DraftModelProposer(ModelExecutor* draft);

  struct Want {
    int64_t seq_id = 0;
    std::vector<int32_t> tokens;  // The sequence's prompt + outputs so far.
    int k = 0;                    // Draft tokens wanted (>= 1).
    float temperature = 0.0f;     // > 0: sampled proposals (else greedy).
    uint64_t seed = 0;            // Of the sequence's draft generator (first want only).
  };
  // Per want, its k draft tokens, or none when the draft cache has no room,
  // the draft model's context is too short or the sequence is still being
  // caught up (the first forward computes at most `max_batch_tokens`
  // missing tokens). An error from the draft executor drops every draft
  // sequence (they are recomputed next time). With `probs`, (*probs)[w]
  // gets the q row (vocab floats) of each of a sampled want's draft tokens,
  // in order (empty for a greedy want).
  absl::StatusOr<std::vector<std::vector<int32_t>>> Propose(
      const std::vector<Want>& wants, int64_t max_batch_tokens,
      std::vector<std::vector<float>>* probs = nullptr);

  // Frees the sequence's draft blocks (the target freed its own).
  void Release(int64_t seq_id);
  void ReleaseAll();

  ModelExecutor* executor() const { return draft_; }
  const BlockManager& block_manager() const { return blocks_; }
  int num_sequences() const { return static_cast<int>(fed_.size()); }

 private:
  // The greedy token of one logits row.
  int32_t Argmax(const std::vector<float>& row) const;
  // A token drawn from softmax(row / want.temperature), that distribution
  // appended to `q`.
  int32_t SampleRow(const std::vector<float>& logits, const Want& want, std::vector<float>* q);

  ModelExecutor* draft_;
  BlockManager blocks_;
  // Per sequence: the tokens whose K/V its draft cache holds, in order.
  absl::flat_hash_map<int64_t, std::vector<int32_t>> fed_;
  // Per sequence with sampled proposals: its draft generator.
  absl::flat_hash_map<int64_t, std::mt19937_64> rngs_;
  worker::ForwardOutput out_;  // Reused across forwards.
};

}  // namespace rill::engine::spec_decode

#endif  // RILL_ENGINE_SPEC_DECODE_DRAFT_MODEL_PROPOSER_H_
