// How many draft tokens the decodes of one planned step may have verified
// (speculative decoding): no more than the tokens left under
// max_num_batched_tokens and, with --target_itl_ms, no more than keep the
// step's predicted time (the SLO budget's step-time model) within the ITL
// target. The scheduler sizes prefill chunks against the same target, so a
// step whose time is spent gets no drafts, and a loose target changes none.
// Made per step from the scheduler's plan; not thread-safe (engine loop).
#ifndef RILL_ENGINE_DRAFT_BUDGET_H_
#define RILL_ENGINE_DRAFT_BUDGET_H_

#include <cstdint>

#include "engine/scheduler.h"
#include "engine/slo_budget.h"
#include "engine/step_time_model.h"

namespace rill::engine {

class DraftBudget {
 public:
  // `slo` must outlive the budget.
  DraftBudget(const SchedulerOutput& plan, int64_t max_num_batched_tokens, const SloBudget& slo);

  // The most draft tokens, up to `wanted`, that decode chunk `c` may have
  // verified after its token in this step, given the drafts granted so far.
  int64_t Limit(const ScheduledChunk& c, int64_t wanted) const;
  // Grants `n` (at most Limit) draft tokens to `c`.
  void Take(const ScheduledChunk& c, int64_t n);
  bool exhausted() const { return tokens_left_ <= 0; }
  // The step's work: the plan's chunks plus the drafts granted (what the
  // step-time model observes once the step ran).
  const StepShape& step() const { return step_; }

 private:
  const SloBudget* slo_;
  int64_t tokens_left_;
  StepShape step_;
};

}  // namespace rill::engine

#endif  // RILL_ENGINE_DRAFT_BUDGET_H_
