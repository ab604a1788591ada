// Freeing KV blocks that fell out of a sliding window covering every layer
// (Scheduler's DeadBlocks, BlockManager::Allocate's dead entries), through
// EngineCore over the real CPU model: tiny random Mistral and Phi-3 (window
// 8 on every layer, blocks of 4 tokens). A long generation keeps each
// sequence's live blocks bounded by the window while its tokens stay those
// of the run that frees nothing; preemption and prefix-cache hits still
// give the same tokens. Gemma's global layers read every block: nothing is
// freed there.
#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "engine/engine_core.h"
#include "engine/local_model_executor.h"
#include "tests/util/tiny_models.h"

namespace rill::engine {
namespace {

constexpr int kBlockSize = 4;
constexpr int kBudget = 16;  // tokens per step: prompts prefill in chunks
constexpr int kPromptTokens = 40;
constexpr int kGreedyTokens = 80;  // 120 positions of the model's 128

struct RunResult {
  std::map<std::string, std::vector<int32_t>> tokens;
  std::map<std::string, int64_t> cached;  // prompt tokens found in the prefix cache
  int64_t max_live_blocks = 0;            // of any one sequence, over all steps
  int64_t preemptions = 0;
};

class WindowFreeingTest : public rill::tests::util::TinyModels<::testing::TestWithParam<std::string>> {
 protected:
  std::unique_ptr<LocalModelExecutor> Executor(int num_blocks) {
    LocalExecutorOptions o;
    o.model_path = absl::StrCat(dir_, "/", GetParam());
    o.num_blocks = num_blocks;
    o.block_size = kBlockSize;
    o.threads = 1;
    absl::StatusOr<std::unique_ptr<LocalModelExecutor>> ex = LocalModelExecutor::Create(o);
    EXPECT_TRUE(ex.ok()) << ex.status();
    return ex.ok() ? std::move(*ex) : nullptr;
  }

  std::vector<std::vector<int32_t>> Prompts() {
    std::mt19937 rng(seed_ ^ std::hash<std::string>{}(GetParam()));
    std::uniform_int_distribution<int32_t> token(0, 298);
    std::vector<std::vector<int32_t>> prompts(3);
    for (auto& p : prompts) {
      for (int i = 0; i < kPromptTokens; ++i) p.push_back(token(rng));
    }
    return prompts;
  }

