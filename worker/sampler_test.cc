#include "worker/sampler.h"

#include <cmath>
#include <map>
#include <random>
#include <vector>

#include <gtest/gtest.h>

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
  const uint64_t seed = std::random_device{}();
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
