#include "engine/draft_budget.h"

#include <algorithm>

namespace rill::engine {

DraftBudget::DraftBudget(const SchedulerOutput& plan, int64_t max_num_batched_tokens,
                         const SloBudget& slo)
    : slo_(&slo),
      tokens_left_(max_num_batched_tokens - plan.num_batched_tokens),
      step_(plan.Shape()) {}

int64_t DraftBudget::Limit(const ScheduledChunk& c, int64_t wanted) const {
  const int64_t n = std::min(wanted, tokens_left_);
  if (n <= 0) return 0;
  // The draft's tokens sit right after the chunk's last one.
  return slo_->DraftLimit(step_, c.start_pos + c.num_tokens, n);
}

void DraftBudget::Take(const ScheduledChunk& c, int64_t n) {
  if (n <= 0) return;
  tokens_left_ -= n;
  step_.AddChunk(c.start_pos + c.num_tokens, n);
}

}  // namespace rill::engine
