// The priced draft length (draft_length_choice.h) and the acceptance
// estimates it is fed (acceptance_model.h).
#include <functional>
#include <vector>

#include <gtest/gtest.h>

#include "engine/spec_decode/acceptance_model.h"
#include "engine/spec_decode/draft_length_choice.h"

namespace rill::engine::spec_decode {
namespace {

// A step of `base` seconds, each draft token adding `per_token`.
std::function<double(int)> Linear(double base, double per_token) {
  return [=](int m) { return base + per_token * m; };
}

TEST(ChooseDraftLengthsTest, VerifiesNothingWhenADraftTokenCostsAsMuchAsAStep) {
  // A 5 ms step, each draft token 5 ms more: even a 90% token loses.
  EXPECT_EQ(ChooseDraftLengths({{0.9, 0.9, 0.9}}, 1, Linear(5e-3, 5e-3)), (std::vector<int>{0}));
}

TEST(ChooseDraftLengthsTest, CheapTokensOfACopyAreAllVerified) {
  EXPECT_EQ(ChooseDraftLengths({{0.95, 0.95, 0.95, 0.95}}, 1, Linear(5e-3, 0.5e-3)),
            (std::vector<int>{4}));
}

TEST(ChooseDraftLengthsTest, StopsWhereTheNextTokenNoLongerPays) {
  // 1 ms per draft token. At the rate without drafts (1 token per 5 ms) a
  // token pays while it adds more than 0.2 tokens: 0.6, 0.36, 0.216 do,
  // 0.13 does not. At a long-run rate of 300 tokens/s it must add 0.3.
  const std::vector<std::vector<double>> d = {{0.6, 0.6, 0.6, 0.6}};
  EXPECT_EQ(ChooseDraftLengths(d, 1, Linear(5e-3, 1e-3)), (std::vector<int>{3}));
  EXPECT_EQ(ChooseDraftLengths(d, 1, Linear(5e-3, 1e-3), 300.0), (std::vector<int>{2}));
}

TEST(ChooseDraftLengthsTest, LooksPastAnExpensiveStepSize) {
  // The first draft token costs 80% of a step, the next three nothing more
  // (one kernel tile): a lone 70% token loses, four of them pay.
  auto tiled = [](int m) { return m == 0 ? 5e-3 : 9e-3; };
  EXPECT_EQ(ChooseDraftLengths({{0.7}}, 1, tiled), (std::vector<int>{0}));
  EXPECT_EQ(ChooseDraftLengths({{0.7, 0.9, 0.9, 0.9}}, 1, tiled), (std::vector<int>{4}));
}

TEST(ChooseDraftLengthsTest, TurnsOffForALargeBatch) {
  // The same draft pays alone but not in a step of 16 decodes (16 tokens in
  // 20 ms: a draft token must be accepted 80% of the time to pay for 1 ms).
  const std::vector<std::vector<double>> d = {{0.7, 0.7}};
  EXPECT_GT(ChooseDraftLengths(d, 1, Linear(5e-3, 1e-3))[0], 0);
  EXPECT_EQ(ChooseDraftLengths(d, 16, Linear(20e-3, 1e-3))[0], 0);
}

TEST(ChooseDraftLengthsTest, GivesTheLikelierDraftMoreTokens) {
  const std::vector<int> n =
      ChooseDraftLengths({{0.5, 0.5, 0.5}, {0.95, 0.95, 0.95}}, 2, Linear(6e-3, 1e-3));
  EXPECT_LT(n[0], n[1]);
  EXPECT_EQ(n[1], 3);
}

TEST(AcceptanceModelTest, LearnsPerKindOfMatchAndPosition) {
  AcceptanceModel m;
  SequenceAcceptance seq;
  const DraftContext weak{1, false}, strong{8, true};
  for (int i = 0; i < 200; ++i) {
    m.Record(weak, 2, 0, &seq);
    m.Record(strong, 4, 4, &seq);
  }
  std::vector<double> pw, ps;
  const SequenceAcceptance fresh;
  m.Estimate(weak, fresh, 2, &pw);
  m.Estimate(strong, fresh, 4, &ps);
  ASSERT_EQ(pw.size(), 2u);
  ASSERT_EQ(ps.size(), 4u);
  EXPECT_LT(pw[0], 0.1);
  for (double p : ps) EXPECT_GT(p, 0.9);
}

TEST(AcceptanceModelTest, ASequenceThatStopsCopyingIsTrustedLess) {
  AcceptanceModel m;
  const DraftContext ctx{3, false};
  SequenceAcceptance copier, rewriter;
  for (int i = 0; i < 50; ++i) {
    m.Record(ctx, 3, 3, &copier);
    m.Record(ctx, 3, 0, &rewriter);
  }
  std::vector<double> pc, pr;
  m.Estimate(ctx, copier, 1, &pc);
  m.Estimate(ctx, rewriter, 1, &pr);
  EXPECT_GT(pc[0], pr[0] + 0.3);
  EXPECT_FALSE(rewriter.last_accepted_whole);
  EXPECT_TRUE(copier.last_accepted_whole);
}

}  // namespace
}  // namespace rill::engine::spec_decode
