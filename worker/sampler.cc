#include "worker/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
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

DrawOrder DrawOrderOf(const SamplingConfig& c, int64_t n) {
  // As Sample branches.
  if (c.top_k > 0 && c.top_k < n) return DrawOrder::kDescending;
  return DrawOrder::kVocabulary;
}

float LogProbOf(const float* logits, int64_t n, int32_t token) {
  // Vectorised: this runs over the whole vocabulary for every sampled token
  // (49,152 exps for SmolLM2), which in scalar double cost ~0.5 ms per
  // sequence per step.
  return logits[token] - kernels::cpu::LogSumExp(logits, n);
}

float LogSumExp(const float* logits, int64_t n) { return kernels::cpu::LogSumExp(logits, n); }

namespace {

// Buckets of unnormalised probabilities in (0, 1] by their float bits (8
// exponent and 4 mantissa bits): a larger bucket holds only larger values,
// and bucket b holds [BucketLow(b), BucketLow(b + 1)).
constexpr int kBucketShift = 19;
constexpr int kProbBuckets = 2048;  // bits(1.0f) >> 19 = 2032
inline int ProbBucket(float p) {
  uint32_t bits;
  std::memcpy(&bits, &p, sizeof(bits));
  return static_cast<int>(std::min<uint32_t>(bits >> kBucketShift, kProbBuckets - 1));
}
inline float BucketLow(int b) {
  const uint32_t bits = static_cast<uint32_t>(b) << kBucketShift;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// Interleaved histograms: consecutive candidates often share a bucket, and
// one histogram would make each add wait for the previous one's store.
constexpr int kHistograms = 4;

inline float KeyOf(float v) { return std::isnan(v) ? -std::numeric_limits<float>::infinity() : v; }

// Per-thread scratch of Sample: a request's sampler keeps only its config and
// generator, so hundreds of running requests do not each hold ~0.6 MB of
// vocabulary-sized buffers. The engine samples a step's rows on a few
// threads at once, each with its own.
struct Scratch {
  std::vector<int32_t> order;       // candidate ids in draw order
  std::vector<float> probs;         // unnormalised probabilities by id
  std::vector<float> cand_p;        // the candidates' probabilities, in draw order
  std::vector<float> cand_logits;   // top_k: the candidates' logits
  std::vector<double> bucket_mass;  // top_p
  std::vector<int32_t> tie;         // top_p
};

Scratch& ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

}  // namespace

void TopKIds(const float* x, int64_t n, int64_t k, std::vector<int32_t>* out) {
  out->clear();
  k = std::min(k, n);
  if (k <= 0) return;
  // better(a, b): a sorts before b. As a heap comparator it keeps the worst
  // kept id on top.
  auto better = [&](int32_t a, int32_t b) {
    const float ka = KeyOf(x[a]), kb = KeyOf(x[b]);
    return ka > kb || (ka == kb && a < b);
  };
  for (int32_t i = 0; i < k; ++i) out->push_back(i);
  std::make_heap(out->begin(), out->end(), better);
  // Scanning in id order, a later id enters only with a value strictly above
  // the worst kept one (an equal value loses the tie on id), so a vector
  // compare skips everything else; a random row replaces ~k log(n / k) times.
  int64_t i = k;
  while (i < n) {
    const float worst = KeyOf(x[out->front()]);
    i += kernels::cpu::FirstAbove(x + i, n - i, worst);
    if (i >= n) break;
    std::pop_heap(out->begin(), out->end(), better);
    out->back() = static_cast<int32_t>(i);
    std::push_heap(out->begin(), out->end(), better);
    ++i;
  }
  std::sort(out->begin(), out->end(), better);
}

int64_t Sampler::NucleusOf(double kept_total, float floor, int64_t n_kept) const {
  Scratch& sc = ThreadScratch();
  const int64_t n = static_cast<int64_t>(sc.probs.size());
  const double target = config_.top_p * kept_total;
  // Tokens below eps hold less than (1 - top_p) of the kept mass together,
  // so the nucleus lies among those at or above it: only they are bucketed
  // (rounded down, so no nucleus token is left out).
  const float eps = std::nextafter(
      static_cast<float>((1.0 - config_.top_p) * kept_total / static_cast<double>(n_kept)), 0.0f);
  float lo = std::max(floor, eps);
  // A model that knows the next token puts the nucleus in a few tokens far
  // above eps: one vector pass per trial threshold finds a tighter bound
  // when the tokens above it already hold the target, so fewer are bucketed.
  constexpr float kTrials[4] = {1.0f / 64, 1.0f / 1024, 1.0f / 16384, 1.0f / 262144};
  if (kTrials[0] > lo) {
    double above[4];
    kernels::cpu::SumsAtLeast(sc.probs.data(), n, kTrials, above);
    for (int k = 0; k < 4 && kTrials[k] > lo; ++k) {
      // The sums are within ~1e-6: a trial counts only with a clear margin.
      if (above[k] >= target * (1.0 + 1e-5)) {
        lo = kTrials[k];
        break;
      }
    }
  }
  sc.order.resize(n);
  sc.tie.resize(n);
  const int64_t m = kernels::cpu::IdsAtLeast(sc.probs.data(), n, lo, sc.order.data());
  // Mass per bucket, then the bucket where the descending mass reaches the
  // target. Only buckets from lo's up hold candidates: only those are
  // cleared.
  const int first = ProbBucket(lo);
  sc.bucket_mass.resize(kHistograms * kProbBuckets);
  for (int h = 0; h < kHistograms; ++h) {
    std::fill(sc.bucket_mass.begin() + h * kProbBuckets + first,
              sc.bucket_mass.begin() + (h + 1) * kProbBuckets, 0.0);
  }
  for (int64_t i = 0; i < m; ++i) {
    const float p = sc.probs[sc.order[i]];
    sc.bucket_mass[(i % kHistograms) * kProbBuckets + ProbBucket(p)] += p;
  }
  for (int b = first; b < kProbBuckets; ++b) {
    sc.bucket_mass[b] = (sc.bucket_mass[b] + sc.bucket_mass[kProbBuckets + b]) +
                      (sc.bucket_mass[2 * kProbBuckets + b] + sc.bucket_mass[3 * kProbBuckets + b]);
  }
  double above = 0.0;  // mass of the buckets over the crossing one
  int cross = kProbBuckets - 1;
  for (; cross > first && above + sc.bucket_mass[cross] < target; --cross) {
    above += sc.bucket_mass[cross];
  }
  // The crossing bucket's tokens, best first, up to where the mass reaches
  // the target: the last one taken sets the nucleus's lowest probability.
  const float higher = std::max(lo, BucketLow(cross + 1));
  const int64_t ties = kernels::cpu::IdsInRange(sc.probs.data(), n, std::max(lo, BucketLow(cross)),
                                                higher, sc.tie.data());
  std::sort(sc.tie.begin(), sc.tie.begin() + ties, [&](int32_t a, int32_t b) {
    return sc.probs[a] > sc.probs[b] || (sc.probs[a] == sc.probs[b] && a < b);
  });
  float threshold = higher;
  double mass = above;
  for (int64_t i = 0; i < ties; ++i) {
    threshold = sc.probs[sc.tie[i]];
    mass += threshold;
    if (mass >= target) break;
  }
  // The nucleus in draw order: every token at or above that probability (its
  // equals too), in id order -- a threshold filter over the row, which the
  // GPU sampler draws the same way (kernels/cuda Sample, vocabulary order).
  return kernels::cpu::IdsAtLeast(sc.probs.data(), n, threshold, sc.order.data());
}

int64_t Sampler::Draw(const float* p, int64_t n, double total) {
  return kernels::cpu::CumulativeSearch(p, n,
                                        std::uniform_real_distribution<double>(0.0, total)(rng_));
}

// Why no full sort: a vocabulary of 49,152 sorted per token cost ~3 ms per
// sampled sequence per step, more than a whole batched forward pass. Every
// pass over the vocabulary is vectorised (max, exps with their sum, the
// filters, the inverse-CDF search); what stays scalar runs over candidates.
// - top_k keeps a k-entry heap while a vector compare skips the ids that
//   cannot enter (TopKIds): exactly the full sort's prefix.
// - top_p finds the nucleus by bucketing the probabilities of the tokens
//   that can be in it and sorting only the bucket where the mass crosses
//   top_p; everything in higher buckets is in.
// - The draw runs over the kept tokens in a fixed order (ids; top_k's
//   descending prefix): the same distribution, one pass.
SampledToken Sampler::Sample(const float* logits, int64_t n) {
  Scratch& sc = ThreadScratch();
  SampledToken out;
  const int32_t best = static_cast<int32_t>(kernels::cpu::ArgMax(logits, n));
  const float m = logits[best];
  // Every logit NaN: LogSumExp's own scan (which skips NaNs) decides.
  auto log_z_given_max = [&] {
    return std::isnan(m) ? kernels::cpu::LogSumExp(logits, n)
                         : kernels::cpu::LogSumExpGivenMax(logits, n, m);
  };
  if (config_.temperature == 0.0f) {
    // Greedy; ties go to the lowest id so results never depend on scan order.
    out.token = best;
    out.log_z = log_z_given_max();
    out.logprob = logits[best] - out.log_z;
    return out;
  }
  const float inv_t = 1.0f / config_.temperature;
  const float floor = config_.min_p;
  const int64_t keep = config_.top_k > 0 && config_.top_k < n ? config_.top_k : n;
  int32_t pick = -1;
  if (keep < n) {
    // The descending prefix: the top_k best, those kept by min_p (p(best) =
    // exp(0) = 1, so best always), then the smallest run holding top_p of
    // what is left. Exps only for these k.
    TopKIds(logits, n, keep, &sc.order);
    sc.cand_logits.resize(keep);
    sc.cand_p.resize(keep);
    for (int64_t i = 0; i < keep; ++i) sc.cand_logits[i] = logits[sc.order[i]];
    kernels::cpu::ExpShiftedScaled(sc.cand_logits.data(), keep, m, inv_t, sc.cand_p.data());
    int64_t n_cand = 1;
    while (n_cand < keep && sc.cand_p[n_cand] >= floor) ++n_cand;
    if (config_.top_p < 1.0f) {
      double kept_total = 0.0;
      for (int64_t i = 0; i < n_cand; ++i) kept_total += sc.cand_p[i];
      const double target = config_.top_p * kept_total;
      double mass = 0.0;
      int64_t i = 0;
      for (; i < n_cand; ++i) {
        mass += sc.cand_p[i];
        if (mass >= target) break;
      }
      n_cand = std::min(n_cand, i + 1);
    }
    double total = 0.0;
    for (int64_t i = 0; i < n_cand; ++i) total += sc.cand_p[i];
    const int64_t at = Draw(sc.cand_p.data(), n_cand, total);
    if (at >= 0) pick = sc.order[at];
    out.log_z = log_z_given_max();
  } else {
    // Unnormalised probabilities by id (p(best) = 1) and their sum.
    sc.probs.resize(n);
    const double total_all = kernels::cpu::ExpShiftedScaled(logits, n, m, inv_t, sc.probs.data());
    // At temperature 1 these are the log-softmax's exps already.
    out.log_z = inv_t == 1.0f && !std::isnan(m) ? m + static_cast<float>(std::log(total_all))
                                                : log_z_given_max();
    if (floor <= 0.0f && config_.top_p >= 1.0f) {
      const int64_t at = Draw(sc.probs.data(), n, total_all);
      if (at >= 0) pick = static_cast<int32_t>(at);
    } else {
      // The kept tokens: all, or those at or above min_p (best always, as
      // p(best) = exp(0) = 1), in id order; then top_p's nucleus of them.
      int64_t n_cand = n;
      double kept_total = total_all;
      if (floor > 0.0f) {
        sc.order.resize(n);
        n_cand = kernels::cpu::IdsAtLeast(sc.probs.data(), n, floor, sc.order.data());
        kept_total = 0.0;
        for (int64_t i = 0; i < n_cand; ++i) kept_total += sc.probs[sc.order[i]];
      }
      if (config_.top_p < 1.0f) n_cand = NucleusOf(kept_total, floor, n_cand);
      sc.cand_p.resize(n_cand);
      double total = 0.0;
      for (int64_t i = 0; i < n_cand; ++i) {
        sc.cand_p[i] = sc.probs[sc.order[i]];
        total += sc.cand_p[i];
      }
      const int64_t at = Draw(sc.cand_p.data(), n_cand, total);
      if (at >= 0) pick = sc.order[at];
    }
  }
  out.token = pick >= 0 ? pick : best;
  out.logprob = logits[out.token] - out.log_z;
  return out;
}

}  // namespace rill::worker
