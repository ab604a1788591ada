#include "worker/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/ops.h"

namespace rill::worker {

absl::Status ValidateSamplingConfig(const SamplingConfig& c) {
  if (!(c.temperature >= 0.0f) || !std::isfinite(c.temperature)) {
    return absl::InvalidArgumentError(
        absl::StrCat("temperature must be a finite number >= 0, got ", c.temperature));
  }
  if (!(c.top_p > 0.0f && c.top_p <= 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("top_p must be in (0, 1], got ", c.top_p));
  }
  if (!(c.min_p >= 0.0f && c.min_p <= 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("min_p must be in [0, 1], got ", c.min_p));
  }
  return absl::OkStatus();
}

float LogProbOf(const float* logits, int64_t n, int32_t token) {
  // Vectorised: this runs over the whole vocabulary for every sampled token
  // (49,152 exps for SmolLM2), which in scalar double cost ~0.5 ms per
  // sequence per step.
  return logits[token] - cpu::LogSumExp(logits, n);
}

float LogSumExp(const float* logits, int64_t n) { return cpu::LogSumExp(logits, n); }

namespace {

// Buckets of unnormalised probabilities in (0, 1] by their float bits (8
// exponent and 3 mantissa bits): a larger bucket holds only larger values.
constexpr int kProbBuckets = 1024;  // bits(1.0f) >> 20 = 1016
inline int ProbBucket(float p) {
  uint32_t bits;
  std::memcpy(&bits, &p, sizeof(bits));
  // NaN (a broken row) lands in the last bucket rather than past the end.
  return static_cast<int>(std::min<uint32_t>(bits >> 20, kProbBuckets - 1));
}

}  // namespace

// Why no full sort: a vocabulary of 49,152 sorted per token cost ~3 ms per
// sampled sequence per step, more than a whole batched forward pass.
// - top_k sorts only the k best (nth_element, then sort of those): exactly
//   the full sort's prefix in the descending order (logit, then id).
// - top_p over the whole vocabulary finds the nucleus by bucketing the
//   probabilities (one pass) and sorting only the bucket where the mass
//   crosses top_p; everything in higher buckets is in.
// - The draw runs over the kept tokens in a fixed order (ids, then the
//   sorted part): the same distribution, one linear pass.
SampledToken Sampler::Sample(const float* logits, int64_t n) {
  SampledToken out;
  if (config_.temperature == 0.0f) {
    // Greedy; ties go to the lowest id so results never depend on scan order.
    out.token = static_cast<int32_t>(cpu::ArgMax(logits, n));
    out.logprob = LogProbOf(logits, n, out.token);
    return out;
  }
  auto by_logit = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  order_.resize(n);
  const int32_t best = static_cast<int32_t>(cpu::ArgMax(logits, n));
  // Unnormalised probabilities by id: p(best) = exp(0) = 1, so min_p keeps
  // the tokens at or above min_p (and always best).
  probs_.resize(n);
  cpu::ExpShiftedScaled(logits, n, logits[best], 1.0f / config_.temperature, probs_.data());
  const float floor = config_.min_p;
  auto kept_by_min_p = [&](int32_t id) { return id == best || probs_[id] >= floor; };
  const int64_t keep = config_.top_k > 0 && config_.top_k < n ? config_.top_k : n;
  // The candidates the draw runs over, in draw order: ids [0, n) when all
  // are kept, else order_[0, n_cand).
  bool all_ids = false;
  int64_t n_cand = 0;
  if (keep == n) {
    if (floor <= 0.0f) {
      all_ids = true;
      n_cand = n;
    } else {
      for (int32_t id = 0; id < n; ++id) {
        if (kept_by_min_p(id)) order_[n_cand++] = id;
      }
    }
    if (config_.top_p < 1.0f) {
      // Mass per bucket of the kept tokens, then the bucket where the
      // descending mass reaches top_p of the kept total.
      bucket_mass_.assign(kProbBuckets, 0.0);
      double kept_total = 0.0;
      for (int64_t i = 0; i < n_cand; ++i) {
        const float p = probs_[all_ids ? i : order_[i]];
        bucket_mass_[ProbBucket(p)] += p;
        kept_total += p;
      }
      const double target = config_.top_p * kept_total;
      double above = 0.0;  // mass of the buckets over the crossing one
      int cross = kProbBuckets - 1;
      for (; cross > 0 && above + bucket_mass_[cross] < target; --cross) {
        above += bucket_mass_[cross];
      }
      // Compact: higher buckets in id order, then the crossing bucket in
      // descending order up to where the mass reaches the target.
      int64_t hi = 0;
      tie_.clear();
      for (int64_t i = 0; i < n_cand; ++i) {
        const int32_t id = all_ids ? static_cast<int32_t>(i) : order_[i];
        const int b = ProbBucket(probs_[id]);
        if (b > cross) {
          order_[hi++] = id;
        } else if (b == cross) {
          tie_.push_back(id);
        }
      }
      std::sort(tie_.begin(), tie_.end(), by_logit);
      double mass = above;
      int64_t c = hi;
      for (int32_t id : tie_) {
        order_[c++] = id;
        mass += probs_[id];
        if (mass >= target) break;
      }
      n_cand = c;
      all_ids = false;
    }
  } else {
    // The descending prefix: the top_k best, those kept by min_p, then the
    // smallest run holding top_p of what is left.
    std::iota(order_.begin(), order_.end(), 0);
    std::nth_element(order_.begin(), order_.begin() + keep, order_.end(), by_logit);
    std::sort(order_.begin(), order_.begin() + keep, by_logit);
    int64_t limit = 1;
    while (limit < keep && kept_by_min_p(order_[limit])) ++limit;
    n_cand = limit;
    if (config_.top_p < 1.0f) {
      double kept_total = 0.0;
      for (int64_t i = 0; i < limit; ++i) kept_total += probs_[order_[i]];
      const double target = config_.top_p * kept_total;
      double mass = 0.0;
      int64_t i = 0;
      for (; i < limit; ++i) {
        mass += probs_[order_[i]];
        if (mass >= target) break;
      }
      n_cand = std::min(limit, i + 1);
    }
  }
  auto cand = [&](int64_t i) { return all_ids ? static_cast<int32_t>(i) : order_[i]; };
  double total = 0.0;
  for (int64_t i = 0; i < n_cand; ++i) total += probs_[cand(i)];
  std::uniform_real_distribution<double> uniform(0.0, total);
  double r = uniform(rng_);
  int32_t pick = -1;
  for (int64_t i = 0; i < n_cand; ++i) {
    const float p = probs_[cand(i)];
    if (p > 0.0f) pick = cand(i);  // rounding may leave r >= 0 past the end
    r -= p;
    if (r < 0.0) break;
  }
  out.token = pick >= 0 ? pick : best;
  out.logprob = LogProbOf(logits, n, out.token);
  return out;
}

}  // namespace rill::worker
