// Speculative decoding through EngineCore: outputs equal non-speculative
// decoding (greedy, and seeded sampling draw for draw), the token
// distribution at temperature 1 is the model's (chi-square), and rejected
// drafts leave nothing behind in the KV cache, the prefix cache or the
// block counts, through preemption and aborts.
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "engine/engine_core.h"
#include "engine/fake_model_executor.h"
#include "engine/spec_decode/spec_decode_config.h"
#include "engine/spec_decode/spec_decode_test_util.h"

namespace rill::engine {
namespace {

using spec_decode::SpecDecodeConfig;
using spec_decode::testing::Cyclic;
using spec_decode::testing::Driver;
using spec_decode::testing::ExpectSeededSamplingUnchanged;
using spec_decode::testing::ExpectTemperatureOneMatchesMarkov;
using spec_decode::testing::Greedy;
using spec_decode::testing::MakeRequest;
using spec_decode::testing::NgramSpec;
using spec_decode::testing::Prompt;
using spec_decode::testing::RunWithAbortsAfterAcceptedDrafts;
using spec_decode::testing::Sched;

// Greedy with the fake model (whose next token depends on what it reads back
// through the block tables): identical tokens with and without speculation,
// drafts accepted, blocks all free at the end. Then prompts extending those
// outputs hit the prefix cache and still continue exactly as the model says,
// so no cached block holds a rejected draft token.
// N-gram draft lengths are priced with the measured step times: where a
// verified draft token costs two decode steps, the engine stops drafting
// once it has measured that (a few steps of the fallback rule); where it
// costs a twentieth of one, it keeps drafting the cyclic model's
// predictable tokens. Outputs are the model's either way.
TEST(SpecDecodeEngineTest, DraftsOnlyWhereTheMeasuredStepTimesPayForThem) {
  for (const bool expensive : {true, false}) {
    FakeModelExecutor::Options o = Cyclic(256);
    o.step_delay = absl::Milliseconds(2);
    o.extra_token_delay = absl::Milliseconds(expensive ? 4 : 0.1);
    FakeModelExecutor fake(o);
    EngineCore core(&fake, Sched(), /*enable_prefix_caching=*/false);
    spec_decode::SpecDecodeConfig spec = NgramSpec(4);
    spec.price_ngram_drafts = true;
    core.SetSpeculation(spec);
    const std::vector<int32_t> prompt = Prompt(6, 1, 16);
    ASSERT_TRUE(core.AddRequest(MakeRequest("r", prompt, Greedy(120))).ok());
    Driver run;
    run.ToCompletion(&core);
    EXPECT_EQ(run.tokens["r"], fake.Generate(prompt, 120)) << expensive;
    const spec_decode::SpecDecodeStats& s = core.spec_stats();
    std::cout << (expensive ? "expensive" : "cheap") << ": drafts " << s.num_drafts
              << " draft tokens " << s.num_draft_tokens << " accepted " << s.num_accepted_tokens
              << " forwards " << fake.num_steps() << "\n";
    if (expensive) {
      EXPECT_LT(s.num_drafts, 12);  // The fallback rule's, until both sizes were measured.
      EXPECT_GT(fake.num_steps(), 90);
    } else {
      EXPECT_GT(s.num_accepted_tokens, 60);
      EXPECT_LT(fake.num_steps(), 60);
    }
  }
}

TEST(SpecDecodeEngineTest, GreedyEqualsReferenceAndPrefixCacheStaysClean) {
  FakeModelExecutor fake(Cyclic(256));
  EngineCore core(&fake, Sched(), /*enable_prefix_caching=*/true);
  core.SetSpeculation(NgramSpec(4));
  std::map<std::string, std::vector<int32_t>> prompts;
  for (int i = 0; i < 12; ++i) {
    const std::string id = absl::StrCat("r", i);
    prompts[id] = Prompt(5 + i, i, 16);
    ASSERT_TRUE(core.AddRequest(MakeRequest(id, prompts[id], Greedy(40 + i))).ok());
  }
  Driver run;
  run.ToCompletion(&core);
  for (const auto& [id, prompt] : prompts) {
    const int max_tokens = static_cast<int>(run.tokens[id].size());
    EXPECT_EQ(run.tokens[id], fake.Generate(prompt, max_tokens)) << id;
    EXPECT_EQ(run.state[id], RequestState::kFinishedLength) << id;
  }
  const spec_decode::SpecDecodeStats& s = core.spec_stats();
  std::cout << "drafts " << s.num_drafts << " draft tokens " << s.num_draft_tokens
            << " accepted " << s.num_accepted_tokens << "\n";
  EXPECT_GT(s.num_drafts, 0);
  EXPECT_GT(s.num_accepted_tokens, 0);
  EXPECT_LT(s.num_accepted_tokens, s.num_draft_tokens);  // Some rejected too.
  EXPECT_EQ(core.block_manager().num_free_blocks(), 256);
  EXPECT_GT(core.block_manager().num_cached_blocks(), 0);

  // Second round over the cache the first one filled.
  Driver second;
  for (const auto& [id, prompt] : prompts) {
    std::vector<int32_t> extended = prompt;
    extended.insert(extended.end(), run.tokens[id].begin(), run.tokens[id].end() - 3);
    prompts[id] = extended;
    ASSERT_TRUE(core.AddRequest(MakeRequest(id, extended, Greedy(20))).ok());
  }
  second.ToCompletion(&core);
  for (const auto& [id, prompt] : prompts) {
    EXPECT_EQ(second.tokens[id], fake.Generate(prompt, 20)) << id;
  }
  EXPECT_GT(core.block_manager().stats().hit_tokens, 0);
  EXPECT_EQ(core.block_manager().num_free_blocks(), 256);
}

// EOS inside a draft, stop tokens, max_tokens reached inside a draft and a
// budget too small for every draft: the same outputs and finish states as
// without speculation.
TEST(SpecDecodeEngineTest, StopsInsideDraftsAsWithout) {
  FakeModelExecutor::Options o = Cyclic(256);
  o.eos_every = 23;
  auto run_with = [&](int k) {
    FakeModelExecutor fake(o);
    EngineCore core(&fake, Sched(/*budget=*/20), true);
    core.SetSpeculation(NgramSpec(k));
    for (int i = 0; i < 10; ++i) {
      SamplingParams p = Greedy(7 + 5 * i);
      p.ignore_eos = i % 2 == 0;
      if (i % 3 == 0) p.stop_token_ids = {5};
      p.min_tokens = i % 4;
      EXPECT_TRUE(core.AddRequest(MakeRequest(absl::StrCat("r", i), Prompt(6 + i, i, 16), p)).ok());
    }
    Driver run;
    run.ToCompletion(&core);
    EXPECT_EQ(core.block_manager().num_free_blocks(), 256);
    EXPECT_LE(fake.max_batch_tokens(), 20);
    if (k > 0) {
      EXPECT_GT(core.spec_stats().num_accepted_tokens, 0);
    }
    return run;
  };
  const Driver plain = run_with(0);
  const Driver spec = run_with(5);
  EXPECT_EQ(spec.tokens, plain.tokens);
  EXPECT_EQ(spec.state, plain.state);
}

// A cache too small for everyone: requests are preempted (and recomputed)
// between speculative steps, some are aborted right after a step that
// verified their drafts; the others still equal the model's greedy output
// and every block comes back.
TEST(SpecDecodeEngineTest, PreemptionAndAbortLeakNoBlocks) {
  for (bool prefix_caching : {false, true}) {
    SCOPED_TRACE(prefix_caching ? "prefix caching" : "no prefix caching");
    FakeModelExecutor fake(Cyclic(24));  // 96 slots; 6 requests want 6 * 48.
    EngineCore core(&fake, Sched(), prefix_caching);
    core.SetSpeculation(NgramSpec(4));
    RunWithAbortsAfterAcceptedDrafts(fake, &core);
    if (HasFatalFailure()) return;
    EXPECT_EQ(core.block_manager().num_free_blocks(), 24);
  }
}

TEST(SpecDecodeEngineTest, NoDraftsAtOrAboveTheBatchSizeThreshold) {
  FakeModelExecutor fake(Cyclic(256));
  EngineCore core(&fake, Sched(), true);
  SpecDecodeConfig spec = NgramSpec(4);
  spec.disable_batch_size = 3;
  core.SetSpeculation(spec);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(core.AddRequest(MakeRequest(absl::StrCat("r", i), Prompt(6, i, 16), Greedy(30))).ok());
  }
  Driver run;
  run.ToCompletion(&core);
  EXPECT_EQ(core.spec_stats().num_drafts, 0);
  // Alone, the same request speculates.
  ASSERT_TRUE(core.AddRequest(MakeRequest("alone", Prompt(6, 0, 16), Greedy(30))).ok());
  run.ToCompletion(&core);
  EXPECT_GT(core.spec_stats().num_drafts, 0);
  EXPECT_EQ(run.tokens["alone"], run.tokens["r0"]);
}

// Seeded sampling with every logits adjustment: each emitted token costs one
// draw of the request's generator from the same processed logits, so the
// outputs are identical draw for draw.
TEST(SpecDecodeEngineTest, SeededSamplingEqualsNonSpeculative) {
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_k = 4;
  p.top_p = 0.9f;
  p.min_p = 0.05f;
  p.repetition_penalty = 1.1f;
  p.presence_penalty = 0.3f;
  p.frequency_penalty = 0.2f;
  p.logit_bias = {{2, 0.7f}, {5, -0.4f}};
  p.min_tokens = 6;
  p.max_tokens = 48;
  ExpectSeededSamplingUnchanged(p, NgramSpec(4));
}

// Temperature 1, no other adjustment: the transitions (a -> b) of every
// output, pooled over many seeds, follow the model's matrix (Pearson
// chi-square, 30 degrees of freedom). Accepting drafts too often, or
// resampling a rejected position from p instead of p without the draft
// token, skews them far past the bound.
TEST(SpecDecodeEngineTest, TemperatureOneDistributionMatchesTheModel) {
  ExpectTemperatureOneMatchesMarkov(NgramSpec(4));
}

}  // namespace
}  // namespace rill::engine
