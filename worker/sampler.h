// Turns one row of logits into the next token: greedy, or temperature with
// top-k / top-p / min-p filtering, from a per-request seeded generator so a
// seeded request gives the same tokens alone or in any batch.
#ifndef RILL_WORKER_SAMPLER_H_
#define RILL_WORKER_SAMPLER_H_

#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/status.h"

namespace rill::worker {

struct SamplingConfig {
  float temperature = 1.0f;  // 0 = greedy
  int top_k = 0;             // 0 or negative = all tokens
  float top_p = 1.0f;        // nucleus mass in (0, 1]
  float min_p = 0.0f;        // drop tokens below min_p * p(max)
  uint64_t seed = 0;
};

// InvalidArgument naming the field when a value is out of range.
absl::Status ValidateSamplingConfig(const SamplingConfig& config);

// The order in which Sampler::Sample's inverse-CDF draw walks the kept
// tokens at temperature > 0: what another sampler (the GPU's) must follow
// to draw the same token from the same uniform.
enum class DrawOrder {
  // ids ascending: no filter, min_p, or top_p without top_k (whose nucleus
  // is every token at or above its smallest member's probability)
  kVocabulary,
  kDescending,  // logit descending, ties by id: top_k filters (with any top_p / min_p)
};
DrawOrder DrawOrderOf(const SamplingConfig& config, int64_t vocab_size);

struct SampledToken {
  int32_t token = -1;
  float logprob = 0.0f;  // log-softmax of the raw logits (before filtering)
  float log_z = 0.0f;    // the row's log-softmax denominator (LogSumExp)
};

// Per-sequence sampler state. Not thread-safe; one per request.
class Sampler {
 public:
  explicit Sampler(const SamplingConfig& config) : config_(config), rng_(config.seed) {}

  SampledToken Sample(const float* logits, int64_t vocab_size);

  // Draws from this request's generator for verifying sampled drafts
  // (speculative decoding's accept test and residual draw): a uniform
  // number in [0, 1), and an index over the weights p[0, n) summing to
  // total (-1 when all are 0).
  double Uniform() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }
  int64_t DrawWeighted(const float* p, int64_t n, double total) { return Draw(p, n, total); }

 private:
  // Writes to the thread's scratch order the nucleus holding top_p of the
  // kept tokens' mass (the n_kept tokens of its probs at or above floor,
  // summing to kept_total), in draw order, and returns its size.
  int64_t NucleusOf(double kept_total, float floor, int64_t n_kept) const;
  // Inverse-CDF draw over the weights p[0, n) summing to total: their index,
  // or -1 when all are 0 (kernels::cpu::CumulativeSearch).
  int64_t Draw(const float* p, int64_t n, double total);

  SamplingConfig config_;
  std::mt19937_64 rng_;
};

// The k best ids of x[0, n) by (value descending, id ascending), in that
// order: exactly the first k of a full sort. NaN counts as -inf. Replaces
// `out`.
void TopKIds(const float* x, int64_t n, int64_t k, std::vector<int32_t>* out);

// log-softmax of logits[token] over the row.
float LogProbOf(const float* logits, int64_t vocab_size, int32_t token);

// log(sum exp(logits)): the log-softmax denominator (vectorised).
float LogSumExp(const float* logits, int64_t vocab_size);

}  // namespace rill::worker

#endif  // RILL_WORKER_SAMPLER_H_
