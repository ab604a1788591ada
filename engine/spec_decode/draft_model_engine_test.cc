// Draft-model drafting through EngineCore, over fake executors: greedy
// outputs equal the model's whatever the draft proposes (the model itself:
// every draft token accepted; another model: few), the draft's own KV cache
// is rolled back to the accepted tokens (a draft that reads stale K/V stops
// being accepted), its blocks are freed with the target's on finish, abort
// and preemption, and sampling at temperature 1 keeps the model's
// distribution (chi-square).
#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "engine/engine_core.h"
#include "engine/fake_model_executor.h"
#include "engine/spec_decode/draft_model_proposer.h"
#include "engine/spec_decode/spec_decode_config.h"
#include "engine/spec_decode/spec_decode_test_util.h"

namespace rill::engine {
namespace {

using spec_decode::SpecDecodeStats;
using spec_decode::testing::Cyclic;
using spec_decode::testing::DraftModelSpec;
using spec_decode::testing::Driver;
using spec_decode::testing::ExpectSeededSamplingUnchanged;
using spec_decode::testing::ExpectTemperatureOneMatchesMarkov;
using spec_decode::testing::Greedy;
using spec_decode::testing::MakeRequest;
using spec_decode::testing::MarkovExecutor;
using spec_decode::testing::Prompt;
using spec_decode::testing::RunWithAbortsAfterAcceptedDrafts;
using spec_decode::testing::Sched;

// The fake model with a next token that hashes the whole context: a draft
// whose cache holds one stale token predicts wrong from there on.
FakeModelExecutor::Options WholeContext(int num_blocks) {
  FakeModelExecutor::Options o = Cyclic(num_blocks);
  o.context_window = 0;
  return o;
}

// The fake model, except that its prediction after every 5th position is
// another token: its drafts are rejected there, and accepted elsewhere only
// if its cache was rolled back to exactly the accepted tokens.
class WrongEvery5th : public ModelExecutor {
 public:
  explicit WrongEvery5th(const FakeModelExecutor::Options& o) : model_(o) {}
  absl::Status Execute(const worker::ForwardBatch& batch, worker::ForwardOutput* out) override {
    if (absl::Status s = model_.Execute(batch, out); !s.ok()) return s;
    const int64_t vocab = model_.model_config().vocab_size;
    for (size_t i = 0; i < batch.sequences.size(); ++i) {
      const worker::SequenceChunk& c = batch.sequences[i];
      if ((c.start_pos + c.tokens.size() - 1) % 5 != 0) continue;
      float* row = out->logits[i].data() + out->logits[i].size() - vocab;
      const int64_t t = std::max_element(row, row + vocab) - row;
      row[t % (vocab - 1) + 1] = row[t] + 1.0f;  // Never t, never 0 (EOS).
    }
    return absl::OkStatus();
  }
  int num_blocks() const override { return model_.num_blocks(); }
  int block_size() const override { return model_.block_size(); }
  const worker::loader::ModelConfig& model_config() const override { return model_.model_config(); }

