#include "engine/slo_budget.h"

#include <algorithm>
#include <cmath>

namespace rill::engine {

SloBudget::SloBudget(SloTargets targets, int64_t max_tokens)
    : targets_(targets), max_tokens_(max_tokens) {}

int64_t SloBudget::ExplorationCap() const {
  const int64_t largest = model_.largest_observed_tokens();
  return largest == 0 ? kFirstStepTokens : std::max<int64_t>(2 * largest, kFirstStepTokens);
}

int64_t SloBudget::FitsTarget(const StepShape& planned, int64_t start_pos) const {
  if (!model_.ready()) return max_tokens_;
  const double a = model_.fixed_seconds();
  const double b = model_.seconds_per_token();
  const double c = model_.seconds_per_kv_read();
  // Time left in the step for the chunk, then the largest n with
  // b*n + c*n*(start + (n+1)/2) <= left (StepShape::AddChunk's kv reads).
  const double left = kPlannedShare * absl::ToDoubleSeconds(targets_.itl) - a -
                      b * static_cast<double>(planned.tokens) - c * planned.kv_reads;
  if (left <= 0.0) return 0;
  const double lin = b + c * (static_cast<double>(start_pos) + 0.5);
  double n;
  if (c > 0.0) {
    const double quad = 0.5 * c;
    n = (-lin + std::sqrt(lin * lin + 4.0 * quad * left)) / (2.0 * quad);
  } else if (lin > 0.0) {
    n = left / lin;
  } else {
    return max_tokens_;
  }
  return static_cast<int64_t>(std::min<double>(std::floor(n), static_cast<double>(max_tokens_)));
}

bool SloBudget::Overloaded(const StepShape& planned) const {
  return model_.ready() && model_.Predict(planned) > targets_.itl;
}

int64_t SloBudget::ChunkLimit(const StepShape& planned, int64_t start_pos, int64_t remaining,
                              absl::Time deadline, absl::Time now, bool first_prefill) const {
  const int64_t explore = std::max<int64_t>(0, ExplorationCap() - planned.tokens);
  int64_t n = std::min(FitsTarget(planned, start_pos), explore);
  if (Overloaded(planned)) {
    // What the step holds already misses the target, so no chunk size keeps
    // its decodes' ITL: holding prompts back would only add TTFT (and lose
    // goodput) for nothing. The chunk takes what exploration allows, which
    // doubles with each measured step, until steps fit the target again.
    n = explore;
  }
  if (first_prefill) n = std::max(n, kMinChunk);
  // The TTFT target: enough tokens per step to finish the prompt by its
  // deadline, counting steps of about the ITL target.
  if (targets_.ttft > absl::ZeroDuration() && now < deadline && deadline != absl::InfiniteFuture()) {
    const double steps_left = std::max(1.0, std::floor(absl::FDivDuration(deadline - now, targets_.itl)));
    if (steps_left < static_cast<double>(remaining)) {
      n = std::max(n, static_cast<int64_t>(std::ceil(static_cast<double>(remaining) / steps_left)));
    }
  }
  return std::min({n, remaining, max_tokens_});
}

int64_t SloBudget::DraftLimit(const StepShape& planned, int64_t start_pos, int64_t wanted) const {
  if (!enabled() || wanted <= 0) return std::max<int64_t>(wanted, 0);
  const int64_t explore = std::max<int64_t>(0, ExplorationCap() - planned.tokens);
  return std::min({wanted, FitsTarget(planned, start_pos), explore});
}

int64_t SloBudget::TokenBudget() const {
  if (!enabled()) return max_tokens_;
  // What a prefill alone in a step gets (ChunkLimit with first_prefill).
  if (Overloaded(StepShape())) return std::min(ExplorationCap(), max_tokens_);
  return std::min(std::max(std::min(FitsTarget(StepShape(), 0), ExplorationCap()), kMinChunk),
                  max_tokens_);
}

}  // namespace rill::engine
