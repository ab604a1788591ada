#include "worker/sampler.h"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "tests/util/test_seed.h"

namespace rill::worker {
namespace {

std::vector<float> RandomLogits(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(n);
  for (float& l : logits) l = normal(rng);
  return logits;
}

TEST(SamplerTest, GreedyPicksArgmaxWithItsLogprob) {
  std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.0f};
  Sampler sampler(SamplingConfig{.temperature = 0.0f});
  SampledToken t = sampler.Sample(logits.data(), logits.size());
  EXPECT_EQ(t.token, 1);  // the first of the tied maxima
  double z = 0;
  for (float l : logits) z += std::exp(l);
  EXPECT_NEAR(t.logprob, 2.0 - std::log(z), 1e-5);
}

TEST(SamplerTest, SameSeedSameTokensDifferentSeedDiffers) {
  const uint64_t seed = rill::tests::util::StreamSeed(0);
  std::cout << "seed " << seed << "\n";
  std::vector<float> logits = RandomLogits(1000, seed);
  SamplingConfig cfg{.temperature = 1.0f, .seed = 7};
  Sampler a(cfg), b(cfg);
  cfg.seed = 8;
  Sampler c(cfg);
  int differ = 0;
  for (int i = 0; i < 50; ++i) {
    int ta = a.Sample(logits.data(), logits.size()).token;
    EXPECT_EQ(ta, b.Sample(logits.data(), logits.size()).token);
    differ += ta != c.Sample(logits.data(), logits.size()).token;
  }
  EXPECT_GT(differ, 0);
}

TEST(SamplerTest, TopKOnlyReturnsTheKBest) {
  std::vector<float> logits = RandomLogits(200, 3);
  std::vector<int> order(200);
  for (int i = 0; i < 200; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  Sampler s(SamplingConfig{.temperature = 5.0f, .top_k = 3, .seed = 1});
  for (int i = 0; i < 300; ++i) {
    int t = s.Sample(logits.data(), logits.size()).token;
    EXPECT_TRUE(t == order[0] || t == order[1] || t == order[2]) << t;
  }
}

TEST(SamplerTest, TopPKeepsTheNucleus) {
  // p = {0.5, 0.3, 0.2}: top_p 0.6 keeps the first two only.
  std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  Sampler s(SamplingConfig{.temperature = 1.0f, .top_p = 0.6f, .seed = 2});
  std::map<int, int> counts;
  for (int i = 0; i < 2000; ++i) counts[s.Sample(logits.data(), 3).token]++;
  EXPECT_EQ(counts[2], 0);
  EXPECT_NEAR(counts[0] / 2000.0, 0.5 / 0.8, 0.05);
}

TEST(SamplerTest, FrequenciesFollowTheDistribution) {
  std::vector<float> logits = {0.0f, std::log(3.0f)};  // p = 0.25, 0.75
  Sampler s(SamplingConfig{.temperature = 1.0f, .seed = 5});
  int ones = 0;
  for (int i = 0; i < 4000; ++i) ones += s.Sample(logits.data(), 2).token == 1;
  EXPECT_NEAR(ones / 4000.0, 0.75, 0.03);
}

// A vocabulary-sized row against a float64 reference of the filters (full
// sort, then top_k, min_p and top_p in that order): every draw lies in the
// reference's kept set and the most likely token's frequency matches.
TEST(SamplerTest, LargeVocabularyFiltersMatchAFullSortReference) {
  const uint64_t seed = rill::tests::util::StreamSeed(1);
  std::cout << "seed " << seed << "\n";
  const int n = 49152;
  std::vector<float> logits = RandomLogits(n, seed);
  const SamplingConfig cases[] = {
      {.temperature = 0.8f, .seed = 1},
      {.temperature = 1.0f, .top_p = 0.9f, .seed = 2},
      {.temperature = 1.3f, .min_p = 0.05f, .seed = 3},
      {.temperature = 0.7f, .top_k = 50, .top_p = 0.8f, .seed = 4},
      {.temperature = 1.0f, .top_k = 2000, .top_p = 0.95f, .min_p = 0.01f, .seed = 5},
  };
  for (const SamplingConfig& cfg : cases) {
    SCOPED_TRACE(::testing::Message() << "T=" << cfg.temperature << " top_k=" << cfg.top_k
                                      << " top_p=" << cfg.top_p << " min_p=" << cfg.min_p);
    std::vector<int> order(n);
    for (int i = 0; i < n; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](int a, int b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    std::vector<double> p(n);
    for (int i = 0; i < n; ++i) {
      p[order[i]] = std::exp((double{logits[order[i]]} - logits[order[0]]) / cfg.temperature);
    }
    // The reference keeps the set a hair wider at the min_p and top_p
    // edges (1e-4 relative): the sampler's float probabilities may round a
    // token that sits exactly on an edge the other way.
    int kept = cfg.top_k > 0 ? std::min(cfg.top_k, n) : n;
    if (cfg.min_p > 0) {
      int c = 1;
      while (c < kept && p[order[c]] >= cfg.min_p * (1 - 1e-4)) ++c;
      kept = c;
    }
    double total = 0;
    for (int i = 0; i < kept; ++i) total += p[order[i]];
    if (cfg.top_p < 1) {
      double mass = 0;
      int i = 0;
      for (; i < kept; ++i) {
        mass += p[order[i]];
        if (mass >= std::min(1.0, cfg.top_p + 1e-4) * total) break;
      }
      kept = std::min(kept, i + 1);
    }
    std::vector<bool> in_set(n, false);
    double kept_total = 0;
    for (int i = 0; i < kept; ++i) {
      in_set[order[i]] = true;
      kept_total += p[order[i]];
    }
    Sampler s(cfg);
    const int draws = 3000;
    int top = 0;
    for (int d = 0; d < draws; ++d) {
      const int t = s.Sample(logits.data(), n).token;
      ASSERT_TRUE(t >= 0 && t < n && in_set[t]) << "token " << t << " outside the kept set";
      top += t == order[0];
    }
    const double want = p[order[0]] / kept_total;
    EXPECT_NEAR(top / double{draws}, want, 4 * std::sqrt(want * (1 - want) / draws) + 1e-3);
  }
}

// The nucleus is exactly the smallest set of best tokens holding top_p of the
// mass: every one of them is drawn, nothing else. Geometric probabilities
// (p_i ~ 0.8^i on 40 shuffled ids, the rest of a 49,152 vocabulary near 0) put
// the edge far from any rounding: with top_p 0.9 the nucleus is the 11 best
// (mass 0.914; 10 hold 0.893).
TEST(SamplerTest, TopPDrawsExactlyTheNucleus) {
  const uint64_t seed = rill::tests::util::StreamSeed(2);
  std::cout << "seed " << seed << "\n";
  std::mt19937_64 rng(seed);
  const int n = 49152;
  std::vector<int32_t> ids(n);
  for (int i = 0; i < n; ++i) ids[i] = i;
  std::shuffle(ids.begin(), ids.end(), rng);
  std::vector<float> logits(n, -30.0f);
  for (int i = 0; i < 40; ++i) logits[ids[i]] = i * std::log(0.8f);
  for (float top_p : {0.9f, 0.5f}) {
    // 0.5: the 4 best hold 0.59, 3 hold 0.49.
    const int want = top_p == 0.9f ? 11 : 4;
    Sampler s(SamplingConfig{.temperature = 1.0f, .top_p = top_p, .seed = seed});
    std::map<int32_t, int> drawn;
    for (int d = 0; d < 20000; ++d) ++drawn[s.Sample(logits.data(), n).token];
    std::map<int32_t, int> expected;
    for (int i = 0; i < want; ++i) expected[ids[i]] = 0;
    ASSERT_EQ(drawn.size(), expected.size()) << "top_p " << top_p;
    for (const auto& [id, count] : drawn) {
      EXPECT_TRUE(expected.count(id)) << "token " << id << " outside the nucleus, top_p " << top_p;
    }
  }
}

// -inf logits (logit bias, min_tokens masking EOS) are never drawn, even at
// a temperature that makes every other token about as likely.
// TopKIds against a full sort by (value desc, id asc), on rows with many
// ties (values on a coarse grid) and NaNs (ordered as -inf).
TEST(SamplerTest, TopKIdsIsTheFullSortPrefix) {
  const uint64_t seed = rill::tests::util::StreamSeed(3);
  std::cout << "seed " << seed << "\n";
  std::mt19937_64 rng(seed);
  for (int n : {1, 5, 64, 1000, 49152}) {
    std::uniform_int_distribution<int> grid(-20, 20);
    std::vector<float> x(n);
    for (float& v : x) v = grid(rng) * 0.25f;
    if (n > 10) x[7] = std::nanf("");
    auto key = [&](int i) { return std::isnan(x[i]) ? -INFINITY : x[i]; };
    std::vector<int32_t> all(n);
    for (int i = 0; i < n; ++i) all[i] = i;
    std::sort(all.begin(), all.end(),
              [&](int a, int b) { return key(a) > key(b) || (key(a) == key(b) && a < b); });
    for (int k : {1, 3, 50, 200, n, n + 5}) {
      std::vector<int32_t> got = {99};
      TopKIds(x.data(), n, k, &got);
      const int want_k = std::min(k, n);
      EXPECT_EQ(got, std::vector<int32_t>(all.begin(), all.begin() + want_k))
          << "n=" << n << " k=" << k;
    }
  }
}

TEST(SamplerTest, MaskedTokensAreNeverSampled) {
  std::vector<float> logits = RandomLogits(1000, 11);
  for (int i = 0; i < 1000; i += 2) logits[i] = -std::numeric_limits<float>::infinity();
  for (const SamplingConfig& cfg : {SamplingConfig{.temperature = 100.0f, .seed = 3},
                                    SamplingConfig{.temperature = 100.0f, .top_p = 0.999f, .seed = 4},
                                    SamplingConfig{.temperature = 100.0f, .top_k = 900, .seed = 5}}) {
    Sampler s(cfg);
    for (int d = 0; d < 2000; ++d) {
      const int t = s.Sample(logits.data(), logits.size()).token;
      ASSERT_EQ(t % 2, 1) << "masked token " << t << " drawn";
    }
  }
}

// min_p keeps exactly the tokens at or above min_p * p(best), in proportion.
TEST(SamplerTest, MinPDropsTokensBelowTheFloor) {
  // p = {0.5, 0.3, 0.15, 0.05}: min_p 0.2 keeps p >= 0.1, the first three.
  std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  Sampler s(SamplingConfig{.temperature = 1.0f, .min_p = 0.2f, .seed = 9});
  std::map<int, int> counts;
  for (int i = 0; i < 4000; ++i) counts[s.Sample(logits.data(), 4).token]++;
  EXPECT_EQ(counts[3], 0);
  EXPECT_NEAR(counts[0] / 4000.0, 0.5 / 0.95, 0.03);
  EXPECT_NEAR(counts[2] / 4000.0, 0.15 / 0.95, 0.03);
}

TEST(SamplerTest, RejectsOutOfRangeParameters) {
  EXPECT_FALSE(ValidateSamplingConfig({.temperature = -1.0f}).ok());
  EXPECT_FALSE(ValidateSamplingConfig({.top_p = 0.0f}).ok());
  EXPECT_FALSE(ValidateSamplingConfig({.top_p = 1.5f}).ok());
  EXPECT_FALSE(ValidateSamplingConfig({.min_p = 2.0f}).ok());
  EXPECT_FALSE(ValidateSamplingConfig({.temperature = NAN}).ok());
  EXPECT_TRUE(ValidateSamplingConfig({}).ok());
}

}  // namespace
}  // namespace rill::worker