 private:
  FakeModelExecutor model_;
};

struct GreedyRun {
  Driver driver;
  SpecDecodeStats stats;
  std::map<std::string, std::vector<int32_t>> prompts;
};

// 12 greedy requests on a WholeContext model with `draft` as its draft
// model (k = 4, prefix caching on); checks every output against the model
// and that both caches are empty at the end.
GreedyRun RunGreedy(std::unique_ptr<ModelExecutor> draft) {
  FakeModelExecutor fake(WholeContext(256));
  fake.AttachDraftModel(std::move(draft));
  EngineCore core(&fake, Sched(), /*enable_prefix_caching=*/true);
  core.SetSpeculation(DraftModelSpec(4));
  GreedyRun run;
  for (int i = 0; i < 12; ++i) {
    const std::string id = absl::StrCat("r", i);
    run.prompts[id] = Prompt(5 + i, i, 16);
    EXPECT_TRUE(core.AddRequest(MakeRequest(id, run.prompts[id], Greedy(40 + i))).ok());
  }
  run.driver.ToCompletion(&core);
  for (const auto& [id, prompt] : run.prompts) {
    EXPECT_EQ(run.driver.tokens[id], fake.Generate(prompt, 40 + std::stoi(id.substr(1)))) << id;
    EXPECT_EQ(run.driver.state[id], RequestState::kFinishedLength) << id;
  }
  run.stats = core.spec_stats();
  std::cout << "drafts " << run.stats.num_drafts << " draft tokens " << run.stats.num_draft_tokens
            << " accepted " << run.stats.num_accepted_tokens << "\n";
  EXPECT_EQ(core.block_manager().num_free_blocks(), 256);
  const spec_decode::DraftModelProposer* proposer = core.draft_proposer();
  EXPECT_NE(proposer, nullptr);
  if (proposer != nullptr) {
    EXPECT_EQ(proposer->num_sequences(), 0);
    EXPECT_EQ(proposer->block_manager().num_free_blocks(), 256);
  }
  return run;
}

TEST(DraftModelEngineTest, TheModelAsItsOwnDraftHasEveryTokenAccepted) {
  const GreedyRun run = RunGreedy(std::make_unique<FakeModelExecutor>(WholeContext(256)));
  EXPECT_GT(run.stats.num_drafts, 50);
  EXPECT_EQ(run.stats.num_accepted_tokens, run.stats.num_draft_tokens);
}

TEST(DraftModelEngineTest, AnotherDraftModelChangesNoOutput) {
  FakeModelExecutor::Options other = WholeContext(256);
  other.context_window = 1;  // Another function of the context: mostly wrong.
  const GreedyRun run = RunGreedy(std::make_unique<FakeModelExecutor>(other));
  EXPECT_GT(run.stats.num_drafts, 50);
  EXPECT_LT(run.stats.num_accepted_tokens * 4, run.stats.num_draft_tokens);
}

// Rejected every 5th position, so its cache is rolled back often: if it
// kept a rejected token's K/V (or lost an accepted one's), every later
// draft would be wrong.
TEST(DraftModelEngineTest, DraftCacheRollsBackToTheAcceptedTokens) {
  const GreedyRun run = RunGreedy(std::make_unique<WrongEvery5th>(WholeContext(256)));
  EXPECT_LT(run.stats.num_accepted_tokens, run.stats.num_draft_tokens);  // Rejections happened.
  EXPECT_GT(run.stats.num_accepted_tokens * 2, run.stats.num_draft_tokens);
}

// A draft model that fails: no drafts, the same outputs, nothing held.
TEST(DraftModelEngineTest, FailingDraftModelOnlyStopsDrafting) {
  auto draft = std::make_unique<FakeModelExecutor>(WholeContext(256));
  draft->SetFailure(absl::InternalError("draft broke"));
  const GreedyRun run = RunGreedy(std::move(draft));
  EXPECT_EQ(run.stats.num_drafts, 0);
}

// A cache too small for everyone: requests are preempted (and recomputed)
// between speculative steps, some are aborted right after a step that
// verified their drafts, and the draft's cache is smaller still (some drafts
// find no room). Draft sequences never outlive their running target
// sequences, outputs equal the model's and every block of both caches
// comes back.
TEST(DraftModelEngineTest, PreemptionAndAbortLeakNoBlocksInEitherCache) {
  for (bool prefix_caching : {false, true}) {
    SCOPED_TRACE(prefix_caching ? "prefix caching" : "no prefix caching");
    FakeModelExecutor fake(WholeContext(24));  // 96 slots; 6 requests want 6 * 48.
    fake.AttachDraftModel(std::make_unique<FakeModelExecutor>(WholeContext(16)));
    EngineCore core(&fake, Sched(), prefix_caching);
    core.SetSpeculation(DraftModelSpec(4));
    const spec_decode::DraftModelProposer* proposer = core.draft_proposer();
    ASSERT_NE(proposer, nullptr);
    // Draft sequences never outlive their running target sequences.
    RunWithAbortsAfterAcceptedDrafts(fake, &core, [&] {
      EXPECT_LE(proposer->num_sequences(), core.scheduler().num_running());
    });
    if (HasFatalFailure()) return;
    EXPECT_EQ(core.block_manager().num_free_blocks(), 24);
    EXPECT_EQ(proposer->num_sequences(), 0);
    EXPECT_EQ(proposer->block_manager().num_free_blocks(), 16);
  }
}

// A step's draft tokens are taken per returned draft: a long request that
// the draft model never drafts for (it is past the draft's 24-token context)
// does not hold the step's last 4 tokens of budget (6 = two decodes + 4)
// away from a short one decoding beside it. Reserving them per want gave
// the short one nothing.
TEST(DraftModelEngineTest, ADraftThatComesBackEmptyLeavesItsBudgetToTheNext) {
  FakeModelExecutor fake(WholeContext(256));
  FakeModelExecutor::Options short_context = WholeContext(64);
  short_context.max_model_len = 24;
  fake.AttachDraftModel(std::make_unique<FakeModelExecutor>(short_context));
  EngineCore core(&fake, Sched(/*budget=*/6), /*enable_prefix_caching=*/false);
  core.SetSpeculation(DraftModelSpec(4));
  const std::vector<int32_t> long_prompt = Prompt(30, 1, 16);
  const std::vector<int32_t> short_prompt = Prompt(3, 2, 16);
  ASSERT_TRUE(core.AddRequest(MakeRequest("long", long_prompt, Greedy(40))).ok());
  ASSERT_TRUE(core.AddRequest(MakeRequest("short", short_prompt, Greedy(8))).ok());
  Driver run;
  for (int i = 0; i < 100 && (run.tokens["long"].empty() || run.tokens["short"].empty()); ++i) {
    run.Step(&core);
  }
  ASSERT_FALSE(run.tokens["short"].empty());
  const int64_t drafts_before = core.spec_stats().num_drafts;
  // Both decode now; the short one finishes long before the long one.
  for (int i = 0; i < 100 && run.state.count("short") == 0; ++i) run.Step(&core);
  EXPECT_EQ(run.state.count("long"), 0u);
  EXPECT_GT(core.spec_stats().num_drafts, drafts_before);
  run.ToCompletion(&core);
  EXPECT_EQ(run.tokens["long"], fake.Generate(long_prompt, 40));
  EXPECT_EQ(run.tokens["short"], fake.Generate(short_prompt, 8));
}

// The draft model's forwards are part of the step's model time
// (StepReport.execute, what the step-time metrics see): k = 4 draft forwards
// of 20 ms each, against a target that takes no time.
TEST(DraftModelEngineTest, DraftForwardsCountInTheStepsExecuteTime) {
  FakeModelExecutor fake(WholeContext(64));
  FakeModelExecutor::Options slow = WholeContext(64);
  slow.step_delay = absl::Milliseconds(20);
  fake.AttachDraftModel(std::make_unique<FakeModelExecutor>(slow));
  EngineCore core(&fake, Sched(), /*enable_prefix_caching=*/false);
  core.SetSpeculation(DraftModelSpec(4));
  ASSERT_TRUE(core.AddRequest(MakeRequest("r", Prompt(6, 3, 16), Greedy(20))).ok());
  Driver run;
  int drafted_steps = 0;
  absl::Duration longest = absl::ZeroDuration();
  for (int i = 0; i < 40 && core.HasUnfinished(); ++i) {
    const int64_t drafts_before = core.spec_stats().num_drafts;
    run.Step(&core);
    if (core.spec_stats().num_drafts == drafts_before) continue;
    ++drafted_steps;
    const StepReport& step = core.last_step();
    EXPECT_GE(step.draft, absl::Milliseconds(20));
    EXPECT_GE(step.execute, step.draft);
    longest = std::max(longest, step.execute);
  }
  EXPECT_GT(drafted_steps, 0);
  // A full draft: the first draft forward (catch-up and the first token)
  // and one per further draft token.
  EXPECT_GE(longest, absl::Milliseconds(80));
}

// Seeded sampling with the Markov model as its own (greedy) draft: one draw
// of the request's generator per emitted token, so identical draw for draw.
TEST(DraftModelEngineTest, SeededSamplingEqualsNonSpeculative) {
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_k = 4;
  p.top_p = 0.9f;
  p.repetition_penalty = 1.1f;
  p.min_tokens = 6;
  p.max_tokens = 48;
  ExpectSeededSamplingUnchanged(p, DraftModelSpec(4), std::make_unique<MarkovExecutor>());
}

// Temperature 1: the transitions of every output, pooled over many seeds,
// follow the model's matrix (Pearson chi-square, 30 degrees of freedom).
// The greedy draft is one-hot, so the verification rule is exact rejection
// sampling; accepting a draft token more often than p(x) skews it.
TEST(DraftModelEngineTest, TemperatureOneDistributionMatchesTheModel) {
  ExpectTemperatureOneMatchesMarkov(DraftModelSpec(4), std::make_unique<MarkovExecutor>());
}

// The same with a draft model that disagrees with the target (another
// matrix), so rejections and their resampling happen often: sampled
// proposals (min(1, p/q), then max(p - q, 0) normalised) and greedy ones
// (min_p = 1e-6 filters nothing here but keeps the proposals greedy).
// Resampling a rejection from p, or from p - q without clamping at 0,
// fails the chi-square.
TEST(DraftModelEngineTest, SampledProposalsFromAnotherModelKeepTheDistribution) {
  ExpectTemperatureOneMatchesMarkov(DraftModelSpec(4), std::make_unique<MarkovExecutor>(11));
}

TEST(DraftModelEngineTest, GreedyProposalsFromAnotherModelKeepTheDistribution) {
  ExpectTemperatureOneMatchesMarkov(DraftModelSpec(4), std::make_unique<MarkovExecutor>(11),
                                    /*min_p=*/1e-6f);
}

}  // namespace
}  // namespace rill::engine
