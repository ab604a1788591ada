// An online model of how long one engine step takes on this model and
// machine, fitted from the steps the engine measures:
//   step time ~= a + b * tokens + c * kv_reads
// where `tokens` are the step's new tokens and `kv_reads` the key positions
// attention reads for them (a chunk of n tokens at position s reads about
// n * (s + n/2)), so long-context chunks cost what they cost.
//
// Samples are kept in ring buffers per token-count class (1, 2-3, 4-7, ...),
// so a long run of decode-only steps does not forget what a large prefill
// chunk costs; older samples weigh less (half-life kHalfLifeSteps steps), so
// the fit follows a machine that gets slower or faster. The fit is weighted
// least squares with Huber reweighting: a step slowed by a noisy neighbour
// moves it little. With too few distinct step sizes to tell a fixed cost
// from a per-token one, it charges all of the time per token (pessimistic).
// Not thread-safe: the engine loop owns it.
#ifndef RILL_ENGINE_STEP_TIME_MODEL_H_
#define RILL_ENGINE_STEP_TIME_MODEL_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/time/time.h"

namespace rill::engine {

// The work of a step (or of a part of one), what the model predicts from.
struct StepShape {
  int64_t tokens = 0;
  double kv_reads = 0.0;

  // Adds a chunk of `n` new tokens starting at position `start`.
  void AddChunk(int64_t start, int64_t n);
  StepShape operator+(const StepShape& o) const { return {tokens + o.tokens, kv_reads + o.kv_reads}; }
};

class StepTimeModel {
 public:
  StepTimeModel();

  void Observe(const StepShape& shape, absl::Duration step_time);

  // False until a step was observed; Predict is then meaningless.
  bool ready() const { return ready_; }
  absl::Duration Predict(const StepShape& shape) const;

  // Coefficients of the current fit (seconds, seconds per token, seconds
  // per kv read).
  double fixed_seconds() const { return coef_[0]; }
  double seconds_per_token() const { return coef_[1]; }
  double seconds_per_kv_read() const { return coef_[2]; }
  // The most tokens in one stored sample (0 if none): the scheduler does
  // not extrapolate far past what it measured.
  int64_t largest_observed_tokens() const;

  // The median time of the last few steps of exactly `tokens` tokens
  // (1 <= tokens <= kExactSizes) among the last kExactMaxAge steps observed,
  // zero with fewer than kMinExact of them: a size measured while the
  // machine was busier (or quieter) expires instead of mispricing it.
  // Small steps do not cost in proportion to their tokens (the matmul
  // kernels work in tiles of several tokens): speculative decoding prices
  // its draft tokens with these where it has them.
  static constexpr int kExactSizes = 32;
  static constexpr int kMinExact = 3;
  static constexpr int64_t kExactMaxAge = 256;
  absl::Duration RecentTime(int64_t tokens) const;

 private:
  struct Sample {
    double tokens;
    double kv_reads;
    double seconds;
    int64_t step;  // Observe count when it was taken.
  };
  static constexpr double kHalfLifeSteps = 64.0;
  static constexpr int kClasses = 16;       // Token counts 1 .. 2^15 and above.
  static constexpr int kPerClass = 16;      // Most recent samples kept per class.

  void Refit();

  static constexpr int kExactKept = 9;  // Per size; the median of these.
  struct Exact {
    std::array<double, kExactKept> seconds{};
    std::array<int64_t, kExactKept> step{};  // Observe count when taken.
    int count = 0;  // Observed so far (the ring holds the last kExactKept).
  };
  std::array<Exact, kExactSizes + 1> exact_;  // [tokens]

  std::array<std::vector<Sample>, kClasses> samples_;
  std::array<int, kClasses> next_{};  // Ring position per class.
  std::array<double, 3> coef_{};
  bool ready_ = false;
  int64_t num_observed_ = 0;
};

}  // namespace rill::engine

#endif  // RILL_ENGINE_STEP_TIME_MODEL_H_
