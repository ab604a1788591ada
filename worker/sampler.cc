#include "worker/sampler.h"

#include <algorithm>
#include <cmath>
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

SampledToken Sampler::Sample(const float* logits, int64_t n) {
  SampledToken out;
  if (config_.temperature == 0.0f) {
    // Greedy; ties go to the lowest id so results never depend on scan order.
    out.token = static_cast<int32_t>(cpu::ArgMax(logits, n));
    out.logprob = LogProbOf(logits, n, out.token);
    return out;
  }
  order_.resize(n);
  std::iota(order_.begin(), order_.end(), 0);
  int64_t keep = n;
  if (config_.top_k > 0 && config_.top_k < n) keep = config_.top_k;
  auto by_logit = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  if (keep < n) {
    std::partial_sort(order_.begin(), order_.begin() + keep, order_.end(), by_logit);
  } else {
    std::sort(order_.begin(), order_.end(), by_logit);
  }
  const float inv_t = 1.0f / config_.temperature;
  const float max = logits[order_[0]];
  probs_.resize(keep);
  double total = 0.0;
  for (int64_t i = 0; i < keep; ++i) {
    probs_[i] = std::exp((logits[order_[i]] - max) * inv_t);
    total += probs_[i];
  }
  // min_p relative to the most likely token, then nucleus over what is left.
  int64_t cut = keep;
  if (config_.min_p > 0.0f) {
    const float floor = config_.min_p * probs_[0];
    cut = 1;
    while (cut < keep && probs_[cut] >= floor) ++cut;
  }
  if (config_.top_p < 1.0f) {
    double mass = 0.0, kept_total = 0.0;
    for (int64_t i = 0; i < cut; ++i) kept_total += probs_[i];
    int64_t i = 0;
    for (; i < cut; ++i) {
      mass += probs_[i];
      if (mass >= config_.top_p * kept_total) break;
    }
    cut = std::min(cut, i + 1);
  }
  total = 0.0;
  for (int64_t i = 0; i < cut; ++i) total += probs_[i];
  std::uniform_real_distribution<double> uniform(0.0, total);
  double r = uniform(rng_);
  int64_t pick = cut - 1;
  for (int64_t i = 0; i < cut; ++i) {
    r -= probs_[i];
    if (r < 0.0) {
      pick = i;
      break;
    }
  }
  out.token = order_[pick];
  out.logprob = LogProbOf(logits, n, out.token);
  return out;
}

}  // namespace rill::worker
