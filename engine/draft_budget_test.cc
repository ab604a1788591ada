// Speculative drafts against the step's budgets: exact with synthetic step
// times (a planned step of 8 decodes and the drafts each may add), then
// through EngineCore, where a loose ITL target leaves every draft as it is
// without one and steps already past the target get none.
#include "engine/draft_budget.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/engine_core.h"
#include "engine/fake_model_executor.h"
#include "engine/scheduler.h"
#include "engine/slo_budget.h"
#include "engine/spec_decode/spec_decode_config.h"
#include "engine/step_time_model.h"

namespace rill::engine {
namespace {

constexpr int kDecodes = 8;
constexpr int kWanted = 4;  // Draft tokens each decode asks for.

// A step-time model fitted to exact synthetic times: 5 ms + 1 ms per token
// (no attention term), over steps of 8 to 128 tokens, so nothing the tests
// plan is past the exploration cap.
SloBudget Trained(absl::Duration itl) {
  SloBudget slo({itl, absl::ZeroDuration()}, /*max_tokens=*/512);
  for (int i = 0; i < 48; ++i) {
    const int n = 8 + (i * 37) % 121;
    StepShape s;
    s.AddChunk(64, n);
    slo.ObserveStep(s, absl::Milliseconds(5 + n));
  }
  return slo;
}

// Eight decodes at positions 100..107 (the requests are not read).
SchedulerOutput EightDecodes() {
  SchedulerOutput plan;
  for (int i = 0; i < kDecodes; ++i) plan.chunks.push_back({nullptr, 100 + i, 1});
  plan.num_batched_tokens = kDecodes;
  return plan;
}

// What each decode gets, in plan order, asking for kWanted each.
std::vector<int64_t> Grant(const SchedulerOutput& plan, DraftBudget& budget) {
  std::vector<int64_t> granted;
  for (const ScheduledChunk& c : plan.chunks) {
    const int64_t n = budget.Limit(c, kWanted);
    EXPECT_LE(n, kWanted);
    budget.Take(c, n);
    granted.push_back(n);
  }
  return granted;
}

TEST(DraftBudgetTest, ATightItlTargetShrinksDraftsToWhatFits) {
  // The 8 decodes take 13 ms; steps are planned to 0.9 * 21 ms = 18.9 ms,
  // which leaves time for 5 draft tokens at 1 ms each.
  const SloBudget slo = Trained(absl::Milliseconds(21));
  ASSERT_TRUE(slo.model().ready());
  const SchedulerOutput plan = EightDecodes();
  DraftBudget budget(plan, /*max_num_batched_tokens=*/512, slo);
  EXPECT_NEAR(absl::ToDoubleMilliseconds(slo.model().Predict(budget.step())), 13.0, 0.05);
  EXPECT_EQ(Grant(plan, budget), (std::vector<int64_t>{4, 1, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(budget.step().tokens, kDecodes + 5);
  EXPECT_LE(slo.model().Predict(budget.step()),
            absl::Milliseconds(21) * SloBudget::kPlannedShare);
}

TEST(DraftBudgetTest, ALooseItlTargetChangesNothing) {
  const SchedulerOutput plan = EightDecodes();
  const SloBudget off({}, 512);
  DraftBudget without(plan, 512, off);
  const std::vector<int64_t> unlimited = Grant(plan, without);
  EXPECT_EQ(unlimited, std::vector<int64_t>(kDecodes, kWanted));
  const SloBudget loose = Trained(absl::Milliseconds(200));
  DraftBudget with(plan, 512, loose);
  EXPECT_EQ(Grant(plan, with), unlimited);
  EXPECT_EQ(with.step().tokens, kDecodes * (1 + kWanted));
}

TEST(DraftBudgetTest, NoDraftsInAStepAlreadyPastTheTarget) {
  const SloBudget slo = Trained(absl::Milliseconds(12));  // The decodes alone take 13 ms.
  const SchedulerOutput plan = EightDecodes();
  DraftBudget budget(plan, 512, slo);
  EXPECT_EQ(Grant(plan, budget), std::vector<int64_t>(kDecodes, 0));
  EXPECT_EQ(budget.step().tokens, kDecodes);
}

TEST(DraftBudgetTest, TheTokenBudgetStillCaps) {
  const SloBudget off({}, 512);
  const SchedulerOutput plan = EightDecodes();
  DraftBudget budget(plan, /*max_num_batched_tokens=*/kDecodes + 6, off);
  EXPECT_EQ(Grant(plan, budget), (std::vector<int64_t>{4, 2, 0, 0, 0, 0, 0, 0}));
  EXPECT_TRUE(budget.exhausted());
}

TEST(DraftBudgetTest, AttentionCostCountsTheDraftPositions) {
  // 1 ms + 0.1 ms per token + 1 us per key read: a draft deep into a long
  // context costs more per token, so it gets fewer in the same time.
  SloBudget slo({absl::Milliseconds(10), absl::ZeroDuration()}, 4096);
  for (int i = 0; i < 48; ++i) {
    StepShape s;
    s.AddChunk(100 * (i % 7), 1 + i % 5);
    slo.ObserveStep(s, absl::Microseconds(1000 + 100 * s.tokens + s.kv_reads));
  }
  SchedulerOutput near_start;
  near_start.chunks.push_back({nullptr, 1000, 1});
  near_start.num_batched_tokens = 1;
  SchedulerOutput far;
  far.chunks.push_back({nullptr, 3000, 1});
  far.num_batched_tokens = 1;
  DraftBudget a(near_start, 4096, slo);
  DraftBudget b(far, 4096, slo);
  // Steps are planned to 9 ms. The decode at 1000 takes 2.1 ms, and each
  // draft token ~1.1 ms more (6.2 fit); the one at 3000 takes 4.1 ms, and
  // each draft token ~3.1 ms (1.6 fit).
  EXPECT_EQ(a.Limit(near_start.chunks[0], 16), 6);
  EXPECT_EQ(b.Limit(far.chunks[0], 16), 1);
}

// Through EngineCore with the fake executor (greedy outputs cycle, so
// n-gram drafts are accepted).
SchedulerConfig Sched(absl::Duration itl) {
  SchedulerConfig c;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 256;
  c.max_model_len = 256;
  c.slo.itl = itl;
  return c;
}

FakeModelExecutor::Options Cyclic(absl::Duration step_delay) {
  FakeModelExecutor::Options o;
  o.num_blocks = 256;
  o.block_size = 4;
  o.vocab_size = 16;
  o.context_window = 2;
  o.step_delay = step_delay;
  return o;
}

std::vector<int32_t> PromptOf(int i) {
  std::vector<int32_t> prompt(6 + i);
  for (size_t j = 0; j < prompt.size(); ++j) prompt[j] = 1 + (j * 7 + i * 13) % 15;
  return prompt;
}

struct EngineRun {
  std::map<std::string, std::vector<int32_t>> tokens;
  spec_decode::SpecDecodeStats spec;
};

EngineRun RunThree(FakeModelExecutor& fake, const SchedulerConfig& sched, int max_tokens) {
  EngineCore core(&fake, sched, /*enable_prefix_caching=*/true);
  spec_decode::SpecDecodeConfig spec;
  spec.ngram_k = kWanted;
  // Drafts independent of the (microsecond, noisy) step times, so runs
  // with and without a target compare draft for draft.
  spec.price_ngram_drafts = false;
  spec.disable_batch_size = 64;
  core.SetSpeculation(spec);
  for (int i = 0; i < 3; ++i) {
    SamplingParams p;
    p.temperature = 0.0f;
    p.max_tokens = max_tokens;
    p.ignore_eos = true;
    auto r = std::make_unique<Request>(absl::StrCat("r", i), PromptOf(i), p);
    r->times.arrival = absl::Now();
    EXPECT_TRUE(core.AddRequest(std::move(r)).ok());
  }
  EngineRun run;
  for (int step = 0; step < 2000 && core.HasUnfinished(); ++step) {
    absl::StatusOr<std::vector<EngineCoreOutput>> outs = core.Step();
    EXPECT_TRUE(outs.ok()) << outs.status();
    if (!outs.ok()) break;
    for (const EngineCoreOutput& o : *outs) {
      auto& t = run.tokens[o.request_id];
      t.insert(t.end(), o.new_token_ids.begin(), o.new_token_ids.end());
    }
  }
  EXPECT_FALSE(core.HasUnfinished());
  run.spec = core.spec_stats();
  return run;
}

TEST(DraftBudgetEngineTest, ALooseItlTargetLeavesEveryDraftAsItIs) {
  FakeModelExecutor fake(Cyclic(absl::ZeroDuration()));
  const EngineRun without = RunThree(fake, Sched(absl::ZeroDuration()), 40);
  const EngineRun loose = RunThree(fake, Sched(absl::Seconds(60)), 40);
  EXPECT_GT(without.spec.num_accepted_tokens, 0);
  EXPECT_EQ(loose.tokens, without.tokens);
  EXPECT_EQ(loose.spec.num_drafts, without.spec.num_drafts);
  EXPECT_EQ(loose.spec.num_draft_tokens, without.spec.num_draft_tokens);
  EXPECT_EQ(loose.spec.num_accepted_tokens, without.spec.num_accepted_tokens);
}

TEST(DraftBudgetEngineTest, StepsPastTheItlTargetGetNoDrafts) {
  // Every step sleeps 60 ms against a 5 ms target: from the first measured
  // step on, the decodes alone are predicted past it (timing noise only
  // makes steps slower), so no draft is proposed; outputs are unchanged.
  FakeModelExecutor fake(Cyclic(absl::Milliseconds(60)));
  const EngineRun tight = RunThree(fake, Sched(absl::Milliseconds(5)), 12);
  EXPECT_EQ(tight.spec.num_drafts, 0);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(tight.tokens.at(absl::StrCat("r", i)), fake.Generate(PromptOf(i), 12)) << i;
  }
}

TEST(DraftBudgetEngineTest, StepTimesAreObservedWithTheirDraftTokens) {
  // A 2-token prompt and then decodes of 1 token: only the draft tokens can
  // make a step the step-time model saw hold more than 2.
  FakeModelExecutor fake(Cyclic(absl::ZeroDuration()));
  EngineCore core(&fake, Sched(absl::Seconds(60)), /*enable_prefix_caching=*/true);
  spec_decode::SpecDecodeConfig spec;
  spec.ngram_k = kWanted;
  // Drafts independent of the (microsecond, noisy) step times, so runs
  // with and without a target compare draft for draft.
  spec.price_ngram_drafts = false;
  core.SetSpeculation(spec);
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = 40;
  p.ignore_eos = true;
  auto r = std::make_unique<Request>("r", std::vector<int32_t>{1, 2}, p);
  r->times.arrival = absl::Now();
  ASSERT_TRUE(core.AddRequest(std::move(r)).ok());
  for (int step = 0; step < 100 && core.HasUnfinished(); ++step) ASSERT_TRUE(core.Step().ok());
  ASSERT_FALSE(core.HasUnfinished());
  EXPECT_GT(core.spec_stats().num_draft_tokens, core.spec_stats().num_drafts);
  EXPECT_GT(core.scheduler().slo_budget().model().largest_observed_tokens(), 2);
}

}  // namespace
}  // namespace rill::engine
