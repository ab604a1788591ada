// SLO-aware step budgets (--target_itl_ms, --target_ttft_ms): how many new
// tokens a prefill chunk may add to a step so that the step, as the
// StepTimeModel predicts it, stays within the inter-token-latency target;
// running decodes then keep their ITL while a long prompt is prefilled in
// pieces that fit. A request whose TTFT deadline (arrival + target) can
// still be met only with bigger chunks gets them; once missed, it is back
// to the ITL budget (it no longer counts as goodput; the others still do).
// When the decodes of a step alone are predicted past the target, no chunk
// size can keep their ITL, so prompts are no longer held back (chunks grow
// as exploration allows): shrinking them would only lose TTFT.
//
// The scheduler never extrapolates far past what it measured: a step holds
// at most twice the most tokens of a measured step (32 before any), so after
// start-up chunks grow at most 32, 64, 128, ... until the model says the
// target is reached. Not thread-safe: the engine loop owns it.
#ifndef RILL_ENGINE_SLO_BUDGET_H_
#define RILL_ENGINE_SLO_BUDGET_H_

#include <cstdint>

#include "absl/time/time.h"
#include "engine/step_time_model.h"

namespace rill::engine {

struct SloTargets {
  absl::Duration itl = absl::ZeroDuration();   // 0: off (a fixed token budget).
  absl::Duration ttft = absl::ZeroDuration();  // 0: none; needs itl.
  bool enabled() const { return itl > absl::ZeroDuration(); }
};

class SloBudget {
 public:
  // A prefill chunk that is alone in its step may always take this many
  // tokens, so prompts progress even when decodes alone exceed the target.
  static constexpr int64_t kMinChunk = 16;
  // Before any step was measured, a step holds at most this many tokens.
  static constexpr int64_t kFirstStepTokens = 32;
  // Steps are planned to take this share of the ITL target: the rest is
  // headroom for noise (a step's time varies by ~10% on a quiet machine).
  static constexpr double kPlannedShare = 0.9;

  // `max_tokens`: the hard cap (max_num_batched_tokens).
  SloBudget(SloTargets targets, int64_t max_tokens);

  const SloTargets& targets() const { return targets_; }
  bool enabled() const { return targets_.enabled(); }

  void ObserveStep(const StepShape& shape, absl::Duration step_time) { model_.Observe(shape, step_time); }

  // The most new tokens (<= remaining) for a prefill chunk at `start_pos`
  // joining a step that already holds `planned`. `deadline`: the request's
  // TTFT deadline (InfiniteFuture for none). `first_prefill`: no other
  // prefill chunk is in the step yet (it gets at least kMinChunk). 0: wait
  // for the next step.
  int64_t ChunkLimit(const StepShape& planned, int64_t start_pos, int64_t remaining,
                     absl::Time deadline, absl::Time now, bool first_prefill) const;

  // The most draft tokens (<= wanted) that speculative decoding may verify
  // at positions start_pos.. in a step that already holds `planned`: what
  // keeps its predicted time within the ITL target, and the exploration cap.
  // Drafts are optional work, so unlike a prompt's chunk they get nothing
  // once the step is predicted past the target (0), and nothing is
  // guaranteed. Without targets: `wanted`.
  int64_t DraftLimit(const StepShape& planned, int64_t start_pos, int64_t wanted) const;

  // What the config RPC and metrics report as the chosen budget: the tokens
  // one step may hold (a prefill from position 0 alone) within the target;
  // at least kMinChunk, which such a prefill always gets.
  int64_t TokenBudget() const;

  const StepTimeModel& model() const { return model_; }

 private:
  // The most tokens of a chunk at `start_pos` that keep `planned` plus it
  // within the ITL target by the model (unbounded: max_tokens_).
  int64_t FitsTarget(const StepShape& planned, int64_t start_pos) const;
  // The model predicts that `planned` alone already takes longer than the
  // ITL target (the machine is overloaded for it).
  bool Overloaded(const StepShape& planned) const;
  // The step-size cap from what was measured.
  int64_t ExplorationCap() const;

  SloTargets targets_;
  int64_t max_tokens_;
  StepTimeModel model_;
};

}  // namespace rill::engine

#endif  // RILL_ENGINE_SLO_BUDGET_H_