  // Three requests at once, then (after they finish) the first prompt again.
  RunResult Run(bool free_blocks, int num_blocks) {
    RunResult result;
    std::unique_ptr<LocalModelExecutor> ex = Executor(num_blocks);
    if (ex == nullptr) return result;
    SchedulerConfig sched;
    sched.max_num_seqs = 3;
    sched.max_num_batched_tokens = kBudget;
    sched.max_model_len = 128;
    sched.free_out_of_window_blocks = free_blocks;
    EngineCore core(ex.get(), sched, /*enable_prefix_caching=*/true);
    EXPECT_EQ(core.scheduler().config().sliding_window, free_blocks ? 8 : 0);
    const std::vector<std::vector<int32_t>> prompts = Prompts();
    SamplingParams greedy;
    greedy.temperature = 0.0f;
    greedy.max_tokens = kGreedyTokens;
    greedy.ignore_eos = true;
    auto run = [&] {
      for (int step = 0; step < 2000 && core.HasUnfinished(); ++step) {
        absl::StatusOr<std::vector<EngineCoreOutput>> outs = core.Step();
        EXPECT_TRUE(outs.ok()) << outs.status();
        if (!outs.ok()) return;
        for (const EngineCoreOutput& o : *outs) {
          std::vector<int32_t>& t = result.tokens[o.request_id];
          t.insert(t.end(), o.new_token_ids.begin(), o.new_token_ids.end());
          if (o.finished()) {
            result.cached[o.request_id] = o.num_cached_tokens;
            result.preemptions += o.num_preemptions;
          }
        }
        for (int64_t seq = 0; seq < 8; ++seq) {  // seq_no: admission order
          result.max_live_blocks =
              std::max(result.max_live_blocks, core.block_manager().NumLiveBlocks(seq));
        }
      }
      EXPECT_FALSE(core.HasUnfinished());
    };
    for (int i = 0; i < 3; ++i) {
      EXPECT_TRUE(core.AddRequest(std::make_unique<Request>(absl::StrCat("r", i), prompts[i],
                                                            greedy))
                      .ok());
    }
    run();
    EXPECT_TRUE(core.AddRequest(std::make_unique<Request>("again", prompts[0], greedy)).ok());
    run();
    return result;
  }
};

TEST_P(WindowFreeingTest, LiveBlocksStayBoundedAndTokensMatchTheRunThatFreesNothing) {
  std::cout << "tiny model seed " << seed_ << "\n";
  const RunResult keep = Run(/*free_blocks=*/false, 128);
  const RunResult freed = Run(/*free_blocks=*/true, 128);
  // Without freeing a sequence ends up holding all of its 120 positions.
  EXPECT_EQ(keep.max_live_blocks, (kPromptTokens + kGreedyTokens) / kBlockSize);
  // With it: the window (8) plus one step's tokens (16), on block bounds.
  EXPECT_LE(freed.max_live_blocks, (8 + kBudget - 2) / kBlockSize + 2);
  std::cout << "live blocks per sequence: " << keep.max_live_blocks << " kept, "
            << freed.max_live_blocks << " with freeing\n";
  ASSERT_EQ(keep.tokens.size(), 4u);
  for (const auto& [id, tokens] : keep.tokens) {
    EXPECT_EQ(tokens.size(), static_cast<size_t>(kGreedyTokens)) << id;
    EXPECT_EQ(freed.tokens.at(id), tokens) << id;
  }
  EXPECT_EQ(keep.tokens.at("again"), keep.tokens.at("r0"));
  // The repeated prompt found its prefix in the cache either way.
  EXPECT_GT(freed.cached.at("again"), 0);
  EXPECT_GT(keep.cached.at("again"), 0);
}

TEST_P(WindowFreeingTest, PreemptionInASmallCacheGivesTheSameTokens) {
  const RunResult keep = Run(/*free_blocks=*/false, 128);
  // 3 sequences of up to 7 live blocks do not fit in 8 blocks: some are
  // preempted and recomputed (a cache this small refuses the requests
  // outright when nothing is freed: 30 blocks each).
  const RunResult freed = Run(/*free_blocks=*/true, 8);
  EXPECT_GT(freed.preemptions, 0);
  std::cout << freed.preemptions << " preemptions\n";
  for (const auto& [id, tokens] : keep.tokens) EXPECT_EQ(freed.tokens.at(id), tokens) << id;
}

INSTANTIATE_TEST_SUITE_P(EveryLayerWindowed, WindowFreeingTest,
                         ::testing::Values("mistral_window/hf-f32", "phi3/model.q8_0.gguf"),
                         rill::tests::util::TinyModelTestName);

class AlternatingWindowTest : public rill::tests::util::TinyModels<::testing::Test> {};

TEST_F(AlternatingWindowTest, GemmaFreesNothing) {
  for (const char* rel : {"gemma2/hf-f32", "gemma3/model.f32.gguf"}) {
    LocalExecutorOptions o;
    o.model_path = absl::StrCat(dir_, "/", rel);
    o.num_blocks = 64;
    o.block_size = kBlockSize;
    o.threads = 1;
    absl::StatusOr<std::unique_ptr<LocalModelExecutor>> ex = LocalModelExecutor::Create(o);
    ASSERT_TRUE(ex.ok()) << ex.status();
    SchedulerConfig sched;
    sched.max_model_len = 128;
    EngineCore core(ex->get(), sched, true);
    EXPECT_EQ(core.scheduler().config().sliding_window, 0) << rel;
  }
}

}  // namespace
}  // namespace rill::engine
