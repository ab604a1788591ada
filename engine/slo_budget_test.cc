// The SLO budget controller and its step-time model, on fake step times.
#include "engine/slo_budget.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "absl/time/clock.h"

#include "engine/step_time_model.h"
#include "tests/util/test_seed.h"

namespace rill::engine {
namespace {

// A machine whose step takes fixed + per_token * tokens + per_kv * kv_reads.
struct FakeMachine {
  double fixed = 0.004;
  double per_token = 0.0008;
  double per_kv = 2e-8;
  double Seconds(const StepShape& s) const {
    return fixed + per_token * static_cast<double>(s.tokens) + per_kv * s.kv_reads;
  }
};

StepShape Decodes(int n, int64_t context) {
  StepShape s;
  for (int i = 0; i < n; ++i) s.AddChunk(context + i, 1);
  return s;
}

TEST(StepTimeModelTest, RecentTimePerStepSizeIsAMedianThatExpires) {
  StepTimeModel m;
  StepShape three;
  three.AddChunk(100, 3);
  m.Observe(three, absl::Milliseconds(7));
  m.Observe(three, absl::Milliseconds(90));  // A noisy neighbour.
  EXPECT_EQ(m.RecentTime(3), absl::ZeroDuration());  // Too few yet.
  m.Observe(three, absl::Milliseconds(8));
  EXPECT_EQ(m.RecentTime(3), absl::Milliseconds(8));
  EXPECT_EQ(m.RecentTime(1), absl::ZeroDuration());
  // After many steps of another size, the 3-token times are stale.
  StepShape one;
  one.AddChunk(100, 1);
  for (int i = 0; i < StepTimeModel::kExactMaxAge; ++i) m.Observe(one, absl::Milliseconds(5));
  EXPECT_EQ(m.RecentTime(1), absl::Milliseconds(5));
  EXPECT_EQ(m.RecentTime(3), absl::ZeroDuration());
}

TEST(StepTimeModelTest, ReadyFromTheFirstStep) {
  StepTimeModel m;
  EXPECT_FALSE(m.ready());
  m.Observe(StepShape(), absl::Milliseconds(10));  // Nothing ran: ignored.
  EXPECT_FALSE(m.ready());
  m.Observe(Decodes(8, 100), absl::Milliseconds(10));
  EXPECT_TRUE(m.ready());
  EXPECT_EQ(m.largest_observed_tokens(), 8);
}

TEST(StepTimeModelTest, FitsNoisyStepsAndShrugsOffSlowOutliers) {
  std::mt19937_64 rng = tests::util::TestRng(1);
  std::normal_distribution<double> noise(1.0, 0.03);
  std::uniform_int_distribution<int> size(1, 512);
  std::uniform_int_distribution<int> pos(0, 4000);
  std::bernoulli_distribution outlier(0.1);  // A neighbour steals the cores.
  const FakeMachine machine;
  StepTimeModel m;
  for (int i = 0; i < 300; ++i) {
    StepShape s = Decodes(8, pos(rng) % 500);
    s.AddChunk(pos(rng), size(rng));
    double t = machine.Seconds(s) * noise(rng);
    if (outlier(rng)) t *= 4.0;
    m.Observe(s, absl::Seconds(t));
  }
  ASSERT_TRUE(m.ready());
  for (int tokens : {8, 64, 256, 512}) {
    for (int64_t start : {0, 2000}) {
      StepShape s = Decodes(8, 200);
      s.AddChunk(start, tokens);
      const double want = machine.Seconds(s);
      EXPECT_NEAR(absl::ToDoubleSeconds(m.Predict(s)), want, 0.1 * want)
          << tokens << " tokens at " << start;
    }
  }
}

TEST(StepTimeModelTest, DecodeOnlyStepsGiveAPessimisticPerTokenCost) {
  // All steps hold 8 tokens: the intercept and the slope cannot be told
  // apart, so the model charges everything per token (a small budget that
  // the scheduler then grows by measuring bigger steps).
  StepTimeModel m;
  for (int i = 0; i < 10; ++i) m.Observe(Decodes(8, 100), absl::Milliseconds(16));
  ASSERT_TRUE(m.ready());
  StepShape big;
  big.AddChunk(0, 80);
  EXPECT_GE(absl::ToDoubleMilliseconds(m.Predict(big)), 100.0);
}

// Runs 8 decodes plus a long prompt through the budget on a fake machine
// (times with multiplicative noise `jitter`) and returns each step's time.
struct PrefillRun {
  std::vector<double> step_seconds;
  std::vector<int64_t> chunks;
  int steps_to_prefill = 0;
};

PrefillRun PrefillDuringDecodes(SloBudget& budget, const FakeMachine& machine, int64_t prompt,
                         double jitter, uint64_t stream) {
  std::mt19937_64 rng = tests::util::TestRng(stream);
  std::normal_distribution<double> noise(1.0, jitter);
  PrefillRun run;
  int64_t done = 0;
  int64_t context = 300;
  const absl::Time now = absl::Now();
  while (done < prompt) {
    StepShape planned = Decodes(8, context);
    const int64_t n = budget.ChunkLimit(planned, done, prompt - done, absl::InfiniteFuture(), now,
                                        /*first_prefill=*/true);
    EXPECT_GT(n, 0);
    planned.AddChunk(done, n);
    const double t = machine.Seconds(planned) * std::max(0.5, noise(rng));
    budget.ObserveStep(planned, absl::Seconds(t));
    run.step_seconds.push_back(t);
    run.chunks.push_back(n);
    done += n;
    ++context;
    ++run.steps_to_prefill;
  }
  return run;
}

TEST(SloBudgetTest, ChunksGrowFromMeasuredStepsThenHoldTheTarget) {
  const FakeMachine machine;
  SloBudget budget({absl::Milliseconds(60), absl::ZeroDuration()}, 2048);
  const PrefillRun run = PrefillDuringDecodes(budget, machine, 8000, 0.0, 2);
  // Never more than twice the largest measured step: 32 tokens, then growth.
  EXPECT_EQ(run.chunks[0], SloBudget::kFirstStepTokens - 8);
  EXPECT_LE(run.chunks[1], 2 * 32 - 8);
  // Once measured, every step stays within the target (the fake machine is
  // exactly linear here), and the chunks are far from the 2048 cap.
  for (size_t i = 0; i < run.step_seconds.size(); ++i) {
    EXPECT_LE(run.step_seconds[i], 0.060 * 1.02) << "step " << i << " chunk " << run.chunks[i];
  }
  const int64_t biggest = *std::max_element(run.chunks.begin(), run.chunks.end());
  EXPECT_GT(biggest, 40);
  EXPECT_LT(biggest, 80);  // (0.060 - 0.004 - 8 * 0.0008) / 0.0008 ~= 62 at position 0.
  // Later chunks read more context, so they are smaller.
  EXPECT_LT(run.chunks.back(), biggest);
}

TEST(SloBudgetTest, NoisyStepsStayNearTheTarget) {
  const FakeMachine machine;
  SloBudget budget({absl::Milliseconds(60), absl::ZeroDuration()}, 2048);
  const PrefillRun run = PrefillDuringDecodes(budget, machine, 6000, 0.1, 3);
  std::vector<double> t = run.step_seconds;
  std::sort(t.begin(), t.end());
  EXPECT_LE(t[t.size() / 2], 0.060);        // Median within the target.
  EXPECT_LE(t[t.size() * 9 / 10], 0.075);   // p90 within noise of it.
}

TEST(SloBudgetTest, AdaptsWhenTheMachineSlowsDown) {
  FakeMachine machine;
  SloBudget budget({absl::Milliseconds(60), absl::ZeroDuration()}, 2048);
  PrefillDuringDecodes(budget, machine, 3000, 0.0, 4);
  const int64_t fast = budget.TokenBudget();
  machine.per_token *= 2;  // Half the cores went to someone else.
  machine.fixed *= 2;
  const PrefillRun slow = PrefillDuringDecodes(budget, machine, 3000, 0.0, 5);
  const int64_t after = budget.TokenBudget();
  EXPECT_LT(after, fast * 2 / 3) << "fast " << fast << " slow " << after;
  // The last steps are back within the target.
  for (size_t i = slow.step_seconds.size() - 10; i < slow.step_seconds.size(); ++i) {
    EXPECT_LE(slow.step_seconds[i], 0.060 * 1.05) << i;
  }
}

TEST(SloBudgetTest, FirstPrefillAlwaysProgresses) {
  const FakeMachine machine;
  SloBudget budget({absl::Milliseconds(60), absl::ZeroDuration()}, 2048);
  PrefillDuringDecodes(budget, machine, 3000, 0.0, 8);
  // A step whose decodes leave less than a chunk's time: the first prefill
  // still gets kMinChunk, a second one waits.
  StepShape planned = Decodes(8, 300);
  planned.AddChunk(0, budget.ChunkLimit(planned, 0, 4000, absl::InfiniteFuture(), absl::Now(),
                                        /*first_prefill=*/true));
  const absl::Time now = absl::Now();
  EXPECT_LT(budget.ChunkLimit(planned, 0, 1000, absl::InfiniteFuture(), now, false),
            SloBudget::kMinChunk);
  EXPECT_GE(budget.ChunkLimit(planned, 0, 1000, absl::InfiniteFuture(), now, true),
            SloBudget::kMinChunk);
  EXPECT_EQ(budget.ChunkLimit(planned, 0, 3, absl::InfiniteFuture(), now, true), 3);
}

TEST(SloBudgetTest, OverloadStopsHoldingPromptsBack) {
  // Decodes alone take 20 ms against a 5 ms target: no chunk size keeps
  // their ITL, so prompts get what exploration allows instead of kMinChunk.
  SloBudget budget({absl::Milliseconds(5), absl::ZeroDuration()}, 2048);
  for (int i = 0; i < 5; ++i) budget.ObserveStep(Decodes(8, 100 + i), absl::Milliseconds(20));
  const StepShape planned = Decodes(8, 110);
  const absl::Time now = absl::Now();
  const int64_t explore = SloBudget::kFirstStepTokens - 8;  // max(2 * 8, 32) - 8.
  EXPECT_EQ(budget.ChunkLimit(planned, 0, 1000, absl::InfiniteFuture(), now, true), explore);
  EXPECT_EQ(budget.ChunkLimit(planned, 0, 1000, absl::InfiniteFuture(), now, false), explore);
  EXPECT_EQ(budget.ChunkLimit(planned, 0, 3, absl::InfiniteFuture(), now, true), 3);
  // Steps that grow are measured, and the next chunk may double.
  StepShape big = planned;
  big.AddChunk(0, explore);
  budget.ObserveStep(big, absl::Milliseconds(60));
  EXPECT_EQ(budget.ChunkLimit(planned, 0, 1000, absl::InfiniteFuture(), now, true),
            2 * (8 + explore) - 8);
}

TEST(SloBudgetTest, TtftTargetEnlargesChunksOnlyWhileItCanBeMet) {
  const FakeMachine machine;
  SloBudget budget({absl::Milliseconds(60), absl::Seconds(2)}, 2048);
  PrefillDuringDecodes(budget, machine, 3000, 0.0, 6);
  const StepShape planned = Decodes(8, 300);
  const absl::Time now = absl::Now();
  const int64_t itl_only =
      budget.ChunkLimit(planned, 0, 4000, absl::InfiniteFuture(), now, true);
  // 4000 tokens in 2 s at ~60 ms per step: ~33 steps, so ~120 tokens each.
  const int64_t with_deadline =
      budget.ChunkLimit(planned, 0, 4000, now + absl::Seconds(2), now, true);
  EXPECT_GE(with_deadline, 4000 / 33);
  EXPECT_GT(with_deadline, itl_only);
  // Missed already: back to what the ITL target allows.
  EXPECT_EQ(budget.ChunkLimit(planned, 0, 4000, now - absl::Seconds(1), now, true), itl_only);
}

TEST(SloBudgetTest, OffMeansTheFixedBudget) {
  SloBudget budget({}, 2048);
  EXPECT_FALSE(budget.enabled());
  EXPECT_EQ(budget.TokenBudget(), 2048);
}

TEST(SloBudgetTest, NeverAboveTheHardCap) {
  SloBudget budget({absl::Seconds(10), absl::ZeroDuration()}, 256);
  const FakeMachine machine;
  PrefillDuringDecodes(budget, machine, 3000, 0.0, 7);
  EXPECT_EQ(budget.TokenBudget(), 256);
  EXPECT_LE(budget.ChunkLimit(StepShape(), 0, 5000, absl::InfiniteFuture(), absl::Now(), true),
            256);
}

}  // namespace
}  // namespace rill::engine
